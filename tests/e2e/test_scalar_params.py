"""Scalar parameters (`i: i64`, `scale: f32`, `n: i32`) and scalar arithmetic on every
target (TARGETS.md: "scalar and shape parameters": SMEM scalars on the tpu, kernel
parameters on b200/h100, C arguments on the cpu). One program per effect, run where it
can run here: the cpu natively, the tpu in the Mosaic interpreter (and compiled by
libtpu), b200/h100 in the PTX simulator (and assembled by ptxas)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import vxc
from vxc import api, runtime

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

T = "Tensor<f32, [128, 128]>"

# Integer scalars index the Vec: the result is tiles[i + n * 2 - 1].
INDEX = f"""
fn k(tiles: &Vec<{T}>, i: i64, n: i64) -> {T} on Topology::TensorCore {{
  let j = i + (n * 2 - 1);
  let t = transfer(tiles[j], Memory::VMEM);
  return transfer(t, Memory::HBM);
}}
"""

# An f32 scalar's arithmetic and comparisons decide which tile is returned.
FLOAT = f"""
fn k(tiles: &Vec<{T}>, scale: f32, j: i64) -> {T} on Topology::TensorCore {{
  let mut i: i64 = 0;
  if scale * 2.0 - 1.0 > 3.0 / 2.0 {{
    i = j;
  }}
  if -scale != -scale {{
    i = 1;
  }}
  let t = transfer(tiles[i], Memory::VMEM);
  return transfer(t, Memory::HBM);
}}
"""

# Scalar f32 arithmetic in the body; lowered as SMEM scalar ops on the tpu (no branch).
FLOAT_ARITH = f"""
fn k(tiles: &Vec<{T}>, i: i64, scale: f32, m: i32) -> {T} on Topology::TensorCore {{
  let s = scale * 2.0 + 1.0 / scale - 0.5;
  let q = m * 3 + 1;
  let t = transfer(tiles[i], Memory::VMEM);
  return transfer(t, Memory::HBM);
}}
"""


def _analysis(text: str) -> api.Analysis:
    return api.analyze([api.Source("k.vx", text.encode())])


def _build(text: str, target: str, emit: str = "artifact", **kw) -> dict[str, bytes]:
    r = api.build(_analysis(text), target, emit, **kw)
    assert r.ok, [f"{d.code} {d.span.line}: {d.message}" for d in r.diagnostics]
    return r.outputs


def _tiles(n: int) -> np.ndarray:
    return np.arange(n * 128 * 128, dtype=np.float32).reshape(n, 128, 128)


def _nvidia(text: str, target: str, args: list) -> np.ndarray:
    from vxc.backends.nvidia import ptxsim

    (kernel,) = json.loads(_build(text, target)[f"k.{target}.json"])["kernels"]
    ptx = _build(text, target, "target-ir")[f"k.{target}.ptx"].decode()
    (out,) = ptxsim.run_kernel(ptx, kernel, args, 1)
    return out.reshape(128, 128)


@pytest.mark.parametrize(("i", "n"), [(0, 1), (2, 1), (0, 2), (3, -1)])
def test_integer_scalars_index_the_vec_on_every_target(i, n, tmp_path):
    tiles = _tiles(6)
    want = tiles[i + n * 2 - 1]
    cpu = runtime.load_outputs(_build(INDEX, "cpu"), tmp_path).k(tiles, i, n)
    np.testing.assert_array_equal(cpu, want)
    tpu = vxc.compile(INDEX, "tpu", filename="k.vx", interpret=True)
    np.testing.assert_array_equal(tpu(tiles, i, n), want)
    for target in ("b200", "h100"):
        np.testing.assert_array_equal(_nvidia(INDEX, target, [tiles, i, n]), want)


@pytest.mark.parametrize(("scale", "pick"), [(1.0, 0), (1.5, 2), (2.0, 2), (float("nan"), 1)])
def test_f32_scalar_arithmetic_and_comparisons_agree_on_cpu_and_nvidia(scale, pick, tmp_path):
    """1.0 * 2 - 1 = 1 is not > 1.5; 1.5 and 2.0 are; NaN compares false, and
    `-nan != -nan` is true (unordered), as IEEE and every target say."""
    tiles = _tiles(3)
    cpu = runtime.load_outputs(_build(FLOAT, "cpu"), tmp_path).k(tiles, np.float32(scale), 2)
    np.testing.assert_array_equal(cpu, tiles[pick])
    tpu = vxc.compile(FLOAT, "tpu", filename="k.vx", interpret=True)
    np.testing.assert_array_equal(tpu(tiles, np.float32(scale), 2), tiles[pick])
    for target in ("b200", "h100"):
        np.testing.assert_array_equal(_nvidia(FLOAT, target, [tiles, scale, 2]), tiles[pick])


@pytest.mark.parametrize("target", ["b200", "h100"])
def test_an_f32_parameter_is_a_kernel_parameter_ptxas_accepts(target, tmp_path):
    from vxc.backends.nvidia.validate import check_artifact

    files = _build(FLOAT, target)
    (k,) = json.loads(files[f"k.{target}.json"])["kernels"]
    (p,) = [p for p in k["params"] if p.get("arg") == "scale"]
    assert (p["kind"], p["value"]) == ("u64", "f32")  # its bits, in a u64 slot
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert check_artifact(tmp_path, target) == []
    ptx = _build(FLOAT, target, "target-ir")[f"k.{target}.ptx"].decode()
    assert "mul.rn.f32" in ptx and "div.rn.f32" in ptx and "setp.neu.f32" in ptx


def test_tpu_scalars_are_smem_scalar_prefetch_operands_libtpu_compiles():
    out = _build(FLOAT_ARITH, "tpu", tpu_aot="v5e,v6e")
    mosaic = out["k.tpu.mosaic.mlir"].decode()
    assert "scalar_prefetch = 3" in mosaic
    assert "memref<1xi32, #tpu.memory_space<smem>>" in mosaic
    assert "memref<1xf32, #tpu.memory_space<smem>>" in mosaic
    assert "arith.divf" in mosaic and "arith.mulf" in mosaic
    (k,) = json.loads(out["k.tpu.json"])["kernels"]
    assert [(p["name"], p["space"], p["dtype"]) for p in k["params"]] == [
        ("tiles", "HBM", "f32"),
        ("i", "SMEM", "i32"),
        ("scale", "SMEM", "f32"),
        ("m", "SMEM", "i32"),
    ]


def test_the_tpu_export_takes_the_parameters_in_vx_order():
    """The exported function takes (tiles, i, scale, m) as the Vx signature says; inside,
    the scalars become the custom call's leading SMEM operands."""
    from jax import export

    exp = export.deserialize(bytearray(_build(FLOAT_ARITH, "tpu")["k.tpu.jax_export"]))
    shapes = [(tuple(str(d) for d in a.shape), str(a.dtype)) for a in exp.in_avals]
    assert shapes == [
        (("tiles_len", "128", "128"), "float32"),
        ((), "int32"),
        ((), "float32"),
        ((), "int32"),
    ]


# A bool parameter (an SMEM i32 word 0/1) and an f32 one scaling nothing but the choice.
BOOL = f"""
fn k(flag: bool, tiles: &Vec<{T}>, j: i64) -> {T} on Topology::TensorCore {{
  let mut i: i64 = 0;
  if flag {{
    i = j;
  }}
  let t = transfer(tiles[i], Memory::VMEM);
  return transfer(t, Memory::HBM);
}}
"""


@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_scalar_is_an_smem_word(flag):
    tiles = _tiles(3)
    tpu = vxc.compile(BOOL, "tpu", filename="k.vx", interpret=True)
    np.testing.assert_array_equal(tpu(flag, tiles, 2), tiles[2 if flag else 0])
    (k,) = json.loads(_build(BOOL, "tpu")["k.tpu.json"])["kernels"]
    assert k["params"][0] == {"name": "flag", "dtype": "bool", "shape": [], "space": "SMEM"}


def test_an_unsupported_tpu_scalar_type_is_refused_by_name():
    r = api.build(_analysis(INDEX.replace("n: i64", "n: f16").replace("n * 2 - 1", "1")), "tpu")
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert d.code == "E7003" and "`n`" in d.message and "SMEM" in d.message, d.message
