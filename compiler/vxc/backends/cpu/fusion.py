"""Which tile ops the CPU backend evaluates as one fused loop nest (issue 31).

A *tree* is a connected set of elementwise tile ops (`vx.binary`, `vx.unary`, `vx.cast`,
`vx.compare`, `vx.select`) and reductions over the last axis (`vx.reduce` sum, max,
min), all in one block, over one *frame*: the shape of the tree's full tiles. A value
of the frame's shape is *full*; one of the frame's shape with the last axis 1 (a
reduction's result, or elementwise arithmetic on such results) is a *row* value. The
backend evaluates a tree row by row (fused.py): per row, one pass over the row per
reduction level, the reductions first, then the elementwise values that need them,
while the row is in L1; a row value is one scalar per row. Intermediates (the results
whose every use is in the tree) get no buffer; a result used outside the tree, or one
the plan placed in a ring, is written to its buffer, row by row (an *output*).

The tree is emitted where its last op is (or at the `vx.store` of its root, which then
writes the destination tensor directly: the root has no tile of its own). That moves
the earlier ops of the tree past the ops between them, so a tree is fused only where
this cannot change a result (`_safe`): nothing between its first op and where it is
emitted writes memory, every outside use of a tree value comes after that point, and
no buffer the tree writes may overlap one it reads (the plan may overlap a tile with
one that died before it; a result's own operand under `in_place` is the exception: the
tree reads element i of it before writing element i).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxlib.mlir import ir

from vxc.backends.cpu import tiles as tiles_ll
from vxc.backends.cpu import tiles_math
from vxc.ir import types as T
from vxc.ir.ops import ReduceOp, UnaryOp, attr_int, buffer_root, ring_layout

ELEMENTWISE = frozenset({"vx.binary", "vx.unary", "vx.cast", "vx.compare", "vx.select"})
# Ops that write no memory: they may sit between the ops of a tree.
PURE = frozenset({"vx.view", "vx.len", "vx.instance", "vx.instances", "vx.wait", "vx.element"})
ROW_REDUCTIONS = ("sum", "max", "min")


def in_place(op: ir.Operation) -> int | None:
    """The operand whose buffer a tile op's result is (its `in_place` attribute), or None."""
    return attr_int(op, "in_place") if "in_place" in op.attributes else None


@dataclass
class Tree:
    """One fused tree: its ops in block order and how they are evaluated."""

    ops: list[ir.Operation]
    frame: tuple[int, ...]
    emit_at: ir.Operation  # the op at whose place the tree is emitted
    store: ir.Operation | None = None  # the root's `vx.store`, written through
    outputs: list[ir.Value] = field(default_factory=list)  # results written to their buffers
    buffered: list[ir.Value] = field(default_factory=list)  # full values kept in a row buffer
    level: dict[ir.Value, int] = field(default_factory=dict)  # the pass a value is ready in
    # Lone tile ops between the tree's ops, lowered right after it (fusion._deferrable).
    deferred: list[ir.Operation] = field(default_factory=list)

    def ready(self, v: ir.Value) -> int:
        """The pass `v` is ready in (an input: from the start)."""
        return self.level.get(v, 0)

    @property
    def values(self) -> list[ir.Value]:
        return [op.results[0] for op in self.ops]

    def member(self, v: ir.Value) -> bool:
        return isinstance(v, ir.OpResult) and v.owner.operation in self.ops

    def full(self, v: ir.Value) -> bool:
        return tuple(_memref(v).shape) == self.frame

    def is_root(self, v: ir.Value) -> bool:
        return self.store is not None and v == self.store.operands[0]

    @property
    def root(self) -> ir.Value | None:
        return self.store.operands[0] if self.store is not None else None

    @property
    def passes(self) -> int:
        """Passes over each row: one per reduction level, and the one writing full values."""
        reads = [self.ready(ReduceOp(op).src) for op in self.ops if op.name == "vx.reduce"]
        writes = [self.ready(v) for v in self.written if self.full(v)]
        return max(reads + writes, default=0) + 1

    @property
    def written(self) -> list[ir.Value]:
        root = [self.root] if self.root is not None else []
        return self.outputs + self.buffered + root


