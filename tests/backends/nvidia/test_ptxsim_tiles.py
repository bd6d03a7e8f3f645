"""Tile arithmetic on b200/h100 (backends/nvidia/tiles.py) in the PTX simulator against
numpy: kernels/softmax.vx (shared-memory tiles, row reductions by shfl butterflies,
online softmax carried through the loop) and kernels/gemm_epilogue.vx (the epilogue on
the accumulator where it lives: tcgen05.ld rows on b200, wgmma fragments on h100, a
broadcast bias row, ReLU, bf16 cast). The shapes mirror the cpu tests
(tests/e2e/test_tile_kernels.py); the large ones are slow in the simulator. Also: the
simulator's models of the new instructions (ex2.approx's error, shfl's lanes, bf16
rounding), and mutations of the emitted PTX that must give a wrong answer."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest
from test_ptxsim import _ptx

from vxc.backends.nvidia import ptxsim

BF16 = ml_dtypes.bfloat16
TARGETS = ["h100", "b200"]


def _softmax(target: str, m: int, n: int, mutate=None) -> tuple[np.ndarray, np.ndarray]:
    ptx, k = _ptx(target, "softmax")
    if mutate:
        ptx = mutate(ptx)
    x = (np.random.default_rng(2).standard_normal((m, n)) * 8).astype(np.float32)
    x[0, :5] = [80.0, -80.0, 0.0, 80.0, 1e-3]  # large spreads: the max is subtracted
    y = np.full((m, n), np.nan, np.float32)
    assert ptxsim.run_kernel(ptx, k, [m, n, x, y], m // 8) == []
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    return y, e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_matches_numpy(target):
    # Two column tiles per row: the running max and the rescaled sum carried once.
    y, want = _softmax(target, 8, 256)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(8, 128), (64, 384), (256, 1024)], ids=str)
def test_softmax_matches_numpy_at_the_cpu_shapes(target, shape):
    y, want = _softmax(target, *shape)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)


def _epilogue(target: str, m: int, n: int, k: int, mutate=None):
    ptx, kern = _ptx(target, "gemm_epilogue")
    if mutate:
        ptx = mutate(ptx)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    bias = rng.standard_normal((1, n)).astype(np.float32) * 4
    c = np.full((m, n), np.nan, BF16)
    assert ptxsim.run_kernel(ptx, kern, [m, n, k, a, b, bias, c], (m // 128) * (n // 128)) == []
    exact = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return c.astype(np.float64), exact, terms


def _check_epilogue(got, exact, terms) -> None:
    # As the cpu test: the f32 sum differs from f64 in its last bits (relative to the
    # terms), at most one bf16 unit after the rounding, on ties only.
    want = exact.astype(np.float32).astype(BF16).astype(np.float64)
    assert np.all(np.abs(got - want) <= np.abs(want) * 2**-7 + terms * 2**-20)
    assert np.mean(got == want) > 0.99
    assert np.all(got >= 0)  # the ReLU


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_epilogue_matches_numpy(target):
    _check_epilogue(*_epilogue(target, 128, 128, 128))


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "shape",
    [(256, 128, 384), (128, 384, 256), (384, 256, 512)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_gemm_epilogue_matches_numpy_at_the_cpu_shapes(target, shape):
    # (1024, 1024, 1024), the cpu's slow shape, is 64 CTAs of 8 K steps: hours here.
    _check_epilogue(*_epilogue(target, *shape))


# -- the emitted PTX, mutated: each must give a wrong answer in the simulator ----------------


def _shfl_lanes(ptx: str) -> str:
    """The butterfly's first step (lanes 16 apart) skipped: half the row is lost."""
    return re.sub(
        r"shfl\.sync\.bfly\.b32 (%f\d+), (%f\d+), 16,", r"shfl.sync.bfly.b32 \1, \2, 0,", ptx
    )


