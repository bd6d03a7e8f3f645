"""`vxc.compile(..., target="h100")` without `interpret=True` runs the nvidia runner's
device way (`vxc.backends.Loaded`): the fatbin through the CUDA runtime
(`runtime.CudaArtifact`), here on the fake CUDA layer (fakecuda.py: cuda-python's calls
answered by the PTX simulator), so the run side's hardware path is checked on a machine
without a GPU: a call is one launch of one CTA, `launch` binds the count at launch."""

from __future__ import annotations

from pathlib import Path

import fakecuda
import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc.backends.nvidia import runtime

ROOT = Path(__file__).resolve().parents[3]
BF16 = ml_dtypes.bfloat16


def _ints(shape, seed):
    """Small integers: every product and sum is exact in f32 (and bf16 inputs are exact)."""
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)


def _compiled(name: str) -> vxc.Kernel:
    # Source text under a name of this test's own: a kernel of the process cache that
    # another test loaded holds its own driver's context.
    source = (ROOT / "kernels" / name).read_text()
    return vxc.compile(source, target="h100", filename=f"gpu_way_{name}")


@pytest.fixture
def driver():
    d = fakecuda.FakeDriver(capability=(9, 0))
    runtime.use_driver(d)
    yield d
    runtime.use_driver(None)


def test_a_compiled_kernel_runs_on_the_device_way(driver):
    k = _compiled("stream.vx")
    assert not k.interpreted and "interpreted" not in repr(k)
    tiles, w = _ints((2, 128, 128), 20), _ints((128, 128), 21)
    np.testing.assert_array_equal(k(tiles, w), tiles.sum(0) @ w)
    assert [x["grid"] for x in driver.launches] == [(1, 1, 1)]

    grid = _compiled("stream_grid.vx")
    parts = grid.launch(tiles.astype(BF16), w.astype(BF16), instances=2)
    np.testing.assert_array_equal(parts, np.stack([tiles[0] @ w, tiles[1] @ w]))
    assert driver.launches[-1]["grid"] == (2, 1, 1)
    with pytest.raises(ValueError, match="instances must be an integer >= 1, got 0"):
        grid.launch(tiles.astype(BF16), w.astype(BF16), instances=0)
    assert len(driver.launches) == 2  # refused before anything ran
