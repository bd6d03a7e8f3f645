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


LONG_LINE = 200  # characters of a source line shown at most


def render_human(d: Diagnostic, source_lines: dict[str, list[str]]) -> str:
    """`error[E6011]: msg`, ` --> file:line:col`, the source line and a caret underline."""
    s = d.span
    out = [f"{d.severity}[{d.code}]: {d.message}", f"  --> {s.file}:{s.line}:{s.column}"]
    lines = source_lines.get(s.file, [])
    if 1 <= s.line <= len(lines):
        raw = lines[s.line - 1].rstrip("\n")
        text = raw.expandtabs(4)
        # Display offsets: tabs are expanded, so columns (characters) are mapped through
        # the same expansion, or the caret drifts left of the span on tab-indented lines.
        start = len(raw[: s.column - 1].expandtabs(4))
        end = start + 1
        if s.end_line == s.line and s.end_column > s.column:
            end = len(raw[: s.end_column - 1].expandtabs(4))
        if len(text) > LONG_LINE:  # a pathological line: show a window around the span
            cut = max(0, min(start - LONG_LINE // 2, len(text) - LONG_LINE))
            lead = "..." if cut else ""
            text = (
                lead + text[cut : cut + LONG_LINE] + ("..." if cut + LONG_LINE < len(text) else "")
            )
            start, end = start - cut + len(lead), end - cut + len(lead)
        width = max(1, min(end - start, len(text) - start))
        gutter = " " * len(str(s.line))
        out += [
            f"{gutter} |",
            f"{s.line} | {text}",
            f"{gutter} | {' ' * start}{'^' * width}",
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
