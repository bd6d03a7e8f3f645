"""Diagnostics: one record type, the code table, and the two renderings."""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.diagnostics.codes import CODES


@dataclass(frozen=True, order=True)
class Span:
    """A source range; lines and columns are 1-based, offsets are character offsets."""

    file: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0


@dataclass
class Diagnostic:
    code: str
    message: str
    span: Span
    notes: list[str] = field(default_factory=list)
    help: str | None = None

    @property
    def severity(self) -> str:
        return CODES[self.code].severity

    def sort_key(self) -> tuple:
        return (self.span.file, self.span.line, self.span.column, self.code, self.message)


class DiagnosticSink:
    """Collects diagnostics; drops exact duplicates (a path-sensitive check may hit twice)."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []
        self._seen: set[tuple] = set()
        # Every error emitted, duplicates included: a pass that asks "did this function
        # have errors?" counts these (a const-generic instance repeats its template's
        # errors, which the list keeps once).
        self.errors_emitted = 0

    def emit(self, code: str, message: str, span: Span, notes=None, help=None) -> None:
        if code not in CODES:
            raise KeyError(f"diagnostic code {code} is not in the code table")
        if CODES[code].severity == "error":
            self.errors_emitted += 1
        key = (code, message, span)
        if key in self._seen:
            return
        self._seen.add(key)
        self.items.append(Diagnostic(code, message, span, list(notes or []), help))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)


__all__ = ["CODES", "Diagnostic", "DiagnosticSink", "Span"]
