"""The generated PTX, run by a functional simulator of one CTA (ptxsim.py), against
numpy: the TMA boxes and swizzle, the ring slots and mbarrier phases, the
descriptors, the transposed B copy, the MMA accumulation and both epilogues. Inputs
are small integers, exact in tf32 / bf16 with an f32 accumulator, so results must
match exactly. Mutated PTX (a wrong swizzle, a wrong phase, a wrong box) must fail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import ptxsim  # beside this file (pytest puts the directory on sys.path)
import pytest

from vxc import api
from vxc.backends.nvidia import ptx_text
from vxc.ir.from_hir import lower_program
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[3]


def _ptx(target: str, name: str):
    src = ROOT / "kernels" / f"{name}.vx"
    checked = api.check_target(api.analyze([api.Source(str(src), src.read_bytes())]), target)
    _, ptx, kernels = ptx_text(
        lower_program(checked.analysis.program, checked.plan), TARGETS[checked.target]
    )
    return ptx, kernels[0]


def _inputs(kernel: dict, n: int, seed: int):
    p = next(p for p in kernel["params"] if p.get("arg") == "tiles" and p["kind"] == "tensormap")
    rows, cols = p["tile"]
    rng = np.random.default_rng(seed)
    tiles = rng.integers(-3, 4, (n, rows, cols)).astype(np.float32)
    w = rng.integers(-3, 4, (cols, 128)).astype(np.float32)
    if p["dtype"] == "bf16":
        import ml_dtypes

        return tiles.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)
    return tiles, w


def _expected(tiles, w, instances: int, grid: bool) -> np.ndarray:
    t, w = tiles.astype(np.float64), w.astype(np.float64)
    if not grid:  # every instance computes the whole sum
        return np.stack([t.sum(0) @ w] * instances)
    per = len(t) // instances
    return np.stack([t[k * per : (k + 1) * per].sum(0) @ w for k in range(instances)])


def _run(target, name, n, instances, mutate=None, seed=0):
    ptx, k = _ptx(target, name)
    if mutate:
        ptx = mutate(ptx)
    tiles, w = _inputs(k, n, seed)
    (out,) = ptxsim.run_kernel(ptx, k, [tiles, w], instances)
    return out, _expected(tiles, w, instances, name.startswith("stream_grid"))


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_stream_kernel_computes_the_sum(target):
    out, ref = _run(target, "stream", 3, 1)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["h100", "b200"])
@pytest.mark.parametrize(
    ("name", "n", "instances"),
    [("stream_grid", 7, 3), ("stream_triple", 5, 1), ("stream_blocking", 2, 2), ("stream", 1, 1)],
)
def test_kernels_compute_their_sums(target, name, n, instances):
    out, ref = _run(target, name, n, instances, seed=n)
    np.testing.assert_array_equal(out, ref)


def _bad(target, name, n, mutate):
    try:
        out, ref = _run(target, name, n, 1, mutate)
    except ptxsim.SimError as e:
        return str(e)
    assert not np.array_equal(out, ref), "the mutated kernel still computes the right sum"
    return "mismatch"


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_the_simulator_catches_a_wrong_swizzle_in_the_transposed_b_copy(target):
    # Drop the XOR of the transposing copy: B lands unswizzled, the MMA reads garbage.
    def mutate(ptx: str) -> str:
        lines = ptx.splitlines()
        i = next(i for i, x in enumerate(lines) if "xor.b32" in x and "tcopy" not in x)
        return "\n".join(lines[:i] + lines[i + 1 :]) + "\n"

    assert _bad(target, "stream", 2, mutate)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["h100", "b200"])
def test_the_simulator_catches_a_wrong_phase_and_a_wrong_box(target):
    # Every TMA wait's parity forced to 0: from the third tile on, a wait passes on the
    # phase its slot completed two tiles earlier and reads the old tile.
    def phase(ptx: str) -> str:
        lines = ptx.splitlines()
        regs = {x.split(",")[-1].strip(" ;") for x in lines if "mbarrier.try_wait.parity" in x}
        for j, x in enumerate(lines):
            parts = x.split()
            if parts[:1] == ["and.b32"] and parts[1].rstrip(",") in regs and x.endswith(", 1;"):
                lines[j] = x.replace(", 1;", ", 0;")
        return "\n".join(lines) + "\n"

    assert _bad(target, "stream", 5, phase)

    # The second box of each A tile loaded from the first box's columns.
    def box(ptx: str) -> str:
        return ptx.replace("[%rd1, {32,", "[%rd1, {0,")

    assert _bad(target, "stream", 2, box)


@pytest.mark.parametrize("target", ["b200"])
def test_more_instances_than_tiles_is_the_where_status(target):
    ptx, k = _ptx(target, "stream_grid")
    tiles, w = _inputs(k, 1, 0)
    with pytest.raises(ptxsim.SimError, match="status word 7"):
        ptxsim.run_kernel(ptx, k, [tiles, w], 2)


BF16_N256 = """
fn mm(tiles: &Vec<Tensor<bf16, [128, 64]>>, w: &Tensor<bf16, [64, 256]>) -> Tensor<f32, [128, 256]> on Topology::TensorCore {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 256]), Memory::ACC);
  for i in 0..tiles.len() {
    let cur = transfer(tiles[i], Memory::VMEM);
    matmul_acc(&mut acc, &cur, &wv);
  }
  return transfer(acc, Memory::HBM);
}
"""


@pytest.mark.slow
def test_b200_bf16_with_n_256_and_k_64():
    import ml_dtypes

    checked = api.check_target(api.analyze([api.Source("mm.vx", BF16_N256.encode())]), "b200")
    _, ptx, (k,) = ptx_text(
        lower_program(checked.analysis.program, checked.plan), TARGETS[checked.target]
    )
    rng = np.random.default_rng(5)
    tiles = rng.integers(-3, 4, (3, 128, 64)).astype(ml_dtypes.bfloat16)
    w = rng.integers(-3, 4, (64, 256)).astype(ml_dtypes.bfloat16)
    (out,) = ptxsim.run_kernel(ptx, k, [tiles, w], 1)
    ref = tiles.astype(np.float64).sum(0) @ w.astype(np.float64)
    np.testing.assert_array_equal(out[0], ref)
