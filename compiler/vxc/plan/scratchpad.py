"""Lifetime-based allocation of explicitly managed scratchpads (LANGUAGE.md §5 rule 5).

Input: the flattened body with liveness (checks/liveness.py) and the `Tile`s
each Transfer/TensorNew node makes in a granule'd space. Output: rings, an
`Alloc` per tile, the per-space working set, and E6010.

Rings. Tiles whose values flow into the same variable share a ring
(`inflight = next`; `cur = wait(inflight)` is the token's own buffer). A staging
tile of a multi-hop route (a hop before the last) is its own ring: it lives
while its transfer is in flight (until the `wait` of an async transfer; only at
the statement itself for a blocking one).

Rotation rule. The backend keeps one counter per ring; each execution of a
tile-making op takes slot `counter++ mod slots`. That is safe exactly when a
value is dead before `slots` more allocations of its ring have run. So for
each tile we walk its value's lifetime (following the variable that holds it
through moves, around loop back edges) and count the ring's allocations that
run while it is live; `slots = 1 + the largest such count`. When values die in
allocation order (FIFO, the seed's ping-pong) this equals the largest number of
the ring's values live at once. When a value can stay live across an unbounded
number of its ring's allocations (a loop), its tile is moved to a ring of its
own; if even alone it outlives an unbounded number of its own allocations, no
static slot count is safe and that is E6010.

Layout. A ring takes `slots * slot_bytes` bytes at a granule-aligned base;
rings whose lifetimes (sets of instructions) never overlap may share bytes,
assigned first-fit in program order. Tiles of unverified size (a dynamic shape
without a `where` bound, W1029) count 0 bytes in the working set and share,
evenly, whatever capacity the static rings leave.

Working set. At each instruction: the bytes of the buffers held by live
variables plus those made there. Above the capacity is E6010 at the transfer
that pushes it over, with a note listing what is live; a ring layout that needs
more than the capacity (possible when rotation reserves more than is live at
any one point) is E6010 too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vxc.diagnostics import DiagnosticSink, Span
from vxc.hir import types as T
from vxc.hir.liveness import Cfg
from vxc.hir.program import Function
from vxc.hir.typecheck import MAX_BYTES
from vxc.machines.model import Memory

INFINITE = -1  # an unbounded number of allocations during one lifetime


@dataclass(frozen=True)
class Tile:
    """One buffer that a node makes in a scratchpad space.

    `hop` is the index of the hop whose destination it is (-1 for a TensorNew);
    `final` says it is the node's result (else a staging buffer of a multi-hop
    route); `slot_bytes` is granule-rounded, None when the size is unverified.
    """

    node: int
    hop: int
    space: str
    slot_bytes: int | None
    final: bool
    span: Span
    label: str

    @property
    def key(self) -> tuple[int, int]:
        return (self.node, self.hop)


@dataclass(frozen=True)
class Alloc:
    """Where a tile lives: ring base `offset` (bytes from the space's start), `slots`
    slots of `slot_bytes` each; execution k of the op uses slot k mod slots of `ring`."""

    space: str
    offset: int
    slots: int
    slot_bytes: int
    ring: int


@dataclass
class Ring:
    """A set of tiles that rotate through `slots` slots at `offset` in `space`."""

    id: int
    space: str
    tiles: list[Tile]
    slots: int = 1
    slot_bytes: int = 0
    offset: int = 0
    points: frozenset[int] = frozenset()  # instructions where one of its values is live
    dynamic: bool = False  # holds tiles of unverified size

    @property
    def bytes(self) -> int:
        return self.slots * self.slot_bytes

    @property
    def slot_offsets(self) -> list[int]:
        return [self.offset + k * self.slot_bytes for k in range(self.slots)]


@dataclass
class Allocation:
    """The result for one function: rings, per-tile allocs, per-space bytes."""

    rings: list[Ring] = field(default_factory=list)
    allocs: dict[tuple[int, int], Alloc] = field(default_factory=dict)
    working_set: dict[str, int] = field(default_factory=dict)
    footprint: dict[str, int] = field(default_factory=dict)


@dataclass
class _Life:
    """A tile value's lifetime: states (instruction, holding variable) and their edges."""

    birth: int
    starts: list[tuple[int, int]]
    edges: dict[tuple[int, int], list[tuple[int, int]]]

    @property
    def points(self) -> frozenset[int]:
        return frozenset({self.birth} | {j for j, _ in self.edges})


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, x: object) -> object:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: object, b: object) -> None:
        self.parent[self.find(a)] = self.find(b)


