"""Masks, bool and integer tiles on b200 / h100 (backends/nvidia/tiles.py): comparisons,
`select`, `iota`, `& | !`, i32 arithmetic (wrapping), `.argmax/.argmin`, casts between
float, integer and bool tiles, in the PTX simulator against numpy; the causal mask on a
matmul accumulator where it lives (h100 registers, b200 TMEM); ptxas for sm_90a and
sm_100a on each form; bool tensors through TMA; the i64 refusal; and the
simulator's models of the new instructions, checked by mutating the emitted PTX.
tests/e2e/test_tile_masks.py covers the same forms on every target."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc import api
from vxc.backends.nvidia import ptxsim

TARGETS = ["b200", "h100"]
R, C = 64, 128
OUT = f"[0 .. {R}, 0 .. {C}]"
F = f"Tensor<f32, [{R}, {C}]>"
I = f"Tensor<i32, [{R}, {C}]>"  # noqa: E741
HEAD = "fn k({args}) -> void on Topology::TensorCore where instances() == 1{where} {{\n{body}\n}}"

BRIEF = f"""
fn k(x: &{F}, o: &mut {F}, a: &mut {I}) -> void on Topology::TensorCore where instances() == 1 {{
  let t = transfer(x, Memory::VMEM);
  let col = iota::<i32>([{R}, {C}], 1);
  transfer(select((t > 0.0) & (col < 100), t, -1.0), o{OUT});
  transfer(Tensor<i32>([{R}, {C}]) + t.argmax(1), a{OUT});
}}
"""


def _src(args: str, body: str, where: str = "") -> str:
    return HEAD.format(args=args, body=body, where=where)


def _data(seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((R, C)).astype(np.float32)
    x[1, 7] = x[1, 9] = np.nan
    x[2, :] = 0.5
    x[3, 3], x[3, 100] = np.inf, -np.inf
    x[:, 50] = x[:, 51]
    return x


@pytest.mark.parametrize("target", TARGETS)
def test_the_briefs_kernel_matches_numpy(target):
    x = _data(0)
    o, a = np.zeros_like(x), np.zeros((R, C), np.int32)
    vxc.compile(BRIEF, target=target, interpret=True).launch(x, o, a, instances=1)
    col = np.arange(C)[None]
    np.testing.assert_array_equal(o, np.where((x > 0) & (col < 100), x, np.float32(-1.0)))
    np.testing.assert_array_equal(a[:, 0], np.argmax(x, 1))


CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
       "==": np.equal, "!=": np.not_equal}  # fmt: skip


CMP_SRC = _src(
    f"x: &Tensor<bf16, [{R}, {C}]>, " + ", ".join(f"o{i}: &mut {F}" for i in range(6)),
    "\n".join(
        ["  let t = transfer(x, Memory::VMEM);",
         f"  let n = iota::<i32>([{R}, {C}], 1) - iota::<i32>([{R}, {C}], 0) * 3;"]
        + [f"  transfer(cast::<f32>((t {op} 0.5) | (n {op} -7)), o{i}{OUT});"
           for i, op in enumerate(CMP)]
    ),
)  # fmt: skip


@pytest.mark.parametrize("target", TARGETS)
def test_every_comparison_of_bf16_and_i32_tiles(target):
    """bf16 compares exactly (widened), NaN false but for `!=`; i32 compares signed."""
    x = _data(1).astype(ml_dtypes.bfloat16)
    outs = [np.zeros((R, C), np.float32) for _ in CMP]
    k = vxc.compile(CMP_SRC, target=target, interpret=True)
    k.launch(x, *outs, instances=1)
    n = np.arange(C)[None] - np.arange(R)[:, None] * 3
    for o, f in zip(outs, CMP.values(), strict=True):
        want = f(x.astype(np.float32), np.float32(0.5)) | f(n, -7)
        np.testing.assert_array_equal(o, want.astype(np.float32))


_A = f"x: &{F}, y: &{F}, o: &mut {F}, p: &mut {F}"
_B = f"""  let t = transfer(x, Memory::VMEM);
  let u = transfer(y, Memory::VMEM);
  let m = t < u;
  transfer(select(!m, 3.0, u) + cast::<f32>(m & (t > 0.0)), o{OUT});
  transfer(select(t.min(1) < -1.0, t, u), p{OUT});"""
BOOL_SRC = _src(_A, _B)


@pytest.mark.parametrize("target", TARGETS)
def test_a_bool_tile_in_shared_memory_and_select_forms(target):
    """A let-bound mask (one byte an element in shared memory) read twice; `!`; select
    with a scalar first branch, and with a [R, 1] condition broadcast over the columns."""
    x, y = _data(2), _data(3)
    o, p = np.zeros_like(x), np.zeros_like(x)
    vxc.compile(BOOL_SRC, target=target, interpret=True).launch(x, y, o, p, instances=1)
    m = x < y
    np.testing.assert_array_equal(o, np.where(~m, np.float32(3.0), y) + (m & (x > 0)))
    low = np.minimum.reduce(x, axis=1, keepdims=True) < -1.0  # NaN rows: NaN < -1 false
    np.testing.assert_array_equal(p, np.where(low, x, y))


_A = f"r: i64, o: &mut {I}, s: &mut {I}, c: &mut {I}"
_B = f"""  let q = iota::<i32>([{R}, {C}], 0) * 33554432 + iota::<i32>([{R}, {C}], 1) - cast::<i32>(r);
  transfer(max(q * 3, -q) - q - min(q, 5), o{OUT});
  transfer(Tensor<i32>([{R}, {C}]) + q.sum(1), s{OUT});
  transfer(Tensor<i32>([{R}, {C}]) + q.max(0) - q.min(0), c{OUT});"""
INT_SRC = _src(_A, _B, ", 0 <= r, r < 65536")


@pytest.mark.parametrize("target", TARGETS)
def test_i32_arithmetic_wraps_and_integer_reductions(target):
    o, s, c = (np.zeros((R, C), np.int32) for _ in range(3))
    k = vxc.compile(INT_SRC, target=target, interpret=True)
    k.launch(7, o, s, c, instances=1)
    with np.errstate(over="ignore"):
        q = (np.arange(R, dtype=np.int32)[:, None] * np.int32(33554432)
             + np.arange(C, dtype=np.int32)[None] - np.int32(7))  # fmt: skip
        want = np.maximum(q * np.int32(3), -q) - q - np.minimum(q, np.int32(5))
        np.testing.assert_array_equal(o, want)
        np.testing.assert_array_equal(s[:, 0], q.sum(1, dtype=np.int32))
        np.testing.assert_array_equal(c[0], q.max(0) - q.min(0))


_A = f"x: &{F}, r: &mut {I}, c: &mut {I}, n: &mut {I}"
_B = f"""  let t = transfer(x, Memory::VMEM);
  transfer(Tensor<i32>([{R}, {C}]) + t.{{fn}}(1), r{OUT});
  transfer(Tensor<i32>([{R}, {C}]) + t.{{fn}}(0), c{OUT});
  transfer(Tensor<i32>([{R}, {C}]) + (iota::<i32>([{R}, {C}], 0) - iota::<i32>([{R}, {C}], 1)).{{fn}}(1), n{OUT});"""
ARG_SRC = _src(_A, _B)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_arg_reductions_first_extreme_first_nan_both_axes(target, fn):
    x = _data(4)
    x[10, 90], x[10, 20] = np.nan, np.nan  # the first NaN of a row: 20
    x[40:, 60] = np.nan  # a NaN column below row 40
    x[:, 0] = x[:, 127] = 9.0  # ties across lanes and column blocks
    r, c, n = (np.zeros((R, C), np.int32) for _ in range(3))
    k = vxc.compile(ARG_SRC.replace("{fn}", fn), target=target, interpret=True)
    k.launch(x, r, c, n, instances=1)
    f = getattr(np, fn)
    np.testing.assert_array_equal(r[:, 0], f(x, 1))
    np.testing.assert_array_equal(c[0], f(x, 0))
    ni = np.arange(R)[:, None] - np.arange(C)[None]
    np.testing.assert_array_equal(n[:, 0], f(ni, 1))


_A = f"x: &{F}, i: &mut {I}, f: &mut {F}"
_B = f"""  let t = transfer(x, Memory::VMEM);
  transfer(cast::<i32>(t * 1e9) + cast::<i32>(t >= 0.0), i{OUT});
  transfer(cast::<f32>(t != t) + cast::<f32>(cast::<i32>(t * 3.0)), f{OUT});"""
CAST_SRC = _src(_A, _B)


@pytest.mark.parametrize("target", TARGETS)
def test_casts_bool_to_float_and_float_to_int(target):
    x = _data(5)
    x[7, :6] = [3.0, -3.0, 2.5, -2.5, 1e30, -1e30]
    i, f = np.zeros((R, C), np.int32), np.zeros((R, C), np.float32)
    vxc.compile(CAST_SRC, target=target, interpret=True).launch(x, i, f, instances=1)

    def to_i32(v):
        v = np.nan_to_num(v.astype(np.float64), nan=0.0)
        return np.trunc(np.clip(v, -(2.0**31), 2.0**31 - 1)).astype(np.int64)

    with np.errstate(invalid="ignore", over="ignore"):
        wi = to_i32(x * np.float32(1e9)) + (x >= 0)
        np.testing.assert_array_equal(i, ((wi + 2**31) % 2**32 - 2**31).astype(np.int32))
        wf = np.isnan(x).astype(np.float32) + to_i32(x * np.float32(3.0)).astype(np.float32)
    np.testing.assert_array_equal(f, wf)


BOOL_HBM = f"""fn k(x: &{F}, m: &Tensor<bool, [{R}, {C}]>, o: &mut Tensor<bool, [{R}, {C}]>,
     p: &mut {F}) -> void on Topology::TensorCore where instances() == 1 {{
  let t = transfer(x, Memory::VMEM);
  let mm = transfer(m, Memory::VMEM);
  transfer((t > 0.0) | mm, o{OUT});
  transfer(select(mm, t, 2.0), p{OUT});
}}"""


@pytest.mark.parametrize("target", TARGETS)
def test_bool_tensors_in_and_out_by_tma(target):
    """A bool tensor is one byte (0/1) an element: TMA moves it as UINT8."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((R, C)).astype(np.float32)
    m = rng.random((R, C)) < 0.3
    o, p = np.zeros((R, C), bool), np.zeros((R, C), np.float32)
    vxc.compile(BOOL_HBM, target=target, interpret=True).launch(x, m, o, p, instances=1)
    np.testing.assert_array_equal(o, (x > 0) | m)
    np.testing.assert_array_equal(p, np.where(m, x, np.float32(2.0)))


