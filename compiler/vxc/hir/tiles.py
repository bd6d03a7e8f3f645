"""Tile arithmetic (LANGUAGE.md section 4.3): which HIR nodes compute a new tile, and how.

One table of the forms, read by the type checker (result types), liveness and the
plan (a tile a `let` binds is a buffer), the HIR -> vx lowering (one vx op per form)
and the docs. A form is recognised only once the node is typed: its result is a
tensor (a scalar `-x` or `a + b` is ordinary arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass

from vxc.hir import nodes as H
from vxc.hir import types as T


@dataclass(frozen=True)
class TileForm:
    """One form of section 4.3: its vx op and the op's `fn` attribute ("" for none)."""

    op: str
    fn: str


BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "&": "and", "|": "or"}
# Elementwise comparisons of tiles (into a bool tile): the operator -> vx.compare's `fn`.
COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
# The elementwise functions `f(a)` of a float tile (the vx.unary kinds besides `neg`), each
# with what it computes; the per-target accuracy is in docs/LANGUAGE.md section 9.
UNARY_CALLS = {
    "exp": "e to the power of each element",
    "sqrt": "square root (correctly rounded)",
    "tanh": "hyperbolic tangent",
    "log": "natural logarithm (`-inf` at 0, NaN below)",
    "abs": "absolute value (exact)",
    "rsqrt": "reciprocal square root, `1 / sqrt(a)`",
    "sigmoid": "logistic function, `1 / (1 + exp(-a))`",
    "erf": "error function",
}
# Intrinsic calls by name (a declared function of the name shadows them): arity.
TILE_CALLS = {
    **dict.fromkeys(UNARY_CALLS, 1),
    "max": 2,
    "min": 2,
    "cast": 1,
    "transpose": 1,
    "select": 3,
}
# `a.sum(axis)`, ...; argmax/argmin give the i32 index of the first extreme.
TILE_METHODS = ("sum", "max", "min", "argmax", "argmin")
TILE_INTS = ("i32", "i64")  # the integer element types of tile arithmetic (`iota`'s)
NUMBERS = ("float", "int")  # the element classes arithmetic takes (bool tiles take logic)
# Which vx fns take which element classes, for the type checker and the vx verifier
# (ir/ops.py): every other fn (exp, tanh, ..., div) takes floats only.
FN_ELEMENTS = {
    **dict.fromkeys(("add", "sub", "mul", "max", "min", "neg", "abs"), NUMBERS),
    **dict.fromkeys(("and", "or", "not"), ("bool",)),
    "sum": NUMBERS,
    "argmax": NUMBERS,
    "argmin": NUMBERS,
}


def elem_class(elem: str) -> str | None:
    """ "float", "int" (i32 / i64) or "bool" for a tile element tile arithmetic takes."""
    if elem in ("f32", "bf16", "f16", "f64"):
        return "float"
    if elem in TILE_INTS:
        return "int"
    return "bool" if elem == "bool" else None


def tile_form(e: H.Expr, declared: object = ()) -> TileForm | None:
    """The section 4.3 form `e` is, or None. `declared`: the program's function names
    (a call of a declared `exp` is that function, not the intrinsic)."""
    if not isinstance(e.ty, T.TensorT):
        return None
    match e:
        case H.Binary() if e.op in BINARY_OPS:
            return TileForm("vx.binary", BINARY_OPS[e.op])
        case H.Binary() if e.op in COMPARISONS:
            return TileForm("vx.compare", COMPARISONS[e.op])
        case H.Unary(op="-"):
            return TileForm("vx.unary", "neg")
        case H.Unary(op="!"):
            return TileForm("vx.unary", "not")
        case H.Iota():
            return TileForm("vx.iota", "")
        case H.MethodCall() if e.method in TILE_METHODS:
            return TileForm("vx.reduce", e.method)
        case H.Call() if e.callee in TILE_CALLS and e.callee not in declared:
            if e.callee in UNARY_CALLS:
                return TileForm("vx.unary", e.callee)
            if e.callee in ("max", "min"):
                return TileForm("vx.binary", e.callee)
            if e.callee == "select":
                return TileForm("vx.select", "")
            return TileForm(f"vx.{e.callee}", "")
    return None


def tile_operands(e: H.Expr) -> list[H.Expr]:
    """The operands a tile form reads (the axis of a reduction is an attribute)."""
    match e:
        case H.Binary():
            return [e.lhs, e.rhs]
        case H.Unary():
            return [e.operand]
        case H.MethodCall():
            return [e.obj]
        case H.Call():
            return list(e.args)
    return []


def broadcast(a: tuple, b: tuple) -> tuple | None:
    """numpy's broadcast of two shapes (trailing dimensions aligned; a 1 stretches), or
    None when they do not agree. Named dimensions agree only with themselves or a 1."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)