class Allocator:
    def __init__(
        self,
        fn: Function,
        cfg: Cfg,
        tiles: dict[int, list[Tile]],
        memories: dict[str, Memory],
        sink: DiagnosticSink,
    ):
        self.fn, self.cfg, self.tiles, self.memories, self.sink = fn, cfg, tiles, memories, sink
        self.born: list[list[Tile]] = [
            [t for node in instr.makes for t in tiles.get(node.nid, [])] for instr in cfg.instrs
        ]
        self.groups = self._groups()
        self.var_bytes: dict[tuple[int, str], int] = {}
        self.lives = {t.key: self._life(i, t) for i, ts in enumerate(self.born) for t in ts}

    # ---- rings ------------------------------------------------------------------------
    def _groups(self) -> _UnionFind:
        """Variables and nodes whose buffers flow into one another."""
        uf = _UnionFind()
        for instr in self.cfg.instrs:
            for d in instr.defs:
                if instr.source is not None:
                    uf.union(("v", d), ("n", instr.source.nid))
                if instr.flow is not None:
                    uf.union(("v", d), ("v", instr.flow))
        return uf

    def _ring_key(self, t: Tile) -> object:
        if not t.final:
            return ("t", t.key)
        return (self.groups.find(("n", t.node)), t.space)

    def run(self) -> Allocation:
        keys = {t.key: self._ring_key(t) for ts in self.born for t in ts}
        depth = self._depths(keys)
        split = [k for k, d in depth.items() if d == INFINITE]
        if split:  # non-FIFO: give each such tile a ring of its own
            keys.update({k: ("t", k) for k in split})
            depth = self._depths(keys)
        out = Allocation(rings=self._rings(keys, depth))
        for space in sorted({r.space for r in out.rings}):
            out.working_set[space] = self._working_set(space)
            self._layout(space, [r for r in out.rings if r.space == space], out)
        for r in out.rings:
            for t in r.tiles:
                out.allocs[t.key] = Alloc(r.space, r.offset, r.slots, r.slot_bytes, r.id)
        return out

    def _rings(self, keys: dict[tuple[int, int], object], depth: dict) -> list[Ring]:
        by_key: dict[object, Ring] = {}
        for ts in self.born:  # program order gives deterministic ring ids
            for t in ts:
                ring = by_key.get(keys[t.key])
                if ring is None:
                    ring = by_key[keys[t.key]] = Ring(len(by_key), t.space, [])
                ring.tiles.append(t)
        for ring in by_key.values():
            worst = [depth[t.key] for t in ring.tiles]
            if INFINITE in worst:
                self._unbounded(ring)
            ring.slots = 1 + max((d for d in worst if d != INFINITE), default=0)
            sizes = [t.slot_bytes for t in ring.tiles]
            ring.dynamic = None in sizes
            ring.slot_bytes = max((s for s in sizes if s is not None), default=0)
            ring.points = frozenset().union(*(self.lives[t.key].points for t in ring.tiles))
        return list(by_key.values())

    def _unbounded(self, ring: Ring) -> None:
        t = ring.tiles[0]
        self.sink.emit(
            "E6010",
            f"a tile of `{t.space}` made here can stay live while this {t.label} runs "
            "again any number of times: its ring would need unbounded slots",
            t.span,
            notes=[
                "scratchpad tiles rotate through a fixed number of slots; a tile kept "
                "across a loop that keeps making tiles of the same kind outlives them all"
            ],
            help="keep the tile in a variable that the loop does not refill, or finish "
            "with it before the next iteration",
        )

    # ---- lifetimes -------------------------------------------------------------------
    def _life(self, birth: int, t: Tile) -> _Life:
        instr = self.cfg.instrs[birth]
        into = None
        if instr.source is not None and instr.source.nid == t.node and instr.defs:
            into = next(iter(instr.defs))
            if not t.final and not self._is_token(into):
                into = None  # a blocking route's staging buffer is free once it completes
        starts = self._next_states(birth, into, staging=not t.final)
        edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
        todo = list(starts)
        while todo:
            state = todo.pop()
            if state in edges:
                continue
            j, holder = state
            holder = self._holder_after(j, holder, staging=not t.final)
            edges[state] = self._next_states(j, holder, staging=not t.final)
            todo.extend(edges[state])
        return _Life(birth, starts, edges)

    def _holder_after(self, j: int, holder: int, staging: bool) -> int | None:
        instr = self.cfg.instrs[j]
        if instr.flow == holder and instr.defs:
            holder = next(iter(instr.defs))  # moved on: `let cur = wait(inflight)`
        elif holder in instr.defs:
            return None  # overwritten
        if staging and not self._is_token(holder):
            return None  # the route completed at its `wait`
        return holder if holder in self.cfg.live_out[j] else None

    def _next_states(self, j: int, holder: int | None, staging: bool) -> list[tuple[int, int]]:
        if holder is None:
            return []
        succ = self.cfg.instrs[j].succ
        return [(k, holder) for k in succ if k < self.cfg.exit and holder in self.cfg.live_in[k]]

    def _is_token(self, vid: int) -> bool:
        return isinstance(self.fn.vars[vid].ty, T.TokenT)

    def _depths(self, keys: dict[tuple[int, int], object]) -> dict[tuple[int, int], int]:
        """Per tile: how many allocations of its ring run while one of its values is live."""
        out = {}
        for i, ts in enumerate(self.born):
            for t in ts:
                ring = keys[t.key]

                def weight(j: int, ring: object = ring) -> int:
                    return sum(1 for u in self.born[j] if keys[u.key] == ring)

                here = weight(i) - 1  # others of the ring made by the same statement
                longest = _longest(self.lives[t.key], weight)
                out[t.key] = INFINITE if longest == INFINITE else here + longest
        return out

    # ---- layout and working set -------------------------------------------------------
    def _layout(self, space: str, rings: list[Ring], out: Allocation) -> None:
        mem = self.memories[space]
        granule = max(mem.granule, 1)
        placed: list[Ring] = []
        for ring in (r for r in rings if not r.dynamic):
            ring.offset = _first_fit(ring, placed, granule)
            placed.append(ring)
        static_end = max((r.offset + r.bytes for r in placed), default=0)
        self._share_rest(rings, static_end, mem, granule)
        out.footprint[space] = max((r.offset + r.bytes for r in rings), default=0)
        # A space without a capacity bounds nothing, but the IR's offsets are i64 (E6014).
        limit = mem.capacity or MAX_BYTES
        over = next((r for r in placed if r.offset + r.bytes > limit), None)
        if over is not None and not mem.capacity:
            why = f"past the {MAX_BYTES} B the IR's i64 offsets hold"
            help_ = f"give `{mem.name}` a capacity or a smaller granule"
            self._layout_overflow(over, mem, "E6014", why, help_)
        elif over is not None and out.working_set[space] <= mem.capacity:
            why = f"`{mem.name}` holds {_size(mem.capacity)}"
            help_ = "finish with tiles sooner so fewer are live at once"
            self._layout_overflow(over, mem, "E6010", why, help_)

    def _share_rest(self, rings: list[Ring], base: int, mem: Memory, granule: int) -> None:
        dynamic = [r for r in rings if r.dynamic]
        total_slots = sum(r.slots for r in dynamic)
        if not total_slots:
            return
        share = max(mem.capacity - base, 0) // total_slots // granule * granule
        for ring in dynamic:
            ring.offset, ring.slot_bytes = base, share
            base += ring.bytes

    def _layout_overflow(self, ring: Ring, mem: Memory, code: str, why: str, help_: str) -> None:
        self.sink.emit(
            code,
            f"the tiles of `{mem.name}` need {_size(ring.offset + ring.bytes)} laid out in "
            f"rings; {why}",
            ring.tiles[0].span,
            notes=[
                f"ring {ring.id} rotates {ring.slots} slots of {_size(ring.slot_bytes)} "
                f"at offset {ring.offset}"
            ],
            help=help_,
        )

    def _working_set(self, space: str) -> int:
        """Peak bytes live in `space`; E6010 at the first statement that makes a tile
        while the tiles that each fit (one too big alone is E6009) exceed the capacity,
        naming the peak too (the first statement that reaches it)."""
        cap = self.memories[space].capacity
        first: _Point | None = None
        peak = _Point(0, -1, [], [])
        for j in range(len(self.cfg.instrs)):
            live = self._live_bytes(j, space)
            made = [t for t in self.born[j] if t.space == space]
            sizes = [b for _, b, _ in live] + [t.slot_bytes or 0 for t in made]
            here = _Point(sum(sizes), j, live, made)
            if here.total > peak.total:
                peak = here
            if cap and made and first is None and here.total > cap >= max(sizes):
                first = here
        if first is not None:
            self._overflow(space, first, peak, cap)
        return peak.total

    def _live_bytes(self, j: int, space: str) -> list[tuple[str, int, int]]:
        """(name, bytes, line it is bound at) of each variable holding a tile of `space`
        live at instruction `j`."""
        out = []
        for vid in sorted(self.cfg.live_in[j]):
            held = self._var_bytes(vid, space)
            if held:
                var = self.fn.vars[vid]
                out.append((var.name, held, var.span.line))
        return out

    def _var_bytes(self, vid: int, space: str) -> int:
        """The most bytes in `space` that the buffer a variable holds can take."""
        if (vid, space) not in self.var_bytes:
            self.var_bytes[vid, space] = self._held_bytes(vid, space)
        return self.var_bytes[vid, space]

    def _held_bytes(self, vid: int, space: str) -> int:
        root = self.groups.find(("v", vid))
        token = self._is_token(vid)
        best = 0
        for node, tiles in self.tiles.items():
            if self.groups.find(("n", node)) != root:
                continue
            held = [t for t in tiles if t.space == space and (t.final or token)]
            best = max(best, sum(t.slot_bytes or 0 for t in held))
        return best

    def _overflow(self, space: str, first: _Point, peak: _Point, cap: int) -> None:
        at = first.made[-1]
        over = f"above its capacity of {cap} B ({_size(cap)})"
        if peak.j == first.j:
            msg = f"working set of `{space}` peaks here at {first.total} B ({_size(first.total)}), {over}"
        else:
            line = peak.made[-1].span.line if peak.made else self.cfg.instrs[peak.j].span.line
            msg = (
                f"working set of `{space}` is {first.total} B ({_size(first.total)}) here, "
                f"{over}, and peaks at {peak.total} B ({_size(peak.total)}) at line {line}"
            )
        self.sink.emit(
            "E6010",
            msg,
            at.span,
            notes=[
                f"live in {space} here: {first.describe()}",
                *([f"live in {space} at its peak: {peak.describe()}"] if peak.j != first.j else []),
            ],
            help="wait and finish with earlier tiles before starting more transfers",
        )


