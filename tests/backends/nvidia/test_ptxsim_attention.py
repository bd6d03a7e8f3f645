"""kernels/attention.vx on b200/h100: the build (ptxas without spills, the SASS's TMA and
MMA instructions) and the PTX simulator against numpy, causal and not, one and two
heads, head dimension 128 and 64 (the const D). What it needs of the backends: a `bool`
parameter and logic on it, the scores [128, 64] and the output accumulator in
Memory::ACC (TMEM / registers), the accumulator rescaled in place and accumulated into
again, `cast::<bf16>(p)` written as the MMA's swizzled A operand (fenced for the async
proxy), `transpose(kt)` folded into B's descriptor, the causal mask from iota/select,
and MMAs inside an `if` inside the loop. A causal CTA issues TMA loads of its key tiles
up to its diagonal only (counted in the simulator). Mutations of the new pieces must
fail in the simulator."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_nvidia_build import ARCH, _build, refused
from test_ptxsim import _ptx
from test_ptxsim_tiles import _build as _build_ptx

from vxc import api
from vxc.backends.nvidia import ptx_text, ptxsim, toolchain
from vxc.backends.nvidia.manifest import Manifest
from vxc.backends.nvidia.mma import UPDATED
from vxc.targets import TARGETS as ALL

BF16 = ml_dtypes.bfloat16
ROOT = Path(__file__).resolve().parents[3]
TARGETS = ["h100", "b200"]
KEYS = 64  # keys per K/V tile


def _attention_ptx(target: str, d: int):
    """kernels/attention.vx's PTX and manifest entry at head dimension `d`."""
    if d == 128:  # the default: the module's cached build
        return _ptx(target, "attention")
    src = ROOT / "kernels" / "attention.vx"
    analysis = api.analyze([api.Source(str(src), src.read_bytes())], consts={"D": d})
    _, ptx, kernels = ptx_text(api.backend_module(api.check_target(analysis, target)), ALL[target])
    return ptx, kernels[0]


def _inputs(h: int, s: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((h * s, d)).astype(BF16) for _ in range(3)]


