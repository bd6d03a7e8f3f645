"""kernels/seed_vx.vx: the seed's `stream` verbatim, its one-argument `matmul_acc` a Vx
helper (TARGETS.md: a helper is inlined into its kernel on every target). It builds for
cpu, tpu, b200 and h100; `stream_last` (the seed's loop over a helper that returns the
token) runs on the cpu natively, on the tpu in the Mosaic interpreter and on b200/h100
in the PTX simulator, and returns numpy's last tile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime

ROOT = Path(__file__).resolve().parents[2]
SEED_VX = ROOT / "kernels" / "seed_vx.vx"
TARGETS = ("cpu", "tpu", "b200", "h100")

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")


def _build(target: str) -> api.BuildResult:
    src = api.Source("kernels/seed_vx.vx", SEED_VX.read_bytes())
    return api.build(api.analyze([src]), target)


def _tiles(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(-8, 8, size=(n, 128, 128)) / 8).astype(np.float32)


@pytest.fixture(scope="module")
def built():
    cache: dict[str, api.BuildResult] = {}

    def get(target: str) -> api.BuildResult:
        if target not in cache:
            cache[target] = _build(target)
        return cache[target]

    return get


@pytest.mark.parametrize("target", TARGETS)
def test_seed_vx_builds_for_every_target(target, built):
    r = built(target)
    assert r.ok, [f"{d.code} {d.span.line}: {d.message}" for d in r.diagnostics]
    manifest = next(json.loads(v) for k, v in r.outputs.items() if k.endswith(".json"))
    # Both kernels, and no helper: `matmul_acc` and `fetch` were inlined.
    assert sorted(k["name"] for k in manifest["kernels"]) == ["stream", "stream_last"]


def test_the_helpers_are_gone_from_the_cpu_object(built, tmp_path):
    """Inlined: no `matmul_acc` or `fetch` symbol is defined in the object."""

    ll = _build_ir("cpu")
    assert "define" in ll
    assert "@matmul_acc" not in ll and "fetch" not in ll


def _build_ir(target: str) -> str:
    src = api.Source("kernels/seed_vx.vx", SEED_VX.read_bytes())
    r = api.build(api.analyze([src]), target, emit="target-ir")
    assert r.ok, r.diagnostics
    return b"".join(r.outputs.values()).decode()


@pytest.mark.parametrize("n", [1, 2, 5])
def test_cpu_runs_both_kernels(n, built, tmp_path):
    k = runtime.load_outputs(built("cpu").outputs, tmp_path)
    tiles = _tiles(n, n)
    np.testing.assert_array_equal(k.stream_last(tiles), tiles[-1])
    assert k.stream(tiles) is None  # void: the seed's helper drops each tile


@pytest.mark.parametrize("n", [1, 4])
def test_tpu_interpreter_returns_the_last_tile(n, built):
    from vxc.backends.tpu.interp import run

    mosaic = built("tpu").outputs["seed_vx.stream_last.tpu.mosaic.mlir"].decode()
    tiles = _tiles(n, n)
    r = run(mosaic, [tiles], ["tiles"])
    np.testing.assert_array_equal(r.outputs[0], tiles[-1])
    # The double buffer survived the inlining: tile i+1's DMA is issued before tile i
    # is waited (two ring slots: the helper's token landed in the caller's ring).
    dmas = [e for e in r.trace if e[0] in ("dma_start", "dma_wait")]
    if n > 1:
        assert dmas[:4] == [
            ("dma_start", "tiles[0]", "%arg3[0]"),
            ("dma_start", "tiles[1]", "%arg3[1]"),
            ("dma_wait", "tiles[0]", "%arg3[0]"),
            ("dma_start", "tiles[2]", "%arg3[0]"),
        ], dmas


@pytest.mark.parametrize("target", ["b200", "h100"])
@pytest.mark.parametrize("n", [1, 3])
def test_ptx_simulator_returns_the_last_tile(target, n, built):
    from vxc.backends.nvidia import ptxsim

    out = built(target).outputs
    manifest = json.loads(out[f"seed_vx.{target}.json"])
    (kernel,) = [k for k in manifest["kernels"] if k["name"] == "stream_last"]
    ptx = _build_ir(target)
    tiles = _tiles(n, n)
    (got,) = ptxsim.run_kernel(ptx, kernel, [tiles], 1)
    np.testing.assert_array_equal(got[0] if got.ndim == 3 else got, tiles[-1])