@dataclass
class _Point:
    """The bytes of one space live at instruction `j`: held by variables, and made there."""

    total: int
    j: int
    live: list[tuple[str, int, int]]  # (variable, bytes, the line it is bound at)
    made: list[Tile]

    def describe(self) -> str:
        """Every tile live here, with its size and line, so the user sees which to end sooner."""
        what = [f"`{name}` ({_size(b)}, line {line})" for name, b, line in self.live]
        what += [
            f"this {t.label} ({_size(t.slot_bytes or 0)}, line {t.span.line})" for t in self.made
        ]
        return ", ".join(what)


def _longest(life: _Life, weight: Callable[[int], int]) -> int:
    """Most weight on a path of lifetime states (Bellman-Ford); INFINITE on a positive cycle."""
    dist: dict[tuple[int, int], int] = {}
    for s in life.starts:
        dist[s] = weight(s[0])
    for _ in range(len(life.edges) + 1):
        changed = False
        for s, nexts in life.edges.items():
            if s not in dist:
                continue
            for n in nexts:
                cand = dist[s] + weight(n[0])
                if cand > dist.get(n, -1):
                    dist[n] = cand
                    changed = True
        if not changed:
            return max(dist.values(), default=0)
    return INFINITE


def _first_fit(ring: Ring, placed: list[Ring], granule: int) -> int:
    """Lowest granule-aligned base where the ring overlaps no ring live at the same time."""
    busy = sorted((r.offset, r.offset + r.bytes) for r in placed if r.points & ring.points)
    offset = 0
    for lo, hi in busy:
        if offset + ring.bytes <= lo:
            break
        offset = max(offset, -(-hi // granule) * granule)
    return offset


def _size(n: int) -> str:
    """Human units (binary, as LANGUAGE.md §1 defines them): 65536 -> `64 KiB`."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            # Integer arithmetic: a size past float range (huge dimensions) still formats.
            whole, tenth = divmod((n * 10 + scale // 2) // scale, 10)
            return (f"{whole}.{tenth}" if tenth else f"{whole}") + f" {unit}"
    return f"{n} B"


human_size = _size
