"""Issue 30, S1: integers and bools a loop body assigns are read at the loop head as
checks/loops.py says (closed forms, intervals, or any value), not as "the entry value or
one step past it". The diagnostics are golden cases (tests/golden/cases/*loop_counter*,
*conditional_step*); here: what the proofs let the lowering drop, and that a correct
counter kernel builds and computes what numpy does."""

from __future__ import annotations

import re

import numpy as np
import pytest

import vxc
from vxc import api
from vxc.runtime import KernelError

VEC = b"""
fn pick(tiles: &Vec<Tensor<f32, [8, 128]>>, c: &mut Tensor<f32, [8, 128]>) -> void
    on Topology::TensorCore where instances() == 1, tiles.len() >= 2 {
  let mut j = 0;
  for i in 0 .. N {
    let t = transfer(tiles[j], Memory::VMEM);
    transfer(t, c[0 .. 8, 0 .. 128]);
    j = j + 1;
  }
}
"""

COUNTER = """
fn carry(a: &Tensor<f32, [512, 128]>, c: &mut Tensor<f32, [512, 128]>) -> void
    on Topology::TensorCore where instances() == 1 {
  let mut r = 0;
  for i in 0 .. 4 {
    let t = transfer(a[r .. r + 128, 0 .. 128], Memory::VMEM);
    transfer(t * 2.0, c[r .. r + 128, 0 .. 128]);
    r = r + 128;
  }
}
"""


def _proved(src: bytes) -> list[int]:
    source = api.Source("pick.vx", src)
    result = api.build(api.analyze([source]), "cpu", "vx-mlir")
    assert result.ok, api.render(result.diagnostics, [source])
    text = result.outputs["pick.cpu.mlir"].decode()
    return [int(x) for x in re.findall(r'"vx\.element"\([^)]*\) \{proved = (\d)', text)]


@pytest.mark.parametrize(("n", "proved"), [(2, 1), (6, 0)])
def test_a_vec_index_stepped_past_the_length_keeps_its_run_time_check(n, proved):
    """`j` reaches 5 in six iterations over a Vec of at least 2: the index is not proved
    in bounds, so its run-time check stays (it was marked proved and `tiles[5]` of two
    tiles was read with status 0). Two iterations stay within the two tiles: proved."""
    assert _proved(VEC.replace(b"N", str(n).encode())) == [proved]


def test_a_vec_index_past_the_length_is_refused_when_it_runs():
    kernel = vxc.compile(VEC.replace(b"N", b"6").decode())
    tiles = np.ones((2, 8, 128), np.float32)
    with pytest.raises(KernelError, match="VX_ERR_INDEX"):
        kernel(tiles, np.zeros((8, 128), np.float32))


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_a_counter_that_stays_in_bounds_checks_and_builds(target):
    source = api.Source("carry.vx", COUNTER.encode())
    result = api.build(api.analyze([source]), target)
    assert result.ok, api.render(result.diagnostics, [source])


def test_a_counter_kernel_computes_what_numpy_does():
    a = np.arange(512 * 128, dtype=np.float32).reshape(512, 128)
    c = np.zeros_like(a)
    vxc.compile(COUNTER)(a, c)
    np.testing.assert_array_equal(c, a * 2)
