"""`vxc report`: the cost table from the target plan and the roofline SVG.

The stream kernel's figures are derived by hand below (docs/PERFORMANCE.md repeats them):
with n = tiles.len() tiles of 128 x 128 f32 (64 KiB each), the kernel moves `w`, tile 0
and tiles 1..n-1 into VMEM (n + 1 transfers of 64 KiB) and the accumulator out once;
it runs n matmul_acc of 2 x 128^3 FLOP.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vxc import api
from vxc.errors import Unsupported
from vxc.report import entries
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted((ROOT / "kernels").glob("*.vx"))
TILE = 128 * 128 * 4
MATMUL = 2 * 128**3

# target -> (the device memory, its bandwidth in B/s as the model declares it (binary
# units), the declared peak in GFLOP/s, the hops the accumulator takes to HBM)
MODELS = {
    "cpu": ("CPU_DRAM", 40 << 30, 460, ["VMEM -> CPU_DRAM"]),
    "tpu": ("HBM", 819 << 30, 197_000, ["VMEM -> HBM"]),
    "b200": ("HBM", 8 << 40, 2_250_000, ["TMEM -> VMEM", "VMEM -> HBM"]),
    "h100": ("HBM", int(3.35 * (1 << 40)), 989_000, ["REG -> VMEM", "VMEM -> HBM"]),
}


def _report(path: Path | str, target: str, source: bytes | None = None, **kw) -> api.ReportResult:
    data = Path(path).read_bytes() if source is None else source
    return api.report(api.analyze([api.Source(str(path), data)]), target, **kw)


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("n", [1, 2, 64])
def test_stream_figures_match_the_hand_derivation(target, n):
    memory, bandwidth, peak_gflops, out_hops = MODELS[target]
    (r,) = _report(ROOT / "kernels" / "stream.vx", target, sizes={"tiles.len()": n}).reports
    dram = memory if target != "cpu" else "CPU_DRAM"
    inbound = f"{dram} -> VMEM"
    assert r.cost.moves[inbound] == n + 1 and r.cost.edges[inbound] == (n + 1) * TILE
    for hop in out_hops:
        key = hop.replace("HBM", dram) if target == "cpu" else hop
        assert r.cost.moves[key] == 1 and r.cost.edges[key] == TILE
    assert r.cost.flops == n * MATMUL and r.cost.matmuls == n
    assert r.memory == memory and r.bandwidth == bandwidth
    assert r.memory_bytes == (n + 2) * TILE
    assert r.intensity == pytest.approx(n * MATMUL / ((n + 2) * TILE))
    assert r.peak_flops == peak_gflops * 1e9
    assert r.ridge == pytest.approx(peak_gflops * 1e9 / bandwidth)
    expected = min(peak_gflops * 1e9, r.intensity * bandwidth)
    assert r.attainable == pytest.approx(expected)
    assert r.seconds == pytest.approx(
        max(n * MATMUL / (peak_gflops * 1e9), (n + 2) * TILE / bandwidth)
    )
    assert r.sizes == {"tiles.len()": n}


def test_stream_is_memory_bound_on_the_accelerators_and_compute_bound_on_the_cpu():
    """Intensity 64 FLOP/B (as n grows) sits below every accelerator's ridge (224 to 269
    FLOP/B) and above the cpu's (10.7): the plan's verdict, not a measurement."""
    verdicts = {t: _report(ROOT / "kernels" / "stream.vx", t).reports[0].bound_by for t in MODELS}
    assert verdicts == {"cpu": "compute", "tpu": "memory", "b200": "memory", "h100": "memory"}


def test_the_table_prints_the_derived_numbers():
    out = _report(ROOT / "kernels" / "stream.vx", "tpu").outputs["stream.tpu.report.txt"].decode()
    n = 1024
    assert "runtime sizes: tiles.len() = 1024" in out
    assert f"{(n + 1) * TILE:,}".replace(",", " ") + " B" in out
    assert f"{n * MATMUL:,}".replace(",", " ") in out
    assert "intensity           63.9 FLOP/B (ridge 224 FLOP/B)" in out
    assert "memory-bound: 56.2 TFLOP/s of 197 TFLOP/s peak (29 %), HBM 819 GB/s" in out
    # Each ring names its tiles: the variables they are bound to, else what makes them.
    assert "ring #0             VMEM: 1 slot in flight x 64 KiB (1 tile: `wv`)" in out
    assert "VMEM: 1 slot in flight x 64 KiB (1 tile: new tensor at line 8)" in out
    assert "VMEM: 2 slots in flight x 64 KiB (2 tiles: `inflight`, `next`)" in out


def test_a_grid_kernel_reports_the_whole_launch():
    """stream_grid with 4 instances of 512 tiles: each streams 128 bf16 tiles (32 KiB)
    and `w`. Its loop's bounds read `instance()`, so each instance is walked; they agree."""
    (r,) = _report(
        ROOT / "kernels" / "stream_grid.vx", "tpu", sizes={"tiles.len()": 512}, instances=4
    ).reports
    assert r.cost.moves["HBM -> VMEM"] == 4 * 129
    assert r.cost.edges["HBM -> VMEM"] == 4 * 129 * TILE // 2
    assert r.cost.flops == 4 * 128 * MATMUL and r.elements == ("bf16",)
    assert r.per_instance and r.instance_flops == (128 * MATMUL, 128 * MATMUL)
    assert r.seconds == pytest.approx(max(r.cost.flops / 197e12, r.memory_bytes / (819 << 30)))


