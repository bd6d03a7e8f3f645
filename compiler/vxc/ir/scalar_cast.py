"""`cast::<E>(x)` of a number (LANGUAGE.md 4.3) in the arith dialect, with the semantics
the language gives it on every target: integer to float rounds to nearest even; float to
integer truncates toward zero and saturates (NaN is 0); integer to integer saturates at
the destination's range (the checks report a value they find out of range as E6045);
float to float rounds to nearest even.

Only arith ops every backend lowers for scalars are emitted besides the conversions
themselves (cmpi, cmpf, select, trunci/extsi/extui, sitofp/uitofp/fptosi/fptoui,
extf/truncf).
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from vxc.hir import types as T


def _unsigned(name: str) -> bool:
    return name.startswith("ui")


def _bits(name: str) -> int:
    return T.SCALARS[name] * 8


def lower(x: ir.Value, src: str, dst: str, want: ir.Type) -> ir.Value:
    """`x` (of Vx type `src`) converted to Vx type `dst` (IR type `want`)."""
    if src == dst:
        return x
    if src in T.FLOATS and dst in T.FLOATS:
        op = arith.ExtFOp if _bits(dst) > _bits(src) else arith.TruncFOp
        return op(want, x).result
    if src in T.INTS and dst in T.FLOATS:
        return (arith.UIToFPOp if _unsigned(src) else arith.SIToFPOp)(want, x).result
    if src in T.FLOATS:
        return _float_to_int(x, dst, want)
    return _int_to_int(x, src, dst, want)


def _const(t: ir.Type, v: int | float) -> ir.Value:
    return arith.ConstantOp(t, v).result


def _float_to_int(x: ir.Value, dst: str, want: ir.Type) -> ir.Value:
    """Truncation toward zero, saturating: `x >= hi + 1` gives `hi`, `x <= lo - 1` gives
    `lo`, NaN 0. Only ordered comparisons (false for NaN: Mosaic's scalar unit has no
    `uno`), and the conversion reads only an in-range value (out of range it is undefined
    in LLVM and PTX alike). `lo - 1` rounds to `lo` in f32 for the 32- and 64-bit types;
    `lo` itself then takes the `lo` branch, which is its exact value."""
    lo, hi = T.int_range(dst)
    ft = x.type
    P = arith.CmpFPredicate
    too_big = arith.CmpFOp(P.OGE, x, _const(ft, float(hi + 1))).result
    too_small = arith.CmpFOp(P.OLE, x, _const(ft, float(lo - 1))).result
    inside = arith.AndIOp(
        arith.CmpFOp(P.OGT, x, _const(ft, float(lo - 1))).result,
        arith.CmpFOp(P.OLT, x, _const(ft, float(hi + 1))).result,
    ).result
    safe = arith.SelectOp(inside, x, _const(ft, 0.0)).result
    conv = (arith.FPToUIOp if _unsigned(dst) else arith.FPToSIOp)(want, safe).result
    outside = arith.SelectOp(too_small, _const(want, lo), _const(want, 0)).result  # NaN: 0
    outside = arith.SelectOp(too_big, _const(want, hi), outside).result
    return arith.SelectOp(inside, conv, outside).result


def _int_to_int(x: ir.Value, src: str, dst: str, want: ir.Type) -> ir.Value:
    """Saturating at `dst`'s range, compared in `src`'s signedness; then extended or
    truncated to `dst`'s width."""
    slo, shi = T.int_range(src)
    dlo, dhi = T.int_range(dst)
    lo, hi = max(slo, dlo), min(shi, dhi)
    t = x.type
    P = arith.CmpIPredicate
    less, more = (P.ult, P.ugt) if _unsigned(src) else (P.slt, P.sgt)
    if lo > slo:
        x = arith.SelectOp(arith.CmpIOp(less, x, _const(t, lo)).result, _const(t, lo), x).result
    if hi < shi:
        x = arith.SelectOp(arith.CmpIOp(more, x, _const(t, hi)).result, _const(t, hi), x).result
    sw, dw = _bits(src), _bits(dst)
    if dw < sw:
        return arith.TruncIOp(want, x).result
    if dw > sw:
        return (arith.ExtUIOp if _unsigned(src) else arith.ExtSIOp)(want, x).result
    return x
