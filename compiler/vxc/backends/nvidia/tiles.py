"""Tile arithmetic (LANGUAGE.md 4.3) on sm_90a / sm_100a: expression trees evaluated
per element in registers.

A tile-arithmetic op does not emit code by itself: its lowered value is a `Lazy`
expression over its operands (shared-memory tiles, the accumulator, scalars,
constants). Code is emitted where a tile must exist — a placed result in shared
memory (the allocator's ring slot), an accumulator-space expression copied to shared
memory (`transfer(y, Memory::VMEM)`), a reduction — so an intermediate (`ring = -1`,
`exp(s - m)`) is never written anywhere: the language does not count intermediates in
the working set, and this lowering needs no room for them.

Where each element is computed (a `Spread`: a per-thread row and column register plus
static offsets per element, so every load is one `ld.shared` at an immediate offset):

- a shared-memory result `[R, C]` (row-major): thread t takes columns t + 128 j when
  128 divides C, else rows t / C + i (128 / C) of column t % C when C divides 128;
- the accumulator, where it lives: on sm_100a thread t holds TMEM lane t (its row),
  read 32 columns per `tcgen05.ld`; on sm_90a wgmma's D fragment (warp w, lane l: rows
  16 w + l / 4 (+ 8, + 64), columns 8 j + 2 (l % 4) + {0, 1});
- a reduction over the last axis: warp w takes rows w + 4 i, lane l columns l + 32 j,
  then a `shfl.sync.bfly` butterfly combines the 32 lanes; on the accumulator, each
  thread combines its own columns of a row, and on sm_90a the 4 lanes that share a row
  combine with `shfl.sync.bfly` 1 and 2. Over axis 0, thread t walks column t's rows.

Arithmetic is f32 (`.rn`, IEEE): bf16/f16 operands widen exactly and a bf16/f16 result
rounds to nearest even after each op (numpy's answer on bf16 arrays). `max`/`min` are
`max.NaN`/`min.NaN` (NaN propagates, numpy's `maximum`). `exp(x)` is `ex2.approx.f32`
of `x * log2(e)`: CUDA's `__expf`, whose documented error is 2 + floor(|1.173 x|) ulp
(the product's rounding grows with |x|; ex2.approx itself is within 2 ulp). `sqrt` is
`sqrt.rn.f32`, `/` is `div.rn.f32`. The other unary functions (the PTX ISA's documented
errors): `abs` is `abs.f32` (exact); `rsqrt` is `rsqrt.approx.f32` (relative 2^-22.9);
`tanh` is `tanh.approx.f32` (relative 2^-11, sm_75+); `log` is `lg2.approx.f32` times
ln 2 (lg2: absolute 2^-22 on (0.5, 2), relative 2^-22 elsewhere, plus the product's
rounding); `sigmoid` is (x >= 0 ? 1 : e) / (1 + e) with e = exp(-|x|) range-reduced
(`_exp_neg`: ex2.approx of a small argument, so within a few ulp at any x);
`erf` is approx.py's polynomial in mul.rn / add.rn with ex2.approx for its exp.

Masks, bool and integer tiles (vx.compare / select / iota, issue 32): an i32 element is a
b32 register (add.s32, sub.s32, mul.lo.s32, min/max.s32, neg.s32: wrapping), a bool
(i1) element a predicate in registers and one byte (0 or 1: `ld/st.shared.u8`) in shared
memory. Comparisons are `setp` (.f32 ordered, so NaN is false, except `ne` = `setp.neu`,
true on NaN; bf16/f16 widen exactly first; .s32 signed); `&`, `|`, `!` are and/or/not.pred;
`select` is `selp`; `iota` is the spread's row or column register plus the element's
static offset. Casts: to a float `cvt.rn.f32.s32` (an i32 to bf16/f16 through f32: exact
up to 2^24), float to i32 `cvt.rzi.s32.f32` (toward zero, saturating, NaN 0), a bool by
`selp` of 1 / 0. `argmax`/`argmin` carry a (value, index) pair per thread and through
the shfl butterflies (`_pick`: a strictly greater / smaller value, or a NaN where the
other is not, wins; equal values, two NaNs included, keep the lower index). i64 tiles are
refused (lower.py, E7001): no 64-bit register path through these forms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from vxc.backends import approx
from vxc.backends.nvidia.encoders import ATOM_ROWS, SWIZZLE_BYTES, elem_bytes
from vxc.backends.nvidia.ptx import Addr, Imm, Kernel, Operand, Reg, Vec

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
EXP_NEG_CLAMP = 104.0  # exp(-104) is below half the smallest subnormal: 0 in f32
FLOATS = ("f32", "bf16", "f16")
NARROW = ("bf16", "f16")  # 16-bit floats: cvt to and from f32

BINARY = {
    "add": "add.rn.f32",
    "sub": "sub.rn.f32",
    "mul": "mul.rn.f32",
    "div": "div.rn.f32",
    "max": "max.NaN.f32",
    "min": "min.NaN.f32",
}
REDUCE = {"sum": "add.rn.f32", "max": "max.NaN.f32", "min": "min.NaN.f32"}
# Integer (i32) and bool (i1) tiles: wrapping two's complement in b32 registers, bools
# as predicates (one byte, 0 or 1, in shared memory).
INTS = ("i32",)
INT_BINARY = {
    "add": "add.s32",
    "sub": "sub.s32",
    "mul": "mul.lo.s32",
    "max": "max.s32",
    "min": "min.s32",
}
INT_REDUCE = {"sum": "add.s32", "max": "max.s32", "min": "min.s32"}
BOOL_BINARY = {"and": "and.pred", "or": "or.pred"}
INT_UNARY = {"neg": "neg.s32", "abs": "abs.s32"}
# vx.compare's fn -> setp's comparison: ordered for floats (false on NaN) except `ne`,
# which is `neu` (true on NaN, numpy's `!=`).
COMPARE_F32 = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "neu"}
COMPARE_S32 = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
ARG = {"argmax": "gt", "argmin": "lt"}  # the strict comparison that makes a new extreme
# A value's register class per element kind.
REG_CLS = {"f": "f32", "i": "b32", "p": "pred"}


def kind(dtype: str) -> str:
    """ "f" (an f32 register: f32, bf16, f16 widened), "i" (i32 in a b32 register) or
    "p" (i1: a predicate)."""
    return "p" if dtype == "i1" else "i" if dtype in ("i32", "i64") else "f"


# -- the unary functions: each an f32 register computed from one operand -----------------


def _f32(k: Kernel, opcode: str, *operands: Operand) -> Reg:
    """A new f32 register set by one instruction."""
    v = k.reg("f32")
    k.ins(opcode, v, *operands)
    return v


def _horner(k: Kernel, x: Operand, coeffs: tuple[float, ...]) -> Reg:
    """c0 x^(n-1) + ... + c(n-1) with mul.rn / add.rn (no fma: approx.py's order)."""
    p = _f32(k, "mov.f32", Imm(coeffs[0]))
    for c in coeffs[1:]:
        p = _f32(k, "add.rn.f32", _f32(k, "mul.rn.f32", p, x), Imm(c))
    return p


def _exp(k: Kernel, x: Operand) -> Reg:
    return _f32(k, "ex2.approx.f32", _f32(k, "mul.rn.f32", x, Imm(LOG2E)))


def _log(k: Kernel, x: Operand) -> Reg:
    return _f32(k, "mul.rn.f32", _f32(k, "lg2.approx.f32", x), Imm(LN2))


def _pow2(k: Kernel, n: Reg) -> Reg:
    """2^-n exactly for an integer 0 <= n <= 126, from the exponent bits."""
    bits, top = k.reg("b32"), k.mov("b32", Imm(127))
    k.ins("sub.s32", bits, top, n)
    k.ins("shl.b32", bits, bits, Imm(23))
    return _f32(k, "mov.b32", bits)


def _exp_neg(k: Kernel, a: Reg) -> Reg:
    """exp(-a) for a >= 0 to within ex2.approx's 2 ulp plus two roundings: a = n ln2 + r
    (Cody-Waite, ln2 in two parts so n ln2_hi is exact), 2^(-r log2 e) with |r| <= ln2/2
    (so the product's rounding costs nothing, unlike `exp`'s x log2 e at large |x|), and
    2^-n in two exact factors so results down to the subnormals are right. a past
    EXP_NEG_CLAMP (where exp(-a) rounds to 0) is clamped; NaN stays NaN."""
    a = _f32(k, "min.NaN.f32", a, Imm(EXP_NEG_CLAMP))
    n = k.reg("b32")
    k.ins("cvt.rni.s32.f32", n, _f32(k, "mul.rn.f32", a, Imm(LOG2E)))
    nf = _f32(k, "cvt.rn.f32.s32", n)
    r = _f32(k, "sub.rn.f32", a, _f32(k, "mul.rn.f32", nf, Imm(approx.LN2_HI)))
    r = _f32(k, "add.rn.f32", r, _f32(k, "mul.rn.f32", nf, Imm(-approx.LN2_LO)))
    er = _f32(k, "ex2.approx.f32", _f32(k, "mul.rn.f32", r, Imm(-LOG2E)))
    half, rest = k.reg("b32"), k.reg("b32")
    k.ins("shr.u32", half, n, Imm(1))
    k.ins("sub.s32", rest, n, half)
    return _f32(k, "mul.rn.f32", _f32(k, "mul.rn.f32", er, _pow2(k, half)), _pow2(k, rest))


def _sigmoid(k: Kernel, x: Operand) -> Reg:
    """(x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|): e never overflows, so a very negative x
    gives e itself, not 1 / inf (the cpu's form)."""
    e = _exp_neg(k, _f32(k, "abs.f32", x))
    top = _f32(k, "selp.f32", Imm(1.0), e, k.setp("ge", "f32", x, Imm(0.0)))
    return _f32(k, "div.rn.f32", top, _f32(k, "add.rn.f32", e, Imm(1.0)))


def _erf(k: Kernel, x: Operand) -> Reg:
    """approx.py's erf: x + x P(x^2) up to ERF_SMALL (NaN too: `setp.gt` is false on it),
    else 1 - exp(t Q(t) - t) with x's sign, t = min(|x|, ERF_CLAMP)."""
    small = _f32(k, "add.rn.f32", _f32(k, "mul.rn.f32", _horner(k, _sq(k, x), approx.ERF_P), x), x)
    a = _f32(k, "abs.f32", x)
    t = _f32(k, "min.NaN.f32", a, Imm(approx.ERF_CLAMP))
    q = _f32(k, "mul.rn.f32", _horner(k, t, approx.ERF_Q_HI), _sq(k, t))
    q = _f32(k, "add.rn.f32", q, _horner(k, t, approx.ERF_Q_MID))
    for c in approx.ERF_Q_LO:
        q = _f32(k, "add.rn.f32", _f32(k, "mul.rn.f32", q, t), Imm(c))
    r = _f32(k, "sub.rn.f32", _f32(k, "mul.rn.f32", q, t), t)
    big = _f32(k, "copysign.f32", x, _f32(k, "sub.rn.f32", Imm(1.0), _exp(k, r)))
    return _f32(k, "selp.f32", big, small, k.setp("gt", "f32", a, Imm(approx.ERF_SMALL)))


def _sq(k: Kernel, x: Operand) -> Reg:
    return _f32(k, "mul.rn.f32", x, x)


def _one(opcode: str) -> Callable[[Kernel, Operand], Reg]:
    return lambda k, x: _f32(k, opcode, x)


def _not(k: Kernel, x: Operand) -> Reg:
    p = k.reg("pred")
    k.ins("not.pred", p, x)
    return p


# vx.unary's `fn` -> its PTX (errors: the module docstring and docs/LANGUAGE.md section 9).
UNARY: dict[str, Callable[[Kernel, Operand], Reg]] = {
    "neg": _one("neg.f32"),
    "sqrt": _one("sqrt.rn.f32"),
    "exp": _exp,
    "abs": _one("abs.f32"),
    "rsqrt": _one("rsqrt.approx.f32"),
    "tanh": _one("tanh.approx.f32"),
    "log": _log,
    "sigmoid": _sigmoid,
    "erf": _erf,
    "not": _not,  # i1 tiles only (the verifier's FN_ELEMENTS)
}


class TileError(ValueError):
    """A tile form this lowering does not take; the message says why."""


# -- expressions ----------------------------------------------------------------------


@dataclass(eq=False)
class Node:
    rows: int
    cols: int
    dtype: str


@dataclass(eq=False)
class Load(Node):
    """A row-major shared-memory tile at `addr`."""

    addr: Reg = None


@dataclass(eq=False)
class AccLeaf(Node):
    """The accumulator, where it lives (`acc` is mma.Acc)."""

    acc: object = None


@dataclass(eq=False)
class Const(Node):
    value: Operand = None  # an f32 register or immediate


@dataclass(eq=False)
class Un(Node):
    fn: str = ""
    x: Node = None


@dataclass(eq=False)
class Bin(Node):
    fn: str = ""
    x: Node = None
    y: Node = None


@dataclass(eq=False)
class Cast(Node):
    x: Node = None


@dataclass(eq=False)
class Cmp(Node):
    """`x fn y` into an i1 (predicate) node; x and y of one element type."""

    fn: str = ""
    x: Node = None
    y: Node = None


@dataclass(eq=False)
class Sel(Node):
    """`c ? x : y`, c an i1 node."""

    c: Node = None
    x: Node = None
    y: Node = None


@dataclass(eq=False)
class Iota(Node):
    """Element [i0, i1] = i_axis (i32)."""

    axis: int = 0


@dataclass(eq=False)
class Red(Node):
    """A reduction keeping its axis; computed into `scratch` (a private f32 [rows, cols]
    shared-memory buffer) before any expression reads it."""

    fn: str = ""
    axis: int = 1
    x: Node = None
    scratch: Reg = None


CHILDREN = ("c", "x", "y")


def children(n: Node) -> list[Node]:
    return [c for c in (getattr(n, f, None) for f in CHILDREN) if c is not None]


def walk(n: Node) -> list[Node]:
    out, stack = [], [n]
    while stack:
        m = stack.pop()
        out.append(m)
        stack.extend(children(m))
    return out


def accs(n: Node) -> list[object]:
    return list({id(m.acc): m.acc for m in walk(n) if isinstance(m, AccLeaf)}.values())


# -- where elements are computed --------------------------------------------------------


@dataclass
class Spread:
    """Per-thread row/column registers (None: 0) and each element's static offsets;
    `guard`: a predicate for threads that hold no element (None: all do)."""

    row: Reg | None
    col: Reg | None
    elems: list[tuple[int, int]]
    guard: Reg | None = None
    acc_regs: list[Reg] = field(default_factory=list)  # per element, accumulator spreads
    even_col: bool = False  # the column register is even (or absent): pairs may pack


class Emitter:
    """Evaluates expressions for one kernel (`tid`, `warp` from the prologue)."""

    def __init__(self, k: Kernel, tid: Reg, warp: Reg, threads: int) -> None:
        self.k, self.tid, self.warp, self.threads = k, tid, warp, threads

    @property
    def lane(self) -> Reg:
        """tid % 32, computed where it is used (an Emitter emits nothing until asked, so
        kernels without tile arithmetic keep their PTX)."""
        r = self.k.reg("b32")
        self.k.ins("and.b32", r, self.tid, Imm(31))
        return r

    # Spreads -----------------------------------------------------------------------

    def tile_spread(self, rows: int, cols: int) -> Spread:
        k, n = self.k, self.threads
        if cols % n == 0:
            return Spread(None, self.tid, [(r, c) for r in range(rows) for c in range(0, cols, n)])
        if n % cols:
            raise TileError(f"a [{rows}, {cols}] tile: columns must divide or be a multiple of {n}")
        per = n // cols
        if rows % per and rows * cols > n:
            raise TileError(f"a [{rows}, {cols}] tile: rows must be a multiple of {per}")
        row, col = k.reg("b32"), None
        k.ins("shr.u32", row, self.tid, Imm(cols.bit_length() - 1))
        if cols > 1:
            col = k.reg("b32")
            k.ins("and.b32", col, self.tid, Imm(cols - 1))
        guard = k.setp("lt", "u32", self.tid, Imm(rows * cols)) if rows * cols < n else None
        return Spread(row, col, [(i * per, 0) for i in range(-(-rows // per))], guard)

    # Evaluation ----------------------------------------------------------------------

    def pointer(self, leaf: Load, s: Spread, memo: dict) -> Reg:
        """The leaf's address for this thread's (row, col), broadcast dims at 0."""
        key = id(leaf)
        if key in memo:
            return memo[key]
        k, p = self.k, leaf.addr
        eb = elem_bytes(leaf.dtype)
        if leaf.rows > 1 and s.row is not None:
            q = k.reg("b32")
            k.ins("mad.lo.u32", q, s.row, Imm(leaf.cols * eb), p)
            p = q
        if leaf.cols > 1 and s.col is not None:
            q = k.reg("b32")
            k.ins("mad.lo.u32", q, s.col, Imm(eb), p)
            p = q
        memo[key] = p
        return p

    def offset(self, leaf: Node, r: int, c: int) -> int:
        eb = elem_bytes(leaf.dtype)
        return (r if leaf.rows > 1 else 0) * leaf.cols * eb + (c if leaf.cols > 1 else 0) * eb

    def load(self, leaf: Load, s: Spread, r: int, c: int, memo: dict) -> Reg:
        k = self.k
        a = Addr(self.pointer(leaf, s, memo), self.offset(leaf, r, c))
        if leaf.dtype == "i32":
            v = k.reg("b32")
            k.ins("ld.shared.b32", v, a)
            return v
        if leaf.dtype == "i1":  # one byte, 0 or 1
            b = k.reg("b32")
            k.ins("ld.shared.u8", b, a)
            return k.setp("ne", "u32", b, Imm(0))
        f = k.reg("f32")
        if leaf.dtype == "f32":
            k.ins("ld.shared.f32", f, a)
        else:
            h = k.reg("b16")
            k.ins("ld.shared.b16", h, a)
            k.ins(f"cvt.f32.{leaf.dtype}", f, h)
        return f

    def round(self, f: Reg, dtype: str) -> Reg:
        """`f` rounded to `dtype` (nearest even) and widened back: bf16/f16 results."""
        if dtype not in NARROW:
            return f
        k = self.k
        h, g = k.reg("b16"), k.reg("f32")
        k.ins(f"cvt.rn.{dtype}.f32", h, f)
        k.ins(f"cvt.f32.{dtype}", g, h)
        return g

    def index(self, n: Node, s: Spread, i: int, axis: int) -> Operand:
        """Element i's index along `axis` of node `n` (0 on a broadcast dimension): the
        spread's row / column register plus the element's static offset."""
        r, c = s.elems[i]
        reg, off, size = (s.row, r, n.rows) if axis == 0 else (s.col, c, n.cols)
        if size == 1:
            return Imm(0)
        if reg is None:
            return Imm(off)
        if off == 0:
            return reg
        v = self.k.reg("b32")
        self.k.ins("add.s32", v, reg, Imm(off))
        return v

    def value(self, n: Node, s: Spread, i: int, memo: dict, elem: dict) -> Operand:
        """Node `n` at element i of the spread (memoised per element in `elem`): an f32
        register or immediate for a float node, b32 for i32, a predicate for i1."""
        if id(n) in elem:
            return elem[id(n)]
        k = self.k
        r, c = s.elems[i]
        kd = kind(n.dtype)
        if isinstance(n, Load):
            v = self.load(n, s, r, c, memo)
        elif isinstance(n, AccLeaf):
            v = s.acc_regs[i]
        elif isinstance(n, Const):
            v = n.value
            if kd == "p" and isinstance(v, Imm):  # a new (zero) bool tile
                v = k.setp("ne", "u32", k.mov("b32", Imm(int(v.value))), Imm(0))
            elif kd == "i" and isinstance(v, Imm):
                v = Imm(int(v.value))
        elif isinstance(n, Iota):
            v = self.index(n, s, i, n.axis)
        elif isinstance(n, Cast):
            v = self.cast(self.value(n.x, s, i, memo, elem), n.x.dtype, n.dtype)
        elif isinstance(n, Un):
            x = self.value(n.x, s, i, memo, elem)
            if kd == "i":
                if n.fn not in INT_UNARY:
                    raise TileError(f"no lowering for `{n.fn}` on {n.dtype} tiles")
                v = k.reg("b32")
                k.ins(INT_UNARY[n.fn], v, self._reg(x, "i"))
            elif kd == "p":
                if n.fn != "not":
                    raise TileError(f"no lowering for `{n.fn}` on bool tiles")
                v = _not(k, x)
            else:
                if n.fn not in UNARY or n.fn == "not":
                    raise TileError(f"no lowering for `{n.fn}`")
                v = self.round(UNARY[n.fn](k, x), n.dtype)
        elif isinstance(n, Bin):
            x, y = self.value(n.x, s, i, memo, elem), self.value(n.y, s, i, memo, elem)
            table = {"f": BINARY, "i": INT_BINARY, "p": BOOL_BINARY}[kd]
            if n.fn not in table:
                raise TileError(f"no lowering for `{n.fn}` on {n.dtype} tiles")
            v = k.reg(REG_CLS[kd])
            k.ins(table[n.fn], v, x if kd == "f" else self._reg(x, kd), y)
            v = self.round(v, n.dtype) if kd == "f" else v
        elif isinstance(n, Cmp):
            x, y = self.value(n.x, s, i, memo, elem), self.value(n.y, s, i, memo, elem)
            xk = kind(n.x.dtype)
            if xk == "f":
                v = k.setp(COMPARE_F32[n.fn], "f32", self._reg(x, "f"), y)
            elif xk == "i":
                v = k.setp(COMPARE_S32[n.fn], "s32", self._reg(x, "i"), y)
            else:
                raise TileError("a comparison of bool tiles")
        elif isinstance(n, Sel):
            cond = self.value(n.c, s, i, memo, elem)
            x, y = self.value(n.x, s, i, memo, elem), self.value(n.y, s, i, memo, elem)
            v = self.select(cond, x, y, kd)
        else:  # a Red is computed before the expression that reads it (`resolve`)
            raise TileError(f"an unresolved {type(n).__name__}")
        elem[id(n)] = v
        return v

    def select(self, cond: Reg, x: Operand, y: Operand, kd: str) -> Reg:
        k = self.k
        if kd == "p":  # (c and x) or (not c and y)
            a, b, d = k.reg("pred"), k.reg("pred"), k.reg("pred")
            k.ins("and.pred", a, cond, x)
            k.ins("and.pred", b, _not(k, cond), y)
            k.ins("or.pred", d, a, b)
            return d
        v = k.reg(REG_CLS[kd])
        k.ins("selp.f32" if kd == "f" else "selp.b32", v, x, y, cond)
        return v

    def cast(self, x: Operand, src: str, dst: str) -> Operand:
        """vx.cast of one element: to a float rounds to nearest even (an i32 through
        f32, exact up to 2^24), float to i32 truncates toward zero saturating with NaN 0
        (`cvt.rzi.s32.f32`), a bool gives 0 or 1."""
        k, sk, dk = self.k, kind(src), kind(dst)
        if dk == "p":
            raise TileError(f"a cast to {dst}")
        if sk == "p":
            v = k.reg(REG_CLS[dk])
            one, zero = (Imm(1.0), Imm(0.0)) if dk == "f" else (Imm(1), Imm(0))
            k.ins("selp.f32" if dk == "f" else "selp.b32", v, one, zero, x)
            return v
        if sk == dk:
            return self.round(self._reg(x, "f"), dst) if dk == "f" else x
        if sk == "i":  # i32 -> float
            return self.round(_f32(k, "cvt.rn.f32.s32", self._reg(x, "i")), dst)
        v = k.reg("b32")
        k.ins("cvt.rzi.s32.f32", v, self._reg(x, "f"))
        return v

    def _reg(self, v: Operand, kd: str | None = None) -> Reg:
        if isinstance(v, Reg):
            return v
        if kd is None:
            kd = "f" if isinstance(v.value, float) else "i"
        if kd == "i":
            return self.k.mov("b32", Imm(int(v.value)))
        return self.k.mov("f32", Imm(float(v.value)))

    def store(self, dst: Load, s: Spread, i: int, v: Operand, memo: dict) -> None:
        k = self.k
        a = Addr(self.pointer(dst, s, memo), self.offset(dst, *s.elems[i]))
        if dst.dtype == "f32":
            k.ins("st.shared.f32", a, v)
            return
        if dst.dtype == "i32":
            k.ins("st.shared.b32", a, self._reg(v, "i"))
            return
        if dst.dtype == "i1":
            b = k.reg("b32")
            k.ins("selp.b32", b, Imm(1), Imm(0), v)
            k.ins("st.shared.u8", a, b)
            return
        h = k.reg("b16")
        k.ins(f"cvt.rn.{dst.dtype}.f32", h, self._reg(v, "f"))
        k.ins("st.shared.b16", a, h)

    def evaluate_into(self, n: Node, dst: Load, s: Spread) -> None:
        """Every element of the spread of `n`, stored into the tile `dst`; two 16-bit
        neighbours in a row (an even column and the next, both this thread's) as one
        `cvt.rn.{bf16,f16}x2.f32` and one 32-bit store."""
        memo: dict = {}
        i = 0
        while i < len(s.elems):
            v = self.value(n, s, i, memo, {})
            if self.pairs(dst, s, i):
                hi = self._reg(self.value(n, s, i + 1, memo, {}))
                packed = self.k.reg("b32")
                self.k.ins(f"cvt.rn.{dst.dtype}x2.f32", packed, hi, self._reg(v))
                a = Addr(self.pointer(dst, s, memo), self.offset(dst, *s.elems[i]))
                self.k.ins("st.shared.b32", a, packed)
                i += 2
                continue
            self.store(dst, s, i, v, memo)
            i += 1

    def element_values(self, n: Node, s: Spread) -> list[Reg]:
        """`n` at every element of the spread, in registers (an in-place update's values)."""
        memo: dict = {}
        return [self._reg(self.value(n, s, i, memo, {})) for i in range(len(s.elems))]

    def evaluate_sw128(self, n: Node, addr: Reg, rows: int, cols: int, dtype: str) -> None:
        """`n` stored as an MMA operand: K-major with the 128-byte swizzle (encoders.py),
        K-blocks of 128 bytes x `rows` rows, the 16-byte chunk q of row r at
        r * 128 + (q ^ r % 8) * 16 in its block. Thread t writes chunk t % 8 of rows
        t / 8 + 16 i of every block (whole chunks: one 16-byte store each); the rows a
        thread writes share r % 8, so its swizzled chunk is one address for all of them."""
        k, eb, span = self.k, elem_bytes(dtype), SWIZZLE_BYTES
        per, block = 16 // eb, span // eb  # elements per chunk, per K-block
        if dtype not in NARROW:
            raise TileError(f"a {dtype} MMA operand computed by tile arithmetic (cast it to bf16)")
        if (cols * eb) % span or rows % 16:
            raise TileError(
                f"a [{rows}, {cols}] {dtype} MMA operand: rows must be a multiple of 16 and "
                f"rows of 128-byte multiples"
            )
        row, chunk, col, sw, dst = (k.reg("b32") for _ in range(5))
        k.ins("shr.u32", row, self.tid, Imm(3))
        k.ins("and.b32", chunk, self.tid, Imm(span // 16 - 1))
        k.ins("shl.b32", col, chunk, Imm(per.bit_length() - 1))
        k.ins("and.b32", sw, row, Imm(ATOM_ROWS - 1))
        k.ins("xor.b32", sw, sw, chunk)
        k.ins("shl.b32", sw, sw, Imm(4))
        k.ins("mad.lo.u32", dst, row, Imm(span), addr)
        k.ins("add.u32", dst, dst, sw)
        elems = [(r, b * block + e) for b in range(cols // block) for r in range(0, rows, 16)
                 for e in range(per)]  # fmt: skip
        s = Spread(row, col, elems, even_col=True)
        memo: dict = {}
        for g in range(0, len(elems), per):
            vals = [self._reg(self.value(n, s, g + e, memo, {})) for e in range(per)]
            words = []
            for e in range(0, per, 2):
                w = k.reg("b32")
                k.ins(f"cvt.rn.{dtype}x2.f32", w, vals[e + 1], vals[e])
                words.append(w)
            r, c = elems[g]
            off = (c // block) * rows * span + r * span
            k.ins("st.shared.v4.b32", Addr(dst, off), Vec(tuple(words)))

    def pairs(self, dst: Load, s: Spread, i: int) -> bool:
        """Elements i and i + 1 are the 4-byte-aligned halves of one word of `dst`: the
        column register (if any) is even (tile spreads: none or t % C with C >= 2 only
        when... so only spreads without a column register, or the wgmma fragment's
        2 (l % 4))."""
        if dst.dtype not in NARROW or i + 1 >= len(s.elems) or dst.cols < 2:
            return False
        (r0, c0), (r1, c1) = s.elems[i], s.elems[i + 1]
        return r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0 and s.even_col

    def guarded(self, s: Spread, body) -> None:
        k = self.k
        if s.guard is None:
            body()
            return
        skip = k.label("tile_idle")
        k.bra(skip, pred=s.guard, negate=True)
        body()
        k.place(skip)

    # Reductions --------------------------------------------------------------------

    def _start(self, n: Red, s: Spread, i: int, memo: dict) -> tuple[Reg, ...]:
        """A reduction's running state from element i: (value,), or for argmax/argmin
        (value, index along the axis)."""
        v = self._reg(self.value(n.x, s, i, memo, {}), kind(n.x.dtype))
        if n.fn in ARG:
            return v, self._reg(self.index(n.x, s, i, n.axis), "i")
        return (v,)

    def _fold(self, n: Red, st: tuple[Reg, ...], s: Spread, i: int, memo: dict):
        if n.fn in ARG:
            return self._pick(n, st, self._start(n, s, i, memo))
        return (self._combine(n, st[0], self.value(n.x, s, i, memo, {})),)

    def _combine(self, n: Red, acc: Reg, v: Operand) -> Reg:
        kd = kind(n.x.dtype)
        if n.fn not in (REDUCE if kd == "f" else INT_REDUCE):
            raise TileError(f"no lowering for `{n.fn}` on {n.x.dtype} tiles")
        nxt = self.k.reg(REG_CLS[kd])
        self.k.ins((REDUCE if kd == "f" else INT_REDUCE)[n.fn], nxt, acc, v)
        return nxt

    def _pick(self, n: Red, a: tuple[Reg, Reg], b: tuple[Reg, Reg]) -> tuple[Reg, Reg]:
        """The first extreme of two (value, index) pairs: b replaces a when its value is
        strictly beyond (`gt` for argmax, `lt` for argmin; a NaN is beyond any number,
        numpy's rule), or the values are equal (both NaN included) and b's index is
        lower. A strict total order on distinct indices, so a butterfly's two lanes
        agree."""
        k, (v1, i1), (v2, i2) = self.k, a, b
        cmp = ARG[n.fn]
        if kind(n.x.dtype) == "f":
            beyond = k.setp(cmp, "f32", v2, v1)
            nan2, nan1 = k.setp("nan", "f32", v2, v2), k.setp("nan", "f32", v1, v1)
            only2, both, eq = k.reg("pred"), k.reg("pred"), k.setp("eq", "f32", v2, v1)
            k.ins("and.pred", only2, nan2, _not(k, nan1))
            k.ins("or.pred", beyond, beyond, only2)
            k.ins("and.pred", both, nan2, nan1)
            k.ins("or.pred", eq, eq, both)
            vsel = "selp.f32"
        else:
            beyond, eq = k.setp(cmp, "s32", v2, v1), k.setp("eq", "s32", v2, v1)
            vsel = "selp.b32"
        take = k.reg("pred")
        k.ins("and.pred", take, eq, k.setp("lt", "s32", i2, i1))
        k.ins("or.pred", take, take, beyond)
        v, i = k.reg(v1.cls), k.reg("b32")
        k.ins(vsel, v, v2, v1, take)
        k.ins("selp.b32", i, i2, i1, take)
        return v, i

    def _finish(self, n: Red, st: tuple[Reg, ...]) -> Reg:
        """The reduction's result: the index of an arg reduction, else the value (a
        float rounded to the result type)."""
        if n.fn in ARG:
            return st[1]
        return self.round(st[0], n.dtype) if kind(n.dtype) == "f" else st[0]

    def reduce_rows(self, n: Red, dst: Load) -> None:
        """`n` over the last axis of a shared-memory expression: warp w rows w + 4 i, lane
        l columns l + 32 j, a 32-lane butterfly, lane 0 writes dst[row]."""
        k, x = self.k, n.x
        if x.cols % 32:
            raise TileError(f"a reduction over {x.cols} columns: a multiple of 32 is reduced")
        warps = self.threads // 32
        elems = [(r, c) for r in range(0, x.rows, warps) for c in range(0, x.cols, 32)]
        lane = self.lane
        s = Spread(self.warp, lane, elems)
        memo: dict = {}
        per_row = x.cols // 32
        lane0 = k.setp("eq", "u32", lane, Imm(0))
        for g in range(0, len(elems), per_row):
            r0 = elems[g][0]
            idle = k.label("rows_idle")
            if x.rows % warps:  # warp-uniform: the whole warp skips, shfl stays full
                k.bra(idle, pred=k.setp("ge", "u32", self.warp, Imm(x.rows - r0)))
            st = self._start(n, s, g, memo)
            for j in range(1, per_row):
                st = self._fold(n, st, s, g + j, memo)
            st = self.butterfly(st, n, 16)
            self.store_row(dst, s, r0, self._finish(n, st), lane0, memo)
            k.place(idle)

    def butterfly(self, st: tuple[Reg, ...], n: Red, width: int) -> tuple[Reg, ...]:
        """Combine the state across lanes xor 1 .. width (shfl.sync.bfly, the full warp)."""
        k = self.k
        step = width
        while step >= 1:
            other = []
            for r in st:
                o = k.reg(r.cls)
                k.ins("shfl.sync.bfly.b32", o, r, Imm(step), Imm(31), Imm(0xFFFFFFFF))
                other.append(o)
            if n.fn in ARG:
                st = self._pick(n, st, tuple(other))
            else:
                st = (self._combine(n, st[0], other[0]),)
            step //= 2
        return st

    def store_row(self, dst: Load, s: Spread, r: int, v: Reg, pred: Reg, memo: dict) -> None:
        a = Addr(self.pointer(dst, Spread(s.row, None, []), memo), r * 4)
        self.k.ins("st.shared.f32" if v.cls == "f32" else "st.shared.b32", a, v, pred=pred)

    def reduce_cols(self, n: Red, dst: Load) -> None:
        """`n` over axis 0: thread t walks column t (+ 128 j) down the rows."""
        x = n.x
        s = self.tile_spread(1, x.cols)
        memo: dict = {}

        def body() -> None:
            for c0 in range(len(s.elems)):
                _, c = s.elems[c0]
                col = Spread(None, s.col, [(r, c) for r in range(x.rows)])
                st = self._start(n, col, 0, memo)
                for r in range(1, x.rows):
                    st = self._fold(n, st, col, r, memo)
                out = Spread(s.row, s.col, [(0, c)])
                self.store(dst, out, 0, self._finish(n, st), memo)

        self.guarded(s, body)

    def acc_reduce_rows(self, n: Red, dst: Load, spread: Spread, lanes_per_row: int) -> None:
        """`n` over the columns of an accumulator expression, in its own spread: each
        thread combines its elements of each row, the `lanes_per_row` lanes sharing a row
        combine by shfl, and the first of them writes dst[row]."""
        k = self.k
        rows: dict[int, list[int]] = {}
        for i, (r, _) in enumerate(spread.elems):
            rows.setdefault(r, []).append(i)
        memo: dict = {}
        first = None
        if lanes_per_row > 1:
            q = k.reg("b32")
            k.ins("and.b32", q, self.lane, Imm(lanes_per_row - 1))
            first = k.setp("eq", "u32", q, Imm(0))
        for r, idx in rows.items():
            st = self._start(n, spread, idx[0], memo)
            for i in idx[1:]:
                st = self._fold(n, st, spread, i, memo)
            if lanes_per_row > 1:
                st = self.butterfly(st, n, lanes_per_row // 2)
            self.store_row(dst, spread, r, self._finish(n, st), first, memo)
