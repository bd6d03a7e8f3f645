"""Run by vx_test: the example kernel against numpy (cpu natively, tpu in the Mosaic
interpreter after libtpu compiles it), or its files (other targets)."""

import os
from pathlib import Path

import numpy as np

TARGET = os.environ["VX_TARGET"]
ART = Path(os.environ["VX_ARTIFACT_DIR"])


def test_outputs_carry_the_target():
    names = sorted(p.name for p in ART.iterdir())
    assert names and all(f".{TARGET}." in n for n in names), names


def test_matmul_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 128), dtype=np.float32)
    w = rng.standard_normal((128, 128), dtype=np.float32)
    if TARGET == "tpu":  # libtpu compiles it; the Mosaic interpreter runs it
        from vxc.backends.tpu.validate import Artifact

        tpu = Artifact.load(ART)
        tpu.verify()
        tpu.aot("v5e", 1)
        out = tpu.interpret([x, w]).outputs[0]
        np.testing.assert_allclose(out, x @ w, rtol=1e-5, atol=1e-4)
        return
    assert TARGET == "cpu", f"no native run for {TARGET}"
    from vxc import runtime

    art = runtime.load(ART / "matmul.cpu.json")
    np.testing.assert_allclose(art.matmul(x, w), x @ w, rtol=1e-5, atol=1e-4)
