"""Placement checks (LANGUAGE.md §7, §5 rule 5) through the real frontend and machine models.

Every case names its target, its source and the exact (code, line) of every
diagnostic the whole pipeline (parse, typecheck, ownership, machine, placement)
reports for it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from vxc.diagnostics import DiagnosticSink
from vxc.frontend.parser import parse_source
from vxc.hir import nodes as H
from vxc.hir.ownership import check_ownership
from vxc.hir.program import Function
from vxc.hir.typecheck import typecheck
from vxc.machines.model import Machine, build_machine
from vxc.plan import plan_target
from vxc.plan.placement import FnPlacement, check_placement, where_bounds
from vxc.targets import model_source

ROOT = Path(__file__).resolve().parents[2]
TILE = 128 * 128 * 4  # one f32 128x128 tile: 64 KiB

CONSUME = "extern fn consume(t: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore;\n"


@dataclass
class Compiled:
    sink: DiagnosticSink
    functions: dict[str, Function]
    machine: Machine
    placed: dict[str, FnPlacement]

    @property
    def codes(self) -> list[tuple[str, int]]:
        return sorted((d.code, d.span.line) for d in self.sink.items)

    def nodes(self, fn: str, kind: type = H.Transfer) -> list:
        """The placements of `fn`'s Transfer (or TensorNew) nodes, in source order."""
        found: list[H.Expr] = []
        _collect(self.functions[fn].decl.body, kind, found)
        return [self.placed[fn].of(n) for n in found]


def _collect(node: object, kind: type, out: list) -> None:
    if isinstance(node, kind):
        out.append(node)
    if isinstance(node, list):
        for x in node:
            _collect(x, kind, out)
    elif isinstance(node, H.Node):
        for value in vars(node).values():
            if isinstance(value, H.Node | list):
                _collect(value, kind, out)


def compile_vx(target: str, source: str) -> Compiled:
    sink = DiagnosticSink()
    path, data = model_source(target)
    model = parse_source(data, path, sink)
    module = parse_source(textwrap.dedent(source).encode(), "test.vx", sink)
    assert model is not None and module is not None, [d.message for d in sink.items]
    program = typecheck(module.items, model.items, sink)
    check_ownership(program.functions, sink)
    machine = build_machine([*model.items, *program.decls], sink)
    placed = plan_target(target, program.functions, machine, sink).functions
    return Compiled(sink, program.functions, machine, placed)


# ---- sources ---------------------------------------------------------------------------
IN_PLACE_ASYNC = """\
fn k(x: &Tensor<f32, [128, 128]>) -> void on Topology::TensorCore {
  let v = transfer(x, Memory::VMEM);
  let t = transfer_async(v, Memory::VMEM);
  let w = wait(t);
}
"""
SEED = (ROOT / "kernels" / "seed.vx").read_text()

HOST_STAGING = """\
fn host(x: Tensor<f32, [128, 128]>) -> void {
  let t = transfer(x, Memory::VMEM);
}
"""

HOST_TMEM = """\
fn host(x: Tensor<f32, [128, 128]>) -> void {
  let tok = transfer_async(x, Memory::TMEM);
  let t = wait(tok);
}
"""

NO_ROUTE = """\
Memory SPARE { capacity: 1 MB, granule: 1 KB, managed: explicit }
fn k(x: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore {
  let s = transfer(x, Memory::SPARE);
}
"""

UNKNOWN_SPACE = """\
fn k(x: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore {
  let s = transfer(x, Memory::TMEM);
}
"""

UNKNOWN_TOPOLOGY = """\
fn k(x: Tensor<f32, [128, 128]>) -> void on Topology::Vector {
  let s = transfer(x, Memory::VMEM);
}
"""

# HBM operands: the TPU core sees VMEM and SMEM only; the B200 core sees HBM too.
MATMUL_HBM = """\
fn k(acc: &mut Tensor<f32, [128, 128]>, a: Tensor<f32, [128, 128]>,
     b: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore {
  matmul_acc(acc, a, b);
}
"""

MATMUL_VMEM = """\
fn k(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let mut acc = Tensor<f32>([128, 128]);
  let a = transfer(tiles[0], Memory::VMEM);
  let b = transfer(tiles[1], Memory::VMEM);
  matmul_acc(&mut acc, a, b);
}
"""

ASSERT_HBM = """\
fn k(x: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore {
  assert(x == 1.0);
  let v = transfer(x, Memory::VMEM);
  assert(v == 1.0);
}
"""

