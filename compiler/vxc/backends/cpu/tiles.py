"""Tile arithmetic (LANGUAGE.md section 4.3) as LLVM functions: explicit vector loops.

Each `vx.binary` / `vx.unary` / `vx.reduce` / `vx.cast` / `vx.transpose` site calls an
internal function specialised for its shapes and element types (static, the verifier
requires it). The loops are written with `<W x float>` values, not left to LLVM's loop
vectoriser, so every form vectorises the same way on every host (AVX-512 takes one zmm
per step, AVX2 two ymm): the innermost dimension runs W lanes at a time, then a scalar
tail. bf16 and f16 elements are widened to f32, computed in f32 and rounded back to
nearest even; f64 computes in f64. `exp` and the functions built on it are written in IR
(tiles_math.py), so they vectorise instead of calling libm per element. Reductions
accumulate in f32 (f64 for f64) in W lanes that are combined at the end. A tree of these
ops is not called one by one but fused into one loop nest (fusion.py, fused.py), which
applies the same element functions (`apply`, `convert`, `load`, `store`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir as ll

from vxc.backends.cpu.loops import I64, counted_loop
from vxc.backends.cpu.tiles_math import F32_FORMS, call, const, short, vec

W = 16  # lanes per vector step: one AVX-512 register of f32
F32, F64, I16, I32 = ll.FloatType(), ll.DoubleType(), ll.IntType(16), ll.IntType(32)
I1, I8 = ll.IntType(1), ll.IntType(8)
PTR = ll.PointerType()
# Storage of each element type (bf16 travels as its bits; a bool tile is a byte mask, 0 or
# 1, as TARGETS.md says) and its size.
STORAGE = {
    "f32": (F32, 4),
    "f64": (F64, 8),
    "f16": (ll.HalfType(), 2),
    "bf16": (I16, 2),
    "i32": (I32, 4),
    "i64": (I64, 8),
    "i1": (I8, 1),
}
# The compute types (the values the loops hold) and their LLVM types.
COMPUTE = {"f32": F32, "f64": F64, "i32": I32, "i64": I64, "i1": I1}


def compute(elem: str) -> str:
    """The type tile arithmetic on `elem` computes in (section 4.3: bf16/f16 in f32;
    integers in their own type, wrapping; a bool tile as i1 lanes)."""
    return elem if elem in ("f64", "i32", "i64", "i1") else "f32"


def _fty(ctype: str) -> ll.Type:
    return COMPUTE[ctype]


def _is_int(t: ll.Type) -> bool:
    return isinstance(_elem_of(t), ll.IntType)


def _c(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


def splat(b: ll.IRBuilder, v: ll.Value, w: int) -> ll.Value:
    if w == 1:
        return v
    one = b.insert_element(ll.Constant(ll.VectorType(v.type, 1), ll.Undefined), v, _c(0))
    mask = ll.Constant(ll.VectorType(I32, w), [ll.Constant(I32, 0)] * w)
    return b.shuffle_vector(one, one, mask)


# ---- element access -------------------------------------------------------------------------
def load(b: ll.IRBuilder, ptr: ll.Value, i: ll.Value, elem: str, w: int) -> ll.Value:
    """`w` elements at element index `i`, widened to the compute type."""
    st, nbytes = STORAGE[elem]
    at = b.gep(ptr, [i], inbounds=True, source_etype=st)
    raw = b.load(at, typ=vec(st, w), align=nbytes)
    return widen(b, raw, elem, w)


def widen(b: ll.IRBuilder, raw: ll.Value, elem: str, w: int) -> ll.Value:
    if elem == "i1":  # a stored mask byte: any nonzero byte holds
        return b.icmp_unsigned("!=", raw, const(raw.type, 0))
    if elem == "bf16":  # bf16 is the top half of an f32: exact
        wide = b.shl(b.zext(raw, vec(I32, w)), const(vec(I32, w), 16))
        return b.bitcast(wide, vec(F32, w))
    if elem == "f16":
        return b.fpext(raw, vec(F32, w))
    return raw


def narrow(b: ll.IRBuilder, v: ll.Value, elem: str, w: int) -> ll.Value:
    """A compute value stored as `elem`, rounded to nearest even."""
    if elem == "i1":
        return b.zext(v, vec(I8, w))
    if elem == "bf16":
        if v.type in (F64, vec(F64, w)):
            v = b.fptrunc(v, vec(F32, w))
        i32 = vec(I32, w)
        bits = b.bitcast(v, i32)
        odd = b.and_(b.lshr(bits, const(i32, 16)), const(i32, 1))
        top = b.trunc(
            b.lshr(b.add(bits, b.add(const(i32, 0x7FFF), odd)), const(i32, 16)), vec(I16, w)
        )
        return b.select(b.fcmp_unordered("uno", v, v), const(vec(I16, w), 0x7FC0), top)
    target = vec(STORAGE[elem][0], w)
    if v.type == target:
        return v
    if elem == "f64":
        return b.fpext(v, target)
    return b.fptrunc(v, target)


def store(b: ll.IRBuilder, ptr: ll.Value, i: ll.Value, v: ll.Value, elem: str, w: int) -> None:
    st, nbytes = STORAGE[elem]
    b.store(narrow(b, v, elem, w), b.gep(ptr, [i], inbounds=True, source_etype=st), align=nbytes)


# ---- the computations -----------------------------------------------------------------------
def fmax(b: ll.IRBuilder, x: ll.Value, y: ll.Value, larger: bool = True) -> ll.Value:
    """numpy's maximum/minimum: a NaN operand gives NaN."""
    pick = b.select(b.fcmp_ordered(">" if larger else "<", x, y), x, y)
    return b.select(b.fcmp_unordered("uno", x, y), b.fadd(x, y), pick)