ACC = """
fn k(a: &Tensor<bf16, [128, 64]>, b: &Tensor<bf16, [64, 128]>, r: i64,
     o: &mut Tensor<f32, [128, 128]>, mx: &mut Tensor<i32, [128, 128]>) -> void
    on Topology::TensorCore where instances() == 1, 0 <= r, r < 65536 {
  let at = transfer(a, Memory::VMEM);
  let bt = transfer(b, Memory::VMEM);
  let mut s = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  matmul_acc(&mut s, &at, &bt);
  let q_pos = iota::<i32>([128, 128], 0) + cast::<i32>(r);
  let k_pos = iota::<i32>([128, 128], 1);
  let masked = select(transfer(k_pos <= q_pos, Memory::ACC), s, -1e30);
  transfer(masked, o[0 .. 128, 0 .. 128]);
  transfer(Tensor<i32>([128, 128]) + transfer(masked.argmax(1), Memory::VMEM), mx[0 .. 128, 0 .. 128]);
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_the_causal_mask_on_a_matmul_accumulator_where_it_lives(target):
    """`select(k_pos <= q_pos, s, -1e30)` on the accumulator (h100 wgmma registers,
    b200 TMEM rows): the mask is read in the accumulator's spread, and an argmax over
    the masked accumulator's rows combines (value, index) pairs across the lanes."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    o, mx = np.zeros((128, 128), np.float32), np.zeros((128, 128), np.int32)
    vxc.compile(ACC, target=target, interpret=True).launch(a, b, 5, o, mx, instances=1)
    s = a.astype(np.float64) @ b.astype(np.float64)
    keep = np.arange(128)[None] <= np.arange(128)[:, None] + 5
    np.testing.assert_allclose(o, np.where(keep, s, -1e30), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o[~keep], np.float32(-1e30))
    np.testing.assert_array_equal(mx[:, 0], np.argmax(o, 1))