def _exact_exp_scale(ptx: str) -> str:
    """exp(x) as 2^x: the log2(e) scale dropped."""
    return ptx.replace(f"0f{struct_bits(math.log2(math.e)):08X}", f"0f{struct_bits(1.0):08X}")


def _drop_tile_barriers(ptx: str) -> str:
    """The bar.sync before each tile form removed: a thread reads another thread's
    elements before they are known to be written (the simulator's race check)."""
    return ptx.replace("\t// tile barrier\n\tbar.sync 0;\n", "")


def struct_bits(x: float) -> int:
    import struct

    return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mutate", [_shfl_lanes, _exact_exp_scale])
def test_a_mutated_softmax_is_wrong(target, mutate):
    ptx, _ = _ptx(target, "softmax")
    assert mutate(ptx) != ptx, "the mutation must change the PTX"
    y, want = _softmax(target, 8, 128, mutate)
    assert not np.allclose(y, want, rtol=1e-5, atol=1e-7, equal_nan=False)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["softmax", "gemm_epilogue"])
def test_a_missing_tile_barrier_is_a_race(target, name):
    ptx, _ = _ptx(target, name)
    assert _drop_tile_barriers(ptx) != ptx
    run = _softmax if name == "softmax" else _epilogue
    args = (8, 128) if name == "softmax" else (128, 128, 128)
    with pytest.raises(ptxsim.SimError, match="race between threads"):
        run(target, *args, _drop_tile_barriers)


@pytest.mark.parametrize("target", TARGETS)
def test_a_bias_read_at_the_wrong_column_is_wrong(target):
    # Every f32 shared load (the bias copy's and the epilogue's) one column (4 bytes) on.
    def shift(ptx: str) -> str:
        return re.sub(r"ld\.shared\.f32 (%f\d+), \[(%r\d+)\+(\d+)\]",
                      lambda m: f"ld.shared.f32 {m[1]}, [{m[2]}+{int(m[3]) + 4}]", ptx)  # fmt: skip

    got, exact, terms = _epilogue(target, 128, 128, 128, shift)
    want = exact.astype(np.float32).astype(BF16).astype(np.float64)
    assert np.mean(got == want) < 0.99


# -- the models of the new instructions ---------------------------------------------------


def test_ex2_approx_is_within_its_bound_and_not_exact():
    xs = np.linspace(-126, 127, 20001, dtype=np.float32)
    got = np.array([ptxsim.ex2_approx(float(x)) for x in xs], np.float32)
    exact = np.exp2(xs.astype(np.float64)).astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - exact.view(np.int32).astype(np.int64))
    assert ulps.max() <= ptxsim.EX2_ULP
    assert (ulps > 0).mean() > 0.5  # not correctly rounded: a test cannot rely on it
    assert ptxsim.ex2_approx(-math.inf) == 0.0 and ptxsim.ex2_approx(math.inf) == math.inf
    assert math.isnan(ptxsim.ex2_approx(math.nan))


# (model, exact f64 function, inputs, relative bound, absolute bound on (0.5, 2) or 0)
APPROX = {
    "tanh": (ptxsim.tanh_approx, math.tanh, (-9.0, 9.0), ptxsim.TANH_REL, 0.0),
    "lg2": (ptxsim.lg2_approx, math.log2, (1e-3, 1e3), ptxsim.LG2_REL, ptxsim.LG2_ABS),
    "rsqrt": (ptxsim.rsqrt_approx, lambda x: 1 / math.sqrt(x), (1e-3, 1e6), ptxsim.RSQRT_REL, 0),
}