# Instance i multiplies i + 1 tiles (a causal attention's triangle): each instance walked.
STAIRS = b"""
fn stairs(tiles: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]>
    on Topology::TensorCore where instances() == tiles.len() {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let last = instance();
  for j in 0 .. last + 1 {
    let t = transfer(tiles[j], Memory::VMEM);
    matmul_acc(&mut acc, &t, &wv);
  }
  return transfer(acc, Memory::HBM);
}
"""


def test_instances_whose_loops_differ_are_each_counted():
    (r,) = _report("stairs.vx", "tpu", STAIRS, sizes={"tiles.len()": 8}).reports
    assert r.instances == 8 and r.per_instance
    assert r.cost.matmuls == sum(i + 1 for i in range(8)) == 36
    assert r.cost.moves["HBM -> VMEM"] == 36 + 8  # the tiles and each instance's `w`
    assert r.instance_flops == (MATMUL, 8 * MATMUL)
    out = _report("stairs.vx", "tpu", STAIRS, sizes={"tiles.len()": 8}).outputs
    text = out["stairs.tpu.report.txt"].decode()
    assert "a launch of 8 instances (each walked: its cost depends on `instance()`)" in text
    assert "per instance" in text and "4 194 304 to 33 554 432 FLOPs" in text


TRIANGLE = b"""
fn tri(tiles: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  for i in 0..tiles.len() {
    for j in 0..i {
      let t = transfer(tiles[j], Memory::VMEM);
      matmul_acc(&mut acc, &t, &wv);
    }
  }
  return transfer(acc, Memory::HBM);
}
"""


def test_a_loop_bound_that_depends_on_the_outer_variable_is_counted_per_iteration():
    (r,) = _report("tri.vx", "cpu", TRIANGLE, sizes={"tiles.len()": 10}).reports
    assert r.cost.matmuls == 45  # sum of i for i < 10
    assert r.cost.moves["CPU_DRAM -> VMEM"] == 46 and not r.cost.bound


BRANCH = b"""
fn pick(x: &Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>, k: i64) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  if k > 3 {
    let xv = transfer(x, Memory::VMEM);
    matmul_acc(&mut acc, &xv, &wv);
  }
  return transfer(acc, Memory::HBM);
}
"""


def test_a_branch_on_a_known_size_is_taken_and_on_an_unknown_one_is_an_upper_bound():
    (taken,) = _report("pick.vx", "cpu", BRANCH, sizes={"k": 5}).reports
    (skipped,) = _report("pick.vx", "cpu", BRANCH, sizes={"k": 2}).reports
    assert (taken.cost.matmuls, skipped.cost.matmuls) == (1, 0)
    assert not taken.cost.bound and not skipped.cost.bound
    assert taken.sizes == {"k": 5}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda p: p.name)
def test_every_kernel_reports_for_every_target(kernel, target):
    result = _report(kernel, target)
    assert result.ok, result.diagnostics
    stem = kernel.stem
    names = [r.kernel for r in result.reports]
    assert names == entries(
        api.analyze([api.Source(str(kernel), kernel.read_bytes())]).program.functions
    )
    assert names and all(r.memory_bytes > 0 for r in result.reports)
    # seed.vx declares its own one-argument `matmul_acc` as an extern: opaque, no FLOPs;
    # seed_vx.vx writes it as a Vx helper that only takes the tile: no FLOPs either.
    plotted = [r.kernel for r in result.reports if r.cost.flops]
    assert plotted == ([] if kernel.name in ("seed.vx", "seed_vx.vx") else names)
    table = result.outputs[f"{stem}.{target}.report.txt"].decode()
    svg = result.outputs[f"{stem}.{target}.roofline.svg"]
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for name in names:
        assert f"{name} ({kernel.name}) on {target}" in table
        assert name in texts  # each kernel is a labelled point
    circles = list(root.iter("{http://www.w3.org/2000/svg}circle"))
    assert len(circles) == len(plotted)


def test_the_svg_is_deterministic_and_marks_the_ridge():
    a = _report(ROOT / "kernels" / "stream.vx", "b200").outputs["stream.b200.roofline.svg"]
    b = _report(ROOT / "kernels" / "stream.vx", "b200").outputs["stream.b200.roofline.svg"]
    assert a == b
    text = a.decode()
    assert "ridge 256 FLOP/B" in text and "HBM 8 TB/s" in text
    assert "63.9 FLOP/B, ≤ 562 TFLOP/s (25 % of peak)" in text


