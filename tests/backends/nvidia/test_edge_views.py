"""`edge` views on b200 / h100 (LANGUAGE.md 4.2): a fill other than zero is tile
arithmetic's select after the TMA load lands (the tensor map itself fills zeros), run in
the PTX simulator against numpy; what the backends refuse at build, coded (and a static
row pitch that is not a multiple of 16 bytes, which the launcher pads, building); and the
simulator's own model of TMA's tiled-mode out-of-bounds rules (ptxsim.py).
kernels/gemm_any.vx, the zero-fill case, is tests/e2e/test_gemm_any_nvidia.py's."""

from __future__ import annotations

import numpy as np
import pytest

from vxc import api
from vxc.backends.nvidia import ptx_text, ptxsim, runtime
from vxc.targets import TARGETS

# An edge tile of x read with the fill `f` (a parameter: a register, not an immediate),
# doubled by tile arithmetic, stored whole into y: y shows every element the select set.
FILL = """
fn fill_edge(m: i64, n: i64, p: i64, f: f32, x: &Tensor<f32, [m, n]>,
             y: &mut Tensor<f32, [p, 128]>) -> void on Topology::TensorCore
    where m >= 1, n >= 1, n <= 1073741824, instances() <= 1048576, p == instances() * 128 {
  let r = instance() * 128;
  let t = transfer(edge(x[r .. r + 128, 0 .. 128], FILL), Memory::VMEM);
  let u = t * 2.0;
  transfer(u, y[r .. r + 128, 0 .. 128]);
}
"""


def _analysis(text: str) -> api.Analysis:
    return api.analyze([api.Source("edge.vx", text.encode())])


def _ptx(target: str, text: str) -> tuple[str, dict]:
    checked = api.check_target(_analysis(text), target)
    _, ptx, kernels = ptx_text(api.backend_module(checked), TARGETS[checked.target])
    return ptx, kernels[0]