# -- ptxas and refusals -------------------------------------------------------------------

ASSEMBLED = {
    "brief": BRIEF,
    "compare": CMP_SRC,
    "bool": BOOL_SRC,
    "int": INT_SRC,
    "argmax": ARG_SRC.replace("{fn}", "argmax"),
    "argmin": ARG_SRC.replace("{fn}", "argmin"),
    "cast": CAST_SRC,
    "bool_hbm": BOOL_HBM,
    "acc": ACC,
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(ASSEMBLED))
def test_ptxas_assembles_the_mask_kernels(target, name):
    src = api.Source("k.vx", ASSEMBLED[name].encode())
    result = api.build(api.analyze([src]), target, "artifact")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    assert any(n.endswith(".fatbin") for n in result.outputs)


def _refusal(target: str, text: str) -> tuple[str, str]:
    result = api.build(api.analyze([api.Source("k.vx", text.encode())]), target, "target-ir")
    assert not result.ok
    (d,) = [d for d in result.diagnostics if d.severity == "error"]
    return d.code, d.message


@pytest.mark.parametrize("target", TARGETS)
def test_i64_tiles_are_refused_with_e7001(target):
    body = f"""  let q = iota::<i64>([{R}, {C}], 1) + iota::<i64>([{R}, {C}], 0);
  transfer(cast::<f32>(q), o{OUT});"""
    code, msg = _refusal(target, _src(f"o: &mut {F}", body))
    assert code == "E7001" and "i64" in msg and "64-bit" in msg


