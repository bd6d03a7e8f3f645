"""The elementwise functions tile arithmetic writes out in LLVM IR (tiles.py applies them):
`exp` by range reduction (Cephes' expf, within 2 ulp over the whole f32 range, subnormal
results included), and tanh, sigmoid, erf and log from it and approx.py's polynomials, so
they vectorise instead of calling libm per element; the vector helpers they share."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir as ll

from vxc.backends import approx

F32, F64, I32 = ll.FloatType(), ll.DoubleType(), ll.IntType(32)


def vec(t: ll.Type, w: int) -> ll.Type:
    return t if w == 1 else ll.VectorType(t, w)


def const(t: ll.Type, value: float | int) -> ll.Constant:
    """A scalar constant, or a vector of `value` in every lane."""
    if isinstance(t, ll.VectorType):
        return ll.Constant(t, [ll.Constant(t.element, value)] * t.count)
    return ll.Constant(t, value)


def intrinsic(module: ll.Module, name: str, t: ll.Type, nargs: int) -> ll.Function:
    suffix = f"v{t.count}{short(t.element)}" if isinstance(t, ll.VectorType) else short(t)
    full = f"llvm.{name}.{suffix}"
    if full in module.globals:
        return module.globals[full]
    return ll.Function(module, ll.FunctionType(t, [t] * nargs), name=full)


def short(t: ll.Type) -> str:
    return "f64" if t == F64 else "f32"


def exp_f32(b: ll.IRBuilder, module: ll.Module, x: ll.Value) -> ll.Value:
    """expf by range reduction: x = n ln2 + r, |r| <= ln2/2, exp(r) by Cephes' degree-6
    polynomial, times 2^n built from exponent bits in two halves so results down to the
    subnormals (n to -151) and up to overflow (inf) come out right. NaN stays NaN."""
    t = x.type
    w = t.count if isinstance(t, ll.VectorType) else 1
    clamped = b.select(b.fcmp_ordered(">", x, const(t, 89.0)), const(t, 89.0), x)
    clamped = b.select(b.fcmp_ordered("<", clamped, const(t, -105.0)), const(t, -105.0), clamped)
    floor = intrinsic(module, "floor", t, 1)
    n = b.call(floor, [b.fadd(b.fmul(clamped, const(t, 1.0 / math.log(2.0))), const(t, 0.5))])
    r = b.fsub(clamped, b.fmul(n, const(t, 0.693359375)))
    r = b.fsub(r, b.fmul(n, const(t, -2.12194440e-4)))
    p = const(t, 1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = b.fadd(b.fmul(p, r), const(t, c))
    y = b.fadd(b.fadd(b.fmul(p, b.fmul(r, r)), r), const(t, 1.0))
    i32 = vec(I32, w)
    ni = b.fptosi(n, i32)
    half = b.ashr(ni, const(i32, 1))

    def pow2(k: ll.Value) -> ll.Value:
        return b.bitcast(b.shl(b.add(k, const(i32, 127)), const(i32, 23)), t)

    out = b.fmul(b.fmul(y, pow2(half)), pow2(b.sub(ni, half)))
    return b.select(b.fcmp_unordered("uno", x, x), x, out)


def _horner(b: ll.IRBuilder, x: ll.Value, coeffs: Sequence[float]) -> ll.Value:
    """c0 x^(n-1) + ... + c(n-1), one f32 multiply and add per step (approx.py's order)."""
    t = x.type
    p = const(t, coeffs[0])
    for c in coeffs[1:]:
        p = b.fadd(b.fmul(p, x), const(t, c))
    return p


def call(b: ll.IRBuilder, module: ll.Module, name: str, *args: ll.Value) -> ll.Value:
    """An LLVM intrinsic that lowers to vector instructions (fabs, copysign, sqrt)."""
    return b.call(intrinsic(module, name, args[0].type, len(args)), list(args))


def tanh_f32(b: ll.IRBuilder, module: ll.Module, x: ll.Value) -> ll.Value:
    """tanh (approx.py): the odd polynomial near 0, 1 - 2 / (exp(2|x|) + 1) beyond, where
    exp overflowing to inf gives exactly 1; NaN takes the second branch and stays NaN."""
    t = x.type
    a = call(b, module, "fabs", x)
    z = b.fmul(x, x)
    small = b.fadd(b.fmul(b.fmul(_horner(b, z, approx.TANH_P), z), x), x)
    e = exp_f32(b, module, b.fadd(a, a))
    big = b.fsub(const(t, 1.0), b.fdiv(const(t, 2.0), b.fadd(e, const(t, 1.0))))
    near = b.fcmp_ordered("<", a, const(t, approx.TANH_SMALL))
    return b.select(near, small, call(b, module, "copysign", big, x))


def sigmoid_f32(b: ll.IRBuilder, module: ll.Module, x: ll.Value) -> ll.Value:
    """1 / (1 + e^-x) as (x >= 0 ? 1 : e) / (1 + e) with e = exp(-|x|): e never overflows,
    so a very negative x gives e itself (down to the subnormals), not 1 / inf = 0."""
    t = x.type
    e = exp_f32(b, module, b.fneg(call(b, module, "fabs", x)))
    top = b.select(b.fcmp_ordered(">=", x, const(t, 0.0)), const(t, 1.0), e)
    return b.fdiv(top, b.fadd(const(t, 1.0), e))


def erf_f32(b: ll.IRBuilder, module: ll.Module, x: ll.Value) -> ll.Value:
    """erf (approx.py): x + x P(x^2) up to ERF_SMALL, 1 - exp(t Q(t) - t) with x's sign
    beyond (t clamped to ERF_CLAMP, where erf is already 1.0f); NaN stays NaN."""
    t = x.type
    a = call(b, module, "fabs", x)
    small = b.fadd(b.fmul(_horner(b, b.fmul(x, x), approx.ERF_P), x), x)
    c = b.select(b.fcmp_ordered(">", a, const(t, approx.ERF_CLAMP)), const(t, approx.ERF_CLAMP), a)
    hi, mid = _horner(b, c, approx.ERF_Q_HI), _horner(b, c, approx.ERF_Q_MID)
    q = b.fadd(b.fmul(hi, b.fmul(c, c)), mid)
    for k in approx.ERF_Q_LO:
        q = b.fadd(b.fmul(q, c), const(t, k))
    big = b.fsub(const(t, 1.0), exp_f32(b, module, b.fsub(b.fmul(q, c), c)))
    near = b.fcmp_unordered("<=", a, const(t, approx.ERF_SMALL))  # NaN: the NaN polynomial
    return b.select(near, small, call(b, module, "copysign", big, x))


def log_f32(b: ll.IRBuilder, module: ll.Module, x: ll.Value) -> ll.Value:
    """log (approx.py): split x = m 2^e from its bits (a subnormal scaled by 2^23 first),
    then the polynomial in m - 1; 0 gives -inf, a negative x NaN, inf and NaN themselves."""
    t = x.type
    i32 = vec(I32, t.count if isinstance(t, ll.VectorType) else 1)
    sub = b.fcmp_ordered("<", x, const(t, 2.0**-126))
    xs = b.select(sub, b.fmul(x, const(t, 2.0**23)), x)
    bits = b.bitcast(xs, i32)
    e = b.sub(b.and_(b.lshr(bits, const(i32, 23)), const(i32, 0xFF)), const(i32, 126))
    e = b.sub(e, b.select(sub, const(i32, 23), const(i32, 0)))
    m = b.bitcast(b.or_(b.and_(bits, const(i32, 0x7FFFFF)), const(i32, 126 << 23)), t)
    low = b.fcmp_ordered("<", m, const(t, approx.SQRT_HALF))  # m in [sqrt(1/2), sqrt(2))
    e = b.sub(e, b.zext(low, i32))
    f = b.select(low, b.fsub(b.fadd(m, m), const(t, 1.0)), b.fsub(m, const(t, 1.0)))
    ef = b.sitofp(e, t)
    z = b.fmul(f, f)
    y = b.fmul(b.fmul(_horner(b, f, approx.LOG_P), f), z)
    y = b.fadd(y, b.fmul(ef, const(t, approx.LN2_LO)))
    y = b.fadd(y, b.fmul(const(t, -0.5), z))
    r = b.fadd(b.fadd(f, y), b.fmul(ef, const(t, approx.LN2_HI)))
    r = b.select(b.fcmp_ordered("==", x, const(t, 0.0)), const(t, -math.inf), r)
    r = b.select(b.fcmp_unordered("<", x, const(t, 0.0)), const(t, math.nan), r)
    return b.select(b.fcmp_ordered("==", x, const(t, math.inf)), x, r)


# The f32 forms written out in IR above (vectorised; bf16/f16 compute through them too).
F32_FORMS: dict[str, Callable] = {
    "exp": exp_f32,
    "tanh": tanh_f32,
    "sigmoid": sigmoid_f32,
    "erf": erf_f32,
    "log": log_f32,
}
# The unary kinds this backend has no f64 form of (f64 tiles are rare: cast to f32).
NO_F64 = ("tanh", "sigmoid", "erf")