HOST_CALLS_DEVICE_TILE = (
    CONSUME
    + """\
fn host(x: Tensor<f32, [128, 128]>) -> void {
  let v = transfer(x, Memory::VMEM);
  consume(v);
}
"""
)

SPAWN_VISIBILITY = (
    CONSUME
    + """\
fn host(x: Tensor<f32, [128, 128]>, y: Tensor<f32, [128, 128]>) -> void {
  spawn on(Topology::TensorCore) {
    let v = transfer(x, Memory::VMEM);
    consume(v);
    consume(y);
  }
}
"""
)

TOO_BIG = """\
fn k(x: Tensor<f32, [512, 512]>) -> void on Topology::TensorCore {
  let v = transfer(x, Memory::VMEM);
}
"""

FOUR_IN_FLIGHT = (
    CONSUME
    + """\
fn four(a: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let t0 = transfer_async(a[0], Memory::VMEM);
  let t1 = transfer_async(a[1], Memory::VMEM);
  let t2 = transfer_async(a[2], Memory::VMEM);
  let t3 = transfer_async(a[3], Memory::VMEM);
  consume(wait(t0));
  consume(wait(t1));
  consume(wait(t2));
  consume(wait(t3));
}
"""
)

# Waited and dead tiles free their bytes: never more than two live at once.
FOUR_IN_SEQUENCE = (
    CONSUME
    + """\
fn four(a: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let t0 = transfer_async(a[0], Memory::VMEM);
  let t1 = transfer_async(a[1], Memory::VMEM);
  consume(wait(t0));
  let t2 = transfer_async(a[2], Memory::VMEM);
  consume(wait(t1));
  let t3 = transfer_async(a[3], Memory::VMEM);
  consume(wait(t2));
  consume(wait(t3));
}
"""
)

DYNAMIC = """\
fn k(x: &Vec<Tensor<f32, [n, 128]>>, n: i64) -> void on Topology::TensorCore {
  let t = transfer(x[0], Memory::VMEM);
}
"""

DYNAMIC_BOUNDED = """\
fn k(x: &Vec<Tensor<f32, [n, 128]>>, n: i64) -> void on Topology::TensorCore where n <= 256 {
  let t = transfer(x[0], Memory::VMEM);
}
"""

DYNAMIC_STRICT_BOUND = """\
fn k(x: &Vec<Tensor<f32, [n, 128]>>, n: i64) -> void on Topology::TensorCore where n < 257 {
  let t = transfer(x[0], Memory::VMEM);
}
"""

DYNAMIC_BOUND_TOO_BIG = """\
fn k(x: &Vec<Tensor<f32, [n, 128]>>, n: i64) -> void on Topology::TensorCore
    where 4096 >= n {
  let t = transfer(x[0], Memory::VMEM);
}
"""

# LANGUAGE.md §2: a program declares its own space and core. The cheapest route to
# CMEM is two hops through VMEM (50 + 10), not the direct edge (500).
PROGRAM_MACHINE = """\
Memory CMEM { within: Memory::HBM, capacity: 8 MB, granule: 512 B,
              managed: explicit, scope: sm }
Topology Stager {
  memory: Memory::CMEM,
  visible: [Memory::CMEM],
  transfer Memory::HBM -> Memory::CMEM : 500,
  transfer Memory::HBM -> Memory::VMEM : 50,
  transfer Memory::VMEM -> Memory::CMEM : 10,
  transfer Memory::CMEM -> Memory::HBM : 40 relaxed
}
extern fn eat(t: Tensor<f32, [64, 64]>) -> void on Topology::Stager;
fn stage(x: Tensor<f32, [64, 64]>) -> void on Topology::Stager {
  let c = transfer(x, Memory::CMEM);
  eat(c);
}
fn direct(x: Tensor<f32, [64, 64]>) -> void on Topology::Stager {
  eat(x);
}
"""

CHILD_TOO_BIG = """\
Memory HUGE { within: Memory::VMEM, capacity: 1 GB }
fn f() -> void {
}
"""

# A tile kept across a loop that keeps refilling its ring: the kept one gets its own ring.
KEEP_FIRST = (
    CONSUME
    + """\
fn keep(a: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let mut t = transfer(a[0], Memory::VMEM);
  let first = t;
  for i in 1..a.len() {
    t = transfer(a[i], Memory::VMEM);
    consume(t);
  }
  consume(first);
}
"""
)

