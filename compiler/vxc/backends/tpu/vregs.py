"""Tile arithmetic (LANGUAGE.md 4.3) on vregs: the rules of the vx tile ops in Mosaic.

A tile op's result is a `vector` value (Mosaic keeps it in vector registers, spilling to
VMEM as its own register allocator decides), not a VMEM buffer: a VMEM tile operand is
read with `vector.load`, the op is `arith`/`math`/`vector` on f32 (bf16 and f16 tiles
are widened with `arith.extf` and the result rounded back with `arith.truncf`, nearest
even: LANGUAGE.md 4.3's f32 compute), and only a result some op needs in memory (a
DMA's source, `matmul_acc`'s accumulator: `FunctionLowering.in_memory`) is stored, into
the ring slot the allocator gave the op. Broadcasts of `[M, 1]` / `[1, N]` tiles and of
scalars are `vector.broadcast`; `.sum(axis)` / `.max(axis)` are
`vector.multi_reduction` then a `vector.shape_cast` that keeps the axis as size 1.

A `transpose` feeding `matmul_acc` costs nothing: the pass `fold-transpose` made it the
matmul's `transpose` attribute, which this rule writes into `tpu.matmul`'s dimension
numbers (the MXU reads the operand transposed). Any other transpose is a `Transposed`
marker, transposed (`vector.transpose`) where it is used.

Integer and bool tiles (vx.compare / select / iota, and/or/not, argmax/argmin): an i32
tile computes in i32 vectors (`arith.addi`.. wrapping, `maxsi`/`minsi`, `multi_reduction
<add/maxsi/minsi>`), `iota` is `tpu.iota`. A bool (i1) tile is a `vector<..xi1>` mask
in vregs: comparisons are `arith.cmpf` (ordered predicates; `ne`, true on NaN, is the
negated `oeq`, and isnan(x) is !(x == x): Mosaic lowers no unordered predicate) or
`arith.cmpi`; `and`/`or`/`not` are `andi`/`ori`/`xori` with all-true; a mask is broadcast
(`[M, 1]` -> `[M, N]`) and selected between as its i32 0/1 form. Where a bool tile must
be in VMEM (a DMA's source) its slot is i8 0/1 (`mask_slot`): the one byte per element
the plan gave the slot, since Mosaic has no i1 memrefs. argmax/argmin reduce to the
extreme, mark its hits (or NaNs) and take the least hit index (`_arg_extreme`). i64 and
f64 tiles are refused (E7004), as are bool tensors in HBM (cast them to i32).
libtpu compiles each of these forms for v5e and v6e (tests/backends/tpu/test_tpu_masks.py).

The interpreter (interp.py) models each op the same way: f32 arithmetic in numpy's f32,
bf16/f16 results rounded to nearest even, i32 wrapping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, math, vector
from jaxlib.mosaic.python import tpu

from vxc.backends.tpu.base import Ref, placed, rule
from vxc.backends.tpu.errors import fail
from vxc.backends.tpu.tiling import mosaic_element
from vxc.ir.ops import MatmulAccOp

if TYPE_CHECKING:
    from vxc.backends.tpu.lower import FunctionLowering

FLOATS = ("f32", "bf16", "f16")

# vx.binary's `fn` -> the arith op on f32 vectors (max/min propagate NaN, as numpy's).
BINARY = {
    "add": arith.AddFOp,
    "sub": arith.SubFOp,
    "mul": arith.MulFOp,
    "div": arith.DivFOp,
    "max": arith.MaximumFOp,
    "min": arith.MinimumFOp,
}


def _splat(like: ir.Value, value: float) -> ir.Value:
    """A constant f32 vector of `like`'s shape."""
    t = like.type
    attr = ir.FloatAttr.get(ir.VectorType(t).element_type, value)
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, attr)).result


def _sigmoid(x: ir.Value) -> ir.Value:
    """(x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|): e never overflows, so a very negative x
    gives e itself rather than 1 / inf = 0 (the form the cpu uses too)."""
    e = math.ExpOp(arith.NegFOp(math.AbsFOp(x).result).result).result
    one = _splat(x, 1.0)
    nonneg = arith.CmpFOp(arith.CmpFPredicate.OGE, x, _splat(x, 0.0)).result
    top = arith.SelectOp(nonneg, one, e).result
    return arith.DivFOp(top, arith.AddFOp(one, e).result).result


