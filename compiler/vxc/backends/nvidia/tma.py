"""What both NVIDIA targets share for moving tiles: mbarriers, TMA loads and stores,
the transposing copy of a B operand, and shared-memory fills. Each function emits
into a `ptx.Kernel` through its typed builder."""

from __future__ import annotations

from vxc.backends.nvidia.encoders import SWIZZLE_BYTES
from vxc.backends.nvidia.ptx import SINK, Addr, Imm, Kernel, Reg, Sym, Vec


def mbarrier_init(k: Kernel, bar: Reg, offset: int, count: int = 1) -> None:
    k.ins("mbarrier.init.shared::cta.b64", Addr(bar, offset), Imm(count))


def mbarrier_wait(k: Kernel, bar: Reg, parity: Reg, hint: str = "wait") -> None:
    """Spin on `mbarrier.try_wait.parity` until the phase with `parity` completes."""
    loop = k.label(hint)
    k.place(loop)
    done = k.reg("pred")
    k.ins("mbarrier.try_wait.parity.shared::cta.b64", done, Addr(bar), parity)
    k.bra(loop, pred=done, negate=True)


def tensormap_address(k: Kernel, param: Sym) -> Reg:
    """The generic address of a by-value tensor-map parameter. `cvta.param` is
    required: ptxas accepts the raw .param address and the TMA unit then reads garbage."""
    raw = k.reg("b64")
    k.ins("mov.b64", raw, param)
    addr = k.reg("b64")
    k.ins("cvta.param.u64", addr, raw)
    return addr


def tma_load(
    k: Kernel,
    leader: Reg,
    bar: Reg,
    dst: Reg,
    tmap: Reg,
    boxes: list[tuple[int, int, int]],
    row: Reg,
    total_bytes: int,
    col: Reg | None = None,
) -> None:
    """One elected thread arms `bar` with the byte count and issues one 2-D TMA load per
    box: (shared offset from `dst`, column coordinate (added to `col` when given), row
    coordinate added to `row`)."""
    skip = k.label("tma_issued")
    k.bra(skip, pred=leader, negate=True)
    k.ins("mbarrier.arrive.expect_tx.shared::cta.b64", SINK, Addr(bar), Imm(total_bytes))
    for off, dcol, drow in boxes:
        where = dst
        if off:
            where = k.reg("b32")
            k.ins("add.u32", where, dst, Imm(off))
        y = row
        if drow:
            y = k.reg("b32")
            k.ins("add.u32", y, row, Imm(drow))
        x = Imm(dcol)
        if col is not None:
            x = col
            if dcol:
                x = k.reg("b32")
                k.ins("add.u32", x, col, Imm(dcol))
        k.ins(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
            Addr(where),
            Addr(tmap, coords=(x, y)),
            Addr(bar),
        )
    k.place(skip)


# How a TMA store is waited for where it is issued: not at all (a store token's wait
# does), until it has read shared memory (the tile may change), or until it is done.
BULK_WAITS = {
    "none": None,
    "read": "cp.async.bulk.wait_group.read",
    "all": "cp.async.bulk.wait_group",
}


def tma_store(
    k: Kernel,
    leader: Reg,
    src: Reg,
    tmap: Reg,
    row: Reg,
    col: Reg | None = None,
    wait: str = "all",
) -> None:
    """Generic-proxy writes of `src` become visible to the TMA unit (every thread's
    fence, then a barrier), then one elected thread stores the tile at (`col`, `row`) as
    one bulk group and waits for it as `wait` says (BULK_WAITS); when it waits, every
    thread is held until it has."""
    k.ins("fence.proxy.async.shared::cta")
    k.ins("bar.sync", Imm(0))
    skip = k.label("tma_stored")
    k.bra(skip, pred=leader, negate=True)
    k.ins(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
        Addr(tmap, coords=(col if col is not None else Imm(0), row)),
        Addr(src),
    )
    k.ins("cp.async.bulk.commit_group")
    if BULK_WAITS[wait]:
        k.ins(BULK_WAITS[wait], Imm(0))
    k.place(skip)
    if BULK_WAITS[wait]:
        k.ins("bar.sync", Imm(0))


