"""Source locations of vx ops: set from a HIR node's span when lowering, read back by
the verifier and the backends as a `Span`, so their refusals name the `.vx` line."""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.diagnostics import Span


def location(span) -> ir.Location:
    """The MLIR location of a source span: `loc("file.vx":line:col)`."""
    return ir.Location.file(span.file, span.line, span.column)


def span_of(op: ir.Operation | None) -> Span | None:
    """The source span of an op's location, or None when it has none (unknown, fused
    or name locations carry no file position)."""
    if op is None:
        return None
    loc = op.location
    try:
        return Span(loc.filename, loc.start_line, loc.start_col)
    except AttributeError:
        return None


def where(op: ir.Operation | None) -> str:
    """`file:line:col: ` of an op's source location, or "" when it has none."""
    s = span_of(op)
    return f"{s.file}:{s.line}:{s.column}: " if s else ""
