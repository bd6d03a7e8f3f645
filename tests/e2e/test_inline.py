"""Vx helpers inlined into their kernels on every target (vxc/ir/passes/inline.py): one pass on
the vx dialect before the backends, so no backend lowers a call to a Vx helper.

Each program runs where it can: the cpu natively, the tpu in the Mosaic interpreter,
b200/h100 in the PTX simulator (tests/backends/nvidia/ptxsim.py), against numpy. Inputs
are small integers (exact in tf32 and in f32 sums)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime
from vxc.ir.from_hir import lower_program
from vxc.ir.passes.inline import inline_helpers, recursive

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("cpu", "tpu", "b200", "h100")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

T = "Tensor<f32, [128, 128]>"

# A helper called twice, a helper calling it (nested), both taking the accumulator `&mut`.
NESTED = f"""
fn acc_into(acc: &mut {T}, x: &{T}, w: &{T}) on Topology::TensorCore {{
  matmul_acc(acc, x, w);
}}
fn twice(acc: &mut {T}, x: &{T}, w: &{T}) on Topology::TensorCore {{
  acc_into(acc, x, w);
  acc_into(acc, x, w);
}}
fn k(x: &{T}, w: &{T}) -> {T} on Topology::TensorCore {{
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  twice(&mut acc, &xv, &wv);
  acc_into(&mut acc, &xv, &wv);
  return transfer(acc, Memory::HBM);
}}
"""

# A helper with tiles of its own (its frame is stacked above the caller's), called twice.
OWN_TILES = f"""
fn mac(acc: &mut {T}, x: &{T}, w: &{T}) on Topology::TensorCore {{
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  matmul_acc(acc, &xv, &wv);
}}
fn k(x: &{T}, w: &{T}) -> {T} on Topology::TensorCore {{
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  mac(&mut acc, x, w);
  mac(&mut acc, w, x);
  return transfer(acc, Memory::HBM);
}}
"""

# A returned token produced in both branches of an `if`: both land in the caller's ring.
BRANCHES = f"""
fn pick(tiles: &Vec<{T}>, i: i64, first: bool) -> Token<{T}, Memory::VMEM> on Topology::TensorCore {{
  if first {{
    return transfer_async(tiles[0], Memory::VMEM);
  }}
  return transfer_async(tiles[i], Memory::VMEM);
}}
fn k(tiles: &Vec<{T}>) -> {T} on Topology::TensorCore {{
  let mut inflight = pick(tiles, 0, true);
  for i in 1..tiles.len() {{
    let next = pick(tiles, i, false);
    let cur = wait(inflight);
    inflight = next;
  }}
  return transfer(wait(inflight), Memory::HBM);
}}
"""

RECURSIVE = f"""
fn tri(n: i64) -> i64 on Topology::TensorCore {{
  if n <= 0 {{
    return 0;
  }}
  return n + tri(n - 1);
}}
fn k(x: &{T}) -> {T} on Topology::TensorCore {{
  let t = transfer(x, Memory::VMEM);
  let s = tri(3);
  return transfer(t, Memory::HBM);
}}
fn sum_to(n: i64) -> i64 {{
  return tri(n);
}}
"""


def _analysis(text: str) -> api.Analysis:
    return api.analyze([api.Source("k.vx", text.encode())])


def _build(text: str, target: str, emit: str = "artifact") -> dict[str, bytes]:
    r = api.build(_analysis(text), target, emit)
    assert r.ok, [f"{d.code} {d.span.line}: {d.message}" for d in r.diagnostics]
    return r.outputs


def _ints(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)


def _run(text: str, target: str, args: list[np.ndarray], names: list[str], tmp_path) -> np.ndarray:
    """kernel `k` of `text` on `args`, as `target` runs it here."""
    if target == "cpu":
        return runtime.load_outputs(_build(text, target), tmp_path).k(*args)
    if target == "tpu":
        from vxc.backends.tpu.interp import run

        return run(_build(text, target)["k.tpu.mosaic.mlir"].decode(), args, names).outputs[0]
    from vxc.backends.nvidia import ptxsim

    (kernel,) = json.loads(_build(text, target)[f"k.{target}.json"])["kernels"]
    ptx = _build(text, target, "target-ir")[f"k.{target}.ptx"].decode()
    (out,) = ptxsim.run_kernel(ptx, kernel, args, 1)
    return out.reshape(out.shape[-2:])


def _calls(text: str, target: str) -> list[str]:
    checked = api.check_target(_analysis(text), target)
    module = inline_helpers(lower_program(checked.analysis.program, checked.plan))
    return [line for line in str(module).splitlines() if "call @" in line]


@pytest.mark.parametrize("target", TARGETS)
def test_a_helper_called_twice_and_a_nested_one_accumulate_through_mut(target, tmp_path):
    x, w = _ints(128, 128, seed=1), _ints(128, 128, seed=2)
    got = _run(NESTED, target, [x, w], ["x", "w"], tmp_path)
    np.testing.assert_array_equal(got, 3 * (x.astype(np.float64) @ w))
    assert _calls(NESTED, target) == []  # three calls, two levels: all inlined


@pytest.mark.parametrize("target", TARGETS)
def test_a_helper_with_tiles_of_its_own_gets_a_frame_above_the_caller(target, tmp_path):
    x, w = _ints(128, 128, seed=3), _ints(128, 128, seed=4)
    got = _run(OWN_TILES, target, [x, w], ["x", "w"], tmp_path)
    np.testing.assert_array_equal(got, x.astype(np.float64) @ w + w.astype(np.float64) @ x)


# Two helpers with tiles of their own of different layouts, called by one kernel.
TWO_HELPERS = f"""
fn mac(acc: &mut {T}, x: &{T}, w: &{T}) on Topology::TensorCore {{
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  matmul_acc(acc, &xv, &wv);
}}
fn mac_half(acc: &mut Tensor<f32, [64, 128]>, x: &Tensor<f32, [64, 128]>, w: &{T}) on Topology::TensorCore {{
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  matmul_acc(acc, &xv, &wv);
}}
fn k(x: &{T}, h: &Tensor<f32, [64, 128]>, w: &{T}) -> {T} on Topology::TensorCore {{
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let mut half = transfer(Tensor<f32>([64, 128]), Memory::ACC);
  mac(&mut acc, x, w);
  mac_half(&mut half, h, w);
  mac(&mut acc, x, w);
  return transfer(acc, Memory::HBM);
}}
"""


def test_two_helpers_frames_take_ring_ids_of_their_own(tmp_path):
    """Was an IR verifier error: both helpers' ring 0 became one ring of the kernel with
    two layouts (a 64 KiB and a 32 KiB slot)."""
    x, h, w = _ints(128, 128, seed=5), _ints(64, 128, seed=6), _ints(128, 128, seed=7)
    got = _run(TWO_HELPERS, "cpu", [x, h, w], ["x", "h", "w"], tmp_path)
    np.testing.assert_array_equal(got, 2 * (x.astype(np.float64) @ w))


def test_the_frame_sits_above_every_ring_of_the_caller():
    """cpu: ACC is VMEM, so the caller's accumulator (ring 0 at offset 0) and the two
    copies of the helper's two tiles share VMEM: the copies start after the accumulator,
    with ring ids of their own after the caller's, and share their bytes (one call runs
    after the other)."""
    checked = api.check_target(_analysis(OWN_TILES), "cpu")
    module = inline_helpers(lower_program(checked.analysis.program, checked.plan))
    rings = sorted(
        (op.attributes["ring"].value, op.attributes["offset"].value)
        for op in module.body.operations[0].regions[0].blocks[0].operations
        if "ring" in op.attributes and op.attributes["ring"].value >= 0
    )
    assert rings == [(0, 0), (1, 65536), (2, 131072), (3, 65536), (4, 131072)]
    assert [f.attributes["sym_name"].value for f in module.body.operations] == ["k"]


# Not tpu: its backend has no `scf.if` lowering yet (E7001, with or without helpers).
@pytest.mark.parametrize("target", ["cpu", "b200", "h100"])
@pytest.mark.parametrize("n", [1, 3])
def test_a_token_returned_from_both_branches_lands_in_the_callers_ring(target, n, tmp_path):
    tiles = _ints(n, 128, 128, seed=n)
    got = _run(BRANCHES, target, [tiles], ["tiles"], tmp_path)
    np.testing.assert_array_equal(got, tiles[-1])


def test_recursion_is_found_on_the_call_graph():
    graph = {"k": {"f"}, "f": {"g"}, "g": {"f"}, "h": {"h"}, "leaf": set()}
    assert recursive(graph) == {"f", "g", "h"}


@pytest.mark.parametrize("target", ["tpu", "b200", "h100"])
def test_a_recursive_helper_is_refused_at_its_call_on_device_targets(target):
    r = api.build(_analysis(RECURSIVE.replace("fn sum_to", "fn _host_only")), target)
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert d.code == "E7002" and not r.outputs
    assert "recursive" in d.message or "calls itself" in d.message, d.message
    assert d.span.line == 10  # `tri(3)` in the kernel: the helper itself is not inlined


def test_a_recursive_helper_stays_a_call_on_the_cpu(tmp_path):
    lib = runtime.load_outputs(_build(RECURSIVE, "cpu"), tmp_path)
    assert lib.sum_to(4) == 10
    x = _ints(128, 128)
    np.testing.assert_array_equal(lib.k(x), x)
    assert [c.split("@")[1].split("(")[0] for c in _calls(RECURSIVE, "cpu")] == [
        "tri",
        "tri",
        "tri",
    ]


BIG_CONSTANT = f"""
fn shift(i: i64) -> i64 on Topology::TensorCore {{
  return i + 5000000000;
}}
fn k(x: &{T}) -> {T} on Topology::TensorCore {{
  let t = transfer(x, Memory::VMEM);
  let j = shift(1);
  return transfer(t, Memory::HBM);
}}
"""


def test_a_refusal_inside_an_inlined_helper_names_its_line_and_the_call():
    r = api.build(_analysis(BIG_CONSTANT), "tpu")
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert d.code == "E7008", d
    assert (d.span.line, d.span.column) == (3, 14)  # `5000000000`, in the helper
    assert d.notes == ["inlined from the call at k.vx:7:11"]


OVERFLOW = f"""
fn load_w(acc: &mut {T}, x: &{T}, w: &{T}) on Topology::TensorCore {{
  let wv = transfer(w, Memory::VMEM);
  matmul_acc(acc, x, &wv);
}}
fn k(a: &{T}, b: &{T}, c: &{T}, w: &{T}) -> {T} on Topology::TensorCore {{
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let av = transfer(a, Memory::VMEM);
  let bv = transfer(b, Memory::VMEM);
  let cv = transfer(c, Memory::VMEM);
  load_w(&mut acc, &av, w);
  load_w(&mut acc, &bv, w);
  load_w(&mut acc, &cv, w);
  return transfer(acc, Memory::HBM);
}}
"""


def test_a_helper_frame_that_overflows_the_callers_space_is_e6010_at_the_call():
    """h100: three 64 KiB tiles of the caller's and the helper's 64 KiB one pass 228 KB
    shared memory only apart; inlined, they do not fit, and the build says where."""
    r = api.build(_analysis(OVERFLOW), "h100")
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert d.code == "E6010" and not r.outputs, d
    assert d.span.line == 11 and "load_w" in d.message and "VMEM" in d.message
