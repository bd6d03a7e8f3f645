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

The interpreter (interp.py) models each op the same way: f32 arithmetic in numpy's f32,
bf16/f16 results rounded to nearest even.
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


def _op(cls: type) -> Callable[[ir.Value], ir.Value]:
    return lambda x: cls(x).result


# vx.unary's `fn` -> its f32 vector form: one `math` op where Mosaic has it (the EUP's
# transcendentals), else arith over them.
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
        return lo.load(x)
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


def _element(lo: FunctionLowering, op: ir.Operation) -> str:
    e = mosaic_element(placed(op.results[0].type).element_type, op)
    if e not in FLOATS:
        raise fail("E7001", op, f"tpu backend: `{op.name}` on {e} tiles is not lowered")
    return e


def bind(lo: FunctionLowering, op: ir.Operation, value: ir.Value) -> None:
    """The op's result: the vector, or, when some op needs it in memory, the vector
    stored into the op's ring slot."""
    r = op.results[0]
    if r not in lo.in_memory:
        lo.env[r] = value
        return
    ref, _, _ = lo.dst(op)
    lo.store(ref, value)
    lo.env[r] = ref


def _operand(lo: FunctionLowering, v: ir.Value, op: ir.Operation, shape: list[int]) -> ir.Value:
    """A binary operand in f32 at the result's shape: a scalar or a `[M, 1]` / `[1, N]`
    tile is broadcast."""
    f32 = ir.VectorType.get(shape, _f32(lo))
    if not isinstance(v.type, ir.MemRefType):
        s = lo.env[v]
        if str(s.type) != "f32":
            raise fail("E7011", op, f"a {s.type} scalar in tile arithmetic: the tpu takes f32")
        return vector.BroadcastOp(f32, s).result
    x = widen(lo, tile(lo, v, op))
    if list(ir.VectorType(x.type).shape) != shape:
        x = vector.BroadcastOp(f32, x).result
    return x


@rule("vx.binary")
def _binary(lo: FunctionLowering, op: ir.Operation) -> None:
    elem = _element(lo, op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    shape = list(placed(op.results[0].type).shape)
    a, b = (_operand(lo, v, op, shape) for v in op.operands)
    bind(lo, op, narrow(lo, BINARY[fn](a, b).result, elem))


@rule("vx.unary")
def _unary(lo: FunctionLowering, op: ir.Operation) -> None:
    elem = _element(lo, op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    x = widen(lo, tile(lo, op.operands[0], op))
    bind(lo, op, narrow(lo, UNARY[fn](x), elem))


@rule("vx.reduce")
def _reduce(lo: FunctionLowering, op: ir.Operation) -> None:
    elem = _element(lo, op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    x = widen(lo, tile(lo, op.operands[0], op))
    shape = list(ir.VectorType(x.type).shape)
    kind, identity = REDUCE[fn]
    rest = ir.VectorType.get([d for k, d in enumerate(shape) if k != axis], _f32(lo))
    init = arith.ConstantOp(
        rest, ir.DenseElementsAttr.get_splat(rest, ir.FloatAttr.get(_f32(lo), identity))
    ).result
    kind_attr = ir.Attribute.parse(f"#vector.kind<{kind}>", context=lo.ctx)
    r = vector.MultiDimReductionOp(kind_attr, x, init, [axis]).result
    kept = ir.VectorType.get([1 if k == axis else d for k, d in enumerate(shape)], _f32(lo))
    bind(lo, op, narrow(lo, vector.ShapeCastOp(kept, r).result, elem))


@rule("vx.cast")
def _cast(lo: FunctionLowering, op: ir.Operation) -> None:
    elem = _element(lo, op)
    src = tile(lo, op.operands[0], op)
    if str(ir.VectorType(src.type).element_type) not in FLOATS:
        raise fail("E7001", op, "tpu backend: a cast of an integer tile is not lowered")
    bind(lo, op, narrow(lo, widen(lo, src), elem))


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
