"""`acc += a @ b` (row-major f32) as an LLVM function.

bf16 and f16 operands are first widened to f32 (exactly: bf16 is the top half
of an f32, f16 converts with `fpext`) into per-call scratch buffers, then run the
same f32 kernel: the accumulation is f32, as LANGUAGE.md section 4 asks. The
widening is O(M*K + K*N) per call against O(M*N*K) multiply-adds.

The bulk runs a register-blocked micro-kernel: an MR x (NV*VW) tile of `acc`
stays in vector registers for the whole K loop, each step broadcasting MR
elements of `a` against NV vector loads of `b`. The shape is chosen from the
host's vector registers (AVX-512: 8 x 32 = 16 zmm accumulators). Edges that
do not fill a tile run an i-k-j loop that LLVM vectorises.

A `transpose` folded into `matmul_acc` (the pass `fold-transpose`) is not materialised: the
operand's packing reads it in transposed order (widened to f32 transposed, or for
`vdpbf16ps` B^T's bf16 pairs taken as 32-bit words and A^T packed in pairs like B).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir as ll

from vxc.backends.cpu.loops import I64, counted_loop

F32 = ll.FloatType()
PTR = ll.PointerType()
NAME = "__vx_matmul_acc_f32"
WIDEN = ("bf16", "f16")  # operand element types widened to f32 before the f32 kernel
AMX_FEATURES = ("+amx-tile", "+amx-bf16")  # what the AMX kernel (amx.py) runs on


@dataclass(frozen=True)
class Blocking:
    vw: int  # f32 lanes per vector register
    mr: int  # rows of the register tile
    nv: int  # vectors per row of the register tile
    bf16dot: bool = False  # AVX512_BF16: bf16 operands go to `vdpbf16ps`, not widened
    amx: bool = False  # AMX-TILE + AMX-BF16: bf16 operands go to `tdpbf16ps` (amx.py)

    @property
    def nr(self) -> int:
        return self.vw * self.nv


# The bf16 vector path per microarchitecture, measured: `benchmarks/bench_cpu.py --only gemm`,
# "vx bf16" (`vdpbf16ps` where the host has AVX512_BF16) against "vx bf16, widening + FMA"
# in the same run, 2 threads. Keyed by (vendor, family, model) of CPUID: which one wins
# depends on the microarchitecture's `vdpbf16ps` rate against its FMAs, which no feature
# bit says. A host not listed takes `vdpbf16ps` where it has the instruction (its nominal
# 2x the multiply-adds of an FMA).
BF16_VECTOR_PATH: dict[tuple[str, int, int], str] = {
    # AMD Zen 4 (EPYC Genoa): vdpbf16ps 1.5-1.9x the widening at 1024^3 and 2048^3
    # (2026-12-06, 4 runs, load 2-4.6; docs/PERFORMANCE.md "bf16 gemm against XLA:CPU").
    ("AuthenticAMD", 25, 17): "vdpbf16ps",
    # Intel Emerald Rapids: the widening 1.18-1.34x faster than vdpbf16ps (issue 34's
    # measurement: vdpbf16ps issues at 0.5 per cycle there, two FMAs at 1 each).
    ("GenuineIntel", 6, 207): "widen",
}


def has_amx(features: str) -> bool:
    """Whether a target's feature string has the AMX tile and bf16 units."""
    return set(AMX_FEATURES) <= set(features.split(","))


def blocking_for(features: str, cpuid: tuple[str, int, int] | None = None) -> Blocking:
    """Register tile for the host: accumulators + loads must fit the register file; bf16's
    vector path from BF16_VECTOR_PATH by the host's CPUID where it is listed."""
    feats = set(features.split(","))
    if "+avx512f" in feats:
        dot = "+avx512bf16" in feats and BF16_VECTOR_PATH.get(cpuid, "vdpbf16ps") == "vdpbf16ps"
        # 16 acc + 2 b + broadcasts of 32 zmm
        return Blocking(vw=16, mr=8, nv=2, bf16dot=dot, amx=has_amx(features))
    if "+avx" in feats:
        return Blocking(vw=8, mr=6, nv=2)  # 12 acc + 2 b + 1 broadcast of 16 ymm
    return Blocking(vw=4, mr=4, nv=2)


