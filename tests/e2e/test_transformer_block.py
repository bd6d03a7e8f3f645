"""The transformer block of benchmarks/transformer/block.py (issue 36): its vxc kernels
called from one `jax.jit` through `to_jax()` and from `torch.compile(fullgraph=True)`
through `to_torch()` equal the same block in each framework's own ops to bf16 rounding;
the same block for the tpu compiles ahead of time for a v5e; the block's two new kernels (a layer norm, a GELU GEMM) check clean and build on every
target."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

from vxc import api

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "transformer"))
import block  # noqa: E402

S, D = 256, 256  # two heads of 128
# bf16 operands with f32 accumulation on both sides, in different orders: the largest
# difference seen is 1.2e-3 of the output's largest magnitude
REL = 5e-3


def _close(got: np.ndarray, want: np.ndarray) -> None:
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < REL, err


@pytest.mark.slow
def test_the_jax_block_equals_pure_jax_under_one_jit():
    import jax

    w, x = block.weights(D), block.inputs(S, D)
    vx = jax.jit(block.jax_block(block.kernels("jax", S, D), w))
    hlo = vx.lower(x).as_text()
    assert hlo.count('custom_call_target="vxc_') + hlo.count("stablehlo.custom_call @vxc_") >= 5
    _close(np.asarray(vx(x)), np.asarray(jax.jit(block.jax_reference(w))(x)))


@pytest.mark.slow
def test_the_torch_block_equals_torch_under_torch_compile():
    import torch

    w = block.torch_weights(block.weights(D))
    x = torch.from_numpy(block.inputs(S, D))
    eager = block.torch_block(block.kernels("torch", S, D), w)
    compiled = torch.compile(eager, fullgraph=True)
    want = block.torch_reference(w)(x).numpy()
    _close(eager(x).numpy(), want)
    _close(compiled(x).numpy(), want)


@pytest.mark.slow
def test_the_same_block_for_tpu_compiles_ahead_of_time_for_v5e():
    import jax
    import jax.numpy as jnp

    from vxc.backends.tpu import aot

    w = block.weights(D)
    f = jax.jit(block.jax_block(block.kernels("jax", S, D, target="tpu"), w))
    sharding = jax.sharding.SingleDeviceSharding(aot.topology("v5e").devices[0])
    x = jax.ShapeDtypeStruct((S, D), jnp.float32, sharding=sharding)
    text = f.trace(x).lower().compile().as_text()
    # two layer norms, four GEMMs (one with the GELU), the attention: one executable
    assert text.count('custom_call_target="tpu_custom_call"') == 7


@pytest.mark.parametrize("kernel", ["layernorm.vx", "gemm_gelu.vx"])
@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_the_blocks_kernels_build_on_every_target(kernel, target):
    path = ROOT / "benchmarks" / "transformer" / kernel
    sources = [api.Source(str(path), path.read_bytes())]
    checked = api.check(sources, target, lower=True)
    assert checked.ok, [str(d) for d in checked.diagnostics]
    result = api.build(api.analyze(sources), target)
    assert result.ok and result.outputs, [str(d) for d in result.diagnostics]
