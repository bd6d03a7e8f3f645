"""One loop nest per fused tree (fusion.py): the tree evaluated row by row, in registers.

Loops over the frame's leading dimensions; per row, `tree.passes` passes over the last
axis, W lanes a step and a scalar tail (as tiles.py's loops). Pass p accumulates the
reductions whose input is ready in pass p and writes the full values that are; after
it, the row values that needed those reductions are computed once, as scalars. A value
is evaluated from the tree's inputs each time it is needed, except a row buffer (read
back from the row of its buffer it was written in) and a row value (a scalar). Every
result is rounded to its element type where the unfused op would have stored it, so a
fused tree computes what the ops one by one compute, to the bit. A step loads and
computes first and stores last: an `in_place` result may be its operand's buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jaxlib.mlir import ir
from llvmlite import ir as ll

from vxc.backends.cpu import tiles as tiles_ll
from vxc.backends.cpu.fusion import Tree, in_place
from vxc.backends.cpu.loops import I64, Mem, counted_loop
from vxc.ir import types as T
from vxc.ir.ops import BinaryOp, CompareOp, ReduceOp, StoreOp, UnaryOp, ring_layout

W = tiles_ll.W


def _c(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


def _memref(v: ir.Value) -> ir.MemRefType:
    return ir.MemRefType(v.type)


def _elem(v: ir.Value) -> str:
    return str(v.type.element_type if isinstance(v.type, ir.MemRefType) else v.type)


def _fn(op: ir.Operation) -> str:
    """The elementwise function of a tree op (tiles.apply's name for it)."""
    views: dict[str, Callable] = {
        "vx.binary": lambda o: BinaryOp(o).fn,
        "vx.unary": lambda o: UnaryOp(o).fn,
        "vx.compare": lambda o: CompareOp(o).fn,
        "vx.cast": lambda o: "cast",
        "vx.select": lambda o: "select",
    }
    return views[op.name](op)


def _ctype(op: ir.Operation) -> str:
    """The compute type of an op's scalar operands (lower.py's `_tile_elementwise`)."""
    skip = 1 if op.name == "vx.select" else 0
    tiles = [v for v in op.operands[skip:] if isinstance(v.type, ir.MemRefType)]
    return tiles_ll.compute(_elem(tiles[0] if tiles else op.results[0]))


def _round(b: ll.IRBuilder, v: ll.Value, elem: str, w: int) -> ll.Value:
    """`v` as storing it as `elem` and loading it back gives (bf16, f16 round)."""
    if elem in ("bf16", "f16"):
        return tiles_ll.widen(b, tiles_ll.narrow(b, v, elem, w), elem, w)
    return v


def _horizontal(b: ll.IRBuilder, fn: str, acc: ll.Value, lanes: ll.Value) -> ll.Value:
    """`acc` combined with the W lanes, halving in log2(W) steps (a row's critical path is
    4 dependent steps, not 16)."""
    n = lanes.type.count
    while n > 1:
        n //= 2
        idx = [ll.Constant(ll.IntType(32), i) for i in range(n)]
        lo = b.shuffle_vector(lanes, lanes, ll.Constant(ll.VectorType(ll.IntType(32), n), idx))
        hi_idx = [ll.Constant(ll.IntType(32), i + n) for i in range(n)]
        hi = b.shuffle_vector(lanes, lanes, ll.Constant(ll.VectorType(ll.IntType(32), n), hi_idx))
        lanes = tiles_ll.reduce_step(b, fn, lo, hi)
    return tiles_ll.reduce_step(b, fn, acc, b.extract_element(lanes, _c(0)))


@dataclass
class _Row:
    """The state of one row: each input's element offset, and the row values so far."""

    offsets: dict[ir.Value, ll.Value]
    index: ll.Value  # the row's linear index in the frame's leading dimensions
    dest: ll.Value | None  # the store destination's element offset of the row
    scalars: dict[ir.Value, ll.Value] = field(default_factory=dict)


class FusedEmitter:
    def __init__(self, lo, tree: Tree):
        self.lo, self.tree, self.b = lo, tree, lo.b
        self.module = lo.mod.ll
        self.frame = tree.frame
        self.cols = tree.frame[-1]
        self.inputs = [
            v
            for op in tree.ops
            for v in op.operands
            if isinstance(v.type, ir.MemRefType) and not tree.member(v)
        ]
        self.inputs = list(dict.fromkeys(self.inputs))
        self.scalar_args: dict[tuple[ir.Operation, int], ll.Value] = {}
        self.ptrs: dict[ir.Value, ll.Value] = {}

    # -- setup -------------------------------------------------------------------------------
    def run(self) -> None:
        self.buffers()
        for op in self.tree.ops:
            for k, v in enumerate(op.operands):
                if not isinstance(v.type, ir.MemRefType):
                    arg = self.lo.get(v)
                    self.scalar_args[(op, k)] = tiles_ll.scalar_arg(
                        self.b, arg, _elem(v), _ctype(op)
                    )
        dest = self.destination()
        self.rows(dest)

    def buffers(self) -> None:
        """Each result's buffer, in block order (a ring's counter advances as the ops one by
        one would advance it, whether or not the tree writes the slot)."""
        lo = self.lo
        for op in self.tree.ops:
            v, t = op.results[0], _memref(op.results[0])
            k, lay = in_place(op), ring_layout(op)
            if k is not None:
                ptr = self.ptrs.get(op.operands[k]) or lo.get(op.operands[k]).ptr
            elif lay.shared:
                ptr = lo.slot(op, t, _c(T.static_bytes(t)))
            elif op in lo.plan.site:
                ptr = lo.at(_c(lo.plan.site[op]))
            else:
                continue  # an intermediate: no buffer
            self.ptrs[v] = ptr
            lo.values[v] = lo_mem(ptr, t)

    def destination(self) -> tuple | None:
        """The root's store: its guard, and the destination tensor with the offsets."""
        if self.tree.store is None:
            return None
        st = StoreOp(self.tree.store)
        out = self.lo.get(st.dst)
        offsets = [self.lo.get(v) for v in st.offsets]
        self.lo.region_guard(st.proved, out, offsets, list(self.frame))
        return out, offsets

    # -- loops -------------------------------------------------------------------------------
    def rows(self, dest) -> None:
        b, frame = self.b, self.frame
        steps = {v: tiles_ll.strides(self.padded(v), frame) for v in self.inputs}
        lead = frame[:-1]

        def level(d: int, offs: dict, index: ll.Value, lin: ll.Value | None) -> None:
            if d == len(lead):
                if dest is not None:
                    out, offsets = dest
                    lin = b.add(b.mul(lin, out.dims[d]), offsets[d])
                self.row(_Row(offs, index, lin))
                return

            def body(i: ll.Value, _carried: list) -> list:
                moved = {v: b.add(o, b.mul(i, _c(steps[v][d]))) for v, o in offs.items()}
                inner = b.add(b.mul(index, _c(lead[d])), i)
                nxt = None
                if dest is not None:
                    out, offsets = dest
                    nxt = b.add(b.mul(lin, out.dims[d]), b.add(offsets[d], i))
                level(d + 1, moved, inner, nxt)
                return []

            counted_loop(b, _c(0), _c(lead[d]), _c(1), body, name=f"fused{d}")

        level(0, {v: _c(0) for v in self.inputs}, _c(0), _c(0) if dest is not None else None)

    def padded(self, v: ir.Value) -> tuple[int, ...]:
        shape = tuple(_memref(v).shape)
        return (1,) * (len(self.frame) - len(shape)) + shape

    def row(self, row: _Row) -> None:
        tree = self.tree
        for v in self.inputs:  # the row inputs (one element per row), read once
            if self.padded(v)[-1] == 1:
                ptr = self.lo.get(v).ptr
                row.scalars[v] = tiles_ll.load(self.b, ptr, row.offsets[v], _elem(v), 1)
        self.row_values(row, 0)
        for p in range(tree.passes):
            reds = [
                op
                for op in tree.ops
                if op.name == "vx.reduce" and tree.ready(ReduceOp(op).src) == p
            ]
            writes = [v for v in tree.written if tree.full(v) and tree.ready(v) == p]
            if reds or writes:
                self.one_pass(row, p, reds, writes)
            self.row_values(row, p + 1)

    def one_pass(self, row: _Row, p: int, reds: list, writes: list) -> None:
        b, n = self.b, self.cols
        main = n - n % W
        cts = [tiles_ll.COMPUTE[tiles_ll.compute(_elem(r.results[0]))] for r in reds]
        inits = [tiles_ll.reduce_init(ReduceOp(r).fn, ct) for r, ct in zip(reds, cts, strict=True)]

        def step(w: int) -> Callable:
            def body(j: ll.Value, accs: list) -> list:
                cache: dict[ir.Value, ll.Value] = {}
                srcs = [self.value(ReduceOp(r).src, row, p, j, w, cache) for r in reds]
                vals = [self.value(v, row, p, j, w, cache) for v in writes]
                for v, x in zip(writes, vals, strict=True):
                    self.write(v, row, j, x, w)
                return [
                    tiles_ll.reduce_step(b, ReduceOp(r).fn, a, x)
                    for r, a, x in zip(reds, accs, srcs, strict=True)
                ]

            return body

        accs = [tiles_ll.const(ct, i) for ct, i in zip(cts, inits, strict=True)]
        if main:
            lanes = [
                tiles_ll.const(tiles_ll.vec(ct, W), i) for ct, i in zip(cts, inits, strict=True)
            ]
            lanes = counted_loop(b, _c(0), _c(main), _c(W), step(W), lanes, name="fvec")
            for k, r in enumerate(reds):
                accs[k] = _horizontal(b, ReduceOp(r).fn, accs[k], lanes[k])
        if main < n:
            accs = counted_loop(b, _c(main), _c(n), _c(1), step(1), accs, name="ftail")
        for r, acc in zip(reds, accs, strict=True):
            res = r.results[0]
            row.scalars[res] = _round(b, acc, _elem(res), 1)
            if res in self.tree.written:
                self.write_row(res, row)

    def row_values(self, row: _Row, p: int) -> None:
        """The row values ready after pass p - 1 (reductions aside), once per row."""
        for op in self.tree.ops:
            v = op.results[0]
            if op.name == "vx.reduce" or self.tree.full(v) or v in row.scalars:
                continue
            if self.tree.ready(v) <= p:
                row.scalars[v] = self.compute(op, row, p, None, 1, {})
                if v in self.tree.written:
                    self.write_row(v, row)

    # -- values ------------------------------------------------------------------------------
    def value(self, v: ir.Value, row: _Row, p: int, j, w: int, cache: dict) -> ll.Value:
        """Elements j .. j + w of the row of tile `v`, in its compute type."""
        if v in row.scalars:
            return tiles_ll.splat(self.b, row.scalars[v], w)
        if v in cache:
            return cache[v]
        tree = self.tree
        if not tree.member(v):  # a full input
            ptr, at = self.lo.get(v).ptr, row.offsets[v]
            if self.padded(v)[-1] == 1:  # unreachable: row inputs are scalars
                raise RuntimeError("fused: a row input was not read")
            out = tiles_ll.load(self.b, ptr, self.b.add(at, j), _elem(v), w)
        elif v in tree.buffered and p > tree.ready(v):
            out = tiles_ll.load(self.b, self.ptrs[v], self.full_at(row, j), _elem(v), w)
        else:
            out = self.compute(v.owner.operation, row, p, j, w, cache)
        cache[v] = out
        return out

    def compute(self, op: ir.Operation, row: _Row, p: int, j, w: int, cache: dict) -> ll.Value:
        args = []
        for k, x in enumerate(op.operands):
            if not isinstance(x.type, ir.MemRefType):
                args.append(tiles_ll.splat(self.b, self.scalar_args[(op, k)], w))
            else:
                args.append(self.value(x, row, p, j, w, cache))
        res = op.results[0]
        out = tiles_ll.apply(self.b, self.module, _fn(op), args)
        out = tiles_ll.convert(self.b, out, tiles_ll.compute(_elem(res)), w)
        return _round(self.b, out, _elem(res), w)

    def full_at(self, row: _Row, j: ll.Value) -> ll.Value:
        return self.b.add(self.b.mul(row.index, _c(self.cols)), j)

    def write(self, v: ir.Value, row: _Row, j: ll.Value, x: ll.Value, w: int) -> None:
        if self.tree.is_root(v):
            out = self.lo.get(StoreOp(self.tree.store).dst)
            tiles_ll.store(self.b, out.ptr, self.b.add(row.dest, j), x, _elem(v), w)
        else:
            tiles_ll.store(self.b, self.ptrs[v], self.full_at(row, j), x, _elem(v), w)

    def write_row(self, v: ir.Value, row: _Row) -> None:
        tiles_ll.store(self.b, self.ptrs[v], row.index, row.scalars[v], _elem(v), 1)


def lo_mem(ptr: ll.Value, t: ir.MemRefType):
    return Mem(ptr, [_c(d) for d in t.shape])


def emit(lo, tree: Tree) -> None:
    """Lower `tree` where its last op (or its root's store) is."""
    FusedEmitter(lo, tree).run()
