"""Shared-memory barriers on b200 / h100 (backends/nvidia/lower.py): a slot rewritten
while other threads may still read its old value. Two loops with loop-carried [8, 1]
accumulators started from a new (zero) tensor, and a placed [8, 1] tile (`mean`, written
and read by a few threads) between them: the allocator gives the second accumulator's
ring the bytes of the first's (dead after `mean`), so the second zero fill overwrites
the slot `mean` is still reading. Without a bar.sync before the fill the simulator
caught the race (kernels/layernorm.vx hit it). In the PTX simulator against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import vxc
from vxc import api
from vxc.backends.nvidia import ptx_text, ptxsim
from vxc.targets import TARGETS as ALL

TARGETS = ["b200", "h100"]

SRC = """fn k(m: i64, n: i64, x: &Tensor<f32, [m, n]>, y: &mut Tensor<f32, [m, n]>) -> void
    on Topology::TensorCore where m % 8 == 0, n % 128 == 0, n >= 128, n <= 4096,
    instances() == m / 8 {{
  let r = instance() * 8;
  let mut sum = Tensor<f32>([8, 1]);
  for c in 0 .. n / 128 {{
    let t = transfer(x[r .. r + 8, c * 128 .. c * 128 + 128], Memory::VMEM);
    sum = sum + t.sum(1);
  }}
  let mean = sum * 0.5;
  let mut sq = Tensor<f32>([8, 1]);
  for c in 0 .. n / 128 {{
    let t = transfer(x[r .. r + 8, c * 128 .. c * 128 + 128], Memory::VMEM);
    sq = sq + ({sq}).sum(1);
  }}
  transfer(Tensor<f32>([8, 128]) + sq, y[r .. r + 8, 0 .. 128]);
}}
"""

# `mean` unused, and read by the second loop: the same race either way.
BODIES = {"mean_unused": "t * t", "mean_read": "(t - mean) * (t - mean)"}
M, N = 16, 256  # two instances, two column tiles per loop: the slots come round


def _data() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    return x, np.zeros_like(x)


def _want(x: np.ndarray, body: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    d = x64 - (x64.sum(1, keepdims=True) * 0.5 if body == "mean_read" else 0.0)
    want = np.zeros_like(x64)
    want[:, :128] = (d * d).sum(1, keepdims=True)
    return want


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("body", list(BODIES))
def test_placed_tile_between_two_zero_started_loops_matches_numpy(target, body):
    x, y = _data()
    vxc.compile(SRC.format(sq=BODIES[body]), target=target, interpret=True).launch(
        x, y, instances=M // 8
    )
    np.testing.assert_allclose(y, _want(x, body), rtol=1e-5, atol=1e-4)


def _ptx(target: str) -> tuple[str, dict]:
    src = SRC.format(sq=BODIES["mean_unused"])
    checked = api.check_target(api.analyze([api.Source("barriers.vx", src.encode())]), target)
    _, ptx, kernels = ptx_text(api.backend_module(checked), ALL[checked.target])
    return ptx, kernels[0]


BARRIER = "\t// tile barrier\n\tbar.sync 0;\n"


@pytest.mark.parametrize("target", TARGETS)
def test_the_barrier_before_the_second_zero_fill_stops_the_race(target):
    ptx, kernel = _ptx(target)
    x, y = _data()
    assert ptxsim.run_kernel(ptx, kernel, [M, N, x, y], M // 8) == []
    np.testing.assert_allclose(y, _want(x, "mean_unused"), rtol=1e-5, atol=1e-4)
    # The barrier just before the second fill loop removed: mean's readers race with it.
    at = ptx.rindex(BARRIER, 0, ptx.index("$L_zero_1:"))
    assert "bar.sync" not in ptx[at + len(BARRIER) : ptx.index("$L_zero_1:")]
    mutated = ptx[:at] + ptx[at + len(BARRIER) :]
    with pytest.raises(ptxsim.SimError, match="race between threads"):
        ptxsim.run_kernel(mutated, kernel, [M, N, *_data()], M // 8)