# (7, 13): x's rows are 52 bytes, laid out at 64 by the launcher; the select still sees 13.
@pytest.mark.parametrize(
    ("target", "m", "n"), [("h100", 200, 100), ("b200", 130, 36), ("b200", 7, 13)]
)
def test_a_non_zero_fill_is_selected_past_the_tensors_end(target, m, n):
    ptx, kern = _ptx(target, FILL.replace("FILL", "f"))
    # The select compares each element's global coordinate with the tensor's dims, which
    # the launcher passes from the array (never rounded to the box).
    assert [p["value"] for p in kern["params"] if p.get("arg") == "x" and p["kind"] == "u64"] == [
        "rows",
        "cols",
    ]
    instances = -(-m // 128)
    x = np.arange(m * n, dtype=np.float32).reshape(m, n) - 7.0
    y = np.full((instances * 128, 128), np.nan, np.float32)
    args = [m, n, instances * 128, np.float32(-1.5), x, y]
    assert ptxsim.run_kernel(ptx, kern, args, instances) == []
    want = np.full_like(y, -1.5)
    want[:m, :n] = x
    np.testing.assert_array_equal(y, 2 * want)


# Edge views in a double-buffered loop: the token carried around it carries the fill's
# register and the box's coordinates too, each load selecting against its own rows.
LOOP = """
fn rows_fill(m: i64, n: i64, p: i64, f: f32, x: &Tensor<f32, [m, n]>,
             y: &mut Tensor<f32, [p, 128]>) -> void on Topology::TensorCore
    where m >= 1, m <= 1048576, n >= 1, n <= 1073741824, p == ((m + 7) / 8) * 8,
          instances() == 1 {
  let mut tk = transfer_async(edge(x[0 .. 8, 0 .. 128], f), Memory::VMEM);
  for i in 1 .. (m + 7) / 8 {
    let nx = transfer_async(edge(x[i * 8 .. i * 8 + 8, 0 .. 128], f), Memory::VMEM);
    let t = wait(tk);
    transfer(t, y[(i - 1) * 8 .. (i - 1) * 8 + 8, 0 .. 128]);
    tk = nx;
  }
  let t = wait(tk);
  transfer(t, y[p - 8 .. p, 0 .. 128]);
}
"""


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_a_fill_through_a_loop_carried_token(target):
    ptx, kern = _ptx(target, LOOP)
    m, n, p = 21, 20, 24  # three tiles of 8 rows, the last one 5 rows in; 20 of 128 columns
    x = np.arange(m * n, dtype=np.float32).reshape(m, n) + 1
    y = np.full((p, 128), np.nan, np.float32)
    assert ptxsim.run_kernel(ptx, kern, [m, n, p, np.float32(7.25), x, y], 1) == []
    want = np.full_like(y, 7.25)
    want[:m, :n] = x
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("target", ["h100", "b200"])
@pytest.mark.parametrize("text", [FILL.replace("FILL", "f"), LOOP], ids=["fill", "loop"])
def test_ptxas_accepts_the_fill_kernels(target, text):
    result = api.build(_analysis(text), target)
    assert result.ok, [d.message for d in result.diagnostics]


def _params(target: str, fill: str) -> list[str]:
    _, kern = _ptx(target, FILL.replace("FILL", fill))
    return [p["name"] for p in kern["params"]]


def test_only_a_fill_other_than_zero_costs_a_select():
    # +0.0 is what the tensor map writes: no select, no dims parameters. -0.0 has other
    # bits, so it is selected like any other value.
    assert "x_rows" not in _params("h100", "0.0")
    assert {"x_rows", "x_cols"} <= set(_params("h100", "-0.0"))


def _refusal(target: str, text: str) -> tuple[str, str]:
    result = api.build(_analysis(text), target)
    assert not result.ok and not result.outputs
    (d,) = [d for d in result.diagnostics if d.severity == "error"]
    return d.code, d.message


MATMUL_FILL = """
fn g(m: i64, a: &Tensor<bf16, [m, 128]>, b: &Tensor<bf16, [128, 128]>,
     c: &mut Tensor<f32, [128, 128]>) -> void on Topology::TensorCore
    where m >= 1, instances() == 1 {
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let at = transfer(edge(a[0 .. 128, 0 .. 128], 1.0), Memory::VMEM);
  let bt = transfer(b, Memory::VMEM);
  matmul_acc(&mut acc, &at, &bt);
  transfer(acc, c[0 .. 128, 0 .. 128]);
}
"""


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_a_non_zero_fill_of_a_matmul_operand_is_refused(target):
    code, msg = _refusal(target, MATMUL_FILL)
    assert code == "E7001" and "fill other than zero" in msg and "matmul_acc operand" in msg, msg


RAGGED_PITCH = """
fn r(x: &Tensor<f32, [200, 13]>, y: &mut Tensor<f32, [256, 128]>) -> void on Topology::TensorCore
    where instances() == 2 {
  let t = transfer(edge(x[instance() * 128 .. instance() * 128 + 128, 0 .. 128], 0.0),
                   Memory::VMEM);
  transfer(t, y[instance() * 128 .. instance() * 128 + 128, 0 .. 128]);
}
"""


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_a_static_row_pitch_that_is_not_16_bytes_builds_and_runs_padded(target):
    # x's rows are 13 x f32 = 52 bytes, which no tensor map's stride can be: it builds
    # (ptxas included), and the launcher lays x out at 64 bytes a row, its map's dims
    # still 13 x 200, so the edge boxes fill zeros past column 13 and row 200.
    result = api.build(_analysis(RAGGED_PITCH), target)
    assert result.ok, [d.message for d in result.diagnostics]
    ptx, kern = _ptx(target, RAGGED_PITCH)
    x = np.arange(200 * 13, dtype=np.float32).reshape(200, 13) + 1.0
    y = np.full((256, 128), np.nan, np.float32)
    (plan,) = [p for p in runtime.plan_launch(kern, [x, y], 2) if p.name.startswith("x_")]
    assert (plan.tensor_map.dims, plan.tensor_map.strides, plan.pitch) == ((13, 200), (64,), 64)
    assert ptxsim.run_kernel(ptx, kern, [x, y], 2) == []
    want = np.zeros_like(y)
    want[:200, :13] = x
    np.testing.assert_array_equal(y, want)


# -- the simulator's TMA rules -----------------------------------------------------------


def _map(**kw) -> ptxsim.TensorMap:
    f = dict(buf=np.zeros(4096, np.uint8), dims=(16, 8), stride=64, box=(16, 8), swizzle="none",
             elem=4)  # fmt: skip
    f.update(kw)
    return ptxsim.TensorMap(**f)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"dims": (13, 8), "stride": 52}, "row pitch of 52"),
        ({"dims": (0, 8)}, "dims"),
        ({"address": 8}, "16-byte aligned"),
        ({"dims": (17, 8)}, "overlap"),
    ],
)
def test_the_simulator_refuses_a_tensor_map_the_driver_would_not_encode(fields, why):
    _map()  # the base map is one the driver takes
    with pytest.raises(ptxsim.SimError, match=why):
        _map(**fields)


def test_tma_coordinates_are_s32_and_never_negative_here():
    assert ptxsim.tma_coords([0, 130, 2**31 - 1]) == [0, 130, 2**31 - 1]
    with pytest.raises(ptxsim.SimError, match="-1 "):
        ptxsim.tma_coords([0xFFFFFFFF, 0])  # a u32 register holding -1
    with pytest.raises(ptxsim.SimError, match="wrapped"):
        ptxsim.tma_coords([0, 2**31])  # a 64-bit offset >= 2^31 cut to 32 bits


def test_a_box_past_the_end_is_inside_only_where_the_map_says():
    m = _map(dims=(13, 5), stride=64)
    assert m.inside(12, 4) and not m.inside(13, 0) and not m.inside(0, 5)
