"""Checks run by vx_test against the `stream_grid` kernel (kernels/stream_grid.vx).

A CPU artifact runs as N = 1, 2 and 7 instances (`K_launch`) against numpy; a vx
dialect module (any target) carries the launch. What each instance computes is the
kernel's own split: instance k sums tiles[k*per, k*per + per) @ w with
per = len // N, so when N does not divide the tile count the last len - N*per
tiles are in no share; more instances than tiles is refused (VX_ERR_WHERE).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

TARGET = os.environ["VX_TARGET"]
ART = Path(os.environ["VX_ARTIFACT_DIR"])
FILES = sorted(p.name for p in ART.iterdir())
CPU_ARTIFACT = TARGET == "cpu" and any(n.endswith(".cpu.json") for n in FILES)
MLIR = [n for n in FILES if n.endswith(f".{TARGET}.mlir")]
NVIDIA = TARGET in ("b200", "h100") and any(n.endswith(f".{TARGET}.fatbin") for n in FILES)
TPU_ARTIFACT = TARGET == "tpu" and any(n.endswith(".tpu.jax_export") for n in FILES)


def test_every_output_has_a_validation():
    assert FILES, f"empty artifact directory {ART}"
    validated = set(MLIR)
    if CPU_ARTIFACT:
        validated |= {n for n in FILES if n.endswith((".json", ".so", ".o", ".h"))}
    if NVIDIA:
        validated |= {n for n in FILES if n.endswith((".fatbin", ".json"))}
    if TPU_ARTIFACT:
        validated |= {n for n in FILES if n.endswith((".json", ".jax_export", ".mosaic.mlir"))}
    assert set(FILES) == validated, f"no validation here for {sorted(set(FILES) - validated)}"


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bf16 as raw uint16 bits (the top half of an f32; exact for small integers)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def expected(tiles: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    per = len(tiles) // n
    return np.stack([tiles[k * per : k * per + per].sum(axis=0) @ w for k in range(n)])


@pytest.fixture(scope="module")
def kernel():
    from vxc import runtime

    (manifest,) = ART.glob("*.cpu.json")
    return runtime.load(manifest).stream_grid


@pytest.mark.skipif(not CPU_ARTIFACT, reason="not a CPU artifact")
@pytest.mark.parametrize(("tiles", "n"), [(12, 1), (12, 2), (14, 7), (11, 2), (10, 7)])
def test_grid_matches_numpy(kernel, tiles, n):
    rng = np.random.default_rng(tiles * 10 + n)
    t = rng.integers(-3, 4, (tiles, 128, 128)).astype(np.float64)
    w = rng.integers(-3, 4, (128, 128)).astype(np.float64)
    out = kernel.launch(bf16_bits(t), bf16_bits(w), instances=n)
    assert out.shape == (n, 128, 128) and out.dtype == np.float32
    np.testing.assert_array_equal(out, expected(t, w, n))  # small integers: exact


@pytest.mark.skipif(not CPU_ARTIFACT, reason="not a CPU artifact")
def test_bad_launches_are_exceptions(kernel):
    from vxc import runtime

    t = bf16_bits(np.ones((3, 128, 128)))
    w = bf16_bits(np.eye(128))
    with pytest.raises(runtime.LaunchError, match="VX_ERR_LAUNCH"):
        kernel.launch(t, w, instances=0)
    with pytest.raises(runtime.LaunchError, match="VX_ERR_WHERE"):
        kernel.launch(t, w, instances=4)  # more instances than tiles


@pytest.mark.skipif(not MLIR, reason="no vx dialect module")
def test_vx_mlir_carries_the_launch():
    from vxc.ir import parse_module, print_module

    for name in MLIR:
        text = (ART / name).read_text()
        assert f'vx.target = "{TARGET}"' in text and 'vx.launch = "instances"' in text
        assert '"vx.instance"()' in text and '"vx.instances"()' in text
        assert print_module(parse_module(text)) == text


@pytest.mark.skipif(not CPU_ARTIFACT, reason="not a CPU artifact")
def test_manifest_has_the_launch_entry_point():
    (manifest,) = ART.glob("*.cpu.json")
    (k,) = json.loads(manifest.read_text())["kernels"]
    assert k["launch_symbol"] == "stream_grid_launch"
    assert k["requires"] == ["instances() <= tiles.len()"]


@pytest.mark.skipif(not NVIDIA, reason="not a b200/h100 artifact")
def test_nvidia_artifact_assembles_and_holds_tma_mbarrier_and_mma():
    """ptxas -v again on the fatbin's PTX (no spills), SASS with UTMALDG, SYNCS and
    HGMMA (h100) or UTCHMMA (b200); there is no GPU to run it on here."""
    from vxc.backends.nvidia.validate import check_artifact

    assert check_artifact(ART, TARGET) == []


@pytest.mark.skipif(not TPU_ARTIFACT, reason="not a TPU artifact")
@pytest.mark.parametrize("n", [2, 7])
def test_tpu_grid_matches_numpy(n):
    """The artifact's grid (its manifest's instances; 0 = a plain call): libtpu compiles
    it for v5e, and the module it compiled, interpreted, gives each instance's share."""
    import ml_dtypes

    from vxc.backends.tpu.validate import Artifact

    art = Artifact.load(ART)
    art.verify()
    inst = art.kernel.instances
    if n < max(inst, 1):
        pytest.skip("more instances than tiles: the clause the caller must keep")
    rng = np.random.default_rng(n)
    tiles = (rng.integers(-8, 8, size=(n, 128, 128)) / 8).astype(ml_dtypes.bfloat16)
    w = (rng.integers(-8, 8, size=(128, 128)) / 8).astype(ml_dtypes.bfloat16)
    out = art.interpret([tiles, w]).outputs[0]
    want = expected(tiles.astype(np.float32), w.astype(np.float32), max(inst, 1))
    np.testing.assert_array_equal(out, want if inst else want[0])