@dataclass
class Fusion:
    """The fused trees of a function: what to skip and where to emit."""

    trees: list[Tree] = field(default_factory=list)
    emit: dict[ir.Operation, Tree] = field(default_factory=dict)
    skip: set[ir.Operation] = field(default_factory=set)
    # Results no buffer is written for: the plan's arena need not hold them.
    unbuffered: set[ir.Operation] = field(default_factory=set)


def analyze(func: ir.Operation, row_buffers: bool = True) -> Fusion:
    """Every fused tree of `func` (each block on its own)."""
    out = Fusion()
    blocks: list[ir.Block] = []
    func.walk(lambda op: _blocks(op, blocks))
    for block in blocks:
        for tree in _block_trees(block, row_buffers):
            out.trees.append(tree)
            out.emit[tree.emit_at] = tree
            out.skip.update(op for op in tree.ops if op != tree.emit_at)
            out.skip.update(tree.deferred)
            out.unbuffered.update(op for op in tree.ops if op not in _holders(tree))
    return out


def _holders(tree: Tree) -> set[ir.Operation]:
    """The ops whose buffers the tree writes: each written result's, or, under
    `in_place`, the operand's it is."""
    out = set()
    for v in tree.written:
        op = v.owner.operation
        out.add(op)
        while (k := in_place(op)) is not None and tree.member(op.operands[k]):
            op = op.operands[k].owner.operation
            out.add(op)
    return out


def _blocks(op: ir.Operation, into: list[ir.Block]) -> ir.WalkResult:
    for region in op.regions:
        into.extend(region.blocks)
    return ir.WalkResult.ADVANCE


def _memref(v: ir.Value) -> ir.MemRefType:
    return ir.MemRefType(v.type)


def _tile(v: ir.Value) -> bool:
    return isinstance(v.type, ir.MemRefType)


def frame_of(op: ir.Operation) -> tuple[int, ...] | None | bool:
    """The frame a fusable op fixes (a tuple), None for a row op (it fits a frame whose
    rows it matches), False when the op is not fusable."""
    if op.name not in ELEMENTWISE and op.name != "vx.reduce":
        return False
    shapes = [_memref(v) for v in [*op.operands, op.results[0]] if _tile(v)]
    if not all(t.has_static_shape and str(t.element_type) in tiles_ll.STORAGE for t in shapes):
        return False
    out = tuple(_memref(op.results[0]).shape)
    if op.name == "vx.reduce":
        r = ReduceOp(op)
        src = tuple(_memref(r.src).shape)
        if r.fn not in ROW_REDUCTIONS or r.axis != len(src) - 1 or src[-1] == 1:
            return False
        return src
    if op.name == "vx.unary" and UnaryOp(op).fn in tiles_math.NO_F64:
        if str(_memref(op.results[0]).element_type) == "f64":
            return False  # refused by the unfused rule, with its help
    if in_place(op) is not None:
        k = in_place(op)
        if (
            not _tile(op.operands[k])
            or _memref(op.operands[k]).shape != _memref(op.results[0]).shape
        ):
            return False
    return None if out[-1] == 1 else out


def _row_of(frame: tuple[int, ...]) -> tuple[int, ...]:
    return (*frame[:-1], 1)


class _Sets:
    """Union-find over a block's fusable ops, each set with the frame it has fixed."""

    def __init__(self, ops: list[ir.Operation], frames: dict[ir.Operation, object]):
        self.parent = {op: op for op in ops}
        self.frame = dict(frames)
        self.rows = {op: tuple(_memref(op.results[0]).shape) for op in ops if frames[op] is None}

    def find(self, op: ir.Operation) -> ir.Operation:
        while self.parent[op] != op:
            self.parent[op] = self.parent[self.parent[op]]
            op = self.parent[op]
        return op

    def union(self, x: ir.Operation, y: ir.Operation) -> None:
        a, b = self.find(x), self.find(y)
        if a == b:
            return
        fa, fb = self.frame[a], self.frame[b]
        ra, rb = self.rows.get(a), self.rows.get(b)
        if fa is not None and fb is not None and fa != fb:
            return
        frame = fa if fa is not None else fb
        rows = {r for r in (ra, rb) if r is not None}
        if frame is not None and any(r != _row_of(frame) for r in rows) or len(rows) > 1:
            return
        self.parent[b] = a
        self.frame[a] = frame
        if rows:
            self.rows[a] = rows.pop()


