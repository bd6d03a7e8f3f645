"""Tile arithmetic (LANGUAGE.md section 4.3) on the cpu against numpy: every form, with
broadcasting and scalars, odd shapes (vector tails), bf16/f16 computed in f32, the
accuracy of `exp` in ulp over the whole f32 range, and that the loops are vector code
with no libm call per element."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from vxc import api, runtime

BF16 = ml_dtypes.bfloat16
M, N = 24, 37  # not multiples of the 16 vector lanes: every loop has a tail


def _build(src: str, tmp_path, name: str = "k"):
    source = api.Source(f"{name}.vx", src.encode())
    result = api.build(api.analyze([source]), "cpu")
    assert result.ok, api.render(result.diagnostics, [source])
    return runtime.load_outputs(result.outputs, tmp_path)


def _kernel(body: str, params: str, ret: str) -> str:
    return f"fn k({params}) -> {ret} on Topology::TensorCore {{\n{body}\n}}\n"


def _t(name: str, shape: tuple, elem: str = "f32") -> str:
    return f"{name}: &Tensor<{elem}, [{', '.join(map(str, shape))}]>"


RNG = np.random.default_rng(7)
X = RNG.standard_normal((M, N)).astype(np.float32)
Y = (RNG.standard_normal((M, N)) + 3).astype(np.float32)
ROW = RNG.standard_normal((M, 1)).astype(np.float32)
COL = RNG.standard_normal((1, N)).astype(np.float32)

# (Vx expression over a: [M, N], b: [M, N], r: [M, 1], c: [1, N], s: f32; numpy reference)
ELEMENTWISE = {
    "add": ("a + b", lambda a, b, r, c, s: a + b),
    "sub_row": ("a - r", lambda a, b, r, c, s: a - r),
    "mul_col": ("c * a", lambda a, b, r, c, s: c * a),
    "div": ("a / b", lambda a, b, r, c, s: a / b),
    "scalar_param": ("2.0 - a * s", lambda a, b, r, c, s: np.float32(2) - a * s),
    "outer": ("(r + c) / 4.0", lambda a, b, r, c, s: (r + c) / np.float32(4)),
    "neg": ("-a", lambda a, b, r, c, s: -a),
    "sqrt": ("sqrt(b)", lambda a, b, r, c, s: np.sqrt(b)),
    "relu": ("max(a, 0.0)", lambda a, b, r, c, s: np.maximum(a, 0)),
    "min_int_literal": ("min(a, 1) * 3", lambda a, b, r, c, s: np.minimum(a, 1) * 3),
    "max_tiles": (
        "max(a, r) + min(b, c)",
        lambda a, b, r, c, s: np.maximum(a, r) + np.minimum(b, c),
    ),
    "softmax": (
        "exp(a - a.max(1)) / exp(a - a.max(1)).sum(1)",
        lambda a, b, r, c, s: (
            np.exp(a - a.max(1, keepdims=True))
            / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True)
        ),
    ),
    "fill": ("Tensor<f32>([24, 1]) - 1e30 + a", lambda a, b, r, c, s: np.float32(-1e30) + a),
    "col_sum": ("a + a.sum(0)", lambda a, b, r, c, s: a + a.sum(0, keepdims=True)),
    "col_max": ("a.max(0) - a", lambda a, b, r, c, s: a.max(0, keepdims=True) - a),
    "row_min": ("a - a.min(1)", lambda a, b, r, c, s: a - a.min(1, keepdims=True)),
    "col_min": ("a.min(0) + b", lambda a, b, r, c, s: a.min(0, keepdims=True) + b),
}


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory):
    params = ", ".join(
        [_t("x", (M, N)), _t("y", (M, N)), _t("rr", (M, 1)), _t("cc", (1, N)), "s: f32"]
    )
    loads = (
        "  let a = transfer(x, Memory::VMEM);\n  let b = transfer(y, Memory::VMEM);\n"
        "  let r = transfer(rr, Memory::VMEM);\n  let c = transfer(cc, Memory::VMEM);\n"
    )
    src = "".join(
        _kernel(
            f"{loads}  let out = {expr};\n  return transfer(out, Memory::HBM);",
            params,
            f"Tensor<f32, [{M}, {N}]>",
        ).replace("fn k(", f"fn k_{name}(")
        for name, (expr, _) in ELEMENTWISE.items()
    )
    return _build(src, tmp_path_factory.mktemp("ew"), "ew")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_forms_match_numpy(elementwise, name):
    _, ref = ELEMENTWISE[name]
    s = np.float32(0.75)
    got = getattr(elementwise, f"k_{name}")(X, Y, ROW, COL, s)
    want = ref(X, Y, ROW, COL, s).astype(np.float32)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_reductions_keep_the_axis_and_accumulate_in_f32(tmp_path):
    """bf16 in, bf16 out: the sum of 1000 values in f32 rounded once (numpy's f32 sum of
    the same values, rounded), not 1000 bf16 roundings."""
    shape = (3, 1000)
    body = (
        "  let a = transfer(x, Memory::VMEM);\n"
        "  let s = a.sum(1);\n  let m = a.max(1);\n"
        "  return transfer(cast::<f32>(s) + cast::<f32>(m) * 0.0, Memory::HBM);"
    )
    art = _build(_kernel(body, _t("x", shape, "bf16"), "Tensor<f32, [3, 1]>"), tmp_path)
    x = RNG.standard_normal(shape).astype(BF16)
    want = x.astype(np.float32).sum(1, keepdims=True).astype(BF16).astype(np.float32)
    np.testing.assert_allclose(art.k(x), want, rtol=1e-2)
    exact = x.astype(np.float64).sum(1, keepdims=True)
    assert np.all(np.abs(art.k(x) - exact) <= np.abs(exact) * 2**-7 + 1e-3)


def test_max_reduction_and_elementwise_max_propagate_nan(tmp_path):
    body = (
        "  let a = transfer(x, Memory::VMEM);\n"
        "  return transfer(a.max(1) + max(a, 0.0).sum(1), Memory::HBM);"
    )
    art = _build(_kernel(body, _t("x", (4, 40)), "Tensor<f32, [4, 1]>"), tmp_path)
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    x[1, 33] = np.nan  # in the vector tail
    x[2, 5] = np.nan  # in the vector body
    got = art.k(x)
    want = x.max(1, keepdims=True) + np.maximum(x, 0).sum(1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[[0, 3]], want[[0, 3]], rtol=1e-6)


@pytest.mark.parametrize("elem", ["bf16", "f16"])
def test_half_precision_computes_in_f32_and_rounds_each_result(tmp_path, elem):
    """Each operation computes in f32 and rounds its tile to the element type, as numpy
    does on bf16/f16 arrays."""
    dtype = BF16 if elem == "bf16" else np.float16
    body = (
        "  let a = transfer(x, Memory::VMEM);\n  let b = transfer(y, Memory::VMEM);\n"
        "  return transfer(exp(a) * b + a / b, Memory::HBM);"
    )
    params = f"{_t('x', (M, N), elem)}, {_t('y', (M, N), elem)}"
    art = _build(_kernel(body, params, f"Tensor<{elem}, [{M}, {N}]>"), tmp_path)
    a, b = X.astype(dtype), Y.astype(dtype)

    def f32(v):
        return v.astype(np.float32)

    e = np.exp(f32(a)).astype(dtype)
    want = f32((f32(e) * f32(b)).astype(dtype)) + f32((f32(a) / f32(b)).astype(dtype))
    want = want.astype(dtype)
    got = art.k(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("elem", ["bf16", "f16", "f64"])
def test_casts_round_to_nearest_even(tmp_path, elem):
    body = (
        "  let a = transfer(x, Memory::VMEM);\n"
        f"  return transfer(cast::<f32>(cast::<{elem}>(a)), Memory::HBM);"
    )
    art = _build(_kernel(body, _t("x", (2, 50)), "Tensor<f32, [2, 50]>"), tmp_path)
    x = (RNG.standard_normal((2, 50)) * 100).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, 1.0 + 2**-8, 1.0 + 2**-11]  # ties round to even (1.0)
    x[1, 0] = np.nan
    dtype = {"bf16": BF16, "f16": np.float16, "f64": np.float64}[elem]
    np.testing.assert_array_equal(art.k(x), x.astype(dtype).astype(np.float32))


def test_transpose_and_loop_carried_tiles(tmp_path):
    body = (
        "  let a = transfer(x, Memory::VMEM);\n"
        "  let mut acc = transpose(a);\n"
        "  for i in 0..5 {\n    acc = acc * 0.5 + transpose(a);\n  }\n"
        "  return transfer(acc, Memory::HBM);"
    )
    art = _build(_kernel(body, _t("x", (M, N)), f"Tensor<f32, [{N}, {M}]>"), tmp_path)
    want = X.T.copy()
    for _ in range(5):
        want = want * np.float32(0.5) + X.T
    np.testing.assert_allclose(art.k(X), want, rtol=1e-6)


def _ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the f32 spacing at ref (ref in f64)."""
    spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / spacing


