"""Tile arithmetic on vregs (backends/tpu/vregs.py) beyond what the kernels exercise: a
transpose that feeds no matmul (vector.transpose), and the alignment promises view
offsets carry (tpu.assume_multiple), which the interpreter holds a call to."""

from __future__ import annotations

import os

import numpy as np
import pytest

import vxc
from vxc import api
from vxc.backends.tpu.interp import InterpError

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

TRANSPOSE = """
fn k(x: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let a = transfer(x, Memory::VMEM);
  let t = transpose(a) - 1.0;
  return transfer(t, Memory::HBM);
}
"""

# `s` is an SMEM scalar; the clause `s % 8 == 0` is what makes `x[s .. s + 8]` a slice at
# a tile-aligned offset, so the offset carries `tpu.assume_multiple` 8.
ALIGNED = """
fn k(s: i64, n: i64, x: &Tensor<f32, [n, 128]>, y: &mut Tensor<f32, [n, 128]>) -> void
    on Topology::TensorCore
    where s % 8 == 0, s >= 0, n >= 8, s <= n - 8, instances() == 1 {
  let t = transfer(x[s .. s + 8, 0 .. 128], Memory::VMEM);
  transfer(t * 2.0, y[s .. s + 8, 0 .. 128]);
}
"""


def _mosaic(text: str, **kw) -> str:
    r = api.build(api.analyze([api.Source("k.vx", text.encode())]), "tpu", "target-ir", **kw)
    assert r.ok, [d.message for d in r.diagnostics]
    return r.outputs["k.tpu.mosaic.mlir"].decode()


def test_a_transpose_feeding_no_matmul_is_a_vector_transpose_libtpu_compiles():
    assert "vector.transpose" in _mosaic(TRANSPOSE)
    r = api.build(api.analyze([api.Source("k.vx", TRANSPOSE.encode())]), "tpu", tpu_aot="v5e")
    assert r.ok, [d.message for d in r.diagnostics]
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    k = vxc.compile(TRANSPOSE, "tpu", filename="k.vx", interpret=True)
    np.testing.assert_array_equal(k(x), x.T - 1)


def test_view_offsets_carry_what_the_where_clause_says_divides_them():
    assert "tpu.assume_multiple" in _mosaic(ALIGNED)
    k = vxc.compile(ALIGNED, "tpu", filename="k.vx", interpret=True)
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    y = np.zeros_like(x)
    k(16, x, y)
    np.testing.assert_array_equal(y[16:24], x[16:24] * 2)
    assert not y[:16].any() and not y[24:].any()
    with pytest.raises(InterpError, match="not a multiple of 8"):
        k(4, x, np.zeros_like(x))  # a call that breaks the clause the promise rests on
