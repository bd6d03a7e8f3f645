"""Lowering of `arith` ops and scalar types to LLVM."""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir
from llvmlite import ir as ll

from vxc.backends.cpu.errors import BackendError


def lltype(t: ir.Type) -> ll.Type:
    """LLVM type of an MLIR scalar type (index is 64-bit on the host)."""
    if isinstance(t, ir.IndexType):
        return ll.IntType(64)
    if isinstance(t, ir.IntegerType):
        return ll.IntType(ir.IntegerType(t).width)
    if isinstance(t, ir.F32Type):
        return ll.FloatType()
    if isinstance(t, ir.F64Type):
        return ll.DoubleType()
    if isinstance(t, ir.F16Type):
        return ll.HalfType()
    if isinstance(t, ir.BF16Type):
        return BF16_BITS  # llvmlite has no bfloat: bf16 is carried as its bits
    raise BackendError("E7011", f"cpu backend: no scalar lowering for type {t}")


BF16_BITS = ll.IntType(16)
_I32 = ll.IntType(32)


def _is_bf16(t: ir.Type) -> bool:
    return isinstance(t, ir.BF16Type)


def bf16_to_f32(b: ll.IRBuilder, bits: ll.Value) -> ll.Value:
    """bf16 is the top half of an f32: widening is exact."""
    return b.bitcast(b.shl(b.zext(bits, _I32), ll.Constant(_I32, 16)), ll.FloatType())


def f32_to_bf16(b: ll.IRBuilder, x: ll.Value) -> ll.Value:
    """Round to nearest even, NaN stays a (quiet) NaN: what every bf16 conversion does."""
    bits = b.bitcast(x, _I32)
    odd = b.and_(b.lshr(bits, ll.Constant(_I32, 16)), ll.Constant(_I32, 1))
    rounded = b.add(bits, b.add(ll.Constant(_I32, 0x7FFF), odd))
    top = b.trunc(b.lshr(rounded, ll.Constant(_I32, 16)), BF16_BITS)
    return b.select(b.fcmp_unordered("uno", x, x), ll.Constant(BF16_BITS, 0x7FC0), top)


def bf16_bits(value: float) -> int:
    """The bf16 bits of a Python float, rounded as f32_to_bf16 rounds."""
    import math
    import struct

    if math.isnan(value):
        return 0x7FC0
    try:
        (bits,) = struct.unpack("<I", struct.pack("<f", value))
    except OverflowError:  # beyond f32: infinity of the same sign
        return 0xFF80 if value < 0 else 0x7F80
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


_INT_BIN = {
    "arith.addi": "add",
    "arith.subi": "sub",
    "arith.muli": "mul",
    "arith.divsi": "sdiv",
    "arith.divui": "udiv",
    "arith.remsi": "srem",
    "arith.remui": "urem",
    "arith.andi": "and_",
    "arith.ori": "or_",
    "arith.xori": "xor",
    "arith.shli": "shl",
    "arith.shrsi": "ashr",
    "arith.shrui": "lshr",
}
_FLOAT_BIN = {
    "arith.addf": "fadd",
    "arith.subf": "fsub",
    "arith.mulf": "fmul",
    "arith.divf": "fdiv",
    "arith.remf": "frem",
}
_MINMAX = {"arith.maxsi": ">", "arith.minsi": "<", "arith.maxui": ">u", "arith.minui": "<u"}
# arith.cmpi / arith.cmpf predicate enum values -> llvmlite comparison spellings.
_CMPI = ["==", "!=", "<", "<=", ">", ">=", "<u", "<=u", ">u", ">=u"]
_CMPF = [
    None, ("ordered", "=="), ("ordered", ">"), ("ordered", ">="), ("ordered", "<"),
    ("ordered", "<="), ("ordered", "!="), ("ordered", "ord"), ("unordered", "=="),
    ("unordered", ">"), ("unordered", ">="), ("unordered", "<"), ("unordered", "<="),
    ("unordered", "!="), ("unordered", "uno"), None,
]  # fmt: skip


def _const(op: ir.Operation) -> ll.Value:
    attr = op.attributes["value"]
    ty = lltype(op.results[0].type)
    if isinstance(attr, ir.IntegerAttr):
        return ll.Constant(ty, ir.IntegerAttr(attr).value)
    if isinstance(attr, ir.BoolAttr):
        return ll.Constant(ty, int(ir.BoolAttr(attr).value))
    if isinstance(attr, ir.FloatAttr):
        if _is_bf16(op.results[0].type):
            return ll.Constant(ty, bf16_bits(ir.FloatAttr(attr).value))
        return ll.Constant(ty, ir.FloatAttr(attr).value)
    raise BackendError("E7011", f"cpu backend: arith.constant {attr} is not a scalar constant")


