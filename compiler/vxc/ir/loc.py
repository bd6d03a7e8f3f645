"""Source locations of vx ops: set from a HIR node's span when lowering, read back by
the verifier and the backends, so their messages name the `.vx` line."""

from __future__ import annotations

from jaxlib.mlir import ir


def location(span) -> ir.Location:
    """The MLIR location of a source span: `loc("file.vx":line:col)`."""
    return ir.Location.file(span.file, span.line, span.column)


def where(op: ir.Operation | None) -> str:
    """`file:line:col: ` of an op's source location, or "" when it has none."""
    if op is None:
        return ""
    loc = op.location
    try:
        return f"{loc.filename}:{loc.start_line}:{loc.start_col}: "
    except AttributeError:  # unknown / fused / name locations carry no file position
        return ""
