"""`edge` views on the tpu (LANGUAGE.md 4.2): a clamped DMA and a fill, in whole tiles.

What Mosaic allows decides the shape of this lowering (measured with libtpu's AOT compiler,
docs/TPU.md "Edge views"). An HBM tensor is stored in (8, 128) tiles, padded to whole tiles
(Mosaic's own `memref_slice` verifier: "the data is padded to tiling"), and a DMA moves
whole tiles: on the two minor dimensions every slice offset and size must be a multiple of
the tile (8 rows, 128 lanes), so no DMA can stop at an element inside a tile. A ragged
edge is therefore moved the way Pallas's pipeline moves its last block: the inside part
rounded up to whole tiles, which reaches into the tensor's tile padding and never past it
(nor into any other element of the tensor); the fill is then applied in vector registers.

- Read (`transfer[_async]` of an edge view into a VMEM slot): if the region is inside the
  tensor (the common case) one ordinary DMA of the whole region; otherwise the inside part
  `v_d = clamp(dim_d - lo_d, 0, size_d)` rounded up to 8 rows and 128 lanes, as static-size
  DMAs chosen by the bits of the number of row tiles (largest first, so each offset is a
  multiple of twice its size) times those of the lane tiles. Its wait repeats the same
  tree of waits, then loads the slot, selects `iota < v` per dimension against the fill
  and stores it back. A tensor of at most 4 rows is padded to 1, 2 or 4 rows (Mosaic's
  tiling for a small kernel argument): its one row chunk is exactly that many rows, in a
  branch that folds to a constant once libtpu specialises the shapes.
- Store to an edge view: the same DMAs from the tile, VMEM -> HBM: the elements of the
  tensor inside the view and the padding of its last tiles, no other element.

Only rank-2 regions of whole tiles ((8k, 128j)) whose offsets are provably multiples of
(8, 128) and whose `0 <= lo` was proved are lowered; anything else is refused (E7004).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, scf, vector
from jaxlib.mosaic.python import tpu

from vxc.backends.tpu.base import Ref, placed
from vxc.backends.tpu.errors import fail

ROWS, LANES = 8, 128  # an HBM tile of a 32- or 16-bit tensor, (sublanes, lanes)
# Element types an edge view lowers for: 32- and 16-bit, whose small-tensor row tiling is
# known (1, 2 or 4 rows; 8-bit types pack 4 rows to a word and tile differently).
PACKING = {"f32": 1, "i32": 1, "bf16": 2, "f16": 2}


@dataclass(frozen=True)
class Edge:
    """What a ragged transfer needs beyond its region: the tensor's dimensions (i32), how
    many of each dimension's elements are inside it (`counts`, i32 in 0 ..= size), and
    the fill (a scalar; None for a store)."""

    dims: tuple[ir.Value, ...]
    counts: tuple[ir.Value, ...]
    fill: ir.Value | None
    packing: int

    def values(self) -> list[ir.Value]:
        """What crosses a loop with the token (the counts and the fill; the dimensions are
        constants)."""
        return [*self.counts, *([self.fill] if self.fill is not None else [])]


def _i32(lo, v: int) -> ir.Value:
    return arith.ConstantOp(lo.ty("i32"), v).result


def _check(lo, op: ir.Operation, sizes: list[int], offsets: list[ir.Value], elem: str, proved):
    what = "an `edge` view" if op.name == "vx.edge_view" else "a store to an `edge` view"
    if len(sizes) != 2:
        raise fail(
            "E7004",
            op,
            f"{what} of rank {len(sizes)}: the tpu lowers ragged regions of rank-2 tensors "
            "(rows, lanes) only",
        )
    if elem not in PACKING:
        raise fail(
            "E7004",
            op,
            f"{what} of {elem} elements: the tpu lowers ragged regions of 32- and 16-bit "
            f"elements ({', '.join(PACKING)}) only",
        )
    if sizes[0] % ROWS or sizes[1] % LANES:
        raise fail(
            "E7004",
            op,
            f"{what} of shape {sizes}: a ragged region is moved in whole HBM tiles, so its "
            f"shape must be a multiple of ({ROWS}, {LANES}) on the tpu",
        )
    for d, (v, k) in enumerate(zip(offsets, (ROWS, LANES), strict=True)):
        if lo.multiple_of(v) % k:
            raise fail(
                "E7004",
                op,
                f"{what}: offset {d} is not provably a multiple of {k}; Mosaic slices an HBM "
                f"tensor only at whole ({ROWS}, {LANES}) tiles (an offset like `i * 128`, or "
                "a `where` clause saying what divides it)",
            )
    if not proved:
        raise fail(
            "E7004",
            op,
            f"{what} whose `0 <= lo` was not proved: a Mosaic kernel has no run-time check "
            "to report it with (add a `where` clause that bounds the index)",
        )


def edge_of(lo, op: ir.Operation, base: Ref, offsets: tuple[ir.Value, ...], sizes, fill):
    """The `Edge` of a region at `offsets` of `sizes` in the HBM tensor `base`."""
    t = ir.MemRefType(base.base.type)
    elem = str(t.element_type)
    dims = tuple(_i32(lo, d) for d in t.shape)
    counts = []
    for dim, off, size in zip(dims, offsets, sizes, strict=True):
        left = arith.SubIOp(dim, off).result
        left = arith.MaxSIOp(left, _i32(lo, 0)).result
        counts.append(arith.MinSIOp(left, _i32(lo, size)).result)
    return Edge(dims, tuple(counts), fill, PACKING[elem])


def edge_view(lo, op: ir.Operation) -> None:
    """`vx.edge_view`: a `Ref` of the region that carries its `Edge`; no code until a
    transfer reads it."""
    for use in op.results[0].uses:
        if use.owner.name not in ("vx.transfer", "vx.transfer_async"):
            raise fail(
                "E7005",
                use.owner,
                f"`{use.owner.name}` takes an `edge` view that no transfer copied; transfer "
                "it into VMEM to make it a tile",
            )
    src = lo.hbm(op.operands[0], op)
    t = placed(op.results[0].type)
    sizes = list(t.shape)
    vx_offs = list(op.operands)[2:]
    elem = str(ir.MemRefType(src.base.type).element_type)
    if src.index is not None or src.starts is not None:
        raise fail("E7004", op, "an `edge` view of a view or a Vec element is not lowered")
    _check(lo, op, sizes, vx_offs, elem, int(ir.IntegerAttr(op.attributes["proved"]).value))
    offs = tuple(lo.aligned(v) for v in vx_offs)
    fill = lo.env[op.operands[1]]
    ref = Ref(src.base, None, t, f"{src.name}[edge]", offs)
    lo.env[op.results[0]] = EdgeRef(ref, edge_of(lo, op, src, offs, sizes, fill))


@dataclass(frozen=True)
class EdgeRef:
    """An edge view before its transfer: the region and its `Edge`."""

    ref: Ref
    edge: Edge


def store_edge(lo, op: ir.Operation, out: Ref, offs: tuple[ir.Value, ...]) -> Edge:
    """The `Edge` of a store to an edge view of `out` (checked as a view is)."""
    sizes = list(placed(op.operands[0].type).shape)
    elem = str(ir.MemRefType(out.base.type).element_type)
    if out.index is not None or out.starts is not None:
        raise fail("E7004", op, "a store to an `edge` view of a Vec element is not lowered")
    _check(
        lo,
        op,
        sizes,
        list(op.operands)[2:],
        elem,
        int(ir.IntegerAttr(op.attributes["proved"]).value),
    )
    return edge_of(lo, op, out, offs, sizes, None)


def _full(lo, edge: Edge, sizes: list[int]) -> ir.Value:
    cond = None
    for n, size in zip(edge.counts, sizes, strict=True):
        c = arith.CmpIOp(arith.CmpIPredicate.eq, n, _i32(lo, size)).result
        cond = c if cond is None else arith.AndIOp(cond, c).result
    return cond


def _bits(lo, count: ir.Value, quantum: int, size: int):
    """The static chunks of `count` (0 ..= size) rounded up to `quantum`: for each bit of
    the number of quanta, largest first, (condition, offset in the region, chunk size).
    The offset clears the chunk's bit and those below it, so it is a multiple of twice
    the chunk."""
    shift = quantum.bit_length() - 1
    q = arith.ShRUIOp(arith.AddIOp(count, _i32(lo, quantum - 1)).result, _i32(lo, shift)).result
    rounded = arith.ShLIOp(q, _i32(lo, shift)).result
    for b in reversed(range((size // quantum).bit_length())):
        chunk = quantum << b
        if chunk > size:
            continue
        on = arith.CmpIOp(
            arith.CmpIPredicate.ne, arith.AndIOp(q, _i32(lo, 1 << b)).result, _i32(lo, 0)
        ).result
        off = arith.AndIOp(rounded, _i32(lo, ~(2 * chunk - 1))).result
        yield on, off, chunk


def _when(cond: ir.Value, emit) -> None:
    branch = scf.IfOp(cond, [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        emit()
        scf.YieldOp([])


def chunked(lo, edge: Edge, starts: tuple[ir.Value, ...], sizes: list[int], each) -> None:
    """Call `each(hbm_starts, tile_starts, shape)` for every static-size chunk of the
    inside part rounded up to whole tiles, each under its `scf.if`; the rows of a tensor
    of at most 4 rows are its (1, 2 or 4) padded rows in one chunk, in a branch on the
    tensor's dimension (a constant once libtpu specialises the shapes, so the branches
    for other dimensions fold away before Mosaic checks their slices)."""
    rows, lanes = edge.counts
    r0, c0 = starts

    def lane_chunks(row_off: ir.Value, nrows: int) -> None:
        for on, off, n in _bits(lo, lanes, LANES, sizes[1]):

            def emit(off=off, n=n):
                hbm = (
                    tpu.AssumeMultipleOp(arith.AddIOp(r0, row_off).result, ROWS).result,
                    tpu.AssumeMultipleOp(arith.AddIOp(c0, off).result, LANES).result,
                )
                lane = tpu.AssumeMultipleOp(off, LANES).result
                each(hbm, (row_off, lane), [nrows, n])

            _when(on, emit)

    def tall() -> None:
        for on, off, n in _bits(lo, rows, ROWS, sizes[0]):

            def emit(off=off, n=n):
                lane_chunks(tpu.AssumeMultipleOp(off, min(2 * n, 128)).result, n)

            _when(on, emit)

    small = [t for t in (1, 2, 4) if t >= edge.packing]

    def short(k: int = 0) -> None:
        # A tensor of at most 4 rows: padded to the smallest of `small` >= its rows.
        t = small[k]

        def emit():
            _when(
                arith.CmpIOp(arith.CmpIPredicate.sgt, rows, _i32(lo, 0)).result,
                lambda: lane_chunks(_i32(lo, 0), t),
            )

        if k == len(small) - 1:
            emit()
            return
        fits = arith.CmpIOp(arith.CmpIPredicate.sle, edge.dims[0], _i32(lo, t)).result
        branch = scf.IfOp(fits, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            emit()
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            short(k + 1)
            scf.YieldOp([])

    # Up to 4 rows the tensor is padded to 1, 2 or 4 rows; from 5 rows on, to whole 8s.
    few = arith.CmpIOp(arith.CmpIPredicate.sle, edge.dims[0], _i32(lo, small[-1])).result
    branch = scf.IfOp(few, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        short()
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        tall()
        scf.YieldOp([])


def _slice(lo, base: ir.Value, index: ir.Value | None, starts, shape: list[int]) -> ir.Value:
    """A static-size slice of `base` (its `index`-th leading slot, if given) at `starts`."""
    return lo.view(Ref(base, index, _memref(base, shape), "chunk", tuple(starts)))


def _memref(base: ir.Value, shape: list[int]) -> ir.MemRefType:
    t = ir.MemRefType(base.type)
    return ir.MemRefType.get(shape, t.element_type, memory_space=t.memory_space)


def _tree(lo, src: Ref, dst: Ref, edge: Edge, reading: bool, move, after=None) -> None:
    """`move(source, target)` of the whole region when it is inside the tensor, else of
    each chunk (`chunked`), then `after()` in that branch. One of `src`, `dst` is the HBM
    region (with `starts`), the other the VMEM tile; `reading`: HBM -> VMEM."""
    hbm, tile = (src, dst) if reading else (dst, src)
    sizes = list(hbm.vx_type.shape)
    full = scf.IfOp(_full(lo, edge, sizes), [], has_else=True)
    with ir.InsertionPoint(full.then_block):
        move(lo.view(src), lo.view(dst))
        scf.YieldOp([])
    with ir.InsertionPoint(full.else_block):

        def each(hbm_starts, tile_starts, shape):
            h = _slice(lo, hbm.base, None, hbm_starts, shape)
            v = _slice(lo, tile.base, tile.index, tile_starts, shape)
            move(*((h, v) if reading else (v, h)))

        chunked(lo, edge, hbm.starts, sizes, each)
        if after is not None:
            after(tile, sizes)
        scf.YieldOp([])


def start(lo, src: Ref, dst: Ref, edge: Edge, sem: ir.Value, reading: bool) -> None:
    """Start an edge transfer `src` -> `dst`: the whole region when it is inside, else
    its chunks, all on semaphore `sem`."""
    _tree(lo, src, dst, edge, reading, lambda s, d: tpu.EnqueueDMAOp(s, d, target_semaphore=sem))


def finish(lo, src: Ref, dst: Ref, edge: Edge, sem_of, reading: bool) -> None:
    """Wait for an edge transfer started by `start` (the same tree of waits, each the size
    of its DMA, on `sem_of()`); a read then gives every element of the tile outside the
    tensor the fill."""
    fill = (lambda tile, sizes: _fill(lo, tile, edge, sizes)) if reading else None
    _tree(lo, src, dst, edge, reading, lambda s, d: tpu.WaitDMA2Op(sem_of(), s, d), fill)


def _fill(lo, tile: Ref, edge: Edge, sizes: list[int]) -> None:
    """tile = (row < v0 && lane < v1) ? tile : fill, in vregs (16-bit floats in f32)."""
    x = lo.load(tile)
    vt = ir.VectorType(x.type)
    elem = str(vt.element_type)
    i32v = ir.VectorType.get(sizes, lo.ty("i32"))
    inside = None
    for d, n in enumerate(edge.counts):
        idx = tpu.IotaOp(i32v, dimensions=[d]).result
        c = arith.CmpIOp(arith.CmpIPredicate.slt, idx, vector.BroadcastOp(i32v, n).result).result
        inside = c if inside is None else arith.AndIOp(inside, c).result
    wide = elem in ("bf16", "f16")
    compute = ir.VectorType.get(sizes, lo.ty("f32")) if wide else vt
    val = arith.ExtFOp(compute, x).result if wide else x
    fill = vector.BroadcastOp(compute, edge.fill).result
    out = arith.SelectOp(inside, val, fill).result
    lo.store(tile, arith.TruncFOp(vt, out).result if wide else out)