@pytest.mark.parametrize("name", sorted(APPROX))
def test_approx_models_sit_within_their_ptx_isa_bound_and_are_not_exact(name):
    model, exact, (lo, hi), rel, absolute = APPROX[name]
    xs = np.geomspace(lo, hi, 20001).astype(np.float32) if lo > 0 else None
    if xs is None:
        xs = np.linspace(lo, hi, 20001, dtype=np.float32)
    got = np.array([model(float(x)) for x in xs])
    ref = np.array([exact(float(x)) for x in xs])
    near = (xs > 0.5) & (xs < 2.0) if absolute else np.zeros(len(xs), bool)
    assert np.all(np.abs(got - ref)[near] <= absolute)
    assert np.all(np.abs(got - ref)[~near] <= np.abs(ref[~near]) * rel)
    correctly_rounded = ref.astype(np.float32).astype(np.float64)
    assert (got != correctly_rounded).mean() > 0.5  # a test cannot rely on exact results


def test_approx_models_follow_the_ptx_isa_corner_cases():
    inf, nan = math.inf, math.nan
    t, lg, rs = ptxsim.tanh_approx, ptxsim.lg2_approx, ptxsim.rsqrt_approx
    assert (t(-inf), t(inf), t(0.0), t(1e-40)) == (-1.0, 1.0, 0.0, 1e-40)
    assert math.copysign(1, t(-0.0)) == -1 and math.isnan(t(nan))
    assert (lg(0.0), lg(-0.0), lg(inf), lg(1.0)) == (-inf, -inf, inf, 0.0)
    assert math.isnan(lg(-1.0)) and math.isnan(lg(-inf)) and math.isnan(lg(nan))
    assert (rs(0.0), rs(-0.0), rs(inf)) == (inf, -inf, 0.0)
    assert math.isnan(rs(-1.0)) and math.isnan(rs(nan))


def test_bf16_conversion_rounds_to_nearest_even():
    xs = np.random.default_rng(0).standard_normal(4096).astype(np.float32) * 100
    xs[:4] = [np.float32(1 + 2**-8), np.float32(1 + 3 * 2**-8), np.inf, np.nan]
    got = np.array([ptxsim.to_half(float(x), "bf16") for x in xs], np.uint16)
    want = xs.astype(BF16).view(np.uint16)
    np.testing.assert_array_equal(got[:3], want[:3])
    assert np.isnan(np.array(got[3], np.uint16).view(BF16).astype(np.float32))
    np.testing.assert_array_equal(got[4:], want[4:])
    back = np.array([ptxsim.from_half(int(h), "bf16") for h in want[4:]], np.float32)
    np.testing.assert_array_equal(back, xs[4:].astype(BF16).astype(np.float32))


def test_max_nan_propagates_as_numpy_maximum():
    assert math.isnan(ptxsim.fminmax(math.nan, 1.0, "max"))
    assert math.isnan(ptxsim.fminmax(1.0, math.nan, "min"))
    assert ptxsim.fminmax(-1.0, 2.0, "max") == 2.0 and ptxsim.fminmax(-1.0, 2.0, "min") == -1.0


# -- reductions of the accumulator where it lives -------------------------------------------

ACC_REDUCE = """
fn accred(a: &Tensor<bf16, [128, 128]>, b: &Tensor<bf16, [128, 128]>,
          c: &mut Tensor<f32, [128, 128]>) -> void
    on Topology::TensorCore where instances() == 1 {
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let at = transfer(a, Memory::VMEM);
  let bt = transfer(b, Memory::VMEM);
  matmul_acc(&mut acc, &at, &bt);
  let y = transfer(acc - acc.max(1) + acc.sum(1) * 0.5, Memory::VMEM);
  transfer(y, c[0 .. 128, 0 .. 128]);
}
"""


def _build(target: str, source: str):
    from vxc import api
    from vxc.backends.nvidia import ptx_text
    from vxc.targets import TARGETS as ALL

    checked = api.check_target(api.analyze([api.Source("k.vx", source.encode())]), target)
    _, ptx, kernels = ptx_text(api.backend_module(checked), ALL[checked.target])
    return ptx, kernels[0]