def _isnan(lo: FunctionLowering, x: ir.Value) -> ir.Value:
    """x != x: `!(x == x)` (Mosaic lowers no unordered `arith.cmpf` predicate)."""
    return _not(arith.CmpFOp(arith.CmpFPredicate.OEQ, x, x).result)


def _not(m: ir.Value) -> ir.Value:
    """`!m`: `arith.xori` with an all-true mask constant."""
    t = m.type
    ones = arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, ir.BoolAttr.get(True))).result
    return arith.XOrIOp(m, ones).result


def _op(cls: type) -> Callable[[ir.Value], ir.Value]:
    return lambda x: cls(x).result


# vx.unary's `fn` -> its f32 vector form: one `math` op where Mosaic has it (the EUP's
# transcendentals), else arith over them; `not` takes a mask. (`neg`/`abs` of an i32
# tile are `_unary`'s.)
UNARY: dict[str, Callable[[ir.Value], ir.Value]] = {
    "neg": _op(arith.NegFOp),
    "exp": _op(math.ExpOp),
    "sqrt": _op(math.SqrtOp),
    "tanh": _op(math.TanhOp),
    "log": _op(math.LogOp),
    "abs": _op(math.AbsFOp),
    "rsqrt": _op(math.RsqrtOp),
    "sigmoid": _sigmoid,
    "erf": _op(math.ErfOp),
    "not": _not,  # of an i1 mask (bool tiles)
}
# vx.reduce's `fn` -> (vector.multi_reduction kind, the identity it starts from).
REDUCE = {
    "sum": ("add", 0.0),
    "max": ("maximumf", float("-inf")),
    "min": ("minimumf", float("inf")),
}


@dataclass(frozen=True)
class Transposed:
    """`transpose(src)` not yet computed: transposed where it is used."""

    src: object  # the operand's env value (a VMEM Ref or a vector)
    op: ir.Operation


def _f32(lo: FunctionLowering) -> ir.Type:
    return lo.ty("f32")


def vector_type(lo: FunctionLowering, t: ir.Type, element: str | None = None) -> ir.VectorType:
    """The vector a vx tile type is held in (its element, or `element`)."""
    m = placed(t)
    return ir.VectorType.get(list(m.shape), lo.ty(element or mosaic_element(m.element_type)))


def tile(lo: FunctionLowering, v: ir.Value, op: ir.Operation) -> ir.Value:
    """vx tile operand `v` as a vector (a VMEM tile is loaded)."""
    x = lo.env[v]
    if isinstance(x, Transposed):
        src = tile_of(lo, x.src, op)
        t = ir.VectorType(src.type)
        out = ir.VectorType.get(list(reversed(t.shape)), t.element_type)
        return vector.TransposeOp(out, src, [1, 0]).result
    return tile_of(lo, x, op)


def tile_of(lo: FunctionLowering, x: object, op: ir.Operation) -> ir.Value:
    if isinstance(x, ir.Value) and isinstance(x.type, ir.VectorType):
        return x
    if isinstance(x, Ref):
        space = str(ir.MemRefType(x.base.type).memory_space)
        if "vmem" not in space:
            raise fail(
                "E7007",
                op,
                f"`{op.name}` reads `{x.name}` in HBM: tile arithmetic works on tiles in "
                "VMEM (transfer it first)",
            )
        v = lo.load(x)
        if str(x.vx_type.element_type) == "i1":
            return mask_of_slot(lo, v)  # the slot's i8 0/1
        return v
    raise fail("E7005", op, f"operand of `{op.name}` is not a tile")


def widen(lo: FunctionLowering, v: ir.Value) -> ir.Value:
    """`v` in f32 (bf16/f16 compute in f32, LANGUAGE.md 4.3)."""
    t = ir.VectorType(v.type)
    if str(t.element_type) == "f32":
        return v
    return arith.ExtFOp(ir.VectorType.get(list(t.shape), _f32(lo)), v).result


