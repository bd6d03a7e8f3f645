"""A worker process for the protocol tests: the real WorkerServer (framing, request
loop, cancel, verbosity, sandbox_dir, bug reports) around a handler whose actions are
protocol exercises rather than compiles. The server takes its handler as a parameter;
the compile handler (vxc.worker.action.VxCompile) is tested against the real compiler
in test_worker_compile.py.

Actions: echo WORDS... | sleep SECONDS | crash | fail | write PATH TEXT | big N |
print TEXT (writes to stdout, which must not reach the protocol stream)
"""

from __future__ import annotations

import os
import sys
import time

from vxc.outputs import write_atomic
from vxc.worker.server import Cancelled, RequestContext, WorkerServer, private_stdout


def handler(args: list[str], ctx: RequestContext) -> tuple[int, str]:
    cmd, rest = args[0], args[1:]
    ctx.stats["cmd"] = cmd
    if cmd == "echo":
        return 0, " ".join(rest) + "\n"
    if cmd == "sleep":
        deadline = time.monotonic() + float(rest[0])
        while time.monotonic() < deadline:
            if ctx.cancelled.is_set():
                raise Cancelled()
            time.sleep(0.01)
        return 0, "slept\n"
    if cmd == "crash":
        raise RuntimeError("deliberate internal failure")
    if cmd == "fail":
        return 1, "error[E0001]: deliberate program error\n --> a.vx:1:1\n"
    if cmd == "write":
        write_atomic(ctx.sandbox.output(rest[0], folder=False), rest[1].encode())
        return 0, ""
    if cmd == "big":
        return 0, "x" * int(rest[0])
    if cmd == "print":
        print(rest[0])
        os.write(1, b"raw fd write\n")
        return 0, "printed\n"
    if cmd == "argc":
        return 0, f"{len(rest)}\n"
    return 2, f"unknown command {cmd}\n"


if __name__ == "__main__":
    assert sys.argv[1:] == ["--persistent_worker"], sys.argv
    out = private_stdout()
    sys.exit(WorkerServer(handler, sys.stdin.buffer, out, sys.stderr).serve())