def apply(b: ll.IRBuilder, module: ll.Module, fn: str, args: Sequence[ll.Value]) -> ll.Value:
    """One elementwise function on compute values (scalars or vectors)."""
    if fn == "cast":
        return args[0]
    if fn == "select":
        return b.select(*args)
    if fn in COMPARE_FNS:
        return compare(b, fn, *args)
    if _is_int(args[0].type):
        return _apply_int(b, fn, args)
    if fn in FLOAT_OPS:
        return getattr(b, FLOAT_OPS[fn])(*args)
    match fn:
        case "max" | "min":
            return fmax(b, *args, larger=fn == "max")
        case "neg":
            return b.fneg(args[0])
        case "sqrt":
            return call(b, module, "sqrt", args[0])
        case "abs":
            return call(b, module, "fabs", args[0])
        case "rsqrt":  # two roundings: within 1 ulp
            return b.fdiv(const(args[0].type, 1.0), call(b, module, "sqrt", args[0]))
        case _ if fn in F32_FORMS and short(_elem_of(args[0].type)) == "f32":
            return F32_FORMS[fn](b, module, args[0])
        case "exp" | "log":  # f64: LLVM's (libm's) exp and log (f64 tiles are rare)
            return call(b, module, fn, args[0])
    raise ValueError(f"unknown tile function {fn}")


# The binary fns that are one LLVM instruction (IRBuilder's method names).
FLOAT_OPS = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
INT_OPS = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_"}
# vx.compare's `fn` -> LLVM's predicate. Floats compare ordered (a NaN makes it false),
# except `ne`, unordered (a NaN makes it true): numpy's and IEEE's answers.
COMPARE_FNS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def compare(b: ll.IRBuilder, fn: str, x: ll.Value, y: ll.Value) -> ll.Value:
    op = COMPARE_FNS[fn]
    if _is_int(x.type):
        return b.icmp_signed(op, x, y)
    if fn == "ne":
        return b.fcmp_unordered(op, x, y)
    return b.fcmp_ordered(op, x, y)


def _apply_int(b: ll.IRBuilder, fn: str, args: Sequence[ll.Value]) -> ll.Value:
    """The integer and bool forms: two's complement, wrapping (as the hardware does)."""
    x = args[0]
    if fn in INT_OPS:
        return getattr(b, INT_OPS[fn])(*args)
    match fn:
        case "max" | "min":
            return b.select(b.icmp_signed(">" if fn == "max" else "<", *args), *args)
        case "neg":
            return b.sub(const(x.type, 0), x)
        case "abs":
            return b.select(b.icmp_signed("<", x, const(x.type, 0)), b.sub(const(x.type, 0), x), x)
        case "not":
            return b.xor(x, const(x.type, 1))
    raise ValueError(f"unknown integer tile function {fn}")


def _elem_of(t: ll.Type) -> ll.Type:
    return t.element if isinstance(t, ll.VectorType) else t


