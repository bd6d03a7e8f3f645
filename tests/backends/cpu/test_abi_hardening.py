"""Issue 25, the CPU ABI from C: a negative Vec length is refused before the kernel reads
anything (it passed the unsigned index check and read before the buffer), and a launch
that breaks the `where` clause is refused before any instance runs, in time independent
of the instance count."""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime

ROOT = Path(__file__).resolve().parents[3]
P, I64 = ctypes.c_void_p, ctypes.c_int64

LAST = b"""
fn last(tiles: &Vec<Tensor<f32, [4, 4]>>) -> Tensor<f32, [4, 4]> on Topology::TensorCore {
  let t = transfer(tiles[tiles.len() - 1], Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""


def _load(name: str, text: bytes, out: Path):
    src = api.Source(name, text)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    return runtime.load_outputs(result.outputs, out)


@pytest.fixture(scope="module")
def last(tmp_path_factory):
    return _load("last.vx", LAST, tmp_path_factory.mktemp("last"))


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return _load(
        "stream_grid.vx",
        (ROOT / "kernels/stream_grid.vx").read_bytes(),
        tmp_path_factory.mktemp("grid"),
    )


def _entry(art, name: str, argtypes: list) -> ctypes._CFuncPtr:
    fn = getattr(ctypes.CDLL(str(art.library_path)), name)
    fn.argtypes, fn.restype = argtypes, ctypes.c_int32
    return fn


@pytest.mark.parametrize("length", [-1, -2, -(1 << 62), -(1 << 63)])
def test_a_negative_vec_length_is_refused_before_any_read(last, length):
    status = last.manifest["status"]
    tiles = np.arange(3 * 16, dtype=np.float32).reshape(3, 4, 4)
    out = np.zeros((4, 4), np.float32)
    single = _entry(last, "last", [P, I64, P])
    launch = _entry(last, "last_launch", [I64, ctypes.c_int32, P, I64, P])
    tp, op = P(tiles.ctypes.data), P(out.ctypes.data)
    assert single(tp, length, op) == status["VX_ERR_SHAPE"]
    assert launch(1, 1, tp, length, op) == status["VX_ERR_SHAPE"]
    assert not out.any()
    assert single(tp, 3, op) == status["VX_OK"]
    np.testing.assert_array_equal(out, tiles[2])


def test_a_where_clause_is_refused_once_before_any_instance_runs(grid):
    """2^28 instances of four tiles break `where instances() <= tiles.len()`: one check
    before the pool starts (it took 24 s when every instance evaluated the clause)."""
    status = grid.manifest["status"]
    launch = _entry(grid, "stream_grid_launch", [I64, ctypes.c_int32, P, I64, P, P])
    tiles = np.zeros((4, 128, 128), np.uint16)
    w = np.zeros((128, 128), np.uint16)
    out = np.zeros((1, 128, 128), np.float32)
    args = [P(a.ctypes.data) for a in (tiles, w, out)]
    start = time.perf_counter()
    assert launch(1 << 28, 0, args[0], 4, args[1], args[2]) == status["VX_ERR_WHERE"]
    took = time.perf_counter() - start
    assert took < 0.5, f"{took:.2f} s to refuse the launch"
    assert not out.any()


ONE = b"""
fn one(w: &Tensor<f32, [4, 4]>) -> Tensor<f32, [4, 4]> on Topology::TensorCore
    where instance() < 2 {
  let t = transfer(w, Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""


def test_a_clause_that_reads_instance_is_checked_for_every_instance_first(tmp_path):
    """Instances 2 and 3 break `instance() < 2`: the launch is refused before instances 0
    and 1 write their results (each instance's own check would let them)."""
    art = _load("one.vx", ONE, tmp_path)
    w = np.ones((4, 4), np.float32)
    with pytest.raises(runtime.LaunchError, match="VX_ERR_WHERE"):
        art.one.launch(w, instances=4)
    launch = _entry(art, "one_launch", [I64, ctypes.c_int32, P, P])
    out = np.zeros((4, 4, 4), np.float32)
    status = art.manifest["status"]
    assert launch(4, 1, P(w.ctypes.data), P(out.ctypes.data)) == status["VX_ERR_WHERE"]
    assert not out.any()
    assert art.one.launch(w, instances=2).shape == (2, 4, 4)