# One transfer's tile may be kept across any number of runs of the same transfer:
# no fixed rotation is safe.
KEEP_ANY = (
    CONSUME
    + """\
fn keep(a: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let mut keep = transfer(a[0], Memory::VMEM);
  for i in 1..a.len() {
    let t = transfer(a[i], Memory::VMEM);
    if i == 3 {
      consume(keep);
      keep = t;
    } else {
      consume(t);
    }
  }
  consume(keep);
}
"""
)

DEEP_PIPELINE = (
    CONSUME
    + """\
fn deep(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let mut a = transfer_async(tiles[0], Memory::VMEM);
  let mut b = transfer_async(tiles[1], Memory::VMEM);
  for i in 2..tiles.len() {
    let next = transfer_async(tiles[i], Memory::VMEM);
    consume(wait(a));
    a = b;
    b = next;
  }
  consume(wait(a));
  consume(wait(b));
}
"""
)

CASES = [
    # (id, target, source, expected (code, line) of every diagnostic)
    ("seed-tpu", "tpu", SEED, []),
    ("seed-b200", "b200", SEED, []),
    ("seed-cpu", "cpu", SEED, []),
    ("host-staging-tpu", "tpu", HOST_STAGING, []),
    ("host-tmem-b200", "b200", HOST_TMEM, []),
    ("E6001-no-route", "tpu", NO_ROUTE, [("E6001", 3)]),
    ("E6002-unknown-space", "tpu", UNKNOWN_SPACE, [("E6002", 2)]),
    ("E6002-unknown-topology", "tpu", UNKNOWN_TOPOLOGY, [("E6002", 1)]),
    ("E6003-matmul-hbm-tpu", "tpu", MATMUL_HBM, [("E6003", 3)] * 3),
    ("matmul-hbm-b200", "b200", MATMUL_HBM, []),
    ("matmul-vmem-tpu", "tpu", MATMUL_VMEM, []),
    ("E6003-assert-hbm-tpu", "tpu", ASSERT_HBM, [("E6003", 2)]),
    ("E6003-host-calls-vmem", "tpu", HOST_CALLS_DEVICE_TILE, [("E6003", 4)]),
    ("E6003-spawn", "tpu", SPAWN_VISIBILITY, [("E6003", 6)]),
    ("E6009-b200", "b200", TOO_BIG, [("E6009", 2)]),
    ("fits-tpu", "tpu", TOO_BIG, []),
    ("four-in-flight-tpu", "tpu", FOUR_IN_FLIGHT, []),
    ("E6010-four-in-flight-b200", "b200", FOUR_IN_FLIGHT, [("E6010", 6)]),
    ("four-in-sequence-b200", "b200", FOUR_IN_SEQUENCE, []),
    ("W1029-dynamic", "b200", DYNAMIC, [("W1029", 2)]),
    ("dynamic-bounded", "b200", DYNAMIC_BOUNDED, []),
    ("dynamic-strict-bound", "b200", DYNAMIC_STRICT_BOUND, []),
    ("E6009-at-bound", "b200", DYNAMIC_BOUND_TOO_BIG, [("E6009", 3)]),
    ("program-machine", "tpu", PROGRAM_MACHINE, [("E6003", 17), ("W1027", 9)]),
    ("E6007-child-too-big", "b200", CHILD_TOO_BIG, [("E6007", 1)]),
    ("keep-first-split", "tpu", KEEP_FIRST, []),
    ("E6010-keep-any", "tpu", KEEP_ANY, [("E6010", 5)]),
    ("deep-pipeline", "tpu", DEEP_PIPELINE, []),
]


