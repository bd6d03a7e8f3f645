"""Per-target placement checks of one typechecked function (LANGUAGE.md §7, §5 rule 5).

- Routing: each `transfer` / `transfer_async` is routed from its source tensor's
  space (a token source reads its buffer) to the requested space over the
  function's topology edges (host code: every edge). E6002 for a space or
  topology the machine does not declare, E6001 when no route exists. Each hop
  becomes one `vx.transfer` in the IR.
- Capacity: a tensor larger than a hop destination's capacity is E6009. A
  runtime dimension into a capacity-bounded space is W1029 unless a `where`
  clause bounds it (`n <= 512`, `n < 513`, `512 >= n`); then the bound's size is
  what is checked and allocated.
- Visibility: code placed on a topology may only compute on values in the
  spaces it lists as `visible` (host code: CPU_DRAM): tensor operands of
  `matmul_acc` and of `extern fn` calls, and tensor sides of `assert(buf == v)`.
  Transfers need no visibility (DMA does them), and a Vx helper's arguments are
  checked where its body (instantiated in the caller's placements) reads them.
  E6003 otherwise.
- Scratchpads: every tile placed into an explicitly managed space with a capacity or
  a granule (`managed` defaults to `explicit`, LANGUAGE.md §2; a hop destination, or a
  `Tensor<E>([..])` in such a home space) gets a ring, slot count and offset
  from real lifetimes; see plan/scratchpad.py for the rotation rule, layout
  and the working-set check (E6010).

The result, `FnPlacement`, is this function's part of the target plan
(plan/__init__.py): keyed by the HIR node id (`nid`) of each Transfer / TensorNew / Call
node (each instance has its own HIR nodes), it holds the route, the allocations
and the attributes of every vx op the node lowers to (`NodePlacement.ops`). The
seam checker, the HIR -> vx lowering and hence the backends read it; nothing
routes again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.diagnostics import DiagnosticSink
from vxc.diagnostics.suggest import did_you_mean
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.liveness import build_cfg, children, makes_buffer
from vxc.hir.program import Function
from vxc.hir.tiles import tile_form, tile_operands
from vxc.hir.typecheck import MAX_BYTES
from vxc.hir.visit import StmtVisitor
from vxc.machines.model import CPU_DRAM, Hop, Machine, Memory
from vxc.plan.scratchpad import Alloc, Allocator, Ring, Tile, human_size

__all__ = [
    "Alloc",
    "FnPlacement",
    "NodePlacement",
    "Ring",
    "check_placement",
    "where_bounds",
]


@dataclass
class NodePlacement:
    """What one H.Transfer or H.TensorNew node does on this target.

    kind: "transfer", "transfer_async" or "new"; source: canonical space the
    tensor starts in (None for a new tensor); space: canonical destination (the
    home space of a new tensor); hops: the route, one `vx.transfer` each (empty
    for a new tensor or a tensor already in place); allocs: parallel to hops, the
    scratchpad allocation of each hop's destination buffer (None where the
    destination is not explicitly managed); alloc: the buffer the node's result
    lives in when that is a scratchpad (the last hop's, or the new tensor's);
    bytes: the tensor's size (at its `where` bound), None when unverified;
    routed: False when the route failed (E6001/E6002), hops then empty;
    ops: the attributes of each vx op the node lowers to, in order (one
    `vx.transfer` per hop, a complete-at-once `vx.transfer_async` for an async
    transfer already in place, the `vx.zeros` of a new tensor, the `func.call`
    of a call whose result lands in a scratchpad), filled once allocation is done.
    """

    kind: str
    source: str | None
    space: str
    hops: list[Hop] = field(default_factory=list)
    allocs: list[Alloc | None] = field(default_factory=list)
    alloc: Alloc | None = None
    bytes: int | None = None
    routed: bool = True
    ops: list[dict[str, object]] = field(default_factory=list)


@dataclass
class FnPlacement:
    """Placement of one function on one target.

    nodes: nid of an H.Transfer | H.TensorNew | H.Call -> NodePlacement; rings: the scratchpad
    rings (`Ring.id` is what `Alloc.ring` names; ids are per function, in
    program order); working_set: per scratchpad space, the peak bytes live at
    once; footprint: per scratchpad space, the bytes the ring layout spans.
    """

    function: str
    nodes: dict[int, NodePlacement] = field(default_factory=dict)
    rings: list[Ring] = field(default_factory=list)
    working_set: dict[str, int] = field(default_factory=dict)
    footprint: dict[str, int] = field(default_factory=dict)
    # nids the seam checker proved: views inside their tensors, Vec indices in bounds,
    # stores whose instances write disjoint regions (the IR's `proved` / `disjoint`).
    proved: set[int] = field(default_factory=set)

    def of(self, node: H.Expr) -> NodePlacement:
        return self.nodes[node.nid]


def _slot_attributes(alloc: Alloc | None) -> dict[str, object]:
    """Where a placing op's buffer lives: its ring, offset and slots (`ring = -1`: a
    private buffer the backend provides; slot_bytes is then the op's own size)."""
    if alloc is None:
        return {"ring": -1, "offset": 0, "slots": 1}
    return {
        "ring": alloc.ring,
        "offset": alloc.offset,
        "slots": alloc.slots,
        "slot_bytes": alloc.slot_bytes,
    }