def narrow(lo: FunctionLowering, v: ir.Value, element: str) -> ir.Value:
    """The f32 vector `v` rounded to `element` (nearest even)."""
    if element == "f32":
        return v
    t = ir.VectorType(v.type)
    return arith.TruncFOp(ir.VectorType.get(list(t.shape), lo.ty(element)), v).result


def _element(lo: FunctionLowering, op: ir.Operation, t: ir.Type | None = None) -> str:
    """The vreg element of the op's result tile (or of tile type `t`): f32/bf16/f16, i32,
    or i1 (a mask). i64 and f64 tiles are refused (E7004): the VPU has 32-bit lanes and
    Mosaic no 64-bit vector arithmetic."""
    name = str(placed(t if t is not None else op.results[0].type).element_type)
    if name in ("i1", "i32", *FLOATS):
        return name
    if name in ("i64", "f64"):
        raise fail(
            "E7004",
            op,
            f"`{op.name}` on {name} tiles: the TPU's vector unit has 32-bit lanes and Mosaic "
            f"no 64-bit vector arithmetic (use i32 / f32 tiles)",
        )
    e = mosaic_element(placed(t if t is not None else op.results[0].type).element_type, op)
    raise fail("E7001", op, f"tpu backend: `{op.name}` on {e} tiles is not lowered")


def _kind(element: str) -> str:
    """How a vreg element computes: "float" (in f32), "int" (i32) or "bool" (an i1 mask)."""
    return "float" if element in FLOATS else "bool" if element == "i1" else "int"


def _compute(lo: FunctionLowering, kind: str) -> ir.Type:
    return lo.ty({"float": "f32", "int": "i32", "bool": "i1"}[kind])


def _const(lo: FunctionLowering, shape: list[int], element: str, value) -> ir.Value:
    """A splat constant vector (f32 or i32)."""
    t = ir.VectorType.get(shape, lo.ty(element))
    attr = (
        ir.FloatAttr.get(lo.ty(element), value)
        if element == "f32"
        else ir.IntegerAttr.get(lo.ty(element), value)
    )
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, attr)).result


def mask_to_i32(lo: FunctionLowering, m: ir.Value) -> ir.Value:
    """An i1 mask as i32 0/1 (`arith.select` of two constants)."""
    shape = list(ir.VectorType(m.type).shape)
    return arith.SelectOp(m, _const(lo, shape, "i32", 1), _const(lo, shape, "i32", 0)).result


def i32_to_mask(lo: FunctionLowering, v: ir.Value) -> ir.Value:
    shape = list(ir.VectorType(v.type).shape)
    return arith.CmpIOp(arith.CmpIPredicate.ne, v, _const(lo, shape, "i32", 0)).result


def mask_slot(lo: FunctionLowering, m: ir.Value) -> ir.Value:
    """The i1 mask `m` as a placed bool tile holds it in VMEM: i8 0/1.

    A bool tile the plan places in memory takes one byte per element (its ring slot's
    `slot_bytes`), and Mosaic has no i1 memrefs (a mask lives only in vregs), so the slot
    is an i8 buffer of 0/1 (tiling.slot_element): exactly the bytes the plan counted, so a
    slot never outgrows what the allocator gave it. Into the slot the mask becomes i32 0/1
    (`arith.select`) truncated to i8; out of it, i8 widened (`arith.extsi`) and compared
    with 0 (`mask_of_slot`)."""
    shape = list(ir.VectorType(m.type).shape)
    return arith.TruncIOp(ir.VectorType.get(shape, lo.ty("i8")), mask_to_i32(lo, m)).result


def mask_of_slot(lo: FunctionLowering, v: ir.Value) -> ir.Value:
    shape = list(ir.VectorType(v.type).shape)
    return i32_to_mask(lo, arith.ExtSIOp(ir.VectorType.get(shape, lo.ty("i32")), v).result)


def bind(lo: FunctionLowering, op: ir.Operation, value: ir.Value) -> None:
    """The op's result: the vector, or, when some op needs it in memory, the vector
    stored into the op's ring slot (a mask as i8 0/1: `mask_slot`)."""
    r = op.results[0]
    if r not in lo.in_memory:
        lo.env[r] = value
        return
    ref, _, _ = lo.dst(op)
    if str(ir.VectorType(value.type).element_type) == "i1":
        value = mask_slot(lo, value)
    lo.store(ref, value)
    lo.env[r] = ref