def _ab(seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (128, 128)).astype(BF16)
    b = rng.integers(-3, 4, (128, 128)).astype(BF16)
    return a, b, np.full((128, 128), np.nan, np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_row_reductions_of_the_accumulator(target):
    # b200: each thread's TMEM lane is a whole row; h100: a fragment row is 4 lanes,
    # combined by shfl.sync.bfly 1 and 2. Small integers: every sum is exact.
    ptx, kern = _build(target, ACC_REDUCE)
    assert ("shfl.sync.bfly" in ptx) == (target == "h100")
    a, b, c = _ab()
    ptxsim.run_kernel(ptx, kern, [a, b, c], 1)
    acc = a.astype(np.float64) @ b.astype(np.float64)
    want = acc - acc.max(1, keepdims=True) + acc.sum(1, keepdims=True) * 0.5
    np.testing.assert_array_equal(c, want)


A_BT = (
    ACC_REDUCE.replace("accred", "abt")
    .replace("matmul_acc(&mut acc, &at, &bt);", "matmul_acc(&mut acc, &at, &transpose(bt));")
    .replace("acc - acc.max(1) + acc.sum(1) * 0.5", "acc")
)


@pytest.mark.parametrize("target", TARGETS)
def test_a_transposed_b_operand_is_read_k_major(target):
    # transpose(bt) folded into the MMA: bt [N, K] is loaded as it lies, in the A
    # operands' K-major layout, and read without the transpose bit; no data moves.
    ptx, kern = _build(target, A_BT)
    assert "transpose" not in ptx
    a, b, c = _ab(1)
    ptxsim.run_kernel(ptx, kern, [a, b, c], 1)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert not np.array_equal(want, a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_array_equal(c, want)


def test_f16_conversion_is_numpys():
    xs = np.random.default_rng(1).standard_normal(2048).astype(np.float32) * 1000
    want = xs.astype(np.float16)
    got = np.array([ptxsim.to_half(float(x), "f16") for x in xs], np.uint16)
    np.testing.assert_array_equal(got, want.view(np.uint16))
    back = np.array([ptxsim.from_half(int(h), "f16") for h in got], np.float32)
    np.testing.assert_array_equal(back, want.astype(np.float32))


# A tile that tile arithmetic reads, in a ring a TMA load refills next iteration: thread
# 0 issued the next copy while the other threads were still reading the slot (a
# write-after-read race on hardware; the simulator saw it once it tracked TMA loads in
# flight). The lowering now holds the copy at a bar.sync until every thread has read.
RING_REREAD = """
fn acc_rows(n: i64, x: &Tensor<f32, [8, n]>, y: &mut Tensor<f32, [8, 128]>) -> void
    on Topology::TensorCore where n % 128 == 0, n >= 128, n <= 1024, instances() == 1 {
  let mut s = Tensor<f32>([8, 128]);
  for c in 0 .. n / 128 {
    let t = transfer(x[0 .. 8, c * 128 .. c * 128 + 128], Memory::VMEM);
    s = s + t;
  }
  transfer(s, y[0 .. 8, 0 .. 128]);
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_a_tma_load_waits_for_the_threads_reading_its_slot(target):
    ptx, kern = _build(target, RING_REREAD)
    x = np.random.default_rng(0).standard_normal((8, 384)).astype(np.float32)
    y = np.full((8, 128), np.nan, np.float32)
    ptxsim.run_kernel(ptx, kern, [384, x, y], 1)
    np.testing.assert_allclose(y, x.reshape(8, 3, 128).sum(1), rtol=1e-6)
    # Without that barrier (the one right before the copy's expect_tx) it is a race.
    racy = re.sub(r"\tbar\.sync 0;\n(\t@!%p\d+ bra \$L_tma_issued_\d+;\n\tmbarrier)", r"\1", ptx)
    assert racy != ptx
    with pytest.raises(ptxsim.SimError, match="race between threads"):
        ptxsim.run_kernel(racy, kern, [384, x, np.full((8, 128), np.nan, np.float32)], 1)
