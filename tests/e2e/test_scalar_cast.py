"""`cast::<E>(x)` of a scalar (LANGUAGE.md 4.3) on every target against its definition:
integer to float rounds to nearest even, float to integer truncates toward zero and
saturates (NaN is 0), and the layer-norm use `1.0 / cast::<f32>(n)`; the cpu natively, the
tpu in the Mosaic interpreter, b200/h100 in the PTX simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

import vxc

TARGETS = ["cpu", "tpu", "b200", "h100"]
KERNEL = """
fn k(n: i64, s: f32, y: &mut Tensor<f32, [8, 128]>) -> void on Topology::TensorCore
    where n >= 1, n <= 1000000000, instances() == 1 {
  let t = Tensor<f32>([8, 128]);
  let i = cast::<i32>(s);
  transfer(t + cast::<f32>(n) + cast::<f32>(i) * 0.0 + 1.0 / cast::<f32>(n), y[0 .. 8, 0 .. 128]);
}
"""
TRUNC = """
fn k(s: f32, y: &mut Tensor<f32, [8, 128]>) -> void on Topology::TensorCore
    where instances() == 1 {
  transfer(Tensor<f32>([8, 128]) + cast::<f32>(cast::<i32>(s)), y[0 .. 8, 0 .. 128]);
}
"""


def _one(src: str, target: str, *args) -> float:
    k = vxc.compile(src, target=target, interpret=target != "cpu")
    y = np.zeros((8, 128), np.float32)
    k.launch(*args, y, instances=1)
    assert (y == y[0, 0]).all() or np.isnan(y).all()
    return float(y[0, 0])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "s, want",
    [(3.7, 3), (-3.7, -3), (0.99, 0), (1e10, 2**31 - 1), (-1e10, -(2**31)), (math.nan, 0)],
)
def test_float_to_int_truncates_and_saturates(target, s, want):
    assert _one(TRUNC, target, s) == float(np.float32(want))


@pytest.mark.parametrize("target", TARGETS)
def test_int_to_float_rounds_to_nearest_even(target):
    src = KERNEL.replace("+ 1.0 / cast::<f32>(n)", "")
    # 2^24 + 1 is halfway between two f32s: it rounds to the even one, 2^24
    assert _one(src, target, 2**24 + 1, 0.0) == 2.0**24


@pytest.mark.parametrize("target", TARGETS)
def test_one_over_n(target):
    got = _one(KERNEL.replace("cast::<f32>(n) + cast", "cast"), target, 7, 2.5)
    assert got == float(np.float32(1) / np.float32(7))
