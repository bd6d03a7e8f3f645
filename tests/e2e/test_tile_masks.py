"""Comparisons, bool tiles, `select`, `iota`, integer tiles, `.argmax/.argmin` and casts
between float, integer and bool tiles (LANGUAGE.md section 4.3) on every target against
numpy: the cpu natively, the tpu in the Mosaic interpreter, b200 and h100 in the PTX
simulator. Results are written as [64, 128] tiles (a GPU's TMA stores rows of 16 bytes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import vxc

TARGETS = ["cpu", "tpu", "b200", "h100"]
SIG = "fn k({args}) -> void on Topology::TensorCore where instances() == 1{where} {{\n{body}\n}}"
ROWS, COLS = 64, 128
OUT = f"[0 .. {ROWS}, 0 .. {COLS}]"


# Bounds on the scalar arguments, so that `cast::<i32>(r)` is in range (E6045 otherwise).
BOUNDS = ", 0 <= r, r < 65536, 0 <= j, j < 512"


def _kernel(target: str, args: str, body: str, where: str = ""):
    src = SIG.format(args=args, body=body, where=where)
    return vxc.compile(src, target=target, interpret=target != "cpu")


def _data(seed: int = 0) -> np.ndarray:
    """Normal values with NaNs, infinities, ties and exact zeros sprinkled in."""
    x = np.random.default_rng(seed).standard_normal((ROWS, COLS)).astype(np.float32)
    x[1, 7] = x[1, 9] = np.nan
    x[2, :] = 0.5  # a row of ties
    x[3, 3], x[3, 100] = np.inf, -np.inf
    x[5, 10:20] = 0.0
    x[:, 50] = x[:, 51]  # a column equal to its neighbour
    return x


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_each_comparison_matches_numpy_nan_included(target, op):
    args = f"x: &Tensor<f32, [{ROWS}, {COLS}]>, y: &Tensor<f32, [{ROWS}, {COLS}]>, "
    args += f"o: &mut Tensor<f32, [{ROWS}, {COLS}]>, s: &mut Tensor<f32, [{ROWS}, {COLS}]>"
    body = f"""  let a = transfer(x, Memory::VMEM);
  let b = transfer(y, Memory::VMEM);
  transfer(cast::<f32>(a {op} b), o{OUT});
  transfer(cast::<f32>(a {op} 0.5), s{OUT});"""
    x, y = _data(1), np.roll(_data(2), 1, axis=1)
    y[::3] = x[::3]  # equal elements on every third row
    o, s = np.zeros_like(x), np.zeros_like(x)
    _kernel(target, args, body).launch(x, y, o, s, instances=1)
    f = {
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
        "==": np.equal,
        "!=": np.not_equal,
    }[op]
    np.testing.assert_array_equal(o, f(x, y).astype(np.float32))
    np.testing.assert_array_equal(s, f(x, np.float32(0.5)).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_select_logic_and_a_broadcast_condition(target):
    args = f"x: &Tensor<f32, [{ROWS}, {COLS}]>, o: &mut Tensor<f32, [{ROWS}, {COLS}]>, "
    args += f"p: &mut Tensor<f32, [{ROWS}, {COLS}]>"
    body = f"""  let t = transfer(x, Memory::VMEM);
  let col = iota::<i32>([{ROWS}, {COLS}], 1);
  let keep = (t > 0.0) & (col < 100) | !(t == t);
  transfer(select(keep, t, -1.0), o{OUT});
  transfer(select(t.max(1) > 1.0, t, t * 2.0), p{OUT});"""
    x = _data(3)
    o, p = np.zeros_like(x), np.zeros_like(x)
    _kernel(target, args, body).launch(x, o, p, instances=1)
    col = np.arange(COLS)[None, :]
    keep = ((x > 0) & (col < 100)) | np.isnan(x)
    np.testing.assert_array_equal(o, np.where(keep, x, np.float32(-1.0)))
    big = np.fmax.reduce(x, axis=1, keepdims=True) > 1.0
    big = np.where(np.isnan(x).any(1, keepdims=True), False, big)  # .max(1) of a NaN row is NaN
    np.testing.assert_array_equal(p, np.where(big, x, x * np.float32(2.0)))


@pytest.mark.parametrize("target", TARGETS)
def test_iota_and_integer_arithmetic(target):
    args = f"r: i64, o: &mut Tensor<f32, [{ROWS}, {COLS}]>, p: &mut Tensor<f32, [{ROWS}, {COLS}]>"
    # `+ r`: the i64 scalar adapts to the i32 tile (its bounds keep it inside i32)
    body = f"""  let q = iota::<i32>([{ROWS}, {COLS}], 0) + r;
  let c = iota::<i32>([{ROWS}, {COLS}], 1);
  transfer(cast::<f32>(max(q * 3 - c, -c) + min(c, 7) + abs(c - q)), o{OUT});
  transfer(select(c <= q, Tensor<f32>([{ROWS}, {COLS}]) + 1.0, 0.0), p{OUT});"""
    o, p = np.zeros((ROWS, COLS), np.float32), np.zeros((ROWS, COLS), np.float32)
    _kernel(target, args.replace("r: i64", "r: i64, j: i64"), body, BOUNDS).launch(
        40, 0, o, p, instances=1
    )
    q = np.arange(ROWS)[:, None] + 40
    c = np.arange(COLS)[None, :]
    np.testing.assert_array_equal(
        o, (np.maximum(q * 3 - c, -c) + np.minimum(c, 7) + np.abs(c - q)).astype(np.float32)
    )
    np.testing.assert_array_equal(p, (c <= q).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argmax_and_argmin_take_the_first_extreme_and_the_first_nan(target, fn):
    args = f"x: &Tensor<f32, [{ROWS}, {COLS}]>, r: &mut Tensor<i32, [{ROWS}, {COLS}]>, "
    args += f"c: &mut Tensor<i32, [{ROWS}, {COLS}]>"
    body = f"""  let t = transfer(x, Memory::VMEM);
  transfer(Tensor<i32>([{ROWS}, {COLS}]) + t.{fn}(1), r{OUT});
  transfer(Tensor<i32>([{ROWS}, {COLS}]) + t.{fn}(0), c{OUT});"""
    x = _data(4)
    x[40:, 60] = np.nan  # a NaN column below row 40: axis 0 finds row 40
    r, c = np.zeros((ROWS, COLS), np.int32), np.zeros((ROWS, COLS), np.int32)
    _kernel(target, args, body).launch(x, r, c, instances=1)
    f = getattr(np, fn)
    np.testing.assert_array_equal(r[:, 0], f(x, axis=1))
    np.testing.assert_array_equal(c[0], f(x, axis=0))


@pytest.mark.parametrize("target", TARGETS)
def test_argmax_of_a_bf16_and_an_integer_tile(target):
    args = f"x: &Tensor<bf16, [{ROWS}, {COLS}]>, r: &mut Tensor<i32, [{ROWS}, {COLS}]>"
    body = f"""  let t = transfer(x, Memory::VMEM);
  let n = iota::<i32>([{ROWS}, {COLS}], 1) * 7 - iota::<i32>([{ROWS}, {COLS}], 0);
  transfer(t.argmax(1) + (n - n.max(1)).argmin(0), r{OUT});"""
    x = _data(5).astype(ml_dtypes.bfloat16)
    r = np.zeros((ROWS, COLS), np.int32)
    _kernel(target, args, body).launch(x, r, instances=1)
    n = np.arange(COLS)[None, :] * 7 - np.arange(ROWS)[:, None]
    want = np.argmax(x.astype(np.float32), 1)[:, None] + np.argmin(n - n.max(1, keepdims=True), 0)
    np.testing.assert_array_equal(r, want.astype(np.int32))


@pytest.mark.parametrize("target", TARGETS)
def test_casts_between_float_integer_and_bool_tiles(target):
    args = f"x: &Tensor<f32, [{ROWS}, {COLS}]>, i: &mut Tensor<i32, [{ROWS}, {COLS}]>, "
    args += f"f: &mut Tensor<f32, [{ROWS}, {COLS}]>"
    body = f"""  let t = transfer(x, Memory::VMEM);
  transfer(cast::<i32>(t), i{OUT});
  transfer(cast::<f32>(cast::<i32>(t * 0.5)) + cast::<f32>(t < 0.0), f{OUT});"""
    x = _data(6) * np.float32(1e9)
    x[7, :4] = [3.0e9, -3.0e9, 2.5, -2.5]  # out of i32's range both ways; truncation
    i, f = np.zeros((ROWS, COLS), np.int32), np.zeros((ROWS, COLS), np.float32)
    _kernel(target, args, body).launch(x, i, f, instances=1)

    def to_i32(v):  # truncating toward zero, saturating, NaN to 0 (LANGUAGE.md 4.3)
        v = np.nan_to_num(v.astype(np.float64), nan=0.0)
        return np.trunc(np.clip(v, -(2.0**31), 2.0**31 - 1)).astype(np.int32)

    np.testing.assert_array_equal(i, to_i32(x))
    want = to_i32(x * np.float32(0.5)).astype(np.float32) + (x < 0).astype(np.float32)
    np.testing.assert_array_equal(f, want)


@pytest.mark.parametrize("target", TARGETS)
def test_the_causal_mask_is_computed_not_loaded(target):
    """LANGUAGE.md's example: a key tile j of 64 against a query tile at row r."""
    args = (
        f"s: &Tensor<f32, [{ROWS}, {COLS}]>, r: i64, j: i64, o: &mut Tensor<f32, [{ROWS}, {COLS}]>"
    )
    body = f"""  let st = transfer(s, Memory::VMEM);
  let q_pos = iota::<i32>([{ROWS}, {COLS}], 0) + cast::<i32>(r);
  let k_pos = iota::<i32>([{ROWS}, {COLS}], 1) + cast::<i32>(j * {COLS});
  transfer(select(k_pos <= q_pos, st, -1e30), o{OUT});"""
    s = _data(7)
    o = np.zeros_like(s)
    _kernel(target, args, body, BOUNDS).launch(s, 192, 1, o, instances=1)
    q = np.arange(ROWS)[:, None] + 192
    k = np.arange(COLS)[None, :] + COLS
    np.testing.assert_array_equal(o, np.where(k <= q, s, np.float32(-1e30)))