def hop_op(machine: Machine, hop: Hop, alloc: Alloc | None) -> dict[str, object]:
    """The attributes of the `vx.transfer` (or `vx.transfer_async`) of one route hop."""
    mem = machine.memories[hop.dst]
    return {
        "space": hop.dst,
        "from": hop.src,
        "within": (machine.space(mem.within) or mem.within) if mem.within else "",
        "capacity": mem.capacity,
        "granule": mem.granule,
        "scope": mem.scope,
        "edge_cost": hop.cost,
        **_slot_attributes(alloc),
    }


def in_place_op(machine: Machine, space: str) -> dict[str, object]:
    """The attributes of the `vx.transfer_async` of a tensor already in `space`: a token
    that is complete at once (no edge, nothing allocated)."""
    mem = machine.memories.get(space)
    return {
        "space": space,
        "from": space,
        "within": "",
        "capacity": 0,
        "granule": 0,
        "scope": mem.scope if mem else "device",
        "edge_cost": 0,
        "ring": -1,
        "offset": 0,
        "slots": 1,
    }


def call_op(alloc: Alloc | None) -> dict[str, object]:
    """The placement attributes of a `func.call` whose result lands in a scratchpad slot
    of the caller's (none otherwise)."""
    if alloc is None:
        return {}
    return {"space": alloc.space, **_slot_attributes(alloc)}


def _node_ops(machine: Machine, node: NodePlacement) -> list[dict[str, object]]:
    if node.kind == "new":
        return [_slot_attributes(node.alloc)]
    if node.kind == "tile":
        return [{"space": node.space, **_slot_attributes(node.alloc)}]
    if node.kind == "call":
        return [call_op(node.alloc)]
    if not node.routed:
        return []
    if not node.hops:
        return [in_place_op(machine, node.space)] if node.kind == "transfer_async" else []
    return [hop_op(machine, h, a) for h, a in zip(node.hops, node.allocs, strict=True)]


def where_bounds(where: list[H.Expr]) -> dict[str, int]:
    """Upper bounds on names from a `where` clause: `n <= 512`, `n < 513`, `512 >= n`."""
    out: dict[str, int] = {}
    todo = list(where)
    while todo:
        e = todo.pop()
        if isinstance(e, H.Binary) and e.op == "&&":
            todo += [e.lhs, e.rhs]
            continue
        bound = _upper_bound(e)
        if bound is not None:
            name, value = bound
            out[name] = min(out.get(name, value), value)
    return out


_FLIP = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "==": "=="}


