"""Checks run by vx_test against the `stream` kernel as Bazel built it.

VX_TARGET, VX_KERNEL and VX_ARTIFACT_DIR come from the vx_test rule. On cpu the
kernel runs on random tiles and is compared with numpy; every target's artifact must
carry the target in each file name and a manifest that names the kernel.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

TARGET = os.environ["VX_TARGET"]
KERNEL = os.environ["VX_KERNEL"]
ART = Path(os.environ["VX_ARTIFACT_DIR"])


def test_every_output_names_the_target():
    names = sorted(p.name for p in ART.iterdir())
    assert names, f"empty artifact directory {ART}"
    for n in names:
        assert f".{TARGET}." in n, n


def test_manifest_names_the_kernel_function():
    manifests = list(ART.glob(f"*.{TARGET}.json"))
    assert len(manifests) == 1, sorted(p.name for p in ART.iterdir())
    text = manifests[0].read_text()
    assert "stream" in json.loads(text).__repr__()


@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_cpu_kernel_matches_numpy(n):
    if TARGET != "cpu":
        pytest.fail(f"this check runs the kernel natively; {TARGET} needs its own vx_test")
    from vxc import runtime

    art = runtime.load(next(ART.glob("*.cpu.json")))
    rng = np.random.default_rng(n)
    tiles = rng.standard_normal((n, 128, 128), dtype=np.float32)
    w = rng.standard_normal((128, 128), dtype=np.float32)
    ref = np.einsum("nik,kj->ij", tiles.astype(np.float64), w.astype(np.float64))
    out = art.stream(tiles, w)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