def _scalar(lo: FunctionLowering, v: ir.Value, op: ir.Operation, kind: str) -> ir.Value:
    s = lo.env[v]
    want = {"float": "f32", "int": "i32", "bool": "i1"}[kind]
    if str(s.type) != want:
        raise fail(
            "E7011", op, f"a {s.type} scalar in {kind} tile arithmetic: the tpu takes {want}"
        )
    return s


def _operand(
    lo: FunctionLowering, v: ir.Value, op: ir.Operation, shape: list[int], kind: str = "float"
) -> ir.Value:
    """An elementwise operand at the result's shape in its compute type (f32, i32 or an
    i1 mask): a scalar or a `[M, 1]` / `[1, N]` tile is broadcast (a mask through i32
    0/1, the broadcast Mosaic has for every layout)."""
    vt = ir.VectorType.get(shape, _compute(lo, kind))
    if not isinstance(v.type, ir.MemRefType):
        s = _scalar(lo, v, op, kind)
        if kind == "bool":
            s = arith.ExtUIOp(lo.ty("i32"), s).result
            i = vector.BroadcastOp(ir.VectorType.get(shape, lo.ty("i32")), s).result
            return i32_to_mask(lo, i)
        return vector.BroadcastOp(vt, s).result
    _element(lo, op, v.type)
    x = tile(lo, v, op)
    if kind == "float":
        x = widen(lo, x)
    if list(ir.VectorType(x.type).shape) != shape:
        if kind == "bool":
            i = vector.BroadcastOp(ir.VectorType.get(shape, lo.ty("i32")), mask_to_i32(lo, x))
            return i32_to_mask(lo, i.result)
        x = vector.BroadcastOp(vt, x).result
    return x


def _fn(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["fn"]).value


# Integer (i32, wrapping) and mask forms of vx.binary.
INT_BINARY = {
    "add": arith.AddIOp,
    "sub": arith.SubIOp,
    "mul": arith.MulIOp,
    "max": arith.MaxSIOp,
    "min": arith.MinSIOp,
}
BOOL_BINARY = {"and": arith.AndIOp, "or": arith.OrIOp}


@rule("vx.binary")
def _binary(lo: FunctionLowering, op: ir.Operation) -> None:
    elem = _element(lo, op)
    kind, fn = _kind(elem), _fn(op)
    table = {"float": BINARY, "int": INT_BINARY, "bool": BOOL_BINARY}[kind]
    if fn not in table:
        raise fail("E7001", op, f"tpu backend: `vx.binary` {fn} on {elem} tiles is not lowered")
    shape = list(placed(op.results[0].type).shape)
    a, b = (_operand(lo, v, op, shape, kind) for v in op.operands)
    r = table[fn](a, b).result
    bind(lo, op, narrow(lo, r, elem) if kind == "float" else r)


@rule("vx.unary")
def _unary(lo: FunctionLowering, op: ir.Operation) -> None:
    elem = _element(lo, op)
    kind, fn = _kind(elem), _fn(op)
    x = tile(lo, op.operands[0], op)
    if kind == "float":
        bind(lo, op, narrow(lo, UNARY[fn](widen(lo, x)), elem))
        return
    if kind == "bool" and fn == "not":
        bind(lo, op, UNARY["not"](x))
        return
    if kind == "int" and fn in ("neg", "abs"):
        shape = list(ir.VectorType(x.type).shape)
        neg = arith.SubIOp(_const(lo, shape, "i32", 0), x).result  # wraps at i32 min
        bind(lo, op, neg if fn == "neg" else arith.MaxSIOp(x, neg).result)
        return
    raise fail("E7001", op, f"tpu backend: `vx.unary` {fn} on {elem} tiles is not lowered")


I32_MIN, I32_MAX = -(2**31), 2**31 - 1
# vx.reduce's `fn` on i32 tiles -> (multi_reduction kind, identity); sums wrap.
INT_REDUCE = {"sum": ("add", 0), "max": ("maxsi", I32_MIN), "min": ("minsi", I32_MAX)}