# -- the simulator's models, through mutations of the emitted PTX -------------------------


def _ptx(target: str, text: str):
    from vxc.backends.nvidia import ptx_text
    from vxc.targets import TARGETS as T

    checked = api.check_target(api.analyze([api.Source("k.vx", text.encode())]), target)
    _, ptx, kernels = ptx_text(api.backend_module(checked), T[checked.target])
    return ptx, kernels[0]


NE = _src(
    f"x: &{F}, o: &mut {F}",
    f"""  let t = transfer(x, Memory::VMEM);
  transfer(cast::<f32>(t != 0.5) + cast::<f32>(iota::<i32>([{R}, {C}], 1) - 64 < 0), o{OUT});""",
)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "mutation",
    [("setp.neu.f32", "setp.ne.f32"),  # NaN != 0.5 is true: the unordered compare
     ("setp.lt.s32", "setp.lt.u32")],  # a negative i32 is below 0 only signed
    ids=["neu", "signed"],
)  # fmt: skip
def test_mutating_a_comparison_gives_a_wrong_answer(target, mutation):
    ptx, k = _ptx(target, NE)
    assert mutation[0] in ptx
    x = _data(6)
    want = (x != 0.5).astype(np.float32) + (np.arange(C)[None] < 64)

    def run(text):
        o = np.zeros_like(x)
        assert ptxsim.run_kernel(text, k, [x, o], 1) == []
        return o

    np.testing.assert_array_equal(run(ptx), want)
    assert not np.array_equal(run(ptx.replace(*mutation)), want)


def test_the_simulator_wraps_neg_and_abs_and_reads_s32_signed():
    assert ptxsim._signed(0x80000000, 32) == -(2**31)
    assert ptxsim._tdiv(-7, 2) == -3 and ptxsim._tdiv(7, -2) == -3
