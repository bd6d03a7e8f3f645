"""Helpers of the TPU backend tests (a module name unique in the suite: conftest modules
of other test folders must not shadow it)."""

from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

ROOT = Path(__file__).resolve().parents[3]
# The Vec kernels of the repository, tested for every Vec length here (seed.vx calls an
# extern fn: tested for its diagnostic instead; the gemm kernels are sized by shape
# parameters, not a Vec length: tests/backends/tpu/test_tpu_views.py, gemm_any's edge views
# tests/backends/tpu/test_tpu_edges.py and tests/e2e/test_gemm_any_tpu.py; the tile-arithmetic
# kernels use tile ops the tpu backend refuses: tests/e2e/test_tile_kernels.py and the
# E7001 goldens).
NO_TPU_ARTIFACT = {
    "seed.vx",
    "gemm.vx",
    "gemm_3stage.vx",
    "gemm_async.vx",
    "gemm_any.vx",
    "gemm_epilogue.vx",
    "softmax.vx",
    "attention.vx",
}
# Two kernels in one file (one Mosaic module each): run in the interpreter by
# tests/e2e/test_seed_vx.py and tests/e2e/test_layernorm.py.
MULTI_KERNEL = {"seed_vx.vx", "layernorm.vx"}
KERNELS = sorted(
    p
    for p in [*ROOT.glob("kernels/*.vx"), *ROOT.glob("examples/**/*.vx")]
    if p.name not in NO_TPU_ARTIFACT | MULTI_KERNEL
)


def build(path: Path, emit: str = "artifact", tpu_aot: str = "none", instances: int = 0):
    from vxc import api

    src = api.Source(str(path.relative_to(ROOT)), path.read_bytes())
    return api.build(api.analyze([src]), "tpu", emit, tpu_aot=tpu_aot, tpu_instances=instances)


class Built:
    def __init__(self, path: Path, instances: int = 0):
        from vxc import api
        from vxc.backends.tpu import mosaic_kernels

        self.path = path
        result = build(path, instances=instances)
        assert result.ok, result.diagnostics
        self.outputs = result.outputs
        src = api.Source(str(path.relative_to(ROOT)), path.read_bytes())
        checked = api.check_target(api.analyze([src]), "tpu")
        (self.kernel,) = mosaic_kernels(api.backend_module(checked), instances)
        stem = path.stem
        self.mosaic = self.outputs[f"{stem}.tpu.mosaic.mlir"].decode()
        self.export = self.outputs[f"{stem}.tpu.jax_export"]


def inputs(kernel, n: int, seed: int = 0) -> list[np.ndarray]:
    """Inputs for `kernel` with Vec length n: multiples of 1/8 in [-1, 1), so every
    product and partial sum is exact in f32 (and the values are exact in bf16)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.inputs:
        shape = [n if d is None else d for d in p.shape]
        out.append((rng.integers(-8, 8, size=shape) / 8).astype(DTYPES[p.dtype]))
    return out


def reference(kernel, args: list[np.ndarray]) -> np.ndarray:
    """numpy's answer for the repository's kernels (f32 accumulation)."""
    f = [a.astype(np.float32) for a in args]
    if kernel.name in ("stream", "stream_blocking", "stream_triple"):
        tiles, w = f
        return sum(t @ w for t in tiles)
    if kernel.name in ("matmul", "matmul_wide"):
        x, w = f
        return x @ w
    if kernel.name == "stream_grid":  # instance k: its share of the tiles
        tiles, w = f
        n_inst = kernel.grid
        per = len(tiles) // n_inst
        parts = [sum(t @ w for t in tiles[k * per : k * per + per]) for k in range(n_inst)]
        return np.stack(parts) if kernel.instances else parts[0]
    raise AssertionError(f"no numpy reference for kernel {kernel.name}")
