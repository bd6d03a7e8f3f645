"""Dimension expressions and const defaults (LANGUAGE.md 3, issue 32): a tile size
computed from a const parameter (`[128, 2 * BK]`) with a default (`BK = 64`), built from
one source for every target, with the default and with `consts=`, runs and returns the
columns its view names (cpu natively, tpu in the Mosaic interpreter, b200 and h100 in
the PTX simulator)."""

from __future__ import annotations

import numpy as np
import pytest

import vxc

PAIR = """\
fn pair<const BK: i64 = 64>(x: &Tensor<f32, [128, 2 * BK]>) -> Tensor<f32, [128, BK]>
    on Topology::TensorCore {
  let t = transfer(x[0 .. 128, BK .. 2 * BK], Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
@pytest.mark.parametrize("consts", [None, {"BK": 128}], ids=["default", "BK=128"])
def test_a_computed_tile_size_builds_and_runs(target, consts):
    k = vxc.compile(PAIR, target=target, consts=consts, interpret=target != "cpu")
    bk = (consts or {"BK": 64})["BK"]
    x = np.arange(128 * 2 * bk, dtype=np.float32).reshape(128, 2 * bk)
    out = k(x)
    assert out.shape == (128, bk)
    np.testing.assert_array_equal(out, x[:, bk:])


def test_an_inexact_division_names_the_values():
    with pytest.raises(vxc.CompileError) as e:
        vxc.compile(PAIR.replace("[128, BK]>", "[128, BK / 3]>"), consts={"BK": 64})
    assert e.value.codes[0] == "E0110"
    assert "`BK / 3` does not divide exactly: 64 / 3 with BK = 64" in str(e.value)