@pytest.mark.parametrize(
    "target,source,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_diagnostics(target: str, source: str, expected: list[tuple[str, int]]) -> None:
    assert compile_vx(target, source).codes == sorted(expected)


def _seams(c: Compiled, fn: str) -> list[list[str]]:
    return [[h.seam for h in p.hops] for p in c.nodes(fn)]


def test_seed_gets_one_ping_pong_ring() -> None:
    c = compile_vx("tpu", SEED)
    placed = c.placed["stream"]
    assert len(placed.rings) == 1
    ring = placed.rings[0]
    assert (ring.space, ring.slots, ring.slot_bytes) == ("VMEM", 2, TILE)
    assert ring.slot_offsets == [0, 65536]
    for node in c.nodes("stream"):
        assert [h.seam for h in node.hops] == ["HBM -> VMEM"]
        assert node.allocs == [node.alloc]
        assert (node.alloc.offset, node.alloc.slots, node.alloc.ring) == (0, 2, 0)
    assert placed.working_set == {"VMEM": 2 * TILE}


def test_seed_on_cpu_routes_from_aliased_hbm() -> None:
    c = compile_vx("cpu", SEED)
    assert _seams(c, "stream") == [["CPU_DRAM -> VMEM"]] * 2
    assert c.placed["stream"].rings[0].slot_offsets == [0, 65536]


def test_two_hop_tpu_staging_from_host() -> None:
    c = compile_vx("tpu", HOST_STAGING)
    (node,) = c.nodes("host")
    assert [h.seam for h in node.hops] == ["CPU_DRAM -> HBM", "HBM -> VMEM"]
    assert node.allocs[0] is None  # HBM is cached: nothing to allocate
    assert node.allocs[1] == node.alloc and node.alloc.slot_bytes == TILE
    attrs = node.ops  # one vx.transfer per hop
    assert len(attrs) == 2
    assert attrs[0]["ring"] == -1 and attrs[0]["from"] == "CPU_DRAM"
    assert attrs[0]["space"] == "HBM" and attrs[0]["within"] == ""
    assert attrs[0]["edge_cost"] == 100
    assert (attrs[1]["space"], attrs[1]["within"], attrs[1]["granule"]) == ("VMEM", "HBM", 4096)
    assert (attrs[1]["capacity"], attrs[1]["scope"]) == (128 << 20, "subcore")
    assert (attrs[1]["offset"], attrs[1]["slots"], attrs[1]["slot_bytes"]) == (0, 1, TILE)


def test_three_hop_b200_staging_into_tmem() -> None:
    c = compile_vx("b200", HOST_TMEM)
    (node,) = c.nodes("host")
    assert [h.seam for h in node.hops] == ["CPU_DRAM -> HBM", "HBM -> VMEM", "VMEM -> TMEM"]
    staging, final = node.allocs[1], node.allocs[2]
    assert node.allocs[0] is None and final == node.alloc
    assert (staging.space, staging.slot_bytes) == ("VMEM", TILE)  # 1 KB granule
    assert (final.space, final.slot_bytes) == ("TMEM", TILE)  # 16 KB granule
    assert staging.ring != final.ring
    # The staging tile lives until the `wait`: it is part of the VMEM working set.
    assert c.placed["host"].working_set == {"VMEM": TILE, "TMEM": TILE}


def test_program_declared_machine_routes_cheapest_two_hops() -> None:
    c = compile_vx("tpu", PROGRAM_MACHINE)
    (node,) = c.nodes("stage")
    assert [h.seam for h in node.hops] == ["HBM -> VMEM", "VMEM -> CMEM"]
    assert node.alloc.space == "CMEM" and node.alloc.slot_bytes == 64 * 64 * 4
    assert node.allocs[0].space == "VMEM"


def test_granule_rounding_and_new_tensor_home() -> None:
    c = compile_vx("tpu", MATMUL_VMEM)
    (acc,) = c.nodes("k", H.TensorNew)
    assert acc.space == "VMEM" and acc.hops == [] and acc.alloc.slot_bytes == TILE
    (attrs,) = acc.ops  # the vx.zeros
    assert attrs["ring"] == acc.alloc.ring and attrs["slot_bytes"] == TILE
    # acc, a and b are all live at the matmul: three rings, three distinct base offsets.
    offsets = sorted(r.offset for r in c.placed["k"].rings)
    assert offsets == [0, TILE, 2 * TILE]


def test_dead_tiles_share_bytes() -> None:
    c = compile_vx("b200", FOUR_IN_SEQUENCE)
    placed = c.placed["four"]
    assert placed.working_set == {"VMEM": 2 * TILE}
    assert placed.footprint == {"VMEM": 2 * TILE}
    assert [r.offset for r in placed.rings] == [0, TILE, 0, TILE]


def test_four_in_flight_working_set() -> None:
    tpu = compile_vx("tpu", FOUR_IN_FLIGHT)
    assert tpu.placed["four"].working_set == {"VMEM": 4 * TILE}
    b200 = compile_vx("b200", FOUR_IN_FLIGHT)
    (diag,) = b200.sink.items
    assert "262144 B (256 KiB)" in diag.message and "230400 B (225 KiB)" in diag.message
    assert diag.notes == [
        "live in VMEM here: `t0` (64 KiB, line 3), `t1` (64 KiB, line 4), `t2` (64 KiB, "
        "line 5), this transfer_async (64 KiB, line 6)"
    ]


def test_e6009_names_space_and_sizes() -> None:
    (diag,) = compile_vx("b200", TOO_BIG).sink.items
    assert diag.message == (
        "`Tensor<f32, [512, 512]>` is 1048576 B (1 MiB), larger than `VMEM` "
        "(capacity 230400 B, 225 KiB)"
    )


def test_where_bound_sizes_the_tile() -> None:
    c = compile_vx("b200", DYNAMIC_BOUNDED)
    (node,) = c.nodes("k")
    assert node.bytes == 256 * 128 * 4 and node.alloc.slot_bytes == 256 * 128 * 4


def test_unverified_tile_takes_the_rest() -> None:
    c = compile_vx("b200", DYNAMIC)
    (node,) = c.nodes("k")
    assert node.bytes is None
    assert (node.alloc.offset, node.alloc.slot_bytes) == (0, 230400)


def test_split_ring_for_kept_tile() -> None:
    placed = compile_vx("tpu", KEEP_FIRST).placed["keep"]
    assert [(r.slots, r.offset) for r in placed.rings] == [(1, 0), (1, TILE)]


def test_deep_pipeline_three_slots() -> None:
    placed = compile_vx("tpu", DEEP_PIPELINE).placed["deep"]
    (ring,) = placed.rings
    assert ring.slots == 3 and ring.slot_offsets == [0, TILE, 2 * TILE]


@pytest.mark.parametrize(
    "clause,bound",
    [("n <= 512", 512), ("n < 513", 512), ("512 >= n", 512), ("n <= 9 && n < 4", 3)],
)
def test_where_bounds(clause: str, bound: int) -> None:
    sink = DiagnosticSink()
    src = f"fn k(n: i64) -> void where {clause} {{\n}}\n"
    module = parse_source(src.encode(), "w.vx", sink)
    program = typecheck(module.items, [], sink)
    assert where_bounds(program.functions["k"].decl.where) == {"n": bound}


def test_check_placement_single_function() -> None:
    c = compile_vx("tpu", SEED)
    sink = DiagnosticSink()
    placed = check_placement(c.functions["stream"], c.machine, c.functions, sink)
    assert sink.items == [] and placed.rings[0].slots == 2


TWO_TO_TMEM = """\
fn host(x: Tensor<f32, [128, 128]>, y: Tensor<f32, [128, 128]>) -> void {
  let t0 = transfer_async(x, Memory::TMEM);
  let t1 = transfer_async(y, Memory::TMEM);
  let a = wait(t0);
  let b = wait(t1);
}
"""


@pytest.mark.parametrize(
    "source,vmem",
    [
        (TWO_TO_TMEM, 2 * TILE),  # both staging tiles stay live until their `wait`
        (
            TWO_TO_TMEM.replace("_async", "").replace("wait(t0)", "t0").replace("wait(t1)", "t1"),
            TILE,
        ),
    ],
    ids=["async", "blocking"],
)
def test_staging_tiles_live_until_the_route_completes(source: str, vmem: int) -> None:
    c = compile_vx("b200", source)
    assert c.codes == []
    assert c.placed["host"].working_set == {"VMEM": vmem, "TMEM": 2 * TILE}


def test_lowering_view() -> None:
    """What ir/from_hir.py copies onto the vx ops: the plan's `ops` per node."""
    c = compile_vx("tpu", MATMUL_VMEM)
    placed = c.placed["k"]
    transfers: list[H.Expr] = []
    _collect(c.functions["k"].decl.body, H.Transfer, transfers)
    node = placed.of(transfers[0])
    ((hop, alloc),) = zip(node.hops, node.allocs, strict=True)
    assert hop.seam == "HBM -> VMEM" and alloc == node.alloc
    (op,) = node.ops
    assert (op["space"], op["from"], op["ring"], op["slot_bytes"]) == ("VMEM", "HBM", 1, TILE)
    news: list[H.Expr] = []
    _collect(c.functions["k"].decl.body, H.TensorNew, news)
    new = placed.of(news[0])
    assert new.alloc.ring == new.ops[0]["ring"] and new.hops == []


def test_async_transfer_in_place_is_one_complete_token() -> None:
    """A transfer_async into the space the tensor is already in: no hop, one op."""
    c = compile_vx("tpu", IN_PLACE_ASYNC)
    assert c.codes == []
    _, node = c.nodes("k")
    assert node.hops == [] and node.routed
    (op,) = node.ops
    assert (op["space"], op["from"], op["edge_cost"], op["ring"]) == ("VMEM", "VMEM", 0, -1)