def _block_trees(block: ir.Block, row_buffers: bool) -> list[Tree]:
    ops = [op.operation for op in block.operations]
    frames = {op: f for op in ops if (f := frame_of(op)) is not False}
    sets = _Sets(list(frames), frames)
    for op in frames:
        for v in op.operands:
            if isinstance(v, ir.OpResult) and v.owner.operation in frames:
                sets.union(op, v.owner.operation)
    groups: dict[ir.Operation, list[ir.Operation]] = {}
    for op in frames:
        groups.setdefault(sets.find(op), []).append(op)
    pos = {op: i for i, op in enumerate(ops)}
    trees = []
    for root, members in groups.items():
        frame = sets.frame[root]
        if frame is None or len(members) < 2:
            continue  # a lone op, or rows only: the unfused rules do as well
        trees.append(_tree(members, frame, ops, pos, row_buffers))
    # Dropping an unsafe tree puts its ops back between the others: decide again.
    while True:
        kept = [t for t in trees if _safe(t, trees, ops, pos)]
        if len(kept) == len(trees):
            return kept
        trees = kept


def _ancestor(op: ir.Operation, pos: dict[ir.Operation, int]) -> ir.Operation | None:
    """The op of the block (keys of `pos`) that is or contains `op`."""
    while op is not None and op not in pos:
        parent = op.parent
        op = parent.operation if parent is not None else None
    return op


def _uses(v: ir.Value, pos: dict[ir.Operation, int]) -> list[ir.Operation]:
    return [a for use in v.uses if (a := _ancestor(use.owner.operation, pos)) is not None]


def _tree(members, frame, ops, pos, row_buffers: bool) -> Tree:
    members = sorted(members, key=pos.__getitem__)
    tree = Tree(members, frame, members[-1])
    outside = {v: [u for u in _uses(v, pos) if u not in members] for v in tree.values}
    last = members[-1].results[0]
    users = _uses(last, pos)
    if (
        tree.full(last)
        and not outside[last][1:]
        and len(users) == 1
        and users[0].name == "vx.store"
        and users[0].operands[0] == last
        and attr_int(users[0], "edge_view") == 0
        and all(
            o.name.startswith("arith.") or o.name in PURE
            for o in ops[pos[members[-1]] + 1 : pos[users[0]]]
        )
    ):
        tree.store, tree.emit_at = users[0], users[0]
    for op in members:
        v = op.results[0]
        lay = ring_layout(op)
        placed = lay is not None and lay.shared
        if not tree.is_root(v) and (outside[v] or placed and not _internal_ring(op, tree)):
            tree.outputs.append(v)
    _levels(tree)
    if row_buffers:
        tree.buffered = _row_buffers(tree)
    return tree


def _internal_ring(op: ir.Operation, tree: Tree) -> bool:
    """A ring result used only inside the tree needs no buffer (the ring counter still
    advances, fused.py): the plan placed it because it is used twice (`e / e.sum(1)`)."""
    return all(u.owner.operation in tree.ops for u in op.results[0].uses)


def _levels(tree: Tree) -> None:
    """The pass each value is ready in: a reduction's result one after its input's."""
    for op in tree.ops:
        ins = [tree.level.get(v, 0) for v in op.operands if tree.member(v)]
        lv = max(ins, default=0)
        tree.level[op.results[0]] = lv + 1 if op.name == "vx.reduce" else lv


def needed_in(tree: Tree) -> dict[ir.Value, set[int]]:
    """The passes each full value is evaluated in (a row buffer stops the recursion)."""
    need: dict[ir.Value, set[int]] = {}

    def mark(v: ir.Value, p: int) -> None:
        if not tree.member(v) or not tree.full(v) or p in need.setdefault(v, set()):
            return
        need[v].add(p)
        if v in tree.buffered and p > tree.ready(v):
            return  # read back from its row buffer
        for x in v.owner.operation.operands:
            mark(x, p)

    for op in tree.ops:
        if op.name == "vx.reduce":
            mark(ReduceOp(op).src, tree.ready(ReduceOp(op).src))
    for v in tree.written:
        if tree.full(v):
            mark(v, tree.ready(v))
    return need


