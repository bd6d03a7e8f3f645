"""Const-generic values (issue 9 item 2) from source to numbers on the CPU: a const
parameter is a value of its declared type, negative arguments included."""

from __future__ import annotations

from vxc import api, runtime

SOURCE = b"""\
fn pick<const N: i64>(x: i64) -> i64 on Topology::TensorCore {
  let mut s = x;
  for i in 0..N {
    s = s + N;
  }
  return s;
}
fn narrow<const M: i32>(y: i32) -> i32 on Topology::TensorCore {
  return y * M;
}
fn k(x: i64, y: i32) -> i64 on Topology::TensorCore {
  let z = narrow::<-3>(y) + narrow::<2>(y);
  return pick::<3>(x) + pick::<-2>(x) + pick::<0>(x);
}
fn j(y: i32) -> i32 on Topology::TensorCore {
  return narrow::<-3>(y) + narrow::<2>(y);
}
"""


def test_const_generic_values_compute_on_the_cpu(tmp_path):
    src = api.Source("cg.vx", SOURCE)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render_human(result.diagnostics, [src])
    mod = runtime.load_outputs(result.outputs, tmp_path)
    # pick<3>(10) = 10 + 3 * 3; pick<-2>(10) and pick<0>(10) run no iteration.
    assert int(mod.k(10, 5)) == 19 + 10 + 10
    assert int(mod.j(7)) == -21 + 14
