"""Distinct arguments (LANGUAGE.md section 7, issue 30 S3): the proofs assume a `&mut`
argument shares no memory with any other argument, so every launcher refuses a launch
whose `&mut` argument overlaps another argument before any instance runs: the cpu C
entry with VX_ERR_ALIAS, `vxc.runtime`, `vxc.compile`'s kernels on every target and the
tpu and nvidia runtimes and interpreters with an `ArgumentError` naming both parameters.
Disjoint slices of one array are distinct and run."""

from __future__ import annotations

import ctypes
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc import api, runtime
from vxc.runtime import ArgumentError

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "kernels" / "stream_grid.vx"
GEMM = ROOT / "kernels" / "gemm.vx"
BF16 = ml_dtypes.bfloat16

# Two `&mut` outputs, each written by instance i at rows [128 i, 128 i + 128) only: the
# stores are disjoint per output, so only distinct arguments keep c and d apart.
TWO = """\
fn two(m: i64, x: &Tensor<f32, [m, 128]>, c: &mut Tensor<f32, [m, 128]>,
       d: &mut Tensor<f32, [m, 128]>) -> void on Topology::TensorCore
    where m % 128 == 0, instances() == m / 128 {
  let r = instance() * 128;
  let t = transfer(x[r .. r + 128, 0 .. 128], Memory::VMEM);
  transfer(t, c[r .. r + 128, 0 .. 128]);
  transfer(t, d[r .. r + 128, 0 .. 128]);
}
"""
M = 256  # two instances
OVERLAP = r"arguments `{}` and `{}` overlap: a `&mut` argument must share no memory"


def _x() -> np.ndarray:
    return np.arange(M * 128, dtype=np.float32).reshape(M, 128)


def _build(source: bytes, name: str, tmp_path_factory):
    src = api.Source(name, source)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    out = tmp_path_factory.mktemp(Path(name).stem)
    return runtime.load_outputs(result.outputs, out), out


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return _build(TWO.encode(), "two.vx", tmp_path_factory)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return _build(GRID.read_bytes(), "kernels/stream_grid.vx", tmp_path_factory)


# -- the cpu C entry, called directly -----------------------------------------------------


def _c_two(art, out: Path):
    lib = ctypes.CDLL(str(out / "two.cpu.so"))
    launch, single = lib.two_launch, lib.two
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    args = [i64, p, i64, p, i64, p, i64]
    launch.argtypes, single.argtypes = [i64, ctypes.c_int32, *args], args
    launch.restype = single.restype = ctypes.c_int32

    def call(x, c, d, instances=None):
        rows = [len(a) for a in (x, c, d)]
        flat = [M, p(x.ctypes.data), rows[0], p(c.ctypes.data), rows[1], p(d.ctypes.data), rows[2]]
        return single(*flat) if instances is None else launch(instances, 0, *flat)

    return art.manifest["status"], call


