"""Builders for vx ops, derived from the op table.

`build("vx.transfer", [src], space="VMEM")` creates the generic operation at
the current insertion point; the per-op helpers (`transfer`, `wait`, ...) are
`build` with the op name bound. Attribute names that are Python keywords take
a trailing underscore (`from_="HBM"`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxlib.mlir import ir

from vxc.ir import types as T
from vxc.ir.ops import OPS, OpDef, arity_error


class BuildError(ValueError):
    """A builder was called with arguments that cannot form the op."""


def _attr(kind: str, value: object) -> ir.Attribute:
    if kind == "str":
        return ir.StringAttr.get(str(value))
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def _round_up(n: int, granule: int) -> int:
    return n if granule <= 0 else -(-n // granule) * granule


def _defaults(d: OpDef, operands: Sequence[ir.Value], attrs: dict[str, object]) -> None:
    """Fill builder defaults that depend on the operands (from, slot_bytes)."""
    names = {a.name for a in d.attrs}
    if "from" in names and "from" not in attrs and operands:
        space = T.space_of(operands[0].type)
        if space is not None:
            attrs["from"] = space
    for a in d.attrs:
        if a.name not in attrs and a.default is not None:
            attrs[a.name] = a.default


def _slot_bytes(placed: ir.Type, attrs: dict[str, object]) -> None:
    if "slot_bytes" in attrs:
        return
    t = T.token_inner(placed) if T.is_token(placed) else placed
    nbytes = T.static_bytes(t) if isinstance(t, ir.MemRefType) else None
    attrs["slot_bytes"] = _round_up(nbytes or 0, int(attrs.get("granule", 0)))


def build(
    name: str,
    operands: Sequence[ir.Value] = (),
    *,
    result_types: Sequence[ir.Type] | None = None,
    loc: ir.Location | None = None,
    **kwargs: object,
) -> ir.Operation:
    """Create vx op `name`; result types are inferred unless given."""
    d = OPS.get(name)
    if d is None:
        raise BuildError(f"unknown vx op '{name}'")
    attrs = {k.rstrip("_"): v for k, v in kwargs.items()}
    unknown = set(attrs) - {a.name for a in d.attrs}
    if unknown:
        raise BuildError(f"{name}: unknown attribute(s) {sorted(unknown)}")
    arity = arity_error(d, len(operands))
    if arity is not None:
        raise BuildError(f"{name}: {arity}")
    _defaults(d, operands, attrs)
    if result_types is None:
        result_types = d.infer([v.type for v in operands], attrs)
        if len(result_types) != len(d.results):
            raise BuildError(f"{name}: result types cannot be inferred; pass result_types")
    if any(a.name == "slot_bytes" for a in d.attrs):
        _slot_bytes(result_types[0], attrs)
    missing = [a.name for a in d.attrs if a.name not in attrs]
    if missing:
        raise BuildError(f"{name}: missing attribute(s) {missing}")
    op = ir.Operation.create(
        name,
        results=list(result_types),
        operands=list(operands),
        attributes={a.name: _attr(a.kind, attrs[a.name]) for a in d.attrs},
        loc=loc,
    )
    return op


def _helper(name: str) -> Callable[..., ir.Operation]:
    def helper(*operands: ir.Value, **kwargs: object) -> ir.Operation:
        return build(name, operands, **kwargs)

    helper.__name__ = name.split(".", 1)[1]
    helper.__doc__ = OPS[name].doc
    return helper


transfer = _helper("vx.transfer")
transfer_async = _helper("vx.transfer_async")
wait = _helper("vx.wait")
matmul_acc = _helper("vx.matmul_acc")
element = _helper("vx.element")
len_ = _helper("vx.len")
instance = _helper("vx.instance")
instances = _helper("vx.instances")
require = _helper("vx.require")
store = _helper("vx.store")
store_async = _helper("vx.store_async")
# Tile arithmetic: the result type (the broadcast shape, the new element) is the caller's.
binary = _helper("vx.binary")
unary = _helper("vx.unary")
reduce = _helper("vx.reduce")
cast = _helper("vx.cast")
transpose = _helper("vx.transpose")
compare = _helper("vx.compare")
select = _helper("vx.select")
iota = _helper("vx.iota")


def view(
    src: ir.Value,
    offsets: Sequence[ir.Value],
    sizes: Sequence[int],
    *,
    loc: ir.Location | None = None,
    **kwargs: object,
) -> ir.Operation:
    """A region of `sizes` of `src` at `offsets` (its type: the sizes, src's element/space)."""
    result = _region_type(src, sizes)
    return build("vx.view", [src, *offsets], result_types=[result], loc=loc, **kwargs)


def _region_type(src: ir.Value, sizes: Sequence[int]) -> ir.Type:
    return T.memref_type(list(sizes), str(src.type.element_type), T.space_of(src.type))


def edge_view(
    src: ir.Value,
    fill: ir.Value,
    offsets: Sequence[ir.Value],
    sizes: Sequence[int],
    *,
    loc: ir.Location | None = None,
    **kwargs: object,
) -> ir.Operation:
    """An `edge` region of `sizes` of `src` at `offsets`, reading `fill` past its end."""
    result = _region_type(src, sizes)
    return build("vx.edge_view", [src, fill, *offsets], result_types=[result], loc=loc, **kwargs)


def zeros(
    result_type: ir.Type, *, loc: ir.Location | None = None, **kwargs: object
) -> ir.Operation:
    """A new zero-filled tensor of `result_type` (its space names the `space` attr)."""
    kwargs.setdefault("space", T.space_of(result_type))
    return build("vx.zeros", (), result_types=[result_type], loc=loc, **kwargs)
