"""`to_jax()` and `to_torch()` of interpreted kernels (vxc/frameworks/interpreted.py): a
tpu, b200 or h100 build with `interpret=True` runs in vxc's Mosaic interpreter or PTX
simulator from inside `jax.jit` (a host callback; `jax.vmap` too) and from
`torch.compile(fullgraph=True)`, equal to numpy, with the cpu's checks."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import vxc
from vxc.runtime import ArgumentError, LaunchError

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
TARGETS = ["tpu", "b200", "h100"]


def _ints(shape, seed) -> np.ndarray:
    """Small integers: every product and sum below is exact in f32."""
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_under_jit_equals_numpy(target):
    gemm = vxc.compile(KERNELS / "gemm.vx", target=target, interpret=True).to_jax()
    a, b = _ints((128, 256), 1), _ints((256, 256), 2)
    c = jax.jit(lambda a, b: gemm(a, b) * 2)(
        jnp.asarray(a, jnp.bfloat16), jnp.asarray(b, jnp.bfloat16)
    )
    np.testing.assert_array_equal(np.asarray(c), (a @ b) * 2)


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_from_torch_compile_equals_numpy(target):
    gemm = vxc.compile(KERNELS / "gemm.vx", target=target, interpret=True).to_torch()
    a, b = _ints((128, 256), 3), _ints((256, 128), 4)
    f = torch.compile(lambda a, b: gemm(a, b) + 1, fullgraph=True)
    c = f(torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16())
    np.testing.assert_array_equal(c.numpy(), a @ b + 1)


def test_softmax_under_vmap_on_the_simulator():
    softmax = vxc.compile(KERNELS / "softmax.vx", target="b200", interpret=True).to_jax()
    x = jax.random.normal(jax.random.key(0), (2, 8, 128), jnp.float32)
    y = jax.jit(jax.vmap(softmax))(x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(jax.nn.softmax(x, axis=-1)), atol=2e-6)


def test_a_mut_tensor_given_to_torch_is_written_in_place():
    softmax = vxc.compile(KERNELS / "softmax.vx", target="h100", interpret=True).to_torch()
    x, y = torch.randn(8, 128), torch.zeros(8, 128)
    assert softmax(x, y) is y
    torch.testing.assert_close(y, torch.softmax(x, 1), rtol=1e-5, atol=2e-6)


def test_the_checks_are_the_cpus():
    gemm = vxc.compile(KERNELS / "gemm.vx", target="b200", interpret=True).to_jax()
    bad = jnp.zeros((100, 128), jnp.bfloat16)
    with pytest.raises(LaunchError, match="m % 128 == 0 is false for m = 100"):
        gemm(bad, jnp.zeros((128, 128), jnp.bfloat16))
    with pytest.raises(ArgumentError, match="argument 'a' must have dtype bfloat16"):
        gemm(jnp.zeros((128, 128), jnp.float32), jnp.zeros((128, 128), jnp.bfloat16))


def test_a_vec_parameter_is_not_there_yet():
    k = vxc.compile(KERNELS / "stream_grid.vx", target="b200", interpret=True)
    with pytest.raises(NotImplementedError, match="a Vec"):
        k.to_jax()
