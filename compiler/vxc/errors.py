"""Errors shared by every stage that are the user's to read (not compiler bugs)."""

from __future__ import annotations

from vxc.diagnostics import Span


class Unsupported(Exception):
    """A request that this version of vxc cannot serve (an unknown target, a bad option,
    a missing tool); the message says what and what works instead. Drivers print it
    plainly (exit 2), never as a crash."""


class Refusal(Unsupported):
    """A valid program that a backend (or the HIR -> vx lowering) cannot lower for its
    target: a diagnostic code (E70xx, diagnostics/codes.py), the source span of the op
    it refuses and a message. `api.build` turns it into a Diagnostic, so it is rendered
    with the source line, in JSON, by the worker and the editor, and the build exits 1.

    The span is data, never text in the message; `str()` prefixes `file:line:col: ` for
    callers that drive a backend directly (tests, benchmarks)."""

    def __init__(self, code: str, message: str, span: Span | None = None, help: str | None = None):
        self.code, self.message, self.span, self.help = code, message, span, help
        super().__init__(message)

    def __str__(self) -> str:
        s = self.span
        return f"{s.file}:{s.line}:{s.column}: {self.message}" if s else self.message

    def at(self, span: Span | None) -> Refusal:
        """This refusal, placed at `span` unless it already has a place."""
        if self.span is None:
            self.span = span
        return self


class NotRunnableHere(RuntimeError):
    """A valid artifact whose hardware this host lacks (no NVIDIA GPU, no TPU). The
    message is one line naming the artifact's target and what it needs."""


class CompileError(Exception):
    """A program that does not build for its target (`vxc.compile`): `diagnostics` are the
    coded diagnostics (`codes` their codes, errors and warnings), `str()` is their rendering
    as `vxc check` prints it, with the source lines."""

    def __init__(self, diagnostics: list, rendered: str):
        self.diagnostics = list(diagnostics)
        self.codes = [d.code for d in self.diagnostics]
        self.rendered = rendered
        super().__init__(rendered.rstrip() or "build failed")