def convert(b: ll.IRBuilder, v: ll.Value, ctype: str, w: int) -> ll.Value:
    """A compute value in another compute type (vx.cast): floats extend or round to
    nearest even; an integer or a mask becomes a float exactly rounded (a mask is 0 or 1);
    a float becomes an integer truncated toward zero, saturating, NaN giving 0 (LLVM's
    fptosi.sat, the language's scalar-cast rule); integers sign-extend or wrap."""
    target = vec(_fty(ctype), w)
    if v.type == target:
        return v
    src = _elem_of(v.type)
    if not isinstance(target.element if w > 1 else target, ll.IntType):
        if src == I1:
            return b.uitofp(v, target)
        if isinstance(src, ll.IntType):
            return b.sitofp(v, target)
        return b.fpext(v, target) if ctype == "f64" else b.fptrunc(v, target)
    if src == I1:
        return b.zext(v, target)
    if isinstance(src, ll.IntType):
        return b.sext(v, target) if src.width < _fty(ctype).width else b.trunc(v, target)
    return b.call(_saturating(b.module, v.type, target), [v])


def _saturating(module: ll.Module, src: ll.Type, dst: ll.Type) -> ll.Function:
    def suffix(t: ll.Type) -> str:  # `short` is tiles_math's name of a float type
        e = _elem_of(t)
        base = f"i{e.width}" if isinstance(e, ll.IntType) else short(e)
        return f"v{t.count}{base}" if isinstance(t, ll.VectorType) else base

    name = f"llvm.fptosi.sat.{suffix(dst)}.{suffix(src)}"
    if name in module.globals:
        return module.globals[name]
    return ll.Function(module, ll.FunctionType(dst, [src]), name=name)


# ---- function definitions ------------------------------------------------------------------
@dataclass(frozen=True)
class TileArg:
    """One operand of an elementwise tile function: a tile (its shape, padded to the
    result's rank) or a scalar (passed in its compute type)."""

    elem: str
    shape: tuple[int, ...] | None  # None: a scalar


def strides(shape: Sequence[int], full: Sequence[int]) -> list[int]:
    """Row-major element strides of `shape`, 0 along a dimension it broadcasts."""
    out, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        out[d] = 0 if shape[d] == 1 and full[d] != 1 else acc
        acc *= shape[d]
    return out


def _function(module: ll.Module, name: str, args: list[ll.Type]) -> tuple[ll.Function, bool]:
    if name in module.globals:
        return module.globals[name], False
    fn = ll.Function(module, ll.FunctionType(ll.VoidType(), args), name=name)
    fn.linkage = "internal"
    return fn, True


def _key(*parts: object) -> str:
    return "__vx_tile_" + "_".join(str(p) for p in parts).translate(
        str.maketrans({"(": "", ")": "", ",": "x", " ": "", "'": "", "N": "s"})
    )


def define_elementwise(
    module: ll.Module, fn: str, out_elem: str, out: tuple[int, ...], args: list[TileArg]
) -> ll.Function:
    """void f(ptr dst, <one ptr per tile operand | one compute scalar per scalar operand>);
    a scalar's `elem` is its compute type (the caller converted it)."""
    types = [PTR] + [PTR if a.shape is not None else _fty(compute(a.elem)) for a in args]
    name = _key(fn, out_elem, out, *[(a.elem, a.shape) for a in args])
    f, new = _function(module, name, types)
    if not new:
        return f
    b = ll.IRBuilder(f.append_basic_block("entry"))
    dst, params = f.args[0], f.args[1:]
    steps = [strides(a.shape, out) if a.shape is not None else None for a in args]
    out_strides = strides(out, out)
    rank = len(out)

    def inner(offs: list[ll.Value], out_off: ll.Value) -> None:
        n = out[-1]
        main = n - n % W

        def step(w: int) -> Callable:
            def body(j: ll.Value, _carried: list) -> list:
                vals = []
                for a, p, st, off in zip(args, params, steps, offs, strict=True):
                    if a.shape is None:
                        vals.append(splat(b, p, w))
                    elif st[-1] == 0:
                        vals.append(splat(b, load(b, p, off, a.elem, 1), w))
                    else:
                        vals.append(load(b, p, b.add(off, j), a.elem, w))
                v = apply(b, module, fn, vals)
                store(b, dst, b.add(out_off, j), convert(b, v, compute(out_elem), w), out_elem, w)
                return []

            return body

        if main:
            counted_loop(b, _c(0), _c(main), _c(W), step(W), name="vec")
        if main < n:
            counted_loop(b, _c(main), _c(n), _c(1), step(1), name="tail")

    def level(d: int, offs: list[ll.Value], out_off: ll.Value) -> None:
        if d == rank - 1:
            inner(offs, out_off)
            return

        def body(i: ll.Value, _carried: list) -> list:
            moved = [
                off if st is None else b.add(off, b.mul(i, _c(st[d])))
                for off, st in zip(offs, steps, strict=True)
            ]
            level(d + 1, moved, b.add(out_off, b.mul(i, _c(out_strides[d]))))
            return []

        counted_loop(b, _c(0), _c(out[d]), _c(1), body, name=f"dim{d}")

    level(0, [_c(0)] * len(args), _c(0))
    b.ret_void()
    return f