def _c(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


def _gep(b: ll.IRBuilder, base: ll.Value, index: ll.Value) -> ll.Value:
    return b.gep(base, [index], inbounds=True, source_etype=F32)


def _fmuladd(module: ll.Module, ty: ll.Type) -> ll.Function:
    suffix = f"v{ty.count}f32" if isinstance(ty, ll.VectorType) else "f32"
    name = f"llvm.fmuladd.{suffix}"
    if name in module.globals:
        return module.globals[name]
    return ll.Function(module, ll.FunctionType(ty, [ty, ty, ty]), name=name)


def _micro(b: ll.IRBuilder, fn: ll.Function, blk: Blocking, i0: ll.Value, j0: ll.Value) -> None:
    acc, a, bm, _m, n, k = fn.args
    vty = ll.VectorType(F32, blk.vw)
    fma = _fmuladd(fn.module, vty)
    rows = [b.mul(b.add(i0, _c(r)), n) for r in range(blk.mr)]
    cptrs = [
        [_gep(b, acc, b.add(rows[r], b.add(j0, _c(v * blk.vw)))) for v in range(blk.nv)]
        for r in range(blk.mr)
    ]
    init = [b.load(p, typ=vty, align=4) for row in cptrs for p in row]
    arows = [b.mul(b.add(i0, _c(r)), k) for r in range(blk.mr)]

    def step(kk: ll.Value, c: list[ll.Value]) -> list[ll.Value]:
        brow = b.mul(kk, n)
        bv = [
            b.load(_gep(b, bm, b.add(brow, b.add(j0, _c(v * blk.vw)))), typ=vty, align=4)
            for v in range(blk.nv)
        ]
        out = []
        for r in range(blk.mr):
            s = b.load(_gep(b, a, b.add(arows[r], kk)), typ=F32, align=4)
            splat = b.insert_element(ll.Constant(vty, ll.Undefined), s, _c(0))
            splat = b.shuffle_vector(
                splat,
                ll.Constant(vty, ll.Undefined),
                ll.Constant(ll.VectorType(ll.IntType(32), blk.vw), [0] * blk.vw),
            )
            out += [b.call(fma, [splat, bv[v], c[r * blk.nv + v]]) for v in range(blk.nv)]
        return out

    final = counted_loop(b, _c(0), k, _c(1), step, init, name="mk.k")
    for row, vals in zip(
        cptrs, [final[r * blk.nv : (r + 1) * blk.nv] for r in range(blk.mr)], strict=True
    ):
        for p, v in zip(row, vals, strict=True):
            b.store(v, p, align=4)


def _edge(b: ll.IRBuilder, fn: ll.Function, i_lo, i_hi, j_lo, j_hi) -> None:
    """acc[i, j] += sum_k a[i, k] b[k, j] over a rectangle, i-k-j order (vectorisable)."""
    acc, a, bm, _m, n, k = fn.args
    fma = _fmuladd(fn.module, F32)

    def row(i: ll.Value, _c0: list) -> list:
        def kstep(kk: ll.Value, _c1: list) -> list:
            aik = b.load(_gep(b, a, b.add(b.mul(i, k), kk)), typ=F32, align=4)

            def col(j: ll.Value, _c2: list) -> list:
                cp = _gep(b, acc, b.add(b.mul(i, n), j))
                bkj = b.load(_gep(b, bm, b.add(b.mul(kk, n), j)), typ=F32, align=4)
                b.store(b.call(fma, [aik, bkj, b.load(cp, typ=F32, align=4)]), cp, align=4)
                return []

            counted_loop(b, j_lo, j_hi, _c(1), col, name="edge.j")
            return []

        counted_loop(b, _c(0), k, _c(1), kstep, name="edge.k")
        return []

    counted_loop(b, i_lo, i_hi, _c(1), row, name="edge.i")


def matmul_function(module: ll.Module, name: str) -> tuple[ll.Function, ll.IRBuilder]:
    """A new internal `void name(ptr noalias acc, ptr noalias a, ptr noalias b, i64 M,
    i64 N, i64 K)` (every matmul kernel's signature) and a builder at its entry."""
    fnty = ll.FunctionType(ll.VoidType(), [PTR, PTR, PTR, I64, I64, I64])
    fn = ll.Function(module, fnty, name=name)
    fn.linkage = "internal"
    for arg, nm in zip(fn.args, ("acc", "a", "b", "m", "n", "k"), strict=True):
        arg.name = nm
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    return fn, ll.IRBuilder(fn.append_basic_block("entry"))


def define_matmul(module: ll.Module, blk: Blocking) -> ll.Function:
    """void NAME(ptr acc, ptr a, ptr b, i64 M, i64 N, i64 K), internal linkage."""
    if NAME in module.globals:
        return module.globals[NAME]
    fn, b = matmul_function(module, NAME)
    _acc, _a, _b, m, n, _k = fn.args
    mb = b.sub(m, b.srem(m, _c(blk.mr)))
    nb = b.sub(n, b.srem(n, _c(blk.nr)))

    def tile_row(i0: ll.Value, _c0: list) -> list:
        def tile(j0: ll.Value, _c1: list) -> list:
            _micro(b, fn, blk, i0, j0)
            return []

        counted_loop(b, _c(0), nb, _c(blk.nr), tile, name="mk.j")
        return []

    counted_loop(b, _c(0), mb, _c(blk.mr), tile_row, name="mk.i")
    _edge(b, fn, _c(0), mb, nb, n)  # right edge of the tiled rows
    _edge(b, fn, mb, m, _c(0), n)  # bottom rows
    b.ret_void()
    return fn


def _widened(b: ll.IRBuilder, src: ll.Value, i: ll.Value, elem: str) -> ll.Value:
    """Element `i` of `src` (of `elem`) as f32: exact for bf16 (the top half of an f32) and f16."""
    if elem == "f32":
        return b.load(_gep(b, src, i), typ=F32, align=4)
    if elem == "bf16":
        i16 = ll.IntType(16)
        bits = b.load(b.gep(src, [i], inbounds=True, source_etype=i16), typ=i16, align=2)
        wide = b.shl(b.zext(bits, ll.IntType(32)), ll.Constant(ll.IntType(32), 16))
        return b.bitcast(wide, F32)
    half = ll.HalfType()
    return b.fpext(
        b.load(b.gep(src, [i], inbounds=True, source_etype=half), typ=half, align=2), F32
    )


def _copy_function(
    module: ll.Module, name: str, ints: int
) -> tuple[ll.Function, ll.IRBuilder | None]:
    """Internal `void name(ptr noalias dst, ptr noalias src, i64 x ints)` and a builder at
    its entry; the builder is None when the module has the function already."""
    if name in module.globals:
        return module.globals[name], None
    fnty = ll.FunctionType(ll.VoidType(), [PTR, PTR] + [I64] * ints)
    fn = ll.Function(module, fnty, name=name)
    fn.linkage = "internal"
    for arg in fn.args[:2]:
        arg.add_attribute("noalias")
    return fn, ll.IRBuilder(fn.append_basic_block("entry"))


def _nest(b: ll.IRBuilder, outer: ll.Value, inner: ll.Value, body, name: str) -> None:
    """for o in 0..outer: for i in 0..inner: body(o, i)."""

    def row(o: ll.Value, _c0: list) -> list:
        def col(i: ll.Value, _c1: list) -> list:
            body(o, i)
            return []

        counted_loop(b, _c(0), inner, _c(1), col, name=f"{name}.in")
        return []

    counted_loop(b, _c(0), outer, _c(1), row, name=f"{name}.out")


def define_widen(module: ll.Module, elem: str) -> ll.Function:
    """void __vx_widen_<elem>(ptr f32_dst, ptr src, i64 count), internal linkage."""
    fn, b = _copy_function(module, f"__vx_widen_{elem}", 1)
    if b is None:
        return fn
    dst, src, count = fn.args

    def step(i: ll.Value, _c0: list) -> list:
        b.store(_widened(b, src, i, elem), _gep(b, dst, i), align=4)
        return []

    counted_loop(b, _c(0), count, _c(1), step, name="widen")
    b.ret_void()
    return fn


def define_widen_transposed(module: ll.Module, elem: str) -> ll.Function:
    """void __vx_widen_t_<elem>(ptr f32_dst, ptr src, i64 R, i64 C): dst[j, i] = src[i, j]
    as f32 (src [R, C] row-major): a transpose that feeds `matmul_acc` is read here, in the
    operand's packing, and never materialised as a tile of its own (issue 21 item 5)."""
    fn, b = _copy_function(module, f"__vx_widen_t_{elem}", 2)
    if b is None:
        return fn
    dst, src, rows, cols = fn.args

    def step(i: ll.Value, j: ll.Value) -> None:
        value = _widened(b, src, b.add(b.mul(i, cols), j), elem)  # reads in order
        b.store(value, _gep(b, dst, b.add(b.mul(j, rows), i)), align=4)

    _nest(b, rows, cols, step, "widen_t")
    b.ret_void()
    return fn


# ---- bf16 with AVX512_BF16 (`vdpbf16ps`) ------------------------------------------------
# `vdpbf16ps zmm_acc, zmm_a, zmm_b` adds a[2i]*b[2i] + a[2i+1]*b[2i+1] to f32 lane i (products
# exact, f32 accumulation): twice the multiply-adds of an f32 FMA per instruction. With
# a = a broadcast pair (A[m, 2p], A[m, 2p+1]) and b = 16 pairs (B[2p, j], B[2p+1, j]) that
# is acc[m, j] += A[m, 2p] B[2p, j] + A[m, 2p+1] B[2p+1, j]: B is packed in pairs of rows
# once per call (O(KN) against O(MNK)); A is read in place (its pairs are adjacent).
BF16_NAME = "__vx_matmul_acc_bf16dot"
PACK_NAME = "__vx_pack_bf16_pairs"
I32 = ll.IntType(32)


class _BFloat(ll.Type):
    """LLVM's `bfloat` (llvmlite has no such type; the IR is text)."""

    def _to_string(self) -> str:
        return "bfloat"


def bf16dot_fits(blk: Blocking, m: int, n: int, k: int) -> bool:
    """Whether a static `acc[m, n] += a[m, k] @ b[k, n]` runs on the bf16 dot kernel."""
    return blk.bf16dot and m % blk.mr == 0 and n % blk.nr == 0 and k % 2 == 0 and k > 0


def define_pack(module: ll.Module, transposed: bool = False) -> ll.Function:
    """void PACK(ptr dst_i32, ptr src_bf16, i64 K, i64 N): dst[p*N + j] = B[2p, j] |
    B[2p+1, j] << 16 for B [K, N]. `transposed`: src holds B^T [N, K] (a transpose that
    feeds `matmul_acc`, never materialised), whose pair (B[2p, j], B[2p+1, j]) is the one
    32-bit word at src[j, 2p]: the pack is a transpose of 32-bit words, read in order."""
    fn, b = _copy_function(module, PACK_NAME + ("_t" if transposed else ""), 2)
    if b is None:
        return fn
    dst, src, k, n = fn.args
    i16 = ll.IntType(16)
    pairs = b.sdiv(k, _c(2))

    def pack(p: ll.Value, j: ll.Value) -> None:
        lo_at = b.add(b.mul(b.mul(p, _c(2)), n), j)
        hi_at = b.add(lo_at, n)
        lo = b.load(b.gep(src, [lo_at], inbounds=True, source_etype=i16), typ=i16, align=2)
        hi = b.load(b.gep(src, [hi_at], inbounds=True, source_etype=i16), typ=i16, align=2)
        pair = b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), ll.Constant(I32, 16)))
        b.store(pair, b.gep(dst, [b.add(b.mul(p, n), j)], inbounds=True, source_etype=I32), align=4)

    def pack_t(p: ll.Value, j: ll.Value) -> None:
        word = b.gep(src, [b.add(b.mul(j, pairs), p)], inbounds=True, source_etype=I32)
        at = b.gep(dst, [b.add(b.mul(p, n), j)], inbounds=True, source_etype=I32)
        b.store(b.load(word, typ=I32, align=2), at, align=4)

    # Both write dst in order (B^T's words are gathered: AVX-512 gathers beat its scatters).
    body = pack_t if transposed else pack

    _nest(b, pairs, n, body, "pack")
    b.ret_void()
    return fn


