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
    return _file_span(_innermost(op.location))


def _innermost(loc: ir.Location) -> ir.Location:
    """The callee end of an inlined op's `callsite(...)` chain: where its code is written."""
    while _is_callsite(loc):
        loc = loc.callee
    return loc


def _is_callsite(loc: ir.Location) -> bool:
    return str(loc).startswith("loc(callsite(")


def _file_span(loc: ir.Location) -> Span | None:
    try:
        return Span(loc.filename, loc.start_line, loc.start_col)
    except AttributeError:
        return None


def call_sites(op: ir.Operation | None) -> list[Span]:
    """For an op of an inlined helper (ir/passes/inline.py), the calls it was inlined through,
    innermost first: `f` inlined into `g` inlined into kernel `k` gives [the call of f
    in g, the call of g in k]."""
    out: list[Span] = []
    loc = op.location if op is not None else None
    while loc is not None and _is_callsite(loc):
        caller = _file_span(_innermost(loc.caller))
        if caller is not None:
            out.append(caller)
        loc = loc.callee
    return out[::-1]


def inlined_notes(op: ir.Operation | None) -> list[str]:
    """The notes a diagnostic at an inlined op carries: the calls that brought it in."""
    return [f"inlined from the call at {s.file}:{s.line}:{s.column}" for s in call_sites(op)]


def where(op: ir.Operation | None) -> str:
    """`file:line:col: ` of an op's source location, or "" when it has none."""
    s = span_of(op)
    return f"{s.file}:{s.line}:{s.column}: " if s else ""