_FLOAT_RANK = {"half": 0, "float": 1, "double": 2}


def _cast(b: ll.IRBuilder, op: ir.Operation, x: ll.Value) -> ll.Value:
    src, dst = op.operands[0].type, op.results[0].type
    to = ll.FloatType() if _is_bf16(dst) else lltype(dst)  # bf16 results: via f32
    if op.name in ("arith.extf", "arith.truncf"):
        # Chosen on the LLVM types, which differ from the MLIR ones for bf16 (f32 here).
        rank_from, rank_to = _FLOAT_RANK[str(x.type)], _FLOAT_RANK[str(to)]
        if rank_from == rank_to:
            return x
        return b.fpext(x, to) if rank_from < rank_to else b.fptrunc(x, to)
    name = op.name
    if name in (
        "arith.index_cast",
        "arith.extsi",
        "arith.trunci",
        "arith.index_castui",
        "arith.extui",
    ):
        sw, dw = x.type.width, to.width
        if sw == dw:
            return x
        if sw > dw:
            return b.trunc(x, to)
        signed = name in ("arith.index_cast", "arith.extsi")
        return b.sext(x, to) if signed else b.zext(x, to)
    casts: dict[str, Callable] = {
        "arith.sitofp": b.sitofp,
        "arith.uitofp": b.uitofp,
        "arith.fptosi": b.fptosi,
        "arith.fptoui": b.fptoui,
        "arith.extf": b.fpext,
        "arith.truncf": b.fptrunc,
    }
    if name in casts:
        return casts[name](x, to)
    raise BackendError("E7011", f"cpu backend: cannot lower {name} from {src} to {dst}")


def lower_arith(b: ll.IRBuilder, op: ir.Operation, args: list[ll.Value]) -> ll.Value:
    """One arith op -> one LLVM value. bf16 operands compute in f32 (exact widening) and
    bf16 results are rounded back, as LLVM does for bfloat on x86 without AVX512-BF16."""
    name = op.name
    if name == "arith.constant":
        return _const(op)
    if name in ("arith.select", "arith.bitcast"):
        return _lower(b, op, args)
    bf16_in = [_is_bf16(v.type) for v in op.operands]
    bf16_out = bool(op.results) and _is_bf16(op.results[0].type)
    if not (any(bf16_in) or bf16_out):
        return _lower(b, op, args)
    args = [bf16_to_f32(b, a) if w else a for a, w in zip(args, bf16_in, strict=True)]
    value = _lower(b, op, args)
    return f32_to_bf16(b, value) if bf16_out else value


def _lower(b: ll.IRBuilder, op: ir.Operation, args: list[ll.Value]) -> ll.Value:
    name = op.name
    if name in _INT_BIN:
        return getattr(b, _INT_BIN[name])(args[0], args[1])
    if name in _FLOAT_BIN:
        return getattr(b, _FLOAT_BIN[name])(args[0], args[1])
    if name == "arith.negf":
        return b.fneg(args[0])
    if name in _MINMAX:
        pred = _MINMAX[name]
        cmp = b.icmp_unsigned(pred[0], *args) if pred.endswith("u") else b.icmp_signed(pred, *args)
        return b.select(cmp, args[0], args[1])
    if name == "arith.cmpi":
        pred = _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value]
        if pred.endswith("u"):
            return b.icmp_unsigned(pred[:-1], args[0], args[1])
        return b.icmp_signed(pred, args[0], args[1])
    if name == "arith.cmpf":
        code = ir.IntegerAttr(op.attributes["predicate"]).value
        if _CMPF[code] is None:
            return ll.Constant(ll.IntType(1), int(code == 15))
        kind, pred = _CMPF[code]
        fn = b.fcmp_ordered if kind == "ordered" else b.fcmp_unordered
        return fn(pred, args[0], args[1])
    if name == "arith.select":
        return b.select(args[0], args[1], args[2])
    if name.startswith("arith."):
        return _cast(b, op, args[0])
    raise BackendError("E7001", f"cpu backend: cannot lower '{name}'")