def define_matmul_bf16(module: ll.Module, blk: Blocking, a_packed: bool = False) -> ll.Function:
    """void NAME(ptr acc_f32, ptr a, ptr b_pairs, i64 M, i64 N, i64 K): the register
    tile of `_micro`, one `vdpbf16ps` per (row, vector) and pair of K; M, N and K fit
    (`bf16dot_fits`). `a` is A [M, K] bf16 read in place (its pairs are adjacent), or with
    `a_packed` A's pairs packed like B's (`define_pack` of A^T: word p*M + i), which is how
    a transposed A is read."""
    name = BF16_NAME + ("_ap" if a_packed else "")
    if name in module.globals:
        return module.globals[name]
    fnty = ll.FunctionType(ll.VoidType(), [PTR, PTR, PTR, I64, I64, I64])
    fn = ll.Function(module, fnty, name=name)
    fn.linkage = "internal"
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    acc, a, bp, m, n, k = fn.args
    vty, pty = ll.VectorType(F32, 16), ll.VectorType(I32, 16)
    bty = ll.VectorType(_BFloat(), 32)
    dot = module.globals.get("llvm.x86.avx512bf16.dpbf16ps.512") or ll.Function(
        module, ll.FunctionType(vty, [vty, bty, bty]), name="llvm.x86.avx512bf16.dpbf16ps.512"
    )
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    i16 = ll.IntType(16)

    def tile(i0: ll.Value, j0: ll.Value) -> None:
        cptrs = [
            [_gep(b, acc, b.add(b.mul(b.add(i0, _c(r)), n), b.add(j0, _c(v * 16))))
             for v in range(blk.nv)]
            for r in range(blk.mr)
        ]  # fmt: skip
        init = [b.load(p, typ=vty, align=4) for row in cptrs for p in row]

        def step(p: ll.Value, c: list[ll.Value]) -> list[ll.Value]:
            bv = []
            for v in range(blk.nv):
                at = b.gep(bp, [b.add(b.mul(p, n), b.add(j0, _c(v * 16)))], source_etype=I32)
                bv.append(b.bitcast(b.load(at, typ=pty, align=4), bty))
            out = []
            for r in range(blk.mr):
                if a_packed:  # word (p, i) of A^T's pairs
                    word = b.gep(a, [b.add(b.mul(p, m), b.add(i0, _c(r)))], source_etype=I32)
                else:  # elements (i, 2p) and (i, 2p + 1) of A
                    el = b.add(b.mul(b.add(i0, _c(r)), k), b.mul(p, _c(2)))
                    word = b.gep(a, [el], inbounds=True, source_etype=i16)
                pair = b.load(word, typ=I32, align=2)
                splat = b.insert_element(ll.Constant(pty, ll.Undefined), pair, _c(0))
                splat = b.shuffle_vector(
                    splat, ll.Constant(pty, ll.Undefined), ll.Constant(pty, [0] * 16)
                )
                av = b.bitcast(splat, bty)
                out += [b.call(dot, [c[r * blk.nv + v], av, bv[v]]) for v in range(blk.nv)]
            return out

        final = counted_loop(b, _c(0), b.sdiv(k, _c(2)), _c(1), step, init, name="bd.k")
        for r, row in enumerate(cptrs):
            for v, ptr in enumerate(row):
                b.store(final[r * blk.nv + v], ptr, align=4)

    def tile_row(i0: ll.Value, _c0: list) -> list:
        def col(j0: ll.Value, _c1: list) -> list:
            tile(i0, j0)
            return []

        counted_loop(b, _c(0), n, _c(blk.nv * 16), col, name="bd.j")
        return []

    counted_loop(b, _c(0), m, _c(blk.mr), tile_row, name="bd.i")
    b.ret_void()
    return fn
