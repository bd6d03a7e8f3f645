"""The per-architecture code: the matrix unit and where it accumulates. The per-arch
facts (sm, accumulator space, MMA family, N limit, SASS) are the target's `NvidiaArch`
record (vxc/targets.py); `MMA[arch.mma]` is the class that emits its instructions.

- `Hopper` (sm_90a): `wgmma.mma_async` by the one warpgroup of the CTA, accumulator
  in registers (a 128-row tile is two m64 halves), `fence` / `commit_group` /
  `wait_group`.
- `Blackwell` (sm_100a): `tcgen05.mma` issued by one thread into tensor memory
  (TMEM columns from the allocator's offsets), completion through `tcgen05.commit` to
  an mbarrier, `tcgen05.ld` for the epilogue, `tcgen05.alloc` / `dealloc` /
  `relinquish_alloc_permit`.

Both read A ([M, K]) and B (stored as B^T, [N, K]) from shared memory in the K-major
128-byte-swizzled layout (encoders.py), 32 bytes of K per instruction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.backends.nvidia import tma
from vxc.backends.nvidia.encoders import (
    MMA_K_BYTES,
    MMA_TYPES,
    SWIZZLE_BYTES,
    elem_bytes,
    kmajor_sw128_desc,
    mnmajor_sw128_desc,
    tcgen05_idesc,
)
from vxc.backends.nvidia.ptx import Addr, Imm, Kernel, Reg, Vec
from vxc.backends.nvidia.tiles import Spread
from vxc.targets import BLACKWELL, HOPPER, NVIDIA_ARCHES

THREADS = 128  # one warpgroup: wgmma's issuing unit, and the 4 warps that cover TMEM's 128 lanes
TMEM_LANES = 128
TMEM_COLUMNS = 512
# The comment before the TMEM stores of an in-place accumulator update complete (tests
# find the update's ordering by it).
UPDATED = "accumulator updated in place"


class MmaError(ValueError):
    """A matmul_acc shape or type this matrix unit does not take; the message says why."""


@dataclass
class Operand:
    """A swizzled matrix in shared memory: `rows` rows (M or N) of `kbytes` bytes of K,
    K-major, or with `mn_major` as TMA loads a row-major [K, N] B tile: 128-byte MN
    blocks of `kbytes / elem` K-rows each (no transposing copy)."""

    addr: Reg
    rows: int
    kbytes: int
    mn_major: bool = False
    elem: int = 2

    def desc_const(self, arch: str) -> int:
        if self.mn_major:
            return mnmajor_sw128_desc(arch, (self.kbytes // self.elem) * SWIZZLE_BYTES)
        return kmajor_sw128_desc(arch, 0)

    def k_offset(self, kbyte: int) -> int:
        """Byte offset of the K step starting at byte `kbyte` of K."""
        if self.mn_major:  # K-row r sits at r * 128 (8-row groups 1024 B apart)
            return (kbyte // self.elem) * SWIZZLE_BYTES
        return _k_offset(kbyte, self.rows)


@dataclass
class Acc:
    """An f32 accumulator tile [m, n]."""

    m: int
    n: int
    regs: list[list[Reg]] = field(default_factory=list)  # Hopper: per m64 half
    column: int = 0  # Blackwell: first TMEM column


@dataclass
class Common:
    """Registers the lowering sets up for every kernel."""

    tid: Reg  # %tid.x
    warp: Reg  # tid / 32
    leader: Reg  # pred: tid == 0
    base: Reg  # the 1024-aligned shared-memory base


def _desc_base(k: Kernel, arch: str, op: Operand) -> Reg:
    """desc = encoder constant | (addr >> 4) & 0x3FFF as a 64-bit register."""
    a = k.reg("b32")
    k.ins("bfe.u32", a, op.addr, Imm(4), Imm(14))
    wide = k.reg("b64")
    k.ins("cvt.u64.u32", wide, a)
    k.ins("or.b64", wide, wide, Imm(op.desc_const(arch)))
    return wide


def _steps(kbytes: int) -> list[int]:
    """Byte offsets of K, one per MMA instruction, inside the swizzled layout of a
    `rows`-row operand are (block, step) pairs: block b = 128 B of K, step s = 32 B."""
    return [s for s in range(0, kbytes, MMA_K_BYTES)]


def _k_offset(kbyte: int, rows: int) -> int:
    block, within = divmod(kbyte, SWIZZLE_BYTES)
    return block * rows * SWIZZLE_BYTES + within


def check_shapes(ab_type: str, m: int, n: int, kbytes: int, arch: str) -> None:
    if ab_type not in MMA_TYPES:
        raise MmaError(
            f"matmul_acc operands of type {ab_type}: the matrix unit takes f32 (tf32), bf16 or f16"
        )
    if m != 128:
        raise MmaError(f"matmul_acc with M = {m}: the NVIDIA backends take M = 128")
    nmax = NVIDIA_ARCHES[arch].mma_n_max
    if not (16 <= n <= nmax and n % 16 == 0):
        raise MmaError(
            f"matmul_acc with N = {n}: N must be a multiple of 16 in [16, {nmax}] on {arch}"
        )
    if kbytes % SWIZZLE_BYTES:
        eb = elem_bytes(ab_type)
        raise MmaError(
            f"matmul_acc with K = {kbytes // eb}: K must be a multiple of "
            f"{SWIZZLE_BYTES // eb} for {ab_type} (128-byte swizzle rows)"
        )


class Hopper:
    arch = HOPPER.sm
    uses_tmem = False

    def __init__(self, k: Kernel, c: Common) -> None:
        self.k, self.c = k, c
        self.true = k.setp("eq", "u32", c.tid, c.tid)

    def setup(self, barrier: Reg, tmem_slot: Reg, columns_used: int) -> None:
        """Nothing: wgmma needs no set-up, its accumulator is registers."""

    def new_acc(self, m: int, n: int, column: int) -> Acc:
        acc = Acc(m, n)
        acc.regs = [self.k.regs("f32", n // 2) for _ in range(m // 64)]
        return acc

    def zero(self, acc: Acc) -> None:
        for half in acc.regs:
            for r in half:
                self.k.ins("mov.f32", r, Imm(0.0))

    def matmul(self, acc: Acc, a: Operand, b: Operand, ab_type: str) -> None:
        k = self.k
        check_shapes(ab_type, acc.m, acc.n, a.kbytes, self.arch)
        eb, name = elem_bytes(ab_type), MMA_TYPES[ab_type][0]
        kstep = MMA_K_BYTES // eb
        da, db = _desc_base(k, self.arch, a), _desc_base(k, self.arch, b)
        k.ins("wgmma.fence.sync.aligned")
        shape = f"m64n{acc.n}k{kstep}"
        if name == "tf32" and b.mn_major:
            raise MmaError("wgmma reads tf32 operands K-major only")
        # imm-scale-a, imm-scale-b, then imm-trans-a, imm-trans-b (16-bit types only).
        trans_b = Imm(int(b.mn_major))
        tail = (Imm(1), Imm(1)) if name == "tf32" else (Imm(1), Imm(1), Imm(0), trans_b)
        for kbyte in _steps(a.kbytes):
            db_k = k.reg("b64")
            k.ins("add.s64", db_k, db, Imm(b.k_offset(kbyte) >> 4))
            for h, regs in enumerate(acc.regs):
                da_k = k.reg("b64")
                off = _k_offset(kbyte, a.rows) + h * 64 * SWIZZLE_BYTES
                k.ins("add.s64", da_k, da, Imm(off >> 4))
                k.ins(
                    f"wgmma.mma_async.sync.aligned.{shape}.f32.{name}.{name}",
                    Vec(tuple(regs)),
                    da_k,
                    db_k,
                    self.true,
                    *tail,
                )
        k.ins("wgmma.commit_group.sync.aligned")
        k.ins("wgmma.wait_group.sync.aligned", Imm(0))
        # Every warp's share is done before any thread reuses the operand slots.
        k.ins("bar.sync", Imm(0))

    def store(self, acc: Acc, dst: Reg) -> None:
        """Registers -> row-major f32 [m, n] at `dst`. wgmma's D fragment: warp w, lane l
        holds for each 8-column group j the pairs (row 16w + l/4, cols 8j + 2(l%4) + {0,1})
        and the same 8 rows down."""
        k, c = self.k, self.c
        lane, row, col, a = (k.reg("b32") for _ in range(4))
        k.ins("and.b32", lane, c.tid, Imm(31))
        k.ins("shr.u32", row, lane, Imm(2))
        k.ins("mad.lo.u32", row, c.warp, Imm(16), row)
        k.ins("and.b32", col, lane, Imm(3))
        k.ins("shl.b32", col, col, Imm(3))  # 2 floats = 8 bytes
        k.ins("mad.lo.u32", a, row, Imm(acc.n * 4), col)
        k.ins("add.u32", a, a, dst)
        row_bytes = acc.n * 4
        for h, regs in enumerate(acc.regs):
            for j in range(acc.n // 8):
                for down in (0, 1):
                    off = h * 64 * row_bytes + down * 8 * row_bytes + j * 32
                    pair = (regs[4 * j + 2 * down], regs[4 * j + 2 * down + 1])
                    k.ins("st.shared.v2.f32", Addr(a, off), Vec(pair))

    # The threads that share an accumulator row: a fragment row is 4 lanes (lane % 4).
    lanes_per_row = 4

    def spreads(self, acc: Acc, whole: bool = False):
        """The D fragment as one spread (tiles.py): row 16 w + l / 4, column 2 (l % 4),
        then for each m64 half, 8-column group and 8-row step, the pair's two columns."""
        k, c = self.k, self.c
        lane, row, col = k.reg("b32"), k.reg("b32"), k.reg("b32")
        k.ins("and.b32", lane, c.tid, Imm(31))
        k.ins("shr.u32", row, lane, Imm(2))
        k.ins("mad.lo.u32", row, c.warp, Imm(16), row)
        k.ins("and.b32", col, lane, Imm(3))
        k.ins("shl.b32", col, col, Imm(1))
        elems, regs = [], []
        for h, half in enumerate(acc.regs):
            for j in range(acc.n // 8):
                for down in (0, 1):
                    for e in (0, 1):
                        elems.append((h * 64 + down * 8, 8 * j + e))
                        regs.append(half[4 * j + 2 * down + e])
        yield Spread(row, col, elems, acc_regs=regs, even_col=True)  # col = 2 (l % 4)

    def write_back(self, acc: Acc, s: Spread, vals: list[Reg]) -> None:
        """New values of the spread's accumulator registers (an in-place update)."""
        for r, v in zip(s.acc_regs, vals, strict=True):
            self.k.ins("mov.f32", r, v)

    def written(self, acc: Acc) -> None:
        """Nothing: the next wgmma's `wgmma.fence` orders the register writes before it."""

    def teardown(self) -> None:
        pass


class Blackwell:
    arch = BLACKWELL.sm
    uses_tmem = True

    def __init__(self, k: Kernel, c: Common) -> None:
        self.k, self.c = k, c
        self.columns = 0
        self.taddr: Reg | None = None
        self.true = k.setp("eq", "u32", c.tid, c.tid)
        self.phase = k.mov("b32", Imm(0))

    def tmem_columns(self, used: int) -> int:
        """tcgen05.alloc takes a power of two >= 32 columns."""
        n = 32
        while n < used:
            n *= 2
        if n > TMEM_COLUMNS:
            raise MmaError(f"the accumulators need {used} TMEM columns; an SM has {TMEM_COLUMNS}")
        return n

    def setup(self, barrier: Reg, tmem_slot: Reg, columns_used: int) -> None:
        """Warp 0 allocates the TMEM columns (address written to `tmem_slot`), gives up
        the right to allocate more, and everyone reads the address after the barrier."""
        k, c = self.k, self.c
        self.bar = barrier
        if not columns_used:
            return  # nothing accumulates in TMEM: no allocation, no dealloc
        self.columns = self.tmem_columns(columns_used)
        w0 = k.setp("eq", "u32", c.warp, Imm(0))
        skip = k.label("tmem_alloc")
        k.bra(skip, pred=w0, negate=True)
        k.ins(
            "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
            Addr(tmem_slot),
            Imm(self.columns),
        )
        k.ins("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned")
        k.place(skip)
        self._sync()
        self.taddr = k.reg("b32")
        k.ins("ld.shared.b32", self.taddr, Addr(tmem_slot))
        self.lane_base = k.reg("b32")  # this warp's 32 TMEM lanes: (32 w) << 16
        k.ins("shl.b32", self.lane_base, c.warp, Imm(21))
        k.ins("add.u32", self.lane_base, self.lane_base, self.taddr)

    def _sync(self) -> None:
        k = self.k
        k.ins("tcgen05.fence::before_thread_sync")
        k.ins("bar.sync", Imm(0))
        k.ins("tcgen05.fence::after_thread_sync")

    def new_acc(self, m: int, n: int, column: int) -> Acc:
        return Acc(m, n, column=column)

    def zero(self, acc: Acc) -> None:
        k = self.k
        z = k.mov("b32", Imm(0))
        for chunk in range(0, acc.n, 32):
            k.ins(
                "tcgen05.st.sync.aligned.32x32b.x32.b32",
                Addr(self.lane_base, acc.column + chunk),
                Vec((z,) * 32),
            )
        k.ins("tcgen05.wait::st.sync.aligned")
        self._sync()

    def matmul(self, acc: Acc, a: Operand, b: Operand, ab_type: str) -> None:
        k, c = self.k, self.c
        check_shapes(ab_type, acc.m, acc.n, a.kbytes, self.arch)
        kind = MMA_TYPES[ab_type][1]
        idesc = k.mov("b32", Imm(tcgen05_idesc(ab_type, acc.m, acc.n, transpose_b=b.mn_major)))
        d = k.reg("b32")
        k.ins("add.u32", d, self.taddr, Imm(acc.column))
        # The operands' TMA wait is a thread synchronisation: the MMA is ordered after it
        # only through this fence (PTX ISA, tcgen05 memory consistency).
        k.ins("tcgen05.fence::after_thread_sync")
        skip = k.label("mma_issued")
        k.bra(skip, pred=c.leader, negate=True)
        da, db = _desc_base(k, self.arch, a), _desc_base(k, self.arch, b)
        for kbyte in _steps(a.kbytes):
            da_k, db_k = k.reg("b64"), k.reg("b64")
            k.ins("add.s64", da_k, da, Imm(a.k_offset(kbyte) >> 4))
            k.ins("add.s64", db_k, db, Imm(b.k_offset(kbyte) >> 4))
            k.ins(f"tcgen05.mma.cta_group::1.kind::{kind}", Addr(d), da_k, db_k, idesc, self.true)
        k.ins(
            "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", Addr(self.bar)
        )
        k.place(skip)
        tma.mbarrier_wait(k, self.bar, self.phase, "mma_wait")
        k.ins("xor.b32", self.phase, self.phase, Imm(1))
        k.ins("tcgen05.fence::after_thread_sync")

    def store(self, acc: Acc, dst: Reg) -> None:
        """TMEM -> row-major f32 [m, n] at `dst`: warp w reads lanes 32w..32w+31 (its
        thread's row), 32 columns per tcgen05.ld."""
        k, c = self.k, self.c
        row = k.reg("b32")
        k.ins("mad.lo.u32", row, c.tid, Imm(acc.n * 4), dst)
        for chunk in range(0, acc.n, 32):
            vals = self._ld(acc, chunk)
            for j in range(8):
                k.ins(
                    "st.shared.v4.b32",
                    Addr(row, chunk * 4 + 16 * j),
                    Vec(tuple(vals[4 * j : 4 * j + 4])),
                )

    def _ld(self, acc: Acc, chunk: int) -> list[Reg]:
        """This warp's 32 lanes x 32 columns of `acc` from `chunk` on, waited."""
        k = self.k
        vals = k.regs("b32", 32)
        k.ins(
            "tcgen05.ld.sync.aligned.32x32b.x32.b32",
            Vec(tuple(vals)),
            Addr(self.lane_base, acc.column + chunk),
        )
        k.ins("tcgen05.wait::ld.sync.aligned")
        return vals

    lanes_per_row = 1  # TMEM lane t is thread t's row

    def spreads(self, acc: Acc, whole: bool = False):
        """Thread t's row (TMEM lane t), 32 columns per tcgen05.ld: one spread per chunk,
        loaded just before it is used, or (`whole`) every column in one spread."""
        k, c = self.k, self.c
        elems, regs = [], []
        for chunk in range(0, acc.n, 32):
            for j, v in enumerate(self._ld(acc, chunk)):
                f = k.reg("f32")
                k.ins("mov.b32", f, v)
                elems.append((0, chunk + j))
                regs.append(f)
            if not whole:
                yield Spread(c.tid, None, elems, acc_regs=regs, even_col=True)
                elems, regs = [], []
        if whole:
            yield Spread(c.tid, None, elems, acc_regs=regs, even_col=True)

    def write_back(self, acc: Acc, s: Spread, vals: list[Reg]) -> None:
        """New values of a spread (this thread's row, 32 columns) stored back to TMEM."""
        k = self.k
        bits = []
        for v in vals:
            b = k.reg("b32")
            k.ins("mov.b32", b, v)
            bits.append(b)
        k.ins(
            "tcgen05.st.sync.aligned.32x32b.x32.b32",
            Addr(self.lane_base, acc.column + s.elems[0][1]),
            Vec(tuple(bits)),
        )

    def written(self, acc: Acc) -> None:
        """The stores complete, and are ordered before the MMA thread 0 issues next."""
        self.k.comment(UPDATED)
        self.k.ins("tcgen05.wait::st.sync.aligned")
        self._sync()

    def teardown(self) -> None:
        k, c = self.k, self.c
        if not self.columns:
            return
        self._sync()
        w0 = k.setp("eq", "u32", c.warp, Imm(0))
        skip = k.label("tmem_free")
        k.bra(skip, pred=w0, negate=True)
        k.ins("tcgen05.dealloc.cta_group::1.sync.aligned.b32", self.taddr, Imm(self.columns))
        k.place(skip)


# The matrix unit of each MMA family (`NvidiaArch.mma`).
MMA = {"wgmma": Hopper, "tcgen05": Blackwell}