def _upper_bound(e: H.Expr) -> tuple[str, int] | None:
    if not isinstance(e, H.Binary):
        return None
    if isinstance(e.lhs, H.Name) and isinstance(e.rhs, H.IntLit):
        name, op, value = e.lhs.name, e.op, e.rhs.value
    elif isinstance(e.rhs, H.Name) and isinstance(e.lhs, H.IntLit) and e.op in _FLIP:
        name, op, value = e.rhs.name, _FLIP[e.op], e.lhs.value  # `512 >= n` is `n <= 512`
    else:
        return None
    return {"<=": (name, value), "<": (name, value - 1), "==": (name, value)}.get(op)


@dataclass
class _Size:
    """A tensor's size: bytes (at the `where` bounds), the runtime dims that no bound covers,
    and the bounds that were used."""

    bytes: int | None
    unbounded: list[str]
    used: list[str]


class _Placer(StmtVisitor):
    def __init__(
        self, fn: Function, machine: Machine, functions: dict[str, Function], sink: DiagnosticSink
    ):
        self.fn, self.machine, self.functions, self.sink = fn, machine, functions, sink
        self.bounds = where_bounds(fn.decl.where)
        self.out = FnPlacement(fn.name)
        self.tiles: dict[int, list[Tile]] = {}

    def run(self) -> FnPlacement:
        if not self._topology_known(self.fn.topology, self.fn.decl.name_span):
            return self.out
        self._block(self.fn.decl.body, self.fn.topology)
        identity = {k for k, p in self.out.nodes.items() if p.routed and p.kind != "new"}
        identity = {k for k in identity if not self.out.nodes[k].hops}
        cfg = build_cfg(self.fn.decl.body, identity)
        result = Allocator(self.fn, cfg, self.tiles, self.machine.memories, self.sink).run()
        self.out.rings, self.out.working_set = result.rings, result.working_set
        self.out.footprint = result.footprint
        for node_id, tiles in self.tiles.items():
            node = self.out.nodes[node_id]
            for t in tiles:
                alloc = result.allocs[t.key]
                if t.hop >= 0:
                    node.allocs[t.hop] = alloc
                if t.final:
                    node.alloc = alloc
        for node in self.out.nodes.values():
            node.ops = _node_ops(self.machine, node)
        return self.out

    def _topology_known(self, topo: str | None, span) -> bool:
        if topo is None or topo in self.machine.topologies:
            return True
        self.sink.emit(
            "E6002",
            f"`Topology::{topo}` is not declared",
            span,
            notes=[f"declared topologies: {', '.join(sorted(self.machine.topologies)) or 'none'}"],
            help=did_you_mean(topo, self.machine.topologies, "Topology::{}"),
        )
        return False

    # ---- walk -----------------------------------------------------------------------
    def _block(self, block: H.Block, topo: str | None) -> None:
        for s in block.stmts:
            self._stmt(s, topo)

    def _stmt(self, s: H.Stmt, topo: str | None) -> None:
        self.visit(s, topo)

    def visit_binding(self, s: H.Let | H.Assign, topo: str | None) -> None:
        self._expr(s.value, topo)

    def visit_expr_stmt(self, s: H.ExprStmt, topo: str | None) -> None:
        self._expr(s.expr, topo)

    def visit_return(self, s: H.Return, topo: str | None) -> None:
        if s.value is not None:
            self._expr(s.value, topo)

    def visit_for(self, s: H.For, topo: str | None) -> None:
        self._expr(s.start, topo)
        self._expr(s.end, topo)
        self._block(s.body, topo)

    def visit_if(self, s: H.If, topo: str | None) -> None:
        self._expr(s.cond, topo)
        self._block(s.then, topo)
        if s.orelse:
            self._block(s.orelse, topo)

    def visit_spawn(self, s: H.Spawn, topo: str | None) -> None:
        if self._topology_known(s.topology, s.span):
            self._block(s.body, s.topology)  # the block's code runs on its own topology

    def _expr(self, e: H.Expr, topo: str | None, inner: bool = False) -> None:
        """`inner`: `e` is an operand of tile arithmetic, computed element by element inside
        its expression (LANGUAGE.md section 4.3), so a tile form there is not placed."""
        form = tile_form(e, self.functions)
        for child in children(e):
            self._expr(child, topo, inner=form is not None)
        if form is not None:
            self._tile_op(e, topo, placed=not inner)
        elif isinstance(e, H.Transfer):
            self._transfer(e, topo)
        elif isinstance(e, H.TensorNew):
            self._tensor_new(e)
        elif isinstance(e, H.Call):
            self._call(e, topo)
            if makes_buffer(e):
                self._call_result(e)

    # ---- routing and capacity ------------------------------------------------------------
    def _transfer(self, e: H.Transfer, topo: str | None) -> None:
        kind = "transfer_async" if e.is_async else "transfer"
        src_t = _tensor(e.src.ty)
        if src_t is None:
            return
        src, dst = self._space(src_t.space, e), self._space(e.space, e)
        node = NodePlacement(kind, src, dst or e.space, routed=False)
        self.out.nodes[e.nid] = node
        if src is None or dst is None:
            return
        hops = self.machine.route(topo, src, dst)
        if hops is None:
            self._no_route(e, topo, src, dst)
            return
        node.hops, node.allocs, node.routed = hops, [None] * len(hops), True
        size = self._size(src_t)
        node.bytes = size.bytes
        self._capacity(e, src_t, size, [h.dst for h in hops])
        tiles = [
            self._tile(e, k, h.dst, size, final=k == len(hops) - 1, label=kind)
            for k, h in enumerate(hops)
        ]
        self.tiles[e.nid] = [t for t in tiles if t is not None]

    def _tensor_new(self, e: H.TensorNew) -> None:
        home = self._space(e.ty.space, e)
        node = NodePlacement("new", None, home or e.ty.space, routed=home is not None)
        self.out.nodes[e.nid] = node
        if home is None:
            return
        self._new_tile(e, node, home, "new tensor")

    def _tile_op(self, e: H.Expr, topo: str | None, placed: bool) -> None:
        """Tile arithmetic: its tile operands must be visible to the core (E6003) and share
        one space (E6044); the result is a new tile there. A placed one (what a `let`
        binds, an assignment stores, an intrinsic or transfer takes) joins the working set
        and gets a ring slot like any tile; an intermediate takes no slot."""
        operands = [a for a in tile_operands(e) if _tensor(a.ty) is not None]
        for a in operands:
            if tile_form(a, self.functions) is None:
                self._visible(a, topo, "tile arithmetic")
        spaces = [self.machine.space(_tensor(a.ty).space) for a in operands]
        if len(set(spaces)) > 1:
            self._mixed_spaces(e, operands, spaces)
        space = self.machine.space(e.ty.space)
        node = NodePlacement("tile", None, space or e.ty.space, routed=space is not None)
        self.out.nodes[e.nid] = node
        if space is None or not placed:
            return
        self._new_tile(e, node, space, "tile result")

    def _new_tile(self, e: H.Expr, node: NodePlacement, space, label: str) -> None:
        """A value made in `space` (a fill, a tile op's result): its bytes, the capacity
        check and its ring slot in the working set."""
        size = self._size(e.ty)
        node.bytes = size.bytes
        self._capacity(e, e.ty, size, [space])
        tile = self._tile(e, -1, space, size, final=True, label=label)
        self.tiles[e.nid] = [tile] if tile is not None else []

    def _mixed_spaces(self, e: H.Expr, operands: list[H.Expr], spaces: list) -> None:
        first = operands[0]
        other = next(a for a, s in zip(operands, spaces, strict=True) if s != spaces[0])
        self.sink.emit(
            "E6044",
            f"tile arithmetic on operands in different spaces: `{_tensor(first.ty).show()}` "
            f"and `{_tensor(other.ty).show()}`",
            e.span,
            notes=["the result of tile arithmetic lives where its tile operands live"],
            help=f"move one first: `transfer({H.show_expr(other)}, Memory::{spaces[0]})`",
        )

    def _call_result(self, e: H.Call) -> None:
        """A returned tensor (or token) lands in a buffer of the caller's: allocate it like a
        transfer's destination, so a result kept across loop iterations gets its own slot."""
        placed = e.ty.inner if isinstance(e.ty, T.TokenT) else e.ty
        space = self.machine.space(placed.space)
        if space is None:
            return
        self.out.nodes[e.nid] = NodePlacement("call", None, space, routed=True)
        size = self._size(placed)
        self.out.nodes[e.nid].bytes = size.bytes
        tile = self._tile(e, -1, space, size, final=True, label=f"result of `{e.callee}`")
        self.tiles[e.nid] = [tile] if tile is not None else []

    def _space(self, name: str, e: H.Expr) -> str | None:
        space = self.machine.space(name)
        if space is None:
            self.sink.emit(
                "E6002",
                f"`Memory::{name}` is not declared",
                e.span,
                notes=[f"declared spaces: {self.machine.declared_spaces()}"],
                help=did_you_mean(
                    name, [*self.machine.memories, *self.machine.aliases], "Memory::{}"
                ),
            )
        return space

    def _no_route(self, e: H.Transfer, topo: str | None, src: str, dst: str) -> None:
        where = f"`Topology::{topo}`" if topo else "any topology (host code)"
        topos = [self.machine.topologies[topo]] if topo else self.machine.topologies.values()
        edges = [h for t in topos for h in t.edges]
        from_src = [h.seam for h in edges if h.src == src]
        self.sink.emit(
            "E6001",
            f"no transfer route from `{src}` to `{dst}` over the edges of {where}",
            e.span,
            notes=[f"edges out of `{src}`: {', '.join(from_src) or 'none'}"],
            help=f"declare a `transfer Memory::{src} -> Memory::{dst} : COST` edge, or stage "
            "through a space that has one",
        )

    def _size(self, t: T.TensorT) -> _Size:
        n = T.SCALARS[t.elem]
        unbounded, used = [], []
        for d in t.dims:
            if isinstance(d, int):
                n *= d
            elif d in self.bounds:
                n *= max(self.bounds[d], 0)
                used.append(f"{d} <= {self.bounds[d]}")
            else:
                unbounded.append(d)
        return _Size(None if unbounded else n, unbounded, used)

    def _capacity(self, e: H.Expr, t: T.TensorT, size: _Size, spaces: list[str]) -> None:
        bounded = [self.machine.memories[s] for s in spaces if self.machine.memories[s].capacity]
        if size.bytes is None and bounded:
            # Name where the tensor lands when that space is bounded (the space the program
            # wrote), else the tightest space on the way: not merely the first hop's.
            dst = self.machine.memories[spaces[-1]]
            self._unverified(
                e, t, size, dst if dst.capacity else min(bounded, key=lambda m: m.capacity)
            )
            return
        for mem in bounded:
            if size.bytes is not None and size.bytes > mem.capacity:
                self._too_big(e, t, size, mem)

    def _unverified(self, e: H.Expr, t: T.TensorT, size: _Size, mem: Memory) -> None:
        names = list(dict.fromkeys(size.unbounded))  # `[n, n]` has one runtime dimension
        dims = ("dimension " if len(names) == 1 else "dimensions ") + ", ".join(
            f"`{d}`" for d in names
        )
        self.sink.emit(
            "W1029",
            f"`{_shape(t)}` has runtime {dims}: its size in `{mem.name}` "
            f"(capacity {mem.capacity} B, {human_size(mem.capacity)}) cannot be checked",
            e.span,
            help=f"bound it on the function: `where {size.unbounded[0]} <= ...`",
        )

    def _too_big(self, e: H.Expr, t: T.TensorT, size: _Size, mem: Memory) -> None:
        at_bound = f" at its bound ({', '.join(size.used)})" if size.used else ""
        self.sink.emit(
            "E6009",
            f"`{_shape(t)}` is {size.bytes} B ({human_size(size.bytes)}){at_bound}, larger "
            f"than `{mem.name}` (capacity {mem.capacity} B, {human_size(mem.capacity)})",
            e.span,
            help="split it into tiles that fit and transfer them one by one",
        )

    def _tile(
        self, e: H.Expr, hop: int, space: str, size: _Size, final: bool, label: str
    ) -> Tile | None:
        mem = self.machine.memories[space]
        if mem.managed == "cached" or not (mem.granule or mem.capacity):
            return None  # a cache, or a space of no bounded size: nothing to allocate
        granule = max(mem.granule, 1)
        slot = None if size.bytes is None else -(-size.bytes // granule) * granule
        if slot is not None and slot != size.bytes and slot > (mem.capacity or MAX_BYTES):
            self._rounded_too_big(e, size, slot, mem)
        return Tile(e.nid, hop, space, slot, final, e.span, label)

    def _rounded_too_big(self, e: H.Expr, size: _Size, slot: int, mem: Memory) -> None:
        """The tile fits, its granule-rounded slot does not (the slot is what the space
        gives it): E6009 against a capacity, E6014 past the IR's i64 sizes without one."""
        rounded = (
            f"{size.bytes} B, rounded up to `{mem.name}`'s granule of {mem.granule} B, "
            f"takes a slot of {slot} B ({human_size(slot)})"
        )
        if mem.capacity:
            self.sink.emit(
                "E6009",
                f"this tile of {rounded}, larger than `{mem.name}` (capacity {mem.capacity} B, "
                f"{human_size(mem.capacity)})",
                e.span,
                help="use a granule that divides the tile, or a smaller tile",
            )
        else:
            self.sink.emit(
                "E6014",
                f"this tile of {rounded}, past the {MAX_BYTES} B an IR size can hold",
                e.span,
                help=f"give `{mem.name}` a capacity or a smaller granule",
            )

    # ---- visibility --------------------------------------------------------------------
    def _call(self, e: H.Call, topo: str | None) -> None:
        if e.callee == "assert" and e.callee not in self.functions:
            for side in _compared_tensors(e.args[0] if e.args else None):
                self._visible(side, topo, "`assert`")
        elif (callee := self.functions.get(e.callee)) is not None and not callee.is_extern:
            return  # a Vx helper is checked in its caller's placements: its body reads or not
        elif e.callee in self.functions or e.callee == "matmul_acc":
            for a in e.args:
                self._visible(a, topo, f"`{e.callee}`")

    def _visible(self, a: H.Expr, topo: str | None, what: str) -> None:
        t = _tensor(a.ty)
        if t is None:
            return
        space = self.machine.space(t.space) or t.space
        seen = self.machine.topologies[topo].visible if topo else [CPU_DRAM]
        if space in seen:
            return
        core = f"`Topology::{topo}`" if topo else "host code"
        target = next((s for s in seen if s != CPU_DRAM), seen[0]) if seen else None
        self.sink.emit(
            "E6003",
            f"{core} cannot read `{space}`: this operand of {what} is `{t.show()}`",
            a.span,
            notes=[f"{core} sees: {', '.join(seen) or 'nothing'}"],
            help=f"transfer it into a visible space first (`transfer(..., Memory::{target})`)"
            if target
            else None,
        )


def _tensor(ty: T.Type | None) -> T.TensorT | None:
    """The tensor a value reads as: through borrows, and a token reads its buffer."""
    if ty is None:
        return None
    t = T.deref(ty)
    if isinstance(t, T.TokenT):
        t = t.inner
    return t if isinstance(t, T.TensorT) else None


def _compared_tensors(e: H.Expr | None) -> list[H.Expr]:
    """Tensor sides of the comparisons in an `assert` condition (`buf == v`)."""
    if not isinstance(e, H.Binary):
        return []
    if e.op in ("&&", "||"):
        return _compared_tensors(e.lhs) + _compared_tensors(e.rhs)
    if e.op in ("==", "!="):
        return [side for side in (e.lhs, e.rhs) if _tensor(side.ty) is not None]
    return []


def _shape(t: T.TensorT) -> str:
    return f"Tensor<{t.elem}, [{', '.join(str(d) for d in t.dims)}]>"


def check_placement(
    fn: Function, machine: Machine, functions: dict[str, Function], sink: DiagnosticSink
) -> FnPlacement:
    """Route, size, visibility-check and allocate one typechecked, non-extern function."""
    return _Placer(fn, machine, functions, sink).run()