def reduce_init(fn: str, ct: ll.Type) -> float | int:
    """The identity a `fn` reduction in compute type `ct` starts from (integer tiles
    reduce in their type, a sum wrapping)."""
    if isinstance(ct, ll.IntType):
        top = (1 << (ct.width - 1)) - 1
        return {"sum": 0, "max": -top - 1, "min": top}[fn]
    return {"sum": 0.0, "max": -math.inf, "min": math.inf}[fn]


def reduce_step(b: ll.IRBuilder, fn: str, x: ll.Value, y: ll.Value) -> ll.Value:
    """One step of a `fn` reduction (numpy's NaN-propagating max and min)."""
    if fn == "sum":
        return b.add(x, y) if _is_int(x.type) else b.fadd(x, y)
    return apply(b, b.module, fn, [x, y])


def define_reduce(module: ll.Module, fn: str, elem: str, shape: tuple[int, ...], axis: int):
    """void f(ptr dst, ptr src): `src.fn(axis)` keeping the axis, accumulated in W lanes."""
    name = _key("reduce", fn, elem, shape, axis)
    f, new = _function(module, name, [PTR, PTR])
    if not new:
        return f
    b = ll.IRBuilder(f.append_basic_block("entry"))
    dst, src = f.args
    outer = math.prod(shape[:axis])
    extent, inner = shape[axis], math.prod(shape[axis + 1 :])
    ct = _fty(compute(elem))
    init = reduce_init(fn, ct)

    def combine(x: ll.Value, y: ll.Value) -> ll.Value:
        return reduce_step(b, fn, x, y)

    def along(base: ll.Value, stride: int, w: int) -> ll.Value:
        """Reduce `extent` steps of `stride` from `base` in `w` independent lanes."""

        def body(k: ll.Value, acc: list) -> list:
            at = b.add(base, b.mul(k, _c(stride)))
            return [combine(acc[0], load(b, src, at, elem, w))]

        (acc,) = counted_loop(b, _c(0), _c(extent), _c(1), body, [const(vec(ct, w), init)])
        return acc

    def row(o: ll.Value, _carried: list) -> list:
        if inner == 1:  # the last axis: W lanes along the row, combined, then the tail
            base = b.mul(o, _c(extent))
            main = extent - extent % W
            acc = const(ct, init)
            if main:

                def chunk(j: ll.Value, lanes: list) -> list:
                    return [combine(lanes[0], load(b, src, b.add(base, j), elem, W))]

                (lanes,) = counted_loop(b, _c(0), _c(main), _c(W), chunk, [const(vec(ct, W), init)])
                for lane in range(W):
                    acc = combine(acc, b.extract_element(lanes, _c(lane)))

            def tail(j: ll.Value, carried: list) -> list:
                return [combine(carried[0], load(b, src, b.add(base, j), elem, 1))]

            (acc,) = counted_loop(b, _c(main), _c(extent), _c(1), tail, [acc])
            store(b, dst, o, acc, elem, 1)
            return []
        main = inner - inner % W
        for lo, hi, w in ((0, main, W), (main, inner, 1)):
            if lo == hi:
                continue

            def cols(i: ll.Value, _c2: list, w: int = w) -> list:
                base = b.add(b.mul(o, _c(extent * inner)), i)
                store(b, dst, b.add(b.mul(o, _c(inner)), i), along(base, inner, w), elem, w)
                return []

            counted_loop(b, _c(lo), _c(hi), _c(w), cols, name="cols")
        return []

    counted_loop(b, _c(0), _c(outer), _c(1), row, name="rows")
    b.ret_void()
    return f


