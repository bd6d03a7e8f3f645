"""Checks run by vx_test against a `stream` kernel as Bazel built it.

VX_TARGET, VX_KERNEL and VX_ARTIFACT_DIR come from the vx_test rule. Every output must
carry the target in its name; then each kind of output gets the validation that exists
for it on this machine:
- a CPU artifact (manifest + shared library): the kernel runs on random tiles and is
  compared with numpy;
- a vx dialect module (.mlir): it verifies, names its target and prints back to the
  same text;
- a TPU artifact (manifest + jax export + Mosaic text): the Mosaic module verifies with
  the tpu dialect, libtpu compiles the export ahead of time for v5e and v6e, JAX
  deserializes and lowers it for platform tpu, and the interpreter's run matches numpy
  (and catches a deleted wait).
An output with no validation fails the test, so a vx_test never passes by doing nothing.
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


def test_every_output_names_the_target():
    assert FILES, f"empty artifact directory {ART}"
    for n in FILES:
        assert f".{TARGET}." in n, n


def test_every_output_has_a_validation():
    validated = set(MLIR)
    if CPU_ARTIFACT:
        validated |= {n for n in FILES if n.endswith((".json", ".so", ".o", ".h"))}
    if NVIDIA:
        validated |= {n for n in FILES if n.endswith((".fatbin", ".json"))}
    if TPU_ARTIFACT:
        validated |= {n for n in FILES if n.endswith((".json", ".jax_export", ".mosaic.mlir"))}
    assert set(FILES) == validated, f"no validation here for {sorted(set(FILES) - validated)}"


@pytest.mark.skipif(not CPU_ARTIFACT, reason="not a CPU artifact")
def test_manifest_names_the_kernel_function():
    (manifest,) = ART.glob("*.cpu.json")
    kernels = [k["name"] for k in json.loads(manifest.read_text())["kernels"]]
    assert kernels and all(k.startswith("stream") for k in kernels), kernels


@pytest.mark.skipif(not CPU_ARTIFACT, reason="not a CPU artifact")
@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_cpu_kernel_matches_numpy(n):
    from vxc import runtime

    (manifest,) = ART.glob("*.cpu.json")
    art = runtime.load(manifest)
    fn = getattr(art, json.loads(manifest.read_text())["kernels"][0]["name"])
    rng = np.random.default_rng(n)
    tiles = rng.standard_normal((n, 128, 128), dtype=np.float32)
    w = rng.standard_normal((128, 128), dtype=np.float32)
    ref = np.einsum("nik,kj->ij", tiles.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(fn(tiles, w), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.skipif(not MLIR, reason="no vx dialect module")
def test_vx_mlir_names_its_target_and_round_trips():
    from vxc.ir import parse_module, print_module

    for name in MLIR:
        text = (ART / name).read_text()
        assert f'vx.target = "{TARGET}"' in text
        assert print_module(parse_module(text)) == text


@pytest.mark.skipif(not NVIDIA, reason="not a b200/h100 artifact")
def test_nvidia_artifact_assembles_and_holds_tma_mbarrier_and_mma():
    """ptxas -v again on the fatbin's PTX (no spills), SASS with UTMALDG, SYNCS and
    HGMMA (h100) or UTCHMMA (b200); there is no GPU to run it on here."""
    from vxc.backends.nvidia.validate import check_artifact

    assert check_artifact(ART, TARGET) == []


@pytest.fixture(scope="module")
def tpu():
    from vxc.backends.tpu.validate import Artifact

    return Artifact.load(ART)


@pytest.mark.skipif(not TPU_ARTIFACT, reason="not a TPU artifact")
def test_tpu_mosaic_verifies_with_the_tpu_dialect(tpu):
    tpu.verify()


@pytest.mark.skipif(not TPU_ARTIFACT, reason="not a TPU artifact")
@pytest.mark.parametrize("topo", ["v5e", "v6e"])
def test_tpu_libtpu_compiles_the_export(tpu, topo):
    for n in (4, 300):
        stats = tpu.aot(topo, n).memory_analysis()
        assert stats.argument_size_in_bytes == (n + 1) * 128 * 128 * 4


@pytest.mark.skipif(not TPU_ARTIFACT, reason="not a TPU artifact")
def test_tpu_export_deserializes_and_lowers_for_tpu(tpu):
    assert "tpu_custom_call" in tpu.lower(8)


@pytest.mark.skipif(not TPU_ARTIFACT, reason="not a TPU artifact")
@pytest.mark.parametrize("n", [1, 2, 5])
def test_tpu_interpreted_run_matches_numpy(tpu, n):
    """The module libtpu compiled for n tiles, interpreted, against numpy."""
    rng = np.random.default_rng(n)
    tiles = (rng.integers(-8, 8, size=(n, 128, 128)) / 8).astype(np.float32)
    w = (rng.integers(-8, 8, size=(128, 128)) / 8).astype(np.float32)
    r = tpu.interpret([tiles, w])
    np.testing.assert_array_equal(r.outputs[0], sum(t @ w for t in tiles))


@pytest.mark.skipif(not TPU_ARTIFACT, reason="not a TPU artifact")
def test_tpu_interpreter_catches_a_deleted_wait(tpu):
    from vxc.backends.tpu.interp import InterpError, run

    lines = tpu.mosaic.splitlines()
    loop = next(j for j, x in enumerate(lines) if "scf.for" in x)
    k = next(i for i in range(loop, len(lines)) if "tpu.wait_dma2" in lines[i])
    bad = "\n".join(line for i, line in enumerate(lines) if i != k)
    tiles = np.ones((3, 128, 128), np.float32)
    with pytest.raises(InterpError, match="stale read"):
        run(bad, [tiles, np.ones((128, 128), np.float32)], ["tiles", "w"])