def test_the_c_entry_refuses_aliased_outputs_before_any_instance_runs(two):
    status, call = _c_two(*two)
    assert status["VX_ERR_ALIAS"] == 9
    x, c = _x(), np.zeros((M, 128), np.float32)
    assert call(x, c, c, instances=2) == status["VX_ERR_ALIAS"]
    assert call(x, x, c, instances=2) == status["VX_ERR_ALIAS"]  # the input is an output
    assert call(x, c, x, instances=2) == status["VX_ERR_ALIAS"]
    buf = np.zeros((2 * M, 128), np.float32)
    assert call(x, buf[:M], buf[M // 2 : M // 2 + M], instances=2) == status["VX_ERR_ALIAS"]
    assert not c.any() and not buf.any()  # nothing was written
    assert call(x, buf[:M], buf[M:], instances=2) == status["VX_OK"]  # disjoint slices
    np.testing.assert_array_equal(buf[:M], x)
    np.testing.assert_array_equal(buf[M:], x)


def test_the_single_instance_c_entry_checks_too(two):
    status, call = _c_two(*two)
    x, c = _x(), np.zeros((M, 128), np.float32)
    assert call(x, c, c) == status["VX_ERR_ALIAS"]
    assert call(x, x[:128], c) == status["VX_ERR_SHAPE_PARAM"]  # its own check comes first
    assert not c.any()


def test_the_c_entry_compares_a_vec_and_all_instances_of_an_output(grid):
    """stream_grid(tiles: &Vec, w) -> out: the Vec is its len * 128 * 128 elements; the
    output of K_launch is vx_instances results, so an input inside instance 1's result
    overlaps a launch of 2 and not a launch of 1."""
    art, out = grid
    status = art.manifest["status"]
    lib = ctypes.CDLL(str(out / "stream_grid.cpu.so"))
    launch, single = lib.stream_grid_launch, lib.stream_grid
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    launch.argtypes = [i64, ctypes.c_int32, p, i64, p, p]
    launch.restype = single.restype = ctypes.c_int32
    result, tile = 128 * 128 * 4, 128 * 128 * 2
    buf = np.zeros(3 * result, np.uint8)  # out at 0, then w at instance 1's result
    w = buf[result : result + tile].view(BF16).reshape(128, 128)
    tiles = np.zeros((8, 128, 128), BF16)
    tp, wp, op = p(tiles.ctypes.data), p(w.ctypes.data), p(buf.ctypes.data)
    assert launch(2, 0, tp, 4, wp, op) == status["VX_ERR_ALIAS"]
    assert launch(3, 0, tp, 2, wp, op) == status["VX_ERR_WHERE"]  # the clause comes first
    assert launch(1, 0, tp, 4, wp, op) == status["VX_OK"]
    assert single(tp, 4, wp, op) == status["VX_OK"]
    assert single(tp, 4, wp, tp) == status["VX_ERR_ALIAS"]  # the output is the Vec
    after = p(tiles[4:].ctypes.data)  # one result is two tiles: tiles[4:6]
    assert single(tp, 5, wp, after) == status["VX_ERR_ALIAS"]  # a Vec of 5 reaches it
    assert single(tp, 4, wp, after) == status["VX_OK"]  # a Vec of 4 ends before it
    assert single(p(tiles[6:].ctypes.data), 2, wp, after) == status["VX_OK"]  # starts after
    assert launch(2, 0, None, 0, wp, op) == status["VX_ERR_WHERE"]  # an empty Vec: no bytes
    assert single(None, 0, wp, op) == status["VX_ERR_WHERE"]  # no tiles, no bytes, no alias


# -- vxc.runtime ------------------------------------------------------------------------


def test_the_runtime_names_both_parameters(two):
    art, _ = two
    x, c = _x(), np.zeros((M, 128), np.float32)
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        art.two.launch(M, x, c, c, instances=2)
    with pytest.raises(ArgumentError, match=OVERLAP.format("x", "c")):
        art.two.launch(x=x, c=x, d=c, instances=2)  # shape parameter inferred
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        art.two(M, x, c, c)
    buf = np.zeros((2 * M, 128), np.float32)
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        art.two.launch(M, x, buf[:M], buf[M - 1 : 2 * M - 1], instances=2)  # one row in common
    assert not c.any() and not buf.any()
    art.two.launch(M, x, buf[:M], buf[M:], instances=2)
    np.testing.assert_array_equal(buf, np.concatenate([x, x]))


def test_an_input_viewed_as_the_output_is_refused(tmp_path_factory):
    """gemm's bf16 `a` and its f32 `c` in one buffer: overlapping bytes of other dtypes."""
    art, _ = _build(GEMM.read_bytes(), "kernels/gemm.vx", tmp_path_factory)
    buf = np.zeros(128 * 128 * 4 + 128 * 128 * 2, np.uint8)
    c = buf[: 128 * 128 * 4].view(np.float32).reshape(128, 128)
    a = buf[-128 * 128 * 2 - 2 : -2].view(BF16).reshape(128, 128)  # its first row in c
    b = np.zeros((128, 128), BF16)
    with pytest.raises(ArgumentError, match=OVERLAP.format("a", "c")):
        art.gemm.launch(a=a, b=b, c=c, instances=1)
    art.gemm.launch(a=buf[-128 * 128 * 2 :].view(BF16).reshape(128, 128), b=b, c=c, instances=1)


def test_the_c_status_is_an_argument_error_too(two, monkeypatch):
    """Without the Python check the C entry's VX_ERR_ALIAS refuses the launch."""
    art, _ = two
    monkeypatch.setattr(runtime, "check_distinct", lambda *_: None)
    x, c = _x(), np.zeros((M, 128), np.float32)
    with pytest.raises(ArgumentError, match=r"refused the launch with VX_ERR_ALIAS \(9\)"):
        art.two.launch(M, x, c, c, instances=2)
    assert not c.any()


def test_check_distinct_itself():
    buf = np.zeros(16, np.float32)
    runtime.check_distinct("k", [("a", buf[:8], True), ("b", buf[8:], True)])
    runtime.check_distinct("k", [("a", buf, False), ("b", buf, False)])  # read-only twice
    runtime.check_distinct("k", [("a", buf[:0], True), ("b", buf, False)])  # empty
    runtime.check_distinct("k", [("a", buf[::2], True), ("b", buf[1::2], False)])  # interleaved
    with pytest.raises(ArgumentError, match=OVERLAP.format("a", "b")):
        runtime.check_distinct("k", [("a", buf[::2], True), ("b", buf[2:3], False)])
    with pytest.raises(ArgumentError, match=OVERLAP.format("a", "b")):
        runtime.check_distinct("k", [("a", buf, False), ("b", buf[3:], True)])
    other = object()  # not numpy (a jax.Array): the same object
    with pytest.raises(ArgumentError, match=OVERLAP.format("a", "b")):
        runtime.check_distinct("k", [("a", other, True), ("b", other, False)])


# -- vxc.compile: the cpu, the tpu interpreter, the PTX simulator -------------------------

TARGETS = ["cpu", "tpu", "b200", "h100"]


@pytest.mark.parametrize("target", TARGETS)
def test_vxc_compile_refuses_overlapping_arguments(target):
    k = vxc.compile(TWO, target=target, interpret=True)
    x, c = _x(), np.zeros((M, 128), np.float32)
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        k.launch(x, c, c, instances=2)
    with pytest.raises(ArgumentError, match=OVERLAP.format("x", "c")):
        k.launch(x, x, c, instances=2)
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        k(x[:128], c[:128], c[:128])  # one instance
    buf = np.zeros((2 * M, 128), np.float32)
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        k.launch(x, buf[:M], buf[M // 2 : M // 2 + M], instances=2)
    assert not c.any() and not buf.any()
    k.launch(x, buf[:M], buf[M:], instances=2)  # disjoint slices of one array
    np.testing.assert_array_equal(buf, np.concatenate([x, x]))


def test_the_tpu_runtime_checks_before_it_looks_for_a_tpu():
    k = vxc.compile(TWO, target="tpu")  # the export, run by the tpu runtime
    x = _x()
    with pytest.raises(ArgumentError, match=OVERLAP.format("x", "d")):
        k.launch(x, np.zeros_like(x), x, instances=2)


@pytest.mark.parametrize("target", ["b200", "h100"])
def test_the_nvidia_launch_plan_checks(target):
    """plan_launch is what the CUDA launch and the PTX simulator both run first."""
    from vxc.backends.nvidia.runtime import plan_launch

    k = vxc.compile(TWO, target=target)
    x, c = _x(), np.zeros((M, 128), np.float32)
    with pytest.raises(ArgumentError, match=OVERLAP.format("c", "d")):
        plan_launch(k.spec, [M, x, c, c], 2)
    assert len(plan_launch(k.spec, [M, x, c, np.zeros_like(c)], 2)) == len(k.spec["params"])