EXPENSIVE = frozenset(tiles_math.F32_FORMS)


def _row_buffers(tree: Tree) -> list[ir.Value]:
    """Full values worth keeping in a row of their own buffer (their ring slot or arena
    site): an expensive function (exp, ...) needed in two passes (softmax's `e`)."""
    out = []
    for v, passes in needed_in(tree).items():
        op = v.owner.operation
        if len(passes) > 1 and op.name == "vx.unary" and UnaryOp(op).fn in EXPENSIVE:
            if v not in tree.outputs and in_place(op) is None:
                out.append(v)
    return out


# ---- safety -------------------------------------------------------------------------------
def _writes_memory(op: ir.Operation) -> bool:
    return not (op.name.startswith("arith.") or op.name in PURE)


def _safe(tree: Tree, trees: list[Tree], ops, pos) -> bool:
    first, last = pos[tree.ops[0]], pos[tree.emit_at]
    tree.deferred = []
    for op in ops[first : last + 1]:
        if op not in tree.ops and op != tree.emit_at and _writes_memory(op):
            if not _deferrable(op, tree, trees, pos):
                return False
            tree.deferred.append(op)
    for v in tree.values:
        early = [u for u in _uses(v, pos) if u not in tree.ops and u not in tree.deferred]
        if any(pos[u] < last for u in early):
            return False
    need = needed_in(tree)
    reads = [*_inputs(tree), *tree.buffered]
    return all(_no_overlap(tree, w, i, pos, need) for w in tree.written for i in reads if i != w)


LONE = ELEMENTWISE | {"vx.reduce", "vx.iota", "vx.transpose"}


def _deferrable(op: ir.Operation, tree: Tree, trees: list[Tree], pos) -> bool:
    """Whether a tile op between the tree's ops may run after the tree instead (attention's
    `acc * alpha`, of another frame, between its softmax's ops): it writes only its own
    result, which nothing reads before the tree is emitted, and the tree writes no buffer
    it reads (one live past the tree is safe: the plan keeps it apart)."""
    last = pos[tree.emit_at]
    if op.name not in LONE or in_place(op) is not None or any(op in t.ops for t in trees):
        return False
    if any(pos[u] <= last for r in op.results for u in _uses(r, pos)):
        return False
    lay = ring_layout(op)
    rings = {ring_layout(m).ring for m in tree.ops}
    if lay is not None and lay.shared and lay.ring in rings:
        return False  # its slot would be taken after the tree's: the ring's order would change
    written = [w for w in tree.written if not tree.is_root(w)]
    for x in op.operands:
        if not _tile(x) or tree.member(x) or any(pos[u] > last for u in _uses(x, pos)):
            continue
        st = _storage(x)
        if st is None or any(
            _storage(w) is None or not all(_disjoint(a, b) for a in _storage(w) for b in st)
            for w in written
        ):
            return False
        if tree.store is not None and ("arg", buffer_root(tree.store.operands[1])) in st:
            return False
    return True


def _inputs(tree: Tree) -> list[ir.Value]:
    seen: list[ir.Value] = []
    for op in tree.ops:
        for v in op.operands:
            if _tile(v) and not tree.member(v) and v not in seen:
                seen.append(v)
    return seen


def _no_overlap(tree: Tree, w: ir.Value, i: ir.Value, pos, need) -> bool:
    """Whether writing `w` row by row cannot clobber `i` (an input, or a row buffer)
    before the tree has read it."""
    st = _storage(i)
    if tree.is_root(w):  # written into the store's destination tensor
        return st is not None and ("arg", buffer_root(tree.store.operands[1])) not in st
    producer = w.owner.operation
    if not tree.member(i) and any(pos[u] > pos[producer] for u in _uses(i, pos)):
        return True  # live past `w`'s op: the plan gave them disjoint buffers
    mine = _storage(w)
    if mine is None or st is None:
        return False
    pairs = [(x, y) for x in mine for y in st if not _disjoint(x, y)]
    if not pairs:
        return True
    if max(_read_passes(tree, i, need)) >= tree.ready(w) + tree.full(w):
        return False  # `i` read again after a row of `w` is written
    return _lags(tree, w, i) and all(_behind(x, y) for x, y in pairs)