def _reduction(
    lo: FunctionLowering, x: ir.Value, kind: str, identity, axis: int, element: str
) -> ir.Value:
    """`vector.multi_reduction <kind>` of `x` (f32 or i32) over `axis`, the axis kept as
    size 1 (`vector.shape_cast`)."""
    shape = list(ir.VectorType(x.type).shape)
    rest = [d for k, d in enumerate(shape) if k != axis]
    init = _const(lo, rest, element, identity)
    kind_attr = ir.Attribute.parse(f"#vector.kind<{kind}>", context=lo.ctx)
    r = vector.MultiDimReductionOp(kind_attr, x, init, [axis]).result
    kept = ir.VectorType.get([1 if k == axis else d for k, d in enumerate(shape)], lo.ty(element))
    return vector.ShapeCastOp(kept, r).result


def _arg_extreme(lo: FunctionLowering, x: ir.Value, fn: str, axis: int, kind: str) -> ir.Value:
    """argmax / argmin over `axis` as Mosaic reduces: m = the extreme (NaN-propagating
    `maximumf` / `minimumf`, or `maxsi` / `minsi`), broadcast back; the hits are where
    x == m or x is NaN (a NaN row's m is NaN, which equals nothing, so its hits are its
    NaNs: numpy's first NaN); then the least index among the hits, a `minsi` reduction
    of select(hit, iota along the axis, size)."""
    shape = list(ir.VectorType(x.type).shape)
    big = kind == "float"
    if fn == "argmax":
        red, ident = ("maximumf", float("-inf")) if big else ("maxsi", I32_MIN)
    else:
        red, ident = ("minimumf", float("inf")) if big else ("minsi", I32_MAX)
    element = "f32" if big else "i32"
    m = _reduction(lo, x, red, ident, axis, element)
    mb = vector.BroadcastOp(x.type, m).result
    if big:
        hit = arith.CmpFOp(arith.CmpFPredicate.OEQ, x, mb).result
        nan = _isnan(lo, x)
        hit = arith.OrIOp(hit, nan).result
    else:
        hit = arith.CmpIOp(arith.CmpIPredicate.eq, x, mb).result
    idx = tpu.IotaOp(ir.VectorType.get(shape, lo.ty("i32")), dimensions=[axis]).result
    size = _const(lo, shape, "i32", shape[axis])
    # (the accumulator must be the neutral i32 max: Mosaic takes no other splat)
    return _reduction(lo, arith.SelectOp(hit, idx, size).result, "minsi", I32_MAX, axis, "i32")


@rule("vx.reduce")
def _reduce(lo: FunctionLowering, op: ir.Operation) -> None:
    fn = _fn(op)
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    src_elem = _element(lo, op, op.operands[0].type)
    kind = _kind(src_elem)
    x = tile(lo, op.operands[0], op)
    if kind == "float":
        x = widen(lo, x)
    if fn in ("argmax", "argmin") and kind in ("float", "int"):
        bind(lo, op, _arg_extreme(lo, x, fn, axis, kind))
    elif kind == "float":
        red, identity = REDUCE[fn]
        bind(lo, op, narrow(lo, _reduction(lo, x, red, identity, axis, "f32"), src_elem))
    elif kind == "int" and fn in INT_REDUCE:
        red, identity = INT_REDUCE[fn]
        bind(lo, op, _reduction(lo, x, red, identity, axis, "i32"))
    else:
        raise fail("E7001", op, f"tpu backend: `vx.reduce` {fn} on {src_elem} tiles is not lowered")


# f32 bounds of a saturating float -> i32 cast: -2^31 is exact, and the largest f32
# below 2^31 is 2^31 - 128 (at or above 2^31 the result is i32 max).
F32_BELOW_2_31 = 2147483520.0