def define_argreduce(module: ll.Module, fn: str, elem: str, shape: tuple[int, ...], axis: int):
    """void f(ptr dst, ptr src): the i32 index of the first extreme along `axis` (numpy's
    argmax / argmin: a NaN is the extreme, so the first NaN wins). Along the last axis a
    scalar scan per row; along another, W columns at a time, each lane its own scan."""
    name = _key(fn, elem, shape, axis)
    f, new = _function(module, name, [PTR, PTR])
    if not new:
        return f
    b = ll.IRBuilder(f.append_basic_block("entry"))
    dst, src = f.args
    outer = math.prod(shape[:axis])
    extent, inner = shape[axis], math.prod(shape[axis + 1 :])
    ct = _fty(compute(elem))

    def scan(base: ll.Value, stride: int, w: int) -> ll.Value:
        first = load(b, src, base, elem, w)

        def body(k: ll.Value, carried: list) -> list:
            best, at = carried
            x = load(b, src, b.add(base, b.mul(k, _c(stride))), elem, w)
            if isinstance(ct, ll.IntType):
                better = b.icmp_signed(">" if fn == "argmax" else "<", x, best)
            else:
                beyond = b.fcmp_ordered(">" if fn == "argmax" else "<", x, best)
                nan = b.and_(b.fcmp_unordered("uno", x, x), b.fcmp_ordered("ord", best, best))
                better = b.or_(beyond, nan)
            k32 = splat(b, b.trunc(k, I32), w)
            return [b.select(better, x, best), b.select(better, k32, at)]

        zero = const(vec(I32, w), 0)
        _best, at = counted_loop(b, _c(1), _c(extent), _c(1), body, [first, zero])
        return at

    def row(o: ll.Value, _carried: list) -> list:
        main = inner - inner % W if inner > 1 else 0
        for lo, hi, w in ((0, main, W), (main, inner, 1)):
            if lo == hi:
                continue

            def cols(i: ll.Value, _c2: list, w: int = w) -> list:
                base = b.add(b.mul(o, _c(extent * inner)), i)
                at = scan(base, inner, w)
                out = b.gep(dst, [b.add(b.mul(o, _c(inner)), i)], inbounds=True, source_etype=I32)
                b.store(at, out, align=4)
                return []

            counted_loop(b, _c(lo), _c(hi), _c(w), cols, name="cols")
        return []

    counted_loop(b, _c(0), _c(outer), _c(1), row, name="rows")
    b.ret_void()
    return f


def define_iota(module: ll.Module, elem: str, shape: tuple[int, ...], axis: int) -> ll.Function:
    """void f(ptr dst): element k (row-major) is its coordinate along `axis`,
    (k / inner) % extent, W elements a step (the divisions are by constants)."""
    name = _key("iota", elem, shape, axis)
    f, new = _function(module, name, [PTR])
    if not new:
        return f
    b = ll.IRBuilder(f.append_basic_block("entry"))
    (dst,) = f.args
    total, extent = math.prod(shape), shape[axis]
    inner = math.prod(shape[axis + 1 :])
    ct = _fty(elem)
    main = total - total % W

    def step(w: int) -> Callable:
        lanes = ll.Constant(vec(I64, w), [ll.Constant(I64, i) for i in range(w)]) if w > 1 else None

        def body(k: ll.Value, _carried: list) -> list:
            ks = b.add(splat(b, k, w), lanes) if w > 1 else k
            coord = b.urem(b.udiv(ks, const(ks.type, inner)), const(ks.type, extent))
            v = coord if ct == I64 else b.trunc(coord, vec(ct, w))
            at = b.gep(dst, [k], inbounds=True, source_etype=ct)
            b.store(v, at, align=ct.width // 8)
            return []

        return body

    if main:
        counted_loop(b, _c(0), _c(main), _c(W), step(W), name="vec")
    if main < total:
        counted_loop(b, _c(main), _c(total), _c(1), step(1), name="tail")
    b.ret_void()
    return f


def define_transpose(module: ll.Module, elem: str, shape: tuple[int, int]) -> ll.Function:
    """void f(ptr dst, ptr src): dst[j, i] = src[i, j], the element bits copied."""
    name = _key("transpose", elem, shape)
    f, new = _function(module, name, [PTR, PTR])
    if not new:
        return f
    b = ll.IRBuilder(f.append_basic_block("entry"))
    dst, src = f.args
    (m, n), (st, nbytes) = shape, STORAGE[elem]

    def rows(i: ll.Value, _c1: list) -> list:
        def cols(j: ll.Value, _c2: list) -> list:
            v = b.load(
                b.gep(src, [b.add(b.mul(i, _c(n)), j)], inbounds=True, source_etype=st),
                typ=st,
                align=nbytes,
            )
            at = b.gep(dst, [b.add(b.mul(j, _c(m)), i)], inbounds=True, source_etype=st)
            b.store(v, at, align=nbytes)
            return []

        counted_loop(b, _c(0), _c(n), _c(1), cols, name="cols")
        return []

    counted_loop(b, _c(0), _c(m), _c(1), rows, name="rows")
    b.ret_void()
    return f


def scalar_arg(b: ll.IRBuilder, v: ll.Value, elem: str, ctype: str) -> ll.Value:
    """A scalar operand (of element type `elem`) in the compute type of its tile."""
    return convert(b, widen(b, v, elem, 1), ctype, 1)
