"""Human (rustc-style) and JSON renderings of diagnostics."""

from __future__ import annotations

import json

from vxc.diagnostics import Diagnostic


def render_json(d: Diagnostic) -> str:
    return json.dumps(
        {
            "code": d.code,
            "severity": d.severity,
            "message": d.message,
            "file": d.span.file,
            "line": d.span.line,
            "column": d.span.column,
            "notes": d.notes,
            "help": d.help,
        },
        sort_keys=False,
    )


def render_human(d: Diagnostic, source_lines: dict[str, list[str]]) -> str:
    """`error[E6011]: msg`, ` --> file:line:col`, the source line and a caret underline."""
    s = d.span
    out = [f"{d.severity}[{d.code}]: {d.message}", f"  --> {s.file}:{s.line}:{s.column}"]
    lines = source_lines.get(s.file, [])
    if 1 <= s.line <= len(lines):
        text = lines[s.line - 1].rstrip("\n").expandtabs(4)
        if len(text) > 200:  # keep a pathological one-line file readable
            text = text[:200] + "..."
        width = 1
        if s.end_line == s.line and s.end_column > s.column:
            width = s.end_column - s.column
        width = max(1, min(width, max(1, len(text) - s.column + 1)))
        gutter = " " * len(str(s.line))
        out += [
            f"{gutter} |",
            f"{s.line} | {text}",
            f"{gutter} | {' ' * (s.column - 1)}{'^' * width}",
        ]
    out += [f"  note: {n}" for n in d.notes]
    if d.help:
        out.append(f"  help: {d.help}")
    return "\n".join(out)


def render_all_human(diags: list[Diagnostic], source_lines: dict[str, list[str]]) -> str:
    parts = [render_human(d, source_lines) for d in diags]
    errors = sum(d.severity == "error" for d in diags)
    warnings = len(diags) - errors
    if errors or warnings:
        parts.append(f"{errors} error(s), {warnings} warning(s)")
    return "\n\n".join(parts) + ("\n" if parts else "")
