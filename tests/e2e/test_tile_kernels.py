"""The tile-arithmetic kernels (TARGETS.md "Kernels"): kernels/gemm_epilogue.vx,
kernels/softmax.vx and kernels/attention.vx built for the cpu and run through
`vxc.runtime` against numpy over the listed shapes; the attention kernel causal and
not at head dimension 64 and 128 (its const `D`), and a sequence that is not a multiple
of the tile refused at launch."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from vxc import api, runtime

ROOT = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16


def _build(name: str, tmp: Path, entry: str | None = None, consts: dict | None = None):
    """kernels/NAME.vx for the cpu, its kernel `entry` (a generic one's instance:
    `attention__64`; by default NAME)."""
    path = ROOT / "kernels" / f"{name}.vx"
    src = api.Source(f"kernels/{name}.vx", path.read_bytes())
    result = api.build(api.analyze([src], consts=consts), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    return getattr(runtime.load_outputs(result.outputs, tmp), entry or name)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return {n: _build(n, tmp_path_factory.mktemp(n)) for n in ("gemm_epilogue", "softmax")}


GEMM_SHAPES = [(128, 128, 128), (256, 128, 384), (128, 384, 256), (384, 256, 512)]


@pytest.mark.parametrize(
    "shape",
    [*GEMM_SHAPES, pytest.param((1024, 1024, 1024), marks=pytest.mark.slow)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_gemm_epilogue_matches_numpy(kernels, shape):
    m, n, k = shape
    a, b, bias, c = gemm_epilogue_inputs(shape)
    kernels["gemm_epilogue"].launch(m, n, k, a, b, bias, c, instances=(m // 128) * (n // 128))
    assert_gemm_epilogue(a, b, bias, c)


def gemm_epilogue_inputs(shape: tuple[int, int, int]) -> tuple[np.ndarray, ...]:
    """a, b, bias and the output c of gemm_epilogue at (m, n, k) (also the tpu test's)."""
    m, n, k = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    bias = rng.standard_normal((1, n)).astype(np.float32) * 4
    return a, b, bias, np.zeros((m, n), BF16)


def assert_gemm_epilogue(a, b, bias, c) -> None:
    """c = relu(a @ b + bias) in bf16 (also the tpu test's check)."""
    exact = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    want = exact.astype(np.float32).astype(BF16).astype(np.float64)
    got = c.astype(np.float64)
    # f32 accumulation differs from the f64 reference in the last f32 bits (relative to
    # the sum's terms, so near zero too); after the bf16 rounding that is at most one bf16
    # unit, and only where the value is on a tie.
    terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(got - want) <= np.abs(want) * 2**-7 + terms * 2**-20)
    assert np.mean(got == want) > 0.99
    assert np.all(got >= 0)  # the ReLU


@pytest.mark.parametrize("shape", [(8, 128), (64, 384), (256, 1024)], ids=str)
def test_softmax_matches_numpy(kernels, shape):
    m, n = shape
    x = (np.random.default_rng(2).standard_normal(shape) * 8).astype(np.float32)
    x[0, :5] = [80.0, -80.0, 0.0, 80.0, 1e-3]  # large spreads: the max is subtracted
    y = np.full(shape, np.nan, np.float32)
    kernels["softmax"].launch(m, n, x, y, instances=m // 8)
    assert_softmax(x, y)


def assert_softmax(x, y) -> None:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    """kernels/attention.vx at head dimension `d` (its const D: the default 128, and 64),
    each built once for the module."""
    built = {}

    def at(d: int):
        if d not in built:
            consts = None if d == 128 else {"D": d}  # 128: the source's default
            tmp = tmp_path_factory.mktemp(f"attention{d}")
            built[d] = _build("attention", tmp, f"attention__{d}", consts)
        return built[d]

    return at


def _attention_reference(q, k, v, h: int, s: int, scale: float, causal: bool) -> np.ndarray:
    """softmax(q k^T * scale) v per head in f64, with P rounded to bf16 as the kernel feeds
    it to the matrix unit (flash attention's usual bf16 P)."""
    d = q.shape[1]
    q, k, v = (t.astype(np.float64).reshape(h, s, d) for t in (q, k, v))
    sc = q @ k.transpose(0, 2, 1) * scale
    if causal:
        sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).reshape(h * s, d)


def attention_inputs(h: int, s: int, d: int) -> tuple[np.ndarray, ...]:
    """q, k, v (bf16) and the NaN-filled output of attention.vx (also the tpu test's)."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((h * s, d)).astype(BF16) for _ in range(3))
    return q, k, v, np.full((h * s, d), np.nan, np.float32)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    ("d", "h", "s"),
    [
        *((d, h, s) for d in (128, 64) for h, s in ((1, 128), (2, 384), (8, 256))),
        pytest.param(128, 8, 2048, marks=pytest.mark.slow),
    ],
    ids=lambda x: str(x),
)
def test_attention_matches_numpy(attention, d, h, s, causal):
    q, k, v, o = attention_inputs(h, s, d)
    scale = d**-0.5
    attention(d).launch(
        h, s, h * s, causal, np.float32(scale), q, k, v, o, instances=h * (s // 128)
    )
    assert_attention(o, q, k, v, h, s, scale, causal)


def assert_attention(o, q, k, v, h: int, s: int, scale: float, causal: bool) -> None:
    want = _attention_reference(q, k, v, h, s, scale, causal)
    # P is rounded to bf16 (8 bits) before P @ V: a relative error of 2^-9 per term.
    np.testing.assert_allclose(o, want, atol=8e-3 * np.abs(want).max())
    if causal:  # the first query of each head sees only its own key: o = v of that row
        first = np.arange(h) * s
        np.testing.assert_allclose(o[first], v[first].astype(np.float32), rtol=1e-6)
    else:
        full = _attention_reference(q, k, v, h, s, scale, True)
        assert np.abs(o - full).max() > 1e-2  # the non-causal kernel does see later keys


def test_attention_refuses_a_sequence_not_a_multiple_of_the_tile(attention):
    h, s = 1, 200
    n = h * s
    q = np.zeros((n, 128), BF16)
    o = np.zeros((n, 128), np.float32)
    with pytest.raises(runtime.LaunchError, match="s % 128 == 0"):
        attention(128).launch(h, s, n, False, np.float32(1), q, q, q, o, instances=2)
