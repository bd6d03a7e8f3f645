"""`.min(axis)` (LANGUAGE.md section 4.3) on every target against numpy: the cpu natively,
the tpu in the Mosaic interpreter, b200 and h100 in the PTX simulator; over both axes, on
f32 and bf16 tiles, and NaN propagating as in `.max(axis)`."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import vxc

TARGETS = ["cpu", "tpu", "b200", "h100"]
KERNEL = """
fn k(x: &Tensor<{e}, [64, 128]>, r: &mut Tensor<f32, [64, 128]>,
     c: &mut Tensor<f32, [64, 128]>) -> void on Topology::TensorCore where instances() == 1 {{
  let a = transfer(x, Memory::VMEM);
  let range = cast::<f32>(a.max(1) - a.min(1));
  transfer(Tensor<f32>([64, 128]) + range, r[0 .. 64, 0 .. 128]);
  transfer(Tensor<f32>([64, 128]) + cast::<f32>(a.min(0)), c[0 .. 64, 0 .. 128]);
}}
"""


def _run(target: str, elem: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = vxc.compile(KERNEL.format(e=elem), target=target, interpret=target != "cpu")
    # written [64, 128] (a column or row broadcast): a GPU's TMA stores rows of 16 bytes
    r, c = np.zeros((64, 128), np.float32), np.zeros((64, 128), np.float32)
    k.launch(x, r, c, instances=1)
    return r[:, :1], c[:1]


@pytest.mark.parametrize("target", TARGETS)
def test_min_over_rows_and_columns_matches_numpy(target):
    x = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32)
    r, c = _run(target, "f32", x)
    np.testing.assert_array_equal(r, x.max(1, keepdims=True) - x.min(1, keepdims=True))
    np.testing.assert_array_equal(c, x.min(0, keepdims=True))


@pytest.mark.parametrize("target", TARGETS)
def test_min_of_a_bf16_tile_is_exact(target):
    x = np.random.default_rng(4).standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    r, c = _run(target, "bf16", x)
    w = x.astype(np.float32)
    np.testing.assert_array_equal(c, w.min(0, keepdims=True))
    want = (w.max(1, keepdims=True) - w.min(1, keepdims=True)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(r, want.astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_a_nan_in_a_row_gives_nan(target):
    x = np.ones((64, 128), np.float32)
    x[5, 77] = np.nan
    r, c = _run(target, "f32", x)
    assert np.isnan(r[5, 0]) and not np.isnan(np.delete(r, 5)).any()
    assert np.isnan(c[0, 77]) and not np.isnan(np.delete(c, 77)).any()
