"""kernels/layernorm.vx (layer norm and RMS norm, `rsqrt` and a scalar cast) against
numpy on every target: the cpu natively, the tpu in the Mosaic interpreter, b200 and h100
in the PTX simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import vxc

SOURCE = Path(__file__).resolve().parents[2] / "kernels" / "layernorm.vx"
TARGETS = ["cpu", "tpu", "b200", "h100"]
EPS = np.float32(1e-5)


def _inputs(m: int, n: int):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(np.float32)
    g = rng.standard_normal((1, n)).astype(np.float32)
    b = rng.standard_normal((1, n)).astype(np.float32)
    return x, g, b


def _shape(target: str) -> tuple[int, int]:
    return (64, 384) if target == "cpu" else (16, 256)  # the interpreters are slower


@pytest.mark.parametrize("target", TARGETS)
def test_layernorm_matches_numpy(target):
    m, n = _shape(target)
    x, g, b = _inputs(m, n)
    y = np.zeros_like(x)
    k = vxc.compile(SOURCE, target=target, kernel="layernorm", interpret=target != "cpu")
    k.launch(EPS, x, g, b, y, instances=m // 8)  # m and n: the arrays' shapes
    x64 = x.astype(np.float64)
    mean = x64.mean(1, keepdims=True)
    want = (x64 - mean) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_rmsnorm_matches_numpy(target):
    m, n = _shape(target)
    x, g, _ = _inputs(m, n)
    y = np.zeros_like(x)
    k = vxc.compile(SOURCE, target=target, kernel="rmsnorm", interpret=target != "cpu")
    k.launch(EPS, x, g, y, instances=m // 8)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
