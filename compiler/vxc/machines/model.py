"""Machine models: Memory and Topology declarations resolved into a routing graph."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from vxc.diagnostics import DiagnosticSink, Span
from vxc.diagnostics.suggest import did_you_mean
from vxc.frontend import ast as A

CPU_DRAM = "CPU_DRAM"  # built in: host memory, where a host-called kernel's arguments start
MEMORY_FACETS = {
    "within": "memory",
    "capacity": "size",
    "bandwidth": "rate",
    "granule": "size",
    "managed": "word",
    "scope": "word",
    "alias": "memory",
}
MANAGED = {"explicit", "cached"}
SCOPES = {"device", "cluster", "sm", "cta", "subcore", "thread"}


@dataclass
class Memory:
    name: str
    span: Span
    within: str | None = None
    capacity: int = 0  # bytes; 0 = unbounded
    granule: int = 0
    bandwidth: int = 0
    managed: str = "explicit"  # LANGUAGE.md 2: a cache must say `managed: cached`
    scope: str = "device"


@dataclass(frozen=True)
class Hop:
    src: str  # canonical space names (aliases resolved)
    dst: str
    cost: int
    relaxed: bool
    span: Span
    declared: str = ""  # "SMEM -> TMEM" as the model wrote it, for messages

    @property
    def seam(self) -> str:
        return self.declared or f"{self.src} -> {self.dst}"


@dataclass
class Topology:
    name: str
    span: Span
    memory: str | None = None
    visible: list[str] = field(default_factory=list)
    edges: list[Hop] = field(default_factory=list)
    # The device's dense bf16 matrix peak in GFLOP/s (all its cores: the roofline of
    # `vxc report` sets it against the device memory's `bandwidth`); 0 = not declared.
    peak_gflops: int = 0


# Topology facets other than `transfer` edges, and the kind of value each takes.
TOPOLOGY_FACETS = {"memory": "memory", "visible": "list", "peak_gflops": "int"}


@dataclass
class Machine:
    memories: dict[str, Memory] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)

    def declared_spaces(self) -> str:
        """The spaces a program may name, aliases with what they stand for:
        `ACC, HBM, SMEM (alias of VMEM), VMEM`."""
        named = {n: n for n in self.memories}
        named.update({a: f"{a} (alias of {self.space(a) or t})" for a, t in self.aliases.items()})
        return ", ".join(named[n] for n in sorted(named)) or "none"

    def space(self, name: str) -> str | None:
        """Canonical name of a memory space (following aliases), or None if undeclared."""
        name = self.aliases.get(name, name)
        return name if name in self.memories else None

    def route(self, topology: str | None, src: str, dst: str) -> list[Hop] | None:
        """Cheapest hop chain src -> dst over the topology's edges (all edges for host code).

        Ties break on the hop names, then on declaration order (two equal-cost edges
        between the same spaces: the first declared), so the route and hence the IR are
        deterministic; Hops themselves are never compared.
        """
        src, dst = self.space(src) or src, self.space(dst) or dst
        if src == dst:
            return []
        graph: dict[str, list[Hop]] = {}
        for hop in self._edges(topology):
            graph.setdefault(hop.src, []).append(hop)
        pushed = itertools.count()
        queue: list[tuple[int, tuple[str, ...], int, str, list[Hop]]] = [
            (0, (src,), next(pushed), src, [])
        ]
        done: set[str] = set()
        while queue:
            cost, names, _, here, hops = heapq.heappop(queue)
            if here == dst:
                return hops
            if here in done:
                continue
            done.add(here)
            for hop in graph.get(here, []):
                if hop.dst not in done:
                    entry = (cost + hop.cost, names + (hop.dst,), next(pushed), hop.dst)
                    heapq.heappush(queue, (*entry, hops + [hop]))
        return None

    def _edges(self, topology: str | None) -> list[Hop]:
        if topology is not None and topology in self.topologies:
            return self.topologies[topology].edges
        return [h for t in self.topologies.values() for h in t.edges]


def build_machine(decls: list[A.Node], sink: DiagnosticSink) -> Machine:
    """Later declarations replace earlier ones of the same name (program over --machine
    over the target model). Reports E0205, E6002, E6007, E6013 and W1027."""
    m = Machine()
    m.memories[CPU_DRAM] = Memory(CPU_DRAM, A.NO_SPAN, managed="cached", scope="device")
    order: dict[str, int] = {}  # space -> position of the declaration that stands
    for k, d in enumerate(decls):
        if isinstance(d, A.MemoryDecl):
            _memory(m, d, sink)
            order[d.name] = k
        elif isinstance(d, A.TopologyDecl):
            _topology(m, d, sink)
    _within_cycles(m, sorted(order, key=order.__getitem__), sink)
    _validate(m, sink)
    return m


def _within_cycles(m: Machine, order: list[str], sink: DiagnosticSink) -> None:
    """E6006 at the declaration that closes a `within` cycle (LANGUAGE.md 2: a tree).

    Edges are added in declaration order; one that would close a cycle is reported and
    dropped, so each cycle is reported once and the relation left behind is a tree."""
    parent: dict[str, str] = {}
    for name in order:
        mem = m.memories.get(name)
        up = m.space(mem.within) if mem is not None and mem.within is not None else None
        if up is None:
            continue
        chain = [name, up]
        while chain[-1] != name and chain[-1] in parent:
            chain.append(parent[chain[-1]])
        if chain[-1] != name:
            parent[name] = up
            continue
        path = " within ".join(f"`{n}`" for n in chain)
        others = [m.memories[n] for n in dict.fromkeys(chain) if n != name]
        sink.emit(
            "E6006",
            f"`{name}` is within itself: {path}",
            mem.span,
            notes=[
                f"`{o.name}` is declared within `{o.within}` at {o.span.file}:{o.span.line}"
                for o in others
            ],
            help="`within` names the enclosing space and the spaces form a tree: remove "
            "the `within` that closes the cycle",
        )
        mem.within = None


def _memory(m: Machine, d: A.MemoryDecl, sink: DiagnosticSink) -> None:
    mem = Memory(d.name, d.span)
    for f in d.facets:
        want = MEMORY_FACETS.get(f.name)
        if want is None:
            sink.emit(
                "E0205",
                f"unknown Memory facet `{f.name}`",
                f.span,
                notes=[f"facets are: {', '.join(sorted(MEMORY_FACETS))}"],
            )
        elif f.kind != want and not (want == "size" and f.kind == "int" and f.value == 0):
            sink.emit("E0205", f"facet `{f.name}` needs a {want}, not a {f.kind}", f.span)
        elif f.name == "alias":
            m.aliases[d.name] = f.value
            m.memories.pop(d.name, None)
            return
        elif f.name == "managed" and f.value not in MANAGED:
            sink.emit("E0205", f"`managed` is `explicit` or `cached`, not `{f.value}`", f.span)
        elif f.name == "scope" and f.value not in SCOPES:
            sink.emit(
                "E0205",
                f"unknown scope `{f.value}`",
                f.span,
                notes=[f"scopes are: {', '.join(sorted(SCOPES))}"],
            )
        else:
            setattr(mem, f.name, f.value)
    _granule_fits(mem, d, sink)
    m.aliases.pop(d.name, None)
    m.memories[d.name] = mem


def _granule_fits(mem: Memory, d: A.MemoryDecl, sink: DiagnosticSink) -> None:
    """E6013 at the facet: a granule above the capacity leaves room for no tile at all, and
    every slot rounded up to it would lie past the space (the IR verifier's ring check)."""
    if not (mem.capacity and mem.granule > mem.capacity):
        return
    facet = next(f for f in reversed(d.facets) if f.name == "granule")
    sink.emit(
        "E6013",
        f"`{d.name}`'s granule ({mem.granule} B) is larger than its capacity "
        f"({mem.capacity} B): no tile fits",
        facet.span,
        help=f"use a granule of at most {mem.capacity} B, the allocation unit of `{d.name}`",
    )
    mem.granule = 0  # reported: the space's tiles are still checked against its capacity


def _topology(m: Machine, d: A.TopologyDecl, sink: DiagnosticSink) -> None:
    topo = Topology(d.name, d.span)
    for f in d.facets:
        want = TOPOLOGY_FACETS.get(f.name)
        if want is None or f.kind != want:
            sink.emit(
                "E0205",
                f"invalid Topology facet `{f.name}`",
                f.span,
                notes=[
                    "facets are `memory: Memory::X`, `visible: [Memory::X, ...]`, "
                    "`peak_gflops: N` (the dense bf16 peak, GFLOP/s) "
                    "and `transfer Memory::A -> Memory::B : COST [relaxed|sync]`"
                ],
            )
        elif f.name == "peak_gflops" and f.value <= 0:
            sink.emit(
                "E0205",
                f"`peak_gflops` must be positive, not {f.value}",
                f.span,
                help="give the device's dense bf16 peak in GFLOP/s (TPU v5e: 197000), "
                "or leave the facet out",
            )
        elif f.name == "visible":
            topo.visible = list(f.value)
        else:
            setattr(topo, f.name, f.value)
    topo.edges = [Hop(e.src, e.dst, e.cost, e.relaxed, e.span) for e in d.edges]
    m.topologies[d.name] = topo


def _validate(m: Machine, sink: DiagnosticSink) -> None:
    for mem in m.memories.values():
        if mem.within is None:
            continue
        parent = m.space(mem.within)
        if parent is None:
            sink.emit(
                "E6002",
                f"`Memory::{mem.within}` is not declared",
                mem.span,
                notes=[f"declared spaces: {m.declared_spaces()}"],
                help=did_you_mean(mem.within, [*m.memories, *m.aliases], "Memory::{}"),
            )
        elif m.memories[parent].capacity and mem.capacity > m.memories[parent].capacity:
            p = m.memories[parent]
            sink.emit(
                "E6007",
                f"`{mem.name}` ({mem.capacity} B) is larger than its parent "
                f"`{p.name}` ({p.capacity} B)",
                mem.span,
                help=f"lower `{mem.name}`'s capacity or place it within a larger space",
            )
    for topo in m.topologies.values():
        names = ([topo.memory] if topo.memory else []) + topo.visible
        names += [n for h in topo.edges for n in (h.src, h.dst)]
        for n in dict.fromkeys(names):
            if m.space(n) is None:
                sink.emit(
                    "E6002",
                    f"`Memory::{n}` is not declared",
                    topo.span,
                    notes=[f"in Topology `{topo.name}`", f"declared spaces: {m.declared_spaces()}"],
                    help=did_you_mean(n, [*m.memories, *m.aliases], "Memory::{}"),
                )
        resolved = []
        for h in topo.edges:
            if m.space(h.src) is None or m.space(h.dst) is None:
                continue  # reported above (E6002); no route may pass an undeclared space
            src, dst = m.space(h.src), m.space(h.dst)
            hop = Hop(src, dst, h.cost, h.relaxed, h.span, f"{h.src} -> {h.dst}")
            resolved.append(hop)
            if hop.relaxed:
                sink.emit(
                    "W1027",
                    f"transfer edge `{hop.seam}` is relaxed: data crossing it is "
                    "not published with a release",
                    h.span,
                    notes=["every read after this seam is proved with z3 (E6004)"],
                )
        topo.edges = resolved
        topo.visible = [m.space(v) or v for v in topo.visible]
        if topo.memory:
            topo.memory = m.space(topo.memory) or topo.memory
