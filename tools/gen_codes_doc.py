#!/usr/bin/env python3
"""Writes docs/CODES.md from the code table (vxc.diagnostics.codes), the one source of
every diagnostic code. `--check` exits 1 when the file is not current (tests use it).

    .venv/bin/python tools/gen_codes_doc.py          # rewrite docs/CODES.md
    .venv/bin/python tools/gen_codes_doc.py --check  # is it current?
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc.diagnostics.codes import CODES  # noqa: E402

OUT = ROOT / "docs" / "CODES.md"
CASES = ROOT / "tests" / "golden" / "cases"

GROUPS = [
    ("E00", "Lexical and syntax"),
    ("E01", "Names"),
    ("E02", "Types and calls"),
    ("E03", "Ownership and borrows"),
    ("E60", "Placement, seams and bounds"),
    ("E70", "Backend refusals: the program cannot be built for the target"),
    ("W", "Warnings"),
]


def render() -> str:
    lines = [
        "# Diagnostic codes",
        "",
        "Generated from `compiler/vxc/diagnostics/codes.py` by `tools/gen_codes_doc.py`;",
        "do not edit by hand. `vxc explain CODE` prints the same text. Every code has a",
        "rejected and an accepted example in `tests/golden/cases/CODE_*.vx`.",
        "",
        "| code | severity | title |",
        "|---|---|---|",
    ]
    lines += [
        f"| [{c.code}](#{c.code.lower()}) | {c.severity} | {c.title} |" for c in CODES.values()
    ]
    seen: set[str] = set()
    for prefix, heading in GROUPS:
        group = [c for c in CODES.values() if c.code.startswith(prefix) and c.code not in seen]
        if not group:
            continue
        lines += ["", f"## {heading}"]
        for c in group:
            seen.add(c.code)
            lines += ["", f"### {c.code}", "", f"**{c.severity}: {c.title}**", "", c.explanation]
            lines += _example(c.example)
    rest = [c for c in CODES.values() if c.code not in seen]
    if rest:
        lines += ["", "## Other"]
        for c in rest:
            lines += ["", f"### {c.code}", "", f"**{c.severity}: {c.title}**", "", c.explanation]
    return "\n".join(lines) + "\n"


def _example(stem: str) -> list[str]:
    """The golden case `stem` and the output `vxc check` gives for it."""
    if not stem:
        return []
    source = (CASES / f"{stem}.vx").read_text().rstrip("\n")
    output = (CASES / f"{stem}.expected").read_text().rstrip("\n")
    return [
        "",
        f"Example (`tests/golden/cases/{stem}.vx`):",
        "",
        "```",
        source,
        "```",
        "",
        "```",
        output,
        "```",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/CODES.md is stale")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run tools/gen_codes_doc.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(CODES)} codes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
