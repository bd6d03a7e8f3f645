"""A minimal client of Bazel's proto worker protocol, for the tests: it starts a
worker process and exchanges length-delimited WorkRequest/WorkResponse frames."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from vxc.worker import framing
from vxc.worker.vx_worker_protocol_pb2 import Input, WorkRequest, WorkResponse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def inputs(root: str | Path, paths: list[str]) -> list[Input]:
    """A request's inputs as Bazel lists them: exec paths (relative to the execroot,
    where the sandbox mirrors them) with the hex digest of each file that exists."""
    out = []
    for p in paths:
        f = Path(root) / p
        digest = hashlib.sha256(f.read_bytes()).hexdigest().encode() if f.is_file() else b""
        out.append(Input(path=p, digest=digest))
    return out


def all_inputs(root: str | Path, *folders: str) -> list[Input]:
    """Every file under `folders` of `root` as an input (what a test's actions may read)."""
    base = Path(root)
    paths = sorted(
        str(f.relative_to(base)) for d in folders for f in (base / d).rglob("*") if f.is_file()
    )
    return inputs(base, paths)


class WorkerClient:
    """`lists`: a folder whose every file `call` lists as the request's inputs unless
    the call names its own (Bazel lists an action's inputs; a test's execroot holds
    only what its actions may read and what they wrote)."""

    def __init__(
        self,
        argv: list[str],
        cwd: str | None = None,
        env: dict | None = None,
        lists: str | Path | None = None,
    ):
        self.lists = lists
        e = dict(os.environ)
        e["PYTHONPATH"] = (
            os.path.join(ROOT, "compiler") + os.pathsep + os.path.join(ROOT, "tests", "worker")
        )
        e.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, *argv, "--persistent_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd or ROOT,
            env=e,
        )

    def send(self, **fields) -> None:
        self.send_raw(WorkRequest(**fields).SerializeToString())

    def send_raw(self, payload: bytes) -> None:
        self.send_bytes(framing.encode_varint(len(payload)) + payload)

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self) -> WorkResponse:
        payload = framing.read_frame(self.proc.stdout)
        assert payload is not None, "worker closed stdout: " + self.stderr_text()
        r = WorkResponse()
        r.ParseFromString(payload)
        return r

    def call(self, args: list[str], **fields) -> WorkResponse:
        if self.lists is not None and "inputs" not in fields:
            fields["inputs"] = all_inputs(self.lists, ".")
        self.send(arguments=args, **fields)
        return self.recv()

    def close(self, timeout: float = 30) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return "(worker still running)"
        return self.proc.stderr.read().decode(errors="replace")
