"""Shrinks a failing input to a small reproducer: `python tests/fuzz/minimise.py X.vx
[--machine X.machine.vx]` (the files the benchmark saves under --save) prints the
smallest program and model it finds that fail the same way.

"The same way" is the failure's class (`failure_class`: the exception or finding
without its numbers, names and locations), so the shrink keeps the defect, not its
line numbers. Lines are removed by delta debugging (ddmin), the program's and the
model's in turn, then single tokens of what is left.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vxfuzz  # noqa: E402


def failure_class(error: str | None) -> str | None:
    if error is None:
        return None
    head = " ".join(error.split(" (at ")[0].splitlines()[:2])  # a verifier's first error too
    head = re.sub(r"loc\([^)]*\)|\S+:\d+:\d+|line \d+", "", head)
    head = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "_", head)
    return re.sub(r"\d+", "N", head)[:160]


def _ddmin(parts: list[bytes], fails: Callable[[list[bytes]], bool]) -> list[bytes]:
    """Zeller's ddmin over `parts`: a 1-minimal sublist that still fails."""
    n = 2
    while len(parts) >= 2:
        size = max(1, len(parts) // n)
        chunks = [parts[i : i + size] for i in range(0, len(parts), size)]
        for i in range(len(chunks)):
            rest = [p for j, c in enumerate(chunks) if j != i for p in c]
            if fails(rest):
                parts, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(parts):
                return parts
            n = min(n * 2, len(parts))
    return parts


def minimise(data: bytes, machine: bytes | None = None) -> tuple[bytes, bytes | None, str]:
    """(program, model, the failure's class); raises ValueError if the input passes."""
    want = failure_class(vxfuzz.run_input(data, machine=machine).error)
    if want is None:
        raise ValueError("the input does not fail")

    def fails(prog: bytes, model: bytes | None) -> bool:
        return failure_class(vxfuzz.run_input(prog, machine=model).error) == want

    lines = _ddmin(data.split(b"\n"), lambda ls: fails(b"\n".join(ls), machine))
    data = b"\n".join(lines)
    if machine is not None:
        mlines = _ddmin(machine.split(b"\n"), lambda ls: fails(data, b"\n".join(ls)))
        machine = b"\n".join(mlines)
    toks = [m.group() for m in vxfuzz.TOKEN.finditer(data)]
    toks = _ddmin(toks, lambda ts: fails(b" ".join(ts), machine))
    small = b" ".join(toks)
    if fails(small, machine) and len(small) < len(data):
        data = small
    return data, machine, want


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("program", type=Path)
    p.add_argument("--machine", type=Path)
    a = p.parse_args(argv)
    model = a.machine.read_bytes() if a.machine else None
    data, model, why = minimise(a.program.read_bytes(), model)
    print(f"// fails as: {why}")
    if model is not None:
        print("// --machine:\n" + model.decode(errors="replace"))
        print("// program:")
    print(data.decode(errors="replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
