"""The persistent-worker request loop, independent of what a request does.

Bazel starts the worker once with ``--persistent_worker`` and sends
length-delimited ``WorkRequest`` messages on stdin; the worker answers each with a
``WorkResponse`` on stdout. This loop:

- reads requests on the calling thread and runs them one at a time on an executor
  thread, so a ``cancel`` request is seen while a compile is running;
- answers a cancelled request (queued or running) once, with ``was_cancelled``;
- answers a frame that is not a ``WorkRequest`` with exit code 2 and goes on;
- confines every path a request names to its sandbox and its listed inputs
  (vxc.worker.sandbox): a path outside is refused without being read;
- answers a request the worker cannot serve because of its own arguments or files
  (``RequestError``) with exit code 2 and one plain line, and turns any other
  exception escaping the handler into exit code 2 and a bug report, and goes on
  serving; an answer quotes a path or argument by a bounded excerpt, and its whole
  text is cut at ``MAX_OUTPUT``;
- logs one stats line per request to stderr (Bazel's worker log), and appends it to
  the response's output when the request's ``verbosity`` is above 0
  (``--worker_verbose``).

The handler is a parameter: ``handler(arguments, ctx) -> (exit_code, output)``.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import BinaryIO, TextIO

from google.protobuf.message import DecodeError

from vxc.worker import framing
from vxc.worker.sandbox import PathRefused, Sandbox
from vxc.worker.vx_worker_protocol_pb2 import WorkRequest, WorkResponse

EXCERPT = 200  # characters of a path or an argument echoed in an answer
MAX_OUTPUT = 64 << 20  # a safety net: an answer is cut past 64 MiB (diagnostics are bounded)


def excerpt(text: object, limit: int = EXCERPT) -> str:
    """`text` as an answer quotes it: at most `limit` characters, then how much was cut.
    A 52 MB file name must not come back as a 105 MB answer."""
    s = str(text)
    if len(s) <= limit:
        return s
    return f"{s[:limit]}... ({len(s) - limit} more characters)"


def bounded(output: str, limit: int = MAX_OUTPUT) -> str:
    if len(output) <= limit:
        return output
    return output[:limit] + f"\n... (answer cut: {len(output) - limit} more characters)\n"


class RequestError(Exception):
    """A request the worker cannot serve because of its own arguments or files (a
    missing input, a missing @flagfile, an output path that is a folder, a NUL in a
    path, junk arguments): answered with exit code 2 and a plain line naming the path
    or argument, never a bug report. The message quotes paths through `excerpt`."""


def refusal(action: str, path: str, e: PathRefused) -> RequestError:
    """The answer to a path the sandbox refused: `action` ("read source", "write")
    names what was asked, the path and any link in it are quoted by excerpts."""
    why = f"`{excerpt(e.link)}` {e.reason}" if e.link else e.reason
    return RequestError(f"cannot {action} `{excerpt(path)}`: {why}")


class Cancelled(Exception):
    """Raised by a handler that noticed ``ctx.cancelled`` and stopped early."""


@dataclass
class RequestContext:
    request_id: int = 0
    verbosity: int = 0
    sandbox_dir: str = ""
    # WorkRequest.inputs' paths; None for a one-shot run, which has no list.
    inputs: tuple[str, ...] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Filled by the handler; logged as key=value pairs after the request.
    stats: dict[str, object] = field(default_factory=dict)

    @cached_property
    def sandbox(self) -> Sandbox:
        """Where the request may read and write (vxc.worker.sandbox): every path goes
        through `sandbox.input` or `sandbox.output`."""
        return Sandbox.of(self.sandbox_dir, self.inputs)

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()


Handler = Callable[[list[str], RequestContext], tuple[int, str]]


def bug_report(exc: BaseException) -> str:
    frames = "".join(traceback.format_tb(exc.__traceback__))
    tb = f"Traceback (most recent call last):\n{frames}{type(exc).__name__}: {excerpt(exc, 2000)}\n"
    return (
        f"internal compiler error: {type(exc).__name__}: {excerpt(exc)}\n"
        "This is a bug in vxc, not in your program. Please report it with the text below\n"
        "and the command that ran (bazel aquery --output=text for the failing action).\n"
        f"--- vxc worker pid {os.getpid()} ---\n{tb}"
    )


def expand_flagfiles(args: list[str], ctx: RequestContext, depth: int = 0) -> list[str]:
    """Expands ``@file`` arguments (one argument per line), recursively. A flagfile is
    an input like any other: inside the sandbox and listed (Bazel expands its own
    flagfiles into the request, so what arrives here names a file of the action's)."""
    out: list[str] = []
    for a in args:
        if a.startswith("@") and not a.startswith("@@") and depth < 8:
            try:
                with open(ctx.sandbox.input(a[1:]), encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except PathRefused as e:
                raise refusal("read flagfile", a[1:], e) from None
            except (OSError, ValueError) as e:  # ValueError: a NUL in the path, or not UTF-8
                why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                raise RequestError(f"cannot read flagfile `{excerpt(a[1:])}`: {why}") from None
            out.extend(expand_flagfiles(lines, ctx, depth + 1))
        elif a.startswith("@@"):
            out.append(a[1:])
        else:
            out.append(a)
    return out


def stats_line(ctx: RequestContext, exit_code: int, seconds: float) -> str:
    parts = [
        f"pid={os.getpid()}",
        f"request_id={ctx.request_id}",
        f"verbosity={ctx.verbosity}",
        f"exit={exit_code}",
    ]
    parts += [f"{k}={v}" for k, v in ctx.stats.items()]
    parts.append(f"total_ms={seconds * 1000:.1f}")
    return "vxc-worker: " + " ".join(parts)


def run_one(handler: Handler, args: list[str], ctx: RequestContext) -> tuple[int, str, bool]:
    """Runs one request; returns (exit_code, output, was_cancelled)."""
    t0 = time.perf_counter()
    cancelled = False
    try:
        ctx.check_cancelled()
        code, output = handler(expand_flagfiles(args, ctx), ctx)
    except Cancelled:
        code, output, cancelled = 0, "", True
    except RequestError as exc:
        code, output = 2, f"vxc-worker: error: {exc}\n"
    except Exception as exc:  # the worker must survive its own bugs
        code, output = 2, bug_report(exc)
    output = bounded(output)
    if ctx.cancelled.is_set():
        cancelled = True
    line = stats_line(ctx, code, time.perf_counter() - t0)
    ctx.stats["_line"] = line
    return code, output, cancelled


def private_stdout() -> BinaryIO:
    """Returns a private handle on the real stdout for the protocol and points fd 1
    (and ``sys.stdout``) at stderr, so that a stray print in the compiler or a
    library, or native code writing to fd 1, lands in Bazel's worker log instead of
    corrupting the response stream."""
    import sys

    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_out


class Restart(Exception):
    """Raised by ``WorkerServer.serve`` when ``stale()`` says the code changed: the
    caller re-executes the worker and hands it ``payload``, the request already read."""

    def __init__(self, payload: bytes):
        super().__init__("worker code changed")
        self.payload = payload


class WorkerServer:
    def __init__(
        self,
        handler: Handler,
        stdin: BinaryIO,
        stdout: BinaryIO,
        log: TextIO,
        stale: Callable[[], bool] | None = None,
    ):
        self.handler = handler
        self.stdin = stdin
        self.stdout = stdout
        self.log = log
        # Bazel 4.2.3 keeps a worker across edits of the compiler it runs; before each
        # request the server asks stale() and, if the code changed, stops so that the
        # caller can re-execute the worker with the new code.
        self.stale = stale
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        # (request, context) to run, (None, message) to answer a bad frame, None to stop.
        self._queue: queue.Queue = queue.Queue()
        # request_id -> context, for requests queued or running and not yet answered.
        self._open: dict[int, RequestContext] = {}

    def _respond(self, request_id: int, exit_code: int, output: str, cancelled: bool) -> None:
        resp = WorkResponse(
            request_id=request_id, exit_code=exit_code, output=output, was_cancelled=cancelled
        )
        with self._write_lock:
            framing.write_frame(self.stdout, resp.SerializeToString())

    def _log(self, line: str) -> None:
        self.log.write(line + "\n")
        self.log.flush()

    def _execute(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            req, ctx = item
            if req is None:  # an answer to a frame that was not a request
                self._respond(0, 2, ctx, False)
                continue
            code, output, cancelled = run_one(self.handler, list(req.arguments), ctx)
            line = str(ctx.stats.pop("_line"))
            self._log(line + (" cancelled" if cancelled else ""))
            if cancelled:
                output = "cancelled\n"
                code = 0
            elif ctx.verbosity > 0:
                output = output + ("" if not output or output.endswith("\n") else "\n")
                output += line + "\n"
            with self._state_lock:
                self._open.pop(ctx.request_id, None)
            self._respond(ctx.request_id, code, output, cancelled)

    def serve(self, pending: bytes | None = None) -> int:
        """Serves until stdin ends; ``pending`` is a request read by a previous process."""
        # The compiler recurses deeply on deeply nested programs (the CLI raises the
        # recursion limit); give the thread that runs it a main-thread-sized stack.
        threading.stack_size(64 * 1024 * 1024)
        executor = threading.Thread(target=self._execute, name="vxc-worker-exec", daemon=True)
        executor.start()
        threading.stack_size(0)
        restart: Restart | None = None
        try:
            while True:
                try:
                    if pending is not None:
                        payload, pending = pending, None
                    else:
                        payload = framing.read_frame(self.stdin)
                        if payload is not None and self.stale is not None and self.stale():
                            restart = Restart(payload)
                            break
                except framing.TruncatedFrame as e:
                    self._log(f"vxc-worker: truncated frame at end of input ({e}); exiting")
                    break
                except framing.MalformedFrame as e:
                    self._log(f"vxc-worker: malformed frame ({e})")
                    self._reject(f"vxc worker: malformed request frame: {e}\n")
                    continue
                if payload is None:
                    break
                req = WorkRequest()
                try:
                    req.ParseFromString(payload)
                except DecodeError as e:
                    self._log(f"vxc-worker: undecodable request of {len(payload)} bytes ({e})")
                    self._reject(
                        f"vxc worker: request is not a WorkRequest ({len(payload)} bytes)\n"
                    )
                    continue
                self._dispatch(req)
        finally:
            self._queue.put(None)
            executor.join()
        if restart is not None:
            self._log("vxc-worker: compiler sources changed; restarting the worker")
            raise restart
        return 0

    def _reject(self, message: str) -> None:
        """Answers a frame that is not a request, in order with the answers before it
        (a singleplex client matches answers to requests by order)."""
        self._queue.put((None, message))

    def _dispatch(self, req: WorkRequest) -> None:
        with self._state_lock:
            if req.cancel:
                ctx = self._open.get(req.request_id)
                if ctx is not None:
                    ctx.cancelled.set()
                # A cancel for a request already answered (or never seen) is ignored.
                return
            ctx = RequestContext(
                request_id=req.request_id,
                verbosity=req.verbosity,
                sandbox_dir=req.sandbox_dir,
                inputs=tuple(i.path for i in req.inputs),
            )
            self._open[req.request_id] = ctx
        self._queue.put((req, ctx))