def _online(q, k, v, h: int, s: int, causal: bool, scale: np.float32) -> np.ndarray:
    """The kernel's algorithm in numpy: 64-key blocks, f32 statistics, P rounded to bf16
    before P @ V (products exact, sums in f64: the MMA's f32 sums differ in the last bits)."""
    f = np.float32
    D = q.shape[1]
    out = np.zeros((h * s, D), f)
    for i in range(h * s // 128):
        qi, hb = i % (s // 128), i // (s // 128) * s
        qt = q[i * 128 : i * 128 + 128].astype(np.float64)
        m, l_, acc = np.full((128, 1), -1e30, f), np.zeros((128, 1), f), np.zeros((128, D), f)
        for j in range(2 * qi + 2 if causal else s // KEYS):
            kb, vb = (x[hb + j * KEYS : hb + (j + 1) * KEYS].astype(np.float64) for x in (k, v))
            st = (qt @ kb.T).astype(f) * scale
            if causal:  # key j * 64 + c after query qi * 128 + r: masked
                keys = j * KEYS + np.arange(KEYS)[None, :]
                st = np.where(keys <= qi * 128 + np.arange(128)[:, None], st, f(-1e30))
            mn = np.maximum(m, st.max(1, keepdims=True))
            p = np.exp(st - mn)
            alpha = np.exp(m - mn)
            l_ = l_ * alpha + p.sum(1, keepdims=True, dtype=f)
            pv = p.astype(BF16).astype(np.float64) @ vb
            acc = (acc * alpha + pv).astype(f)
            m = mn
        out[i * 128 : i * 128 + 128] = acc / l_
    return out


def _exact(q, k, v, h: int, s: int, causal: bool, scale: float) -> np.ndarray:
    out = np.zeros((h * s, q.shape[1]))
    for hd in range(h):
        rows = slice(hd * s, (hd + 1) * s)
        sc = q[rows].astype(np.float64) @ k[rows].astype(np.float64).T * scale
        if causal:
            sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
        e = np.exp(sc - sc.max(1, keepdims=True))
        out[rows] = e / e.sum(1, keepdims=True) @ v[rows].astype(np.float64)
    return out


def _run(target: str, h: int, s: int, causal: bool, mutate=None, d=128, cta=None, loads=None):
    """Run the kernel in the simulator, every CTA or only `cta` (its rows compared: the
    others stay NaN); `loads` collects the TMA loads (ptxsim.run_kernel's `tma_loads`)."""
    ptx, kern = _attention_ptx(target, d)
    if mutate:
        changed = mutate(ptx)
        assert changed != ptx, "the mutation must change the PTX"
        ptx = changed
    q, k, v = _inputs(h, s, d)
    o = np.full((h * s, d), np.nan, np.float32)
    scale = np.float32(1 / np.sqrt(d))
    args = [h, s, h * s, causal, scale, q, k, v, o]
    ctas = None if cta is None else [cta]
    assert ptxsim.run_kernel(ptx, kern, args, h * s // 128, ctas, loads) == []
    rows = slice(None) if cta is None else slice(cta * 128, cta * 128 + 128)
    online, exact = _online(q, k, v, h, s, causal, scale), _exact(q, k, v, h, s, causal, scale)
    return o[rows], online[rows], exact[rows]


def _check(got, online, exact) -> None:
    # Measured at one head of 128: within 5e-7 of the kernel's algorithm everywhere, and
    # 1.8e-3 of exact softmax. P's bf16 rounding can fall the other way where exp
    # (ex2.approx) differs in its last bits: one bf16 unit (2^-8) of one probability,
    # a few 1e-3 of an output at most, so a few outputs may be further off.
    assert not np.isnan(got).any()
    assert np.abs(got - online).max() < 5e-3
    assert np.mean(np.abs(got - online) < 1e-5) > 0.99
    assert np.abs(got - exact).max() < 1e-2  # the bf16 P against exact softmax


@pytest.mark.parametrize("target", TARGETS)
def test_attention_matches_numpy_causal(target):
    # One query tile: both key tiles are on the diagonal, so both halves of the mask.
    _check(*_run(target, 1, 128, True))


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("h", "s", "causal"), [(1, 128, False), (2, 256, True), (2, 256, False)])
def test_attention_matches_numpy_at_more_shapes(target, h, s, causal):
    # s = 256, the last CTA only (head 1, query tile 1): the second head reads its own
    # K/V rows, and the causal one its four key tiles, the diagonal block's two masked.
    _check(*_run(target, h, s, causal, cta=None if s == 128 else 2 * h - 1))


@pytest.mark.parametrize("target", TARGETS)
def test_a_causal_cta_loads_no_key_tile_past_its_diagonal(target):
    # Head dimension 64, one head of 256 (two query tiles, four key tiles), CTA 0 alone
    # (one simulated CTA: about 10 s): query tile 0 needs key tiles 0 and 1. Its TMA loads
    # of K and of V are each of those rows once but the last, which the loop's final
    # (clamped) prefetch loads again; never rows 128 .. 256. Its output rows match numpy.
    loads: list = []
    _check(*_run(target, 1, 256, True, d=64, cta=0, loads=loads))
    kern = _attention_ptx(target, 64)[1]
    arg = {p["name"]: p.get("arg") for p in kern["params"]}
    for name in ("k", "v"):
        boxes = [cs for cta, tm, cs in loads if arg[tm] == name]
        assert {cta for cta, *_ in loads} == {0}
        per_tile = len({cs[0] for cs in boxes})  # the tile's column boxes
        rows = Counter(cs[1] for cs in boxes)
        want = {0: per_tile, 64: 2 * per_tile}
        assert rows == want, (name, rows)


@pytest.mark.parametrize("target", TARGETS)
def test_attention_builds_without_spills_with_its_sass(target):
    files = _build(target, ROOT / "kernels" / "attention.vx")
    sass = toolchain.sass(files[f"attention.{target}.fatbin"])
    count = lambda op: len(re.findall(rf"\b{re.escape(op)}\b", sass))  # noqa: E731
    assert toolchain.missing_sass(sass, ARCH[target]) == []
    # q (2 boxes), K and V (2 boxes each) before the loops and in each of the two (causal,
    # full): 2 + 3 x 2 x 2.
    assert count("UTMALDG.2D") == 14 and count("UTMASTG.2D") == 1
    assert count("LDG") == 0 and count("STL") == 0 and count("LDL") == 0
    # Each of the two loops (causal, full) has its QK^T and PV.
    if target == "b200":  # QK^T: 8 steps of K = 128; PV: 4 of K = 64
        assert count("UTCHMMA") == 2 * 12 and count("HGMMA") == 0
    else:  # two m64 halves each
        assert count("HGMMA.64x64x16.F32.BF16") == 2 * 16
        assert count("HGMMA.64x128x16.F32.BF16") == 2 * 8
        assert count("UTCHMMA") == 0
    (k,) = Manifest.from_bytes(files[f"attention.{target}.json"]).kernels
    assert 0 < k["registers"] <= 255  # the build refuses any spill (ptxas -v)
    assert k["dynamic_smem"] <= ALL[target].arch.smem_limit
    ptx = _ptx(target, "attention")[0]
    assert ".minnctapersm 1" in ptx  # one CTA per SM: ptxas may use its registers


# -- mutations of the new pieces -----------------------------------------------------------


def _no_operand_fence(ptx: str) -> str:
    """The swizzled P's generic stores not fenced for the async proxy the MMA reads by."""
    return re.sub(
        r"(\tst\.shared\.v4\.b32 [^\n]*\n)\tfence\.proxy\.async\.shared::cta;\n", r"\1", ptx
    )


def _no_swizzle(ptx: str) -> str:
    """P written row-major in each 128-byte row: the chunk's XOR with the row dropped."""
    return re.sub(
        r"(and\.b32 (%r\d+), %r\d+, 7;\n)\txor\.b32 \2, \2, (%r\d+);", r"\1\tmov.b32 \2, \3;", ptx
    )


# Each mutation runs the whole kernel (10-20 s): one target in the fast suite, the other slow.
@pytest.mark.parametrize("target", ["h100", pytest.param("b200", marks=pytest.mark.slow)])
def test_an_unfenced_mma_operand_is_stale(target):
    # The MMA reads what the async proxy saw last: the slot's earlier bytes (NaN at first).
    got, online, _ = _run(target, 1, 128, True, _no_operand_fence)
    assert not np.allclose(got, online, atol=0.1)


@pytest.mark.parametrize("target", ["b200", pytest.param("h100", marks=pytest.mark.slow)])
def test_an_unswizzled_mma_operand_is_wrong(target):
    got, online, _ = _run(target, 1, 128, True, _no_swizzle)
    assert np.abs(got - online).max() > 0.1


def _no_update_sync(ptx: str) -> str:
    """The in-place update's TMEM stores not ordered before thread 0's next MMA."""
    note = f"\t// {UPDATED}\n\ttcgen05.wait::st.sync.aligned;\n"
    return ptx.replace(f"{note}\ttcgen05.fence::before_thread_sync;\n", note)


def test_an_in_place_update_unordered_before_the_mma_is_caught():
    with pytest.raises(ptxsim.SimError, match=r"tcgen05 mma .* is not ordered after the (ld|st) "):
        _run("b200", 1, 128, True, _no_update_sync)


# -- bools, and what is refused ---------------------------------------------------------------

FLAGS = """\
fn flags(f: bool, g: bool, x: &Tensor<f32, [8, 128]>) -> Tensor<f32, [8, 128]>
    on Topology::TensorCore {
  let mut v = transfer(x, Memory::VMEM);
  if f && !g { v = v * 2.0; }
  if f || g { v = v + 1.0; }
  return transfer(v, Memory::HBM);
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_bool_parameters_and_logic(target):
    ptx, kern = _build_ptx(target, FLAGS)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    for f in (False, True):
        for g in (False, True):
            (y,) = ptxsim.run_kernel(ptx, kern, [f, g, x], 1)
            want = (x * 2 if f and not g else x) + (1 if f or g else 0)
            np.testing.assert_array_equal(y, want[None])  # one instance's stacked result


# One instance: c = what `body` makes of acc, A and B (at, bt in shared memory).
GEMM = """\
fn k(a: &Tensor<{t}, [128, 128]>, b: &Tensor<{t}, [128, 128]>,
     c: &mut Tensor<f32, [128, 128]>) -> void on Topology::TensorCore
    where instances() == 1 {{
  let at = transfer(a, Memory::VMEM);
  let bt = transfer(b, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
{body}
  transfer(y, c[0 .. 128, 0 .. 128]);
}}
"""
UPDATE = GEMM.format(
    t="bf16",
    body="""\
  for i in 0 .. 2 {
    acc = (acc * 2.0) - 1.0;
    matmul_acc(&mut acc, &at, &bt);
  }
  let y = transfer(acc, Memory::VMEM);""",
)


@pytest.mark.parametrize("target", TARGETS)
def test_an_accumulator_updated_in_place_through_a_loop(target):
    # acc = (2 acc - 1) + A B twice, small integers: exact. The nested expression's
    # accumulator is found through the unstored `acc * 2.0`.
    ptx, kern = _build_ptx(target, UPDATE)
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-3, 4, (128, 128)).astype(BF16) for _ in range(2))
    c = np.full((128, 128), np.nan, np.float32)
    ptxsim.run_kernel(ptx, kern, [a, b, c], 1)
    ab = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(c, (2 * (2 * 0 - 1 + ab) - 1) + ab)


STALE_ACC = GEMM.format(
    t="bf16",
    body="""\
  matmul_acc(&mut acc, &at, &bt);
  let mut acc2 = acc * 2.0;
  matmul_acc(&mut acc2, &at, &bt);
  let y = transfer(acc * 3.0, Memory::VMEM);""",
)


@pytest.mark.parametrize("target", TARGETS)
def test_an_accumulator_read_after_its_in_place_update_is_refused(target):
    result = api.build(api.analyze([api.Source("k.vx", STALE_ACC.encode())]), target, "artifact")
    msg = refused(result, "E7006")
    assert msg.startswith("k.vx:8:") and "old value is read after" in msg, msg


F32_OPERAND = GEMM.format(
    t="f32",
    body="""\
  matmul_acc(&mut acc, &(at * 2.0), &bt);
  let y = transfer(acc, Memory::VMEM);""",
)


@pytest.mark.parametrize("target", TARGETS)
def test_a_computed_f32_mma_operand_is_refused(target):
    result = api.build(api.analyze([api.Source("k.vx", F32_OPERAND.encode())]), target, "artifact")
    msg = refused(result, "E7001")
    assert "cast it to bf16" in msg, msg