def _lags(tree: Tree, w: ir.Value, i: ir.Value) -> bool:
    """Whether, from the same base, writing `w` row by row stays behind reading `i` row by
    row: `w`'s elements no wider than `i`'s, and `i` read along the rows (a full tile, or
    a row tile under a row result). In place is the equal case; attention's bf16 `P`
    written over the f32 scores it is computed from is the narrower one."""
    wide = T.element_bytes(_memref(w).element_type) <= T.element_bytes(_memref(i).element_type)
    return wide and (tree.full(i) or not tree.full(w))


def _behind(x: tuple, y: tuple) -> bool:
    """Whether buffer `x` starts at or before buffer `y`, both fixed: one slot of the same
    ring (the same slot, or apart), a one-slot ring each, or the same private site."""
    if x == y:
        return True
    if x[0] == y[0] == "ring" and x[1] == y[1] and x[4] == y[4] == 1:
        return x[2] <= y[2]
    return False


def _read_passes(tree: Tree, i: ir.Value, need) -> set[int]:
    """The passes `i` is read in; -1: a row value, read once at the start of each row."""
    if not tree.full(i):
        return {-1}
    if tree.member(i):  # a row buffer, read back after the pass that writes it
        return need.get(i, set()) | {tree.ready(i)}
    out: set[int] = set()
    for op in tree.ops:
        if any(v == i for v in op.operands):
            v = op.results[0]
            out |= {tree.level.get(i, 0)} if op.name == "vx.reduce" else need.get(v, set())
    return out or {0}


def _storage(v: ir.Value, depth: int = 0) -> list[object] | None:
    """Where a tile value's buffer may be: ("ring", space, lo, hi, slots), ("site", op), a
    function argument; None when it cannot be told (the tree is then not fused)."""
    v = buffer_root(v)
    if depth > 8:
        return None
    if isinstance(v, ir.BlockArgument):
        owner = v.owner.owner
        owner = owner.operation if owner is not None else None
        if owner is None or owner.name == "func.func":
            return [("arg", v)]
        if owner.name != "scf.for" or v.arg_number == 0:
            return None
        return _carried(owner, v.arg_number - 1, depth)
    op = v.owner.operation
    if op.name == "scf.for":
        return _carried(op, ir.OpResult(v).result_number, depth)
    if op.name == "scf.if":
        return _yielded(op, ir.OpResult(v).result_number, depth)
    k = in_place(op)
    if k is not None:
        return _storage(op.operands[k], depth + 1)
    lay = ring_layout(op)
    if lay is None or not isinstance(v.type, ir.MemRefType) or T.space_of(v.type) is None:
        return None
    if not lay.shared:
        return [("site", op)]
    return [("ring", lay.space, lay.offset, lay.end, lay.slots)]


def _yields(op: ir.Operation, k: int) -> list[ir.Value]:
    """Operand k of each `scf.yield` that ends a region of `op`."""
    return [
        o.operands[k]
        for region in op.regions
        for block in region.blocks
        for o in block.operations
        if o.operation.name == "scf.yield"
    ]


def _yielded(op: ir.Operation, k: int, depth: int) -> list[object] | None:
    """The storage of an `scf.if` result: each branch's yielded tile's."""
    return _sources(_yields(op, k), depth)


def _carried(loop: ir.Operation, k: int, depth: int) -> list[object] | None:
    """The storage of a loop-carried tile: its initial value's and each yielded one's."""
    return _sources([loop.operands[3 + k], *_yields(loop, k)], depth)


def _sources(values: list[ir.Value], depth: int) -> list[object] | None:
    found: list[object] = []
    for s in values:
        got = _storage(s, depth + 1)
        if got is None:
            return None
        found += got
    return found


def _disjoint(a: object, b: object) -> bool:
    if a[0] == "ring" and b[0] == "ring":
        return a[1] != b[1] or a[3] <= b[2] or b[3] <= a[2]
    return a != b
