"""Run `vxc` as a user does: a subprocess, with a time limit (helpers for tests/cli)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"


@dataclass
class Run:
    rc: int
    out: str
    err: str


def run_vxc(*args: str, cwd: Path | None = None, timeout: float = 120, module: bool = True) -> Run:
    """`python -m vxc ARGS` (or the console script) under the test's Python."""
    if module:
        cmd = [sys.executable, "-m", "vxc", *args]
    else:
        cmd = [str(Path(sys.executable).parent / "vxc"), *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "compiler") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False)
    return Run(
        p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    )


def assert_no_crash(r: Run) -> None:
    """Never a Python traceback, a RecursionError or an internal-error report."""
    for bad in ("Traceback", "RecursionError", "internal compiler error"):
        assert bad not in r.err, r.err[-2000:]
        assert bad not in r.out, r.out[-2000:]