def bulk_wait(k: Kernel, leader: Reg, read: bool, barrier: bool = True) -> None:
    """The elected thread waits for its bulk groups: with `read`, until they have read
    shared memory (the tiles may be rewritten), else until their global writes are
    done; then, with `barrier`, every thread is held until it has."""
    skip = k.label("bulk_waited")
    k.bra(skip, pred=leader, negate=True)
    k.ins(BULK_WAITS["read" if read else "all"], Imm(0))
    k.place(skip)
    if barrier:
        k.ins("bar.sync", Imm(0))


def transposed_copy(
    k: Kernel, tid: Reg, threads: int, src: Reg, dst: Reg, rows: int, cols: int, elem: int
) -> None:
    """Copy a row-major [rows, cols] global matrix at `src` into shared memory at `dst`
    transposed, as the K-major, 128-byte-swizzled [cols, rows] operand (K = rows): the
    B operand of matmul_acc. TMA cannot transpose; this runs once per B tile."""
    ty = {2: "b16", 4: "b32"}[elem]
    cls = "b16" if elem == 2 else "b32"
    i = k.reg("b32")
    k.ins("mov.b32", i, tid)
    head, end = k.label("tcopy"), k.label("tcopy_end")
    k.place(head)
    k.bra(end, pred=k.setp("ge", "u32", i, Imm(rows * cols)))
    kk, n = k.reg("b32"), k.reg("b32")
    k.ins("div.u32", kk, i, Imm(cols))
    k.ins("rem.u32", n, i, Imm(cols))
    g = k.reg("b64")
    k.ins("mul.wide.u32", g, i, Imm(elem))
    k.ins("add.s64", g, g, src)
    v = k.reg(cls)
    k.ins(f"ld.global.nc.{ty}", v, Addr(g))
    # offset = (k*e >> 7) * cols*128 + n*128 + (((k*e & 127) >> 4) ^ (n & 7)) << 4 + (k*e & 15)
    kb, blk, chunk, within, sw, off = (k.reg("b32") for _ in range(6))
    k.ins("mul.lo.u32", kb, kk, Imm(elem))
    k.ins("shr.u32", blk, kb, Imm(7))
    k.ins("mul.lo.u32", blk, blk, Imm(cols * SWIZZLE_BYTES))
    k.ins("bfe.u32", chunk, kb, Imm(4), Imm(3))
    k.ins("and.b32", within, kb, Imm(15))
    k.ins("and.b32", sw, n, Imm(7))
    k.ins("xor.b32", chunk, chunk, sw)
    k.ins("shl.b32", chunk, chunk, Imm(4))
    k.ins("mad.lo.u32", off, n, Imm(SWIZZLE_BYTES), blk)
    k.ins("add.u32", off, off, chunk)
    k.ins("add.u32", off, off, within)
    k.ins("add.u32", off, off, dst)
    k.ins(f"st.shared.{ty}", Addr(off), v)
    k.ins("add.u32", i, i, Imm(threads))
    k.bra(head)
    k.place(end)
    generic_writes_done(k)


def fill_zero(k: Kernel, tid: Reg, threads: int, dst: Reg, nbytes: int) -> None:
    """Zero `nbytes` of shared memory at `dst` (16 bytes per thread per step)."""
    z = k.mov("b32", Imm(0))
    i = k.reg("b32")
    k.ins("shl.b32", i, tid, Imm(4))
    head, end = k.label("zero"), k.label("zero_end")
    k.place(head)
    k.bra(end, pred=k.setp("ge", "u32", i, Imm(nbytes)))
    a = k.reg("b32")
    k.ins("add.u32", a, dst, i)
    k.ins("st.shared.v4.b32", Addr(a), Vec((z, z, z, z)))
    k.ins("add.u32", i, i, Imm(16 * threads))
    k.bra(head)
    k.place(end)
    generic_writes_done(k)


def generic_writes_done(k: Kernel) -> None:
    """Shared-memory writes of every thread are visible to the async proxy (TMA, MMA)."""
    k.ins("fence.proxy.async.shared::cta")
    k.ins("bar.sync", Imm(0))