TWO = (ROOT / "kernels" / "stream.vx").read_bytes() + (
    ROOT / "kernels" / "stream_blocking.vx"
).read_bytes()


def test_an_extern_call_is_counted_as_a_call_not_as_flops():
    (r,) = _report(ROOT / "kernels" / "seed.vx", "tpu", sizes={"tiles.len()": 8}).reports
    assert r.cost.externs == {"matmul_acc": 8} and r.cost.flops == 0
    assert r.cost.moves == {"HBM -> VMEM": 8}


def test_two_kernels_in_one_source_are_two_points():
    result = _report("two.vx", "h100", TWO)
    root = ET.fromstring(result.outputs["two.h100.roofline.svg"])
    assert len(list(root.iter("{http://www.w3.org/2000/svg}circle"))) == 2
    assert [r.kernel for r in result.reports] == ["stream", "stream_blocking"]


def test_a_program_with_errors_reports_its_diagnostics_and_no_files():
    bad = b"fn k(x: &Tensor<f32, [256, 256]>) -> Tensor<f32, [256, 256]> on Topology::TensorCore {\n  return transfer(transfer(x, Memory::VMEM), Memory::HBM);\n}\n"
    result = _report("k.vx", "b200", bad)
    assert not result.ok and [d.code for d in result.diagnostics] == ["E6009"]
    assert result.outputs == {}


HELPER = b"""
fn load2(x: &Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>, acc: &mut Tensor<f32, [128, 128]>) on Topology::TensorCore {
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  matmul_acc(acc, &xv, &wv);
}
fn outer(xs: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  for i in 0..xs.len() {
    load2(&xs[i], w, &mut acc);
  }
  return transfer(acc, Memory::HBM);
}
"""


def test_a_helper_call_counts_the_helper_body_and_lists_its_rings():
    result = _report("h.vx", "tpu", HELPER, sizes={"xs.len()": 3})
    (r,) = result.reports  # load2 is a helper, not a kernel entry
    assert r.kernel == "outer" and r.cost.moves["HBM -> VMEM"] == 6 and r.cost.matmuls == 3
    assert [ring.function for ring in r.rings] == ["outer"] + ["load2<HBM, HBM, ACC>"] * 2
    assert (
        "ring #1 of load2<HBM, HBM, ACC> VMEM: 1 slot in flight x 64 KiB"
        in result.outputs["h.tpu.report.txt"].decode()
    )


TRIANGLE_HELPER = b"""
fn row(tiles: &Vec<Tensor<f32, [128, 128]>>, acc: &mut Tensor<f32, [128, 128]>, wv: &Tensor<f32, [128, 128]>, i: i64) on Topology::TensorCore {
  for j in 0..i {
    let t = transfer(tiles[j], Memory::VMEM);
    matmul_acc(acc, &t, wv);
  }
}
fn tri2(tiles: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  for i in 0..tiles.len() {
    row(tiles, &mut acc, &wv, i);
  }
  return transfer(acc, Memory::HBM);
}
"""


def test_a_helper_whose_loop_depends_on_the_callers_loop_variable_is_counted_per_call():
    (r,) = _report("t2.vx", "cpu", TRIANGLE_HELPER, sizes={"tiles.len()": 10}).reports
    assert r.cost.matmuls == 45


def test_a_loop_too_long_to_walk_one_by_one_is_a_plain_error():
    with pytest.raises(Unsupported, match=r"runs 2000000 times"):
        _report("tri.vx", "cpu", TRIANGLE, sizes={"tiles.len()": 2_000_000})


def test_sizes_not_given_are_chosen_to_satisfy_the_where_clauses():
    """attention's `n == h * s` and `instances() == h * (s / 128)`: 1024 for every size
    would launch a kernel its clauses refuse; the report solves for n and the grid."""
    (r,) = _report(ROOT / "kernels" / "attention.vx", "cpu").reports
    assert r.sizes == {"h": 1024, "n": 1024 * 1024, "s": 1024}
    assert r.instances == 1024 * (1024 // 128)
    (g,) = _report(ROOT / "kernels" / "gemm.vx", "cpu", sizes={"m": 256, "n": 384}).reports
    assert (g.sizes["m"], g.sizes["n"], g.instances) == (256, 384, 2 * 3)


def test_given_sizes_the_where_clauses_rule_out_are_an_error():
    with pytest.raises(Unsupported, match=r"rule out the launch given \(m=100\)"):
        _report(ROOT / "kernels" / "gemm.vx", "cpu", sizes={"m": 100})
    with pytest.raises(Unsupported, match="--instances 5"):
        _report(ROOT / "kernels" / "gemm.vx", "cpu", sizes={"m": 256, "n": 256}, instances=5)