def _float_to_i32(lo: FunctionLowering, x: ir.Value) -> ir.Value:
    """Truncation toward zero, saturating, NaN -> 0 (LANGUAGE.md's cast): `arith.fptosi`
    of an out-of-range or NaN value is undefined, so NaN becomes 0 and the value is
    clamped to [-2^31, 2^31 - 128] first, and x >= 2^31 selects i32 max."""
    shape = list(ir.VectorType(x.type).shape)
    nan = _isnan(lo, x)
    x0 = arith.SelectOp(nan, _const(lo, shape, "f32", 0.0), x).result
    lo_c = arith.MaximumFOp(x0, _const(lo, shape, "f32", float(I32_MIN))).result
    cl = arith.MinimumFOp(lo_c, _const(lo, shape, "f32", F32_BELOW_2_31)).result
    i = arith.FPToSIOp(ir.VectorType.get(shape, lo.ty("i32")), cl).result
    high = arith.CmpFOp(arith.CmpFPredicate.OGE, x, _const(lo, shape, "f32", 2.0**31)).result
    return arith.SelectOp(high, _const(lo, shape, "i32", I32_MAX), i).result


@rule("vx.cast")
def _cast(lo: FunctionLowering, op: ir.Operation) -> None:
    """float <-> float rounds to nearest even; i32 -> float is `arith.sitofp` to f32 then
    rounded to bf16/f16 (for |x| > 2^24 into bf16/f16 that is two roundings, which can
    differ from one by an ulp of the narrow type); a mask gives 0/1; float -> i32
    saturates (`_float_to_i32`)."""
    elem = _element(lo, op)
    src_elem = _element(lo, op, op.operands[0].type)
    kind, src_kind = _kind(elem), _kind(src_elem)
    src = tile(lo, op.operands[0], op)
    shape = list(ir.VectorType(src.type).shape)
    if src_kind == "float":
        src = widen(lo, src)
    if kind == "float":
        if src_kind == "int":
            src = arith.SIToFPOp(ir.VectorType.get(shape, _f32(lo)), src).result
        elif src_kind == "bool":
            one, zero = _const(lo, shape, "f32", 1.0), _const(lo, shape, "f32", 0.0)
            src = arith.SelectOp(src, one, zero).result
        bind(lo, op, narrow(lo, src, elem))
        return
    if kind != "int":
        raise fail("E7001", op, f"tpu backend: a cast to {elem} tiles is not lowered")
    if src_kind == "float":
        src = _float_to_i32(lo, src)
    elif src_kind == "bool":
        src = mask_to_i32(lo, src)
    bind(lo, op, src)


# vx.compare's `fn` -> the predicate: floats ordered (false on NaN), as IEEE and numpy
# compare; `ne` (true on NaN) is the negated `oeq`; integers signed.
CMPF = {
    "lt": arith.CmpFPredicate.OLT,
    "le": arith.CmpFPredicate.OLE,
    "gt": arith.CmpFPredicate.OGT,
    "ge": arith.CmpFPredicate.OGE,
    "eq": arith.CmpFPredicate.OEQ,
}
CMPI = {
    "lt": arith.CmpIPredicate.slt,
    "le": arith.CmpIPredicate.sle,
    "gt": arith.CmpIPredicate.sgt,
    "ge": arith.CmpIPredicate.sge,
    "eq": arith.CmpIPredicate.eq,
    "ne": arith.CmpIPredicate.ne,
}


@rule("vx.compare")
def _compare(lo: FunctionLowering, op: ir.Operation) -> None:
    """`lhs fn rhs` into an i1 mask: floats compare in f32 (bf16/f16 widen exactly),
    i32 signed."""
    tiles = [o.type for o in op.operands if isinstance(o.type, ir.MemRefType)]
    elem = _element(lo, op, tiles[0])
    kind, fn = _kind(elem), _fn(op)
    if kind == "bool":
        raise fail("E7001", op, "tpu backend: a comparison of bool tiles is not lowered")
    shape = list(placed(op.results[0].type).shape)
    a, b = (_operand(lo, v, op, shape, kind) for v in op.operands)
    if kind == "float" and fn == "ne":  # true on NaN: !(a == b) (Mosaic has no `une`)
        bind(lo, op, _not(arith.CmpFOp(CMPF["eq"], a, b).result))
    elif kind == "float":
        bind(lo, op, arith.CmpFOp(CMPF[fn], a, b).result)
    else:
        bind(lo, op, arith.CmpIOp(CMPI[fn], a, b).result)


