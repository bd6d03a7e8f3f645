"""The tile-arithmetic kernels (TARGETS.md "Kernels") on the tpu: kernels/gemm_epilogue.vx,
softmax.vx, attention.vx and seed_vx.vx build, their Mosaic verifies, libtpu compiles
them for v5e and v6e, and the Mosaic interpreter (backends/tpu/interp.py) computes
numpy's answer over the cpu tests' shapes (tests/e2e/test_tile_kernels.py; the
largest marked slow). The references and tolerances are the cpu test's. Attention runs
at head dimension 128 and 64, and the DMAs each instance starts are counted: a causal
instance moves no key tile past its diagonal."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_tile_kernels import (
    GEMM_SHAPES,
    assert_attention,
    assert_gemm_epilogue,
    assert_softmax,
    attention_inputs,
    gemm_epilogue_inputs,
)

import vxc
from vxc import api
from vxc.backends.tpu import interp

ROOT = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
KERNELS = ("gemm_epilogue", "softmax", "attention", "seed_vx")


def _kernel(name: str, consts: dict | None = None) -> vxc.Kernel:
    path = ROOT / "kernels" / f"{name}.vx"
    return vxc.compile(path, target="tpu", consts=consts, interpret=True)


@pytest.mark.parametrize("name", KERNELS)
def test_the_kernel_builds_verifies_and_libtpu_compiles_it(name):
    """`--tpu-aot v5e,v6e`: libtpu compiles every kernel of the file for both chips (at
    the Vec lengths and shapes its constraints allow, backends/tpu/aot.py)."""
    path = ROOT / "kernels" / f"{name}.vx"
    src = api.Source(f"kernels/{name}.vx", path.read_bytes())
    r = api.build(api.analyze([src]), "tpu", tpu_aot="v5e,v6e")
    assert r.ok, api.render(r.diagnostics, [src])
    mosaic = b"".join(v for k, v in r.outputs.items() if k.endswith(".mosaic.mlir")).decode()
    if name != "seed_vx":
        assert "vector.multi_reduction" in mosaic or "arith.maximumf" in mosaic


@pytest.mark.parametrize(
    "shape",
    [*GEMM_SHAPES[:2], pytest.param(GEMM_SHAPES[2], marks=pytest.mark.slow)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_gemm_epilogue_matches_numpy(shape):
    m, n, _ = shape
    a, b, bias, c = gemm_epilogue_inputs(shape)
    _kernel("gemm_epilogue").launch(a, b, bias, c, instances=(m // 128) * (n // 128))
    assert_gemm_epilogue(a, b, bias, c)


@pytest.mark.parametrize(
    "shape", [(8, 128), (64, 384), pytest.param((256, 1024), marks=pytest.mark.slow)], ids=str
)
def test_softmax_matches_numpy(shape):
    m, n = shape
    x = (np.random.default_rng(2).standard_normal(shape) * 8).astype(np.float32)
    x[0, :5] = [80.0, -80.0, 0.0, 80.0, 1e-3]  # large spreads: the max is subtracted
    y = np.full(shape, np.nan, np.float32)
    _kernel("softmax").launch(x, y, instances=m // 8)
    assert_softmax(x, y)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    ("d", "h", "s"),
    [(128, 1, 128), (128, 2, 384), (64, 1, 256), pytest.param(128, 8, 256, marks=pytest.mark.slow)],
    ids=lambda x: str(x),
)
def test_attention_matches_numpy(monkeypatch, d, h, s, causal):
    runs = []  # the interpreter's Run: the DMAs each instance started
    real = interp.run
    monkeypatch.setattr(interp, "run", lambda *a, **kw: runs.append(real(*a, **kw)) or runs[-1])
    q, k, v, o = attention_inputs(h, s, d)
    scale = d**-0.5
    kernel = _kernel("attention", None if d == 128 else {"D": d})
    kernel.launch(h, s, causal, np.float32(scale), q, k, v, o, instances=h * (s // 128))
    assert_attention(o, q, k, v, h, s, scale, causal)
    (run,) = runs
    assert_key_tiles(run.dmas, h, s, causal)


def assert_key_tiles(dmas, h: int, s: int, causal: bool) -> None:
    """Instance i (query tile qi = i % (s / 128) of head i / (s / 128)) moves key tiles
    0 .. 2 qi + 1 of its head's K and V when causal (its diagonal block's two 64-key tiles
    are the last), every tile of the head when not; each once, but for the last, which the
    loop's final prefetch moves again. A tile past the diagonal, or another head's, fails."""
    per = s // 128
    for i in range(h * per):
        hb, qi = i // per * s, i % per
        last = 2 * qi + 1 if causal else s // 64 - 1
        want = Counter({t: 1 for t in range(last)} | {last: 2})
        for name in ("k", "v"):
            rows = [r[0] for pid, src, r in dmas if pid == i and src == name]
            assert all(n == 64 and (lo - hb) % 64 == 0 for lo, n in rows), rows
            assert Counter((lo - hb) // 64 for lo, _ in rows) == want, (i, name, rows)
