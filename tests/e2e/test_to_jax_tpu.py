"""`Kernel.to_jax()` on the tpu (vxc/frameworks/jax_tpu.py): the artifact's export called
inside a `jax.jit` that also holds XLA's own ops, compiled ahead of time by libtpu for a
v5e (no TPU here); the trace-time checks of the cpu's convention; a static-grid kernel
built for the instances asked for."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import vxc
from vxc.backends.tpu import aot
from vxc.runtime import ArgumentError, LaunchError

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"


def _on_v5e(*shapes):
    sharding = jax.sharding.SingleDeviceSharding(aot.topology("v5e").devices[0])
    return [jax.ShapeDtypeStruct(s, d, sharding=sharding) for s, d in shapes]


@pytest.fixture(scope="module")
def gemm():
    return vxc.compile(KERNELS / "gemm.vx", target="tpu").to_jax()


def test_a_jit_with_the_kernel_and_xla_ops_compiles_for_v5e(gemm):
    a, b = _on_v5e(((256, 384), jnp.bfloat16), ((384, 256), jnp.bfloat16))
    compiled = jax.jit(lambda a, b: jnp.tanh(gemm(a, b)) * 2).trace(a, b).lower().compile()
    text = compiled.as_text()
    assert text.count('custom_call_target="tpu_custom_call"') == 1
    assert "tanh" in text  # XLA's own op beside it, in one executable
    assert compiled.out_info.shape == (256, 256) and compiled.out_info.dtype == jnp.float32


def test_a_where_clause_the_shapes_break_is_refused_at_trace_time(gemm):
    a, b = _on_v5e(((100, 128), jnp.bfloat16), ((128, 128), jnp.bfloat16))
    with pytest.raises(LaunchError, match="m % 128 == 0 is false for m = 100"):
        jax.jit(gemm).trace(a, b)


def test_a_wrong_dtype_names_the_argument(gemm):
    a, b = _on_v5e(((128, 128), jnp.float32), ((128, 128), jnp.bfloat16))
    with pytest.raises(ArgumentError, match="argument 'a' must have dtype bfloat16"):
        jax.jit(gemm).trace(a, b)


def test_a_static_grid_kernel_needs_instances_and_is_built_for_them():
    k = vxc.compile(KERNELS / "attention.vx", target="tpu")
    with pytest.raises(TypeError, match="static grid: pass to_jax\\(instances=N\\)"):
        k.to_jax()
    attention = k.to_jax(instances=4)  # 2 heads of 256 queries, 128 a instance
    q = _on_v5e(((512, 128), jnp.bfloat16))[0]
    f = jax.jit(lambda q, k, v: attention(2, 256, False, 0.088, q, k, v))
    text = f.trace(q, q, q).lower().compile().as_text()
    assert "tpu_custom_call" in text