def test_exp_is_accurate_to_two_ulp_over_the_f32_range(tmp_path):
    n = 64 * 1024
    body = "  let a = transfer(x, Memory::VMEM);\n  return transfer(exp(a), Memory::HBM);"
    art = _build(_kernel(body, _t("x", (64, 1024)), "Tensor<f32, [64, 1024]>"), tmp_path)
    x = np.linspace(-103.0, 88.7, n, dtype=np.float32)
    x[:16] = [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 88.72, 89.0, 100, -110, np.inf, -np.inf,
              np.nan, 0.5, 0.34657359, -87.5]  # fmt: skip
    got = art.k(x.reshape(64, 1024)).ravel()
    ref = np.exp(x.astype(np.float64))
    normal = (ref >= np.finfo(np.float32).tiny) & (ref <= np.finfo(np.float32).max)
    assert _ulp_error(got[normal], ref[normal]).max() <= 2.0
    sub = ref < np.finfo(np.float32).tiny  # subnormal results: within one subnormal step
    assert np.all(np.abs(got[sub] - ref[sub]) <= 2 * 2.0**-149)
    big = ref > np.finfo(np.float32).max
    assert np.all(np.isinf(got[big])) and np.isnan(got[12]) and got[11] == 0.0


def test_tile_loops_are_vector_code_without_libm(tmp_path):
    src = _kernel(
        "  let a = transfer(x, Memory::VMEM);\n"
        "  return transfer(exp(a - a.max(1)) + sqrt(a), Memory::HBM);",
        _t("x", (128, 128)),
        "Tensor<f32, [128, 128]>",
    )
    source = api.Source("k.vx", src.encode())
    result = api.build(api.analyze([source]), "cpu", emit="target-ir")
    (text,) = [v.decode() for k, v in result.outputs.items() if k.endswith(".ll")]
    assert "<16 x float>" in text
    assert "@expf" not in text and "@llvm.exp." not in text
    assert "llvm.sqrt.v16f32" in text
