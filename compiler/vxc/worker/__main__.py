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
    import vxc.api as api
    from vxc.errors import Unsupported
    from vxc.worker.action import VxCompile

    entries = int(os.environ.get("VX_WORKER_HIR_CACHE_ENTRIES", "64"))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    return VxCompile(api, entries, unsupported=Unsupported)


_PENDING = "VX_WORKER_PENDING_REQUEST"


def _code_fingerprint(root: str) -> tuple:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".lark", ".vx", ".md")):
                st = os.stat(os.path.join(dirpath, f))
                out.append((dirpath, f, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _code_watch():
    """A stale() for WorkerServer: true once any file of the vxc package changed."""
    import vxc

    root = os.path.dirname(os.path.abspath(vxc.__file__))
    start = _code_fingerprint(root)
    return lambda: _code_fingerprint(root) != start


def _take_pending_request() -> bytes | None:
    path = os.environ.pop(_PENDING, None)
    if not path:
        return None
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data


def _reexec(proto_out, payload: bytes) -> None:
    """Replaces this process by a fresh worker (same pid, same pipes) that first
    serves ``payload``, the request that was read before the change was noticed."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="vxc-worker-pending-")
    with os.fdopen(fd, "wb") as f:
        f.write(payload)
    os.environ[_PENDING] = path
    sys.stderr.flush()
    os.dup2(proto_out.fileno(), 1)  # the protocol stream goes back to fd 1
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


class _LazyHandler:
    def __init__(self):
        self._handler = None

    def __call__(self, args, ctx):
        if self._handler is None:
            self._handler = _compile_handler()
        return self._handler(args, ctx)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from vxc.worker.server import RequestContext, Restart, WorkerServer, private_stdout, run_one

    if "--persistent_worker" in argv:
        pending = _take_pending_request()
        stale = _code_watch()
        proto_out = private_stdout()
        # The compiler is imported on the first request, so that a compiler that
        # cannot load answers every request with a bug report instead of a worker
        # that dies at start-up.
        server = WorkerServer(_LazyHandler(), sys.stdin.buffer, proto_out, sys.stderr, stale)
        try:
            return server.serve(pending)
        except Restart as r:
            _reexec(proto_out, r.payload)

    ctx = RequestContext()
    code, output, _ = run_one(_LazyHandler(), argv, ctx)
    if output:
        sys.stderr.write(output)
    if os.environ.get("VX_WORKER_VERBOSE"):
        sys.stderr.write(str(ctx.stats.get("_line", "")) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
