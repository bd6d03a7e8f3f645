"""``python -m vxc.worker``: the VxCompile action, as a Bazel persistent worker or one-shot.

    python -m vxc.worker --persistent_worker     serve WorkRequests on stdin
    python -m vxc.worker @ARGS_FILE              run one action (standalone strategy)
    python -m vxc.worker hir|build ...           the same, arguments inline

Both modes run the same handler, so their outputs are byte-identical. Exit status in
the one-shot mode: 0 ok, 1 program errors (rustc-style diagnostics on stderr), 2 bad
usage or an internal failure (a bug report on stderr).
"""

from __future__ import annotations

import os
import sys


def _compile_handler():
    import vxc
    import vxc.api as api
    from vxc.worker.action import VxCompile

    missing = [
        n
        for n in ("analyze", "build", "render_human", "Analysis", "StaleCache")
        if not hasattr(api, n)
    ]
    if missing:
        raise RuntimeError(f"vxc.api lacks {', '.join(missing)}: this compiler cannot run actions")
    from vxc.errors import Unsupported

    version = api.compiler_version() if hasattr(api, "compiler_version") else vxc.__version__
    entries = int(os.environ.get("VX_WORKER_HIR_CACHE_ENTRIES", "64"))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    return VxCompile(api, version, entries, unsupported=Unsupported)


class _LazyHandler:
    def __init__(self):
        self._handler = None

    def __call__(self, args, ctx):
        if self._handler is None:
            self._handler = _compile_handler()
        return self._handler(args, ctx)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from vxc.worker.server import RequestContext, WorkerServer, private_stdout, run_one

    if "--persistent_worker" in argv:
        proto_out = private_stdout()
        # The compiler is imported on the first request, so that a compiler that
        # cannot load answers every request with a bug report instead of a worker
        # that dies at start-up.
        return WorkerServer(_LazyHandler(), sys.stdin.buffer, proto_out, sys.stderr).serve()

    ctx = RequestContext()
    try:
        handler = _compile_handler()
    except Exception as exc:
        from vxc.worker.server import bug_report

        sys.stderr.write(bug_report(exc))
        return 2
    code, output, _ = run_one(handler, argv, ctx)
    if output:
        sys.stderr.write(output)
    if os.environ.get("VX_WORKER_VERBOSE"):
        sys.stderr.write(str(ctx.stats.get("_line", "")) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
