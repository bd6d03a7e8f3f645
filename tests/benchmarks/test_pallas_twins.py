"""The Pallas twins of the schedule benchmark (benchmarks/pallas_twins.py) compute what
their vxc kernels compute: each runs in Pallas's TPU interpreter (no TPU here) at a
small shape against numpy. A twin that computed something else would make the
benchmark's comparison meaningless."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from vxc.backends.tpu.env import prepare  # noqa: E402 - jax on the CPU, as vxc runs it

prepare()
import jax  # noqa: E402


def _interpret(fn, *args):
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode():
        return np.asarray(jax.jit(fn)(*args), np.float32)


def test_softmax_twin_matches_numpy():
    import pallas_twins

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((16, 384)) * 4).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(_interpret(pallas_twins.softmax_blockspec, x), want, rtol=2e-6)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_twin_matches_numpy(causal):
    """jax's Pallas flash attention at the benchmark's block sizes (128 / 128 / 128),
    head dim 128, bf16 in: numpy's softmax(q k^T * scale) v in f32 on the same bf16
    values, within bf16 rounding of P and of the output."""
    import jax.numpy as jnp
    import pallas_twins

    s, scale = 256, 0.125
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.standard_normal((1, 1, s, 128)), jnp.bfloat16) for _ in range(3))
    got = _interpret(lambda a, b, c: pallas_twins.flash_attention(a, b, c, causal, scale), q, k, v)
    qf, kf, vf = (np.asarray(t, np.float32)[0, 0] for t in (q, k, v))
    sc = qf @ kf.T * scale
    if causal:
        sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ vf
    np.testing.assert_allclose(got[0, 0], want, atol=1e-2, rtol=1e-2)
    assert np.abs(got[0, 0] - want).mean() < 1e-3  # measured: 2e-4 (full), 3e-4 (causal)
