"""A compiler process driven over its stdin/stdout (the worker, the language server):
started with this checkout's compiler on its path, its answers read by a thread into
a queue, its stderr's last lines kept for the report."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Finding:
    """What a mode found: its kind, what was sent (shortened), and what came back."""

    kind: str
    sent: str
    detail: str
    context: list[str] = field(default_factory=list)  # what was sent before it, in order


class Child:
    def __init__(self, argv: list[str], cwd: Path | None = None):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd) if cwd else None,
            env=env,
        )
        self.inbox: queue.Queue = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _read(self) -> None:
        """Puts each answer of the child's stdout into `inbox` (the protocol's own)."""
        raise NotImplementedError

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            del self.stderr[:-20]

    def send_raw(self, data: bytes) -> bool:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return b"".join(self.stderr[-6:]).decode(errors="replace")[-600:]

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
