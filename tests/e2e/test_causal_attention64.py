"""benchmarks/attention64.vx: a causal flash attention at head dimension 64 whose mask is
computed with `iota`/`select` and whose key loop stops at the diagonal, and its full
twin, against numpy on every target (the cpu natively, the tpu in the Mosaic
interpreter, b200/h100 in the PTX simulator). The timing of the two is
benchmarks/bench_causal.py's (docs/PERFORMANCE.md)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import vxc

SOURCE = Path(__file__).resolve().parents[2] / "benchmarks" / "attention64.vx"
TARGETS = ["cpu", "tpu", "b200", "h100"]


def reference(q, k, v, h: int, s: int, scale: float, causal: bool) -> np.ndarray:
    """softmax(q k^T * scale) v per head in f64 (P is rounded to bf16 by the kernel, as
    flash attention feeds the matrix unit)."""
    q, k, v = (t.astype(np.float64).reshape(h, s, 64) for t in (q, k, v))
    sc = q @ k.transpose(0, 2, 1) * scale
    if causal:
        sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).reshape(h * s, 64)


def inputs(h: int, s: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((h * s, 64)).astype(ml_dtypes.bfloat16) for _ in range(3)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("entry", ["causal", "full"])
def test_attention64_matches_numpy(target, entry):
    # the cpu and the tpu interpreter run instances that stop before key tiles they skip;
    # the PTX simulator (about 10 s an instance) one instance, its two diagonal tiles
    h, s = {"cpu": (2, 384), "tpu": (1, 256)}.get(target, (1, 128))
    k = vxc.compile(SOURCE.read_text(), target=target, kernel=entry, interpret=target != "cpu")
    q, kk, v = inputs(h, s)
    o = np.zeros((h * s, 64), np.float32)
    k.launch(h, s, np.float32(0.125), q, kk, v, o, instances=h * (s // 128))  # n: the shapes
    want = reference(q, kk, v, h, s, 0.125, entry == "causal")
    np.testing.assert_allclose(o, want, rtol=2e-2, atol=2e-2)