@rule("vx.select")
def _select(lo: FunctionLowering, op: ir.Operation) -> None:
    """`cond ? a : b` (`arith.select` on f32 or i32 vectors; bool values select their
    i32 0/1 forms)."""
    elem = _element(lo, op)
    kind = _kind(elem)
    shape = list(placed(op.results[0].type).shape)
    cond = _operand(lo, op.operands[0], op, shape, "bool")
    a, b = (_operand(lo, v, op, shape, kind) for v in list(op.operands)[1:])
    if kind == "bool":
        a, b = mask_to_i32(lo, a), mask_to_i32(lo, b)
    r = arith.SelectOp(cond, a, b).result
    if kind == "bool":
        r = i32_to_mask(lo, r)
    bind(lo, op, narrow(lo, r, elem) if kind == "float" else r)


@rule("vx.iota")
def _iota(lo: FunctionLowering, op: ir.Operation) -> None:
    """`tpu.iota` along the axis (i32; an i64 iota is refused by `_element`)."""
    _element(lo, op)
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    shape = list(placed(op.results[0].type).shape)
    vt = ir.VectorType.get(shape, lo.ty("i32"))
    bind(lo, op, tpu.IotaOp(vt, dimensions=[axis]).result)


@rule("vx.transpose")
def _transpose(lo: FunctionLowering, op: ir.Operation) -> None:
    lazy = Transposed(lo.env[op.operands[0]], op)
    if op.results[0] not in lo.in_memory:
        lo.env[op.results[0]] = lazy  # transposed at its use
        return
    lo.env[op.results[0]] = lazy
    bind(lo, op, tile(lo, op.results[0], op))


def _dims(lhs_t: bool, rhs_t: bool) -> ir.Attribute:
    """`tpu.matmul`'s dimension numbers for acc += lhs @ rhs, either operand read
    transposed (lhs `[K, M]`, rhs `[N, K]`): contracting, non-contracting, output order
    (operand, dimension) pairs, no batch."""
    lc, ln = (0, 1) if lhs_t else (1, 0)
    rc, rn = (1, 0) if rhs_t else (0, 1)
    return ir.Attribute.parse(
        f"#tpu.dot_dimension_numbers<[{lc}], [{rc}], [{ln}], [{rn}], [0, {ln}, 1, {rn}], [], []>"
    )


@rule("vx.matmul_acc")
def _matmul_acc(lo: FunctionLowering, op: ir.Operation) -> None:
    acc = lo.hbm(op.operands[0], op)
    if "vmem" not in str(ir.MemRefType(acc.base.type).memory_space):
        raise fail("E7007", op, "matmul_acc operand `acc` must be in VMEM (transfer it first)")
    elem = str(placed(op.operands[1].type).element_type)
    if elem not in FLOATS:
        raise fail(
            "E7007", op, f"matmul_acc on {elem} operands: the MXU path takes f32, bf16 or f16"
        )
    # The MXU reads an operand transposed where `fold-transpose` folded a transpose into
    # the op (its `transpose` attribute): the dimension numbers say so, no vector moves.
    transpose = MatmulAccOp(op).transpose
    av, bv = (tile_of(lo, lo.env[v], op) for v in list(op.operands)[1:])
    at, bt = "a" in transpose, "b" in transpose
    held = op.operands[0] in lo.promoted  # the accumulator kept in vector registers
    if held:
        vt = lo.promoted[op.operands[0]].type
        cv = arith.ConstantOp(
            vt, ir.DenseElementsAttr.get_splat(vt, ir.FloatAttr.get(_f32(lo), 0.0))
        ).result
    else:
        cv = lo.load(acc)
    # Mosaic's default for f32 operands is one MXU pass, which rounds them to bf16; the
    # fp32 contract precision computes what the cpu does, to f32 rounding (docs/TPU.md).
    exact = elem == "f32" and lo.precision == "f32"
    r = tpu.MatmulOp(
        cv.type,
        av,
        bv,
        cv,
        False,
        precision=ir.Attribute.parse("#tpu.contract_precision<fp32>") if exact else None,
        dimension_numbers=_dims(at, bt),
    ).result
    if held:
        lo.promoted[op.operands[0]] = arith.AddFOp(lo.promoted[op.operands[0]], r).result
    else:
        lo.store(acc, r)
