"""Programs a new user writes that once crashed or were wrongly rejected (issue 8).

Each runs the whole pipeline through `vxc.api` (parse, HIR, checks, and for the cpu a
real build with jaxlib and llvmlite) and asserts the diagnostic or the artifact.
"""

from __future__ import annotations

import pytest

from vxc import api

FINISH_TWICE = """\
fn finish(t: &Tensor<f32, [32, 32]>, acc: &mut Tensor<f32, [32, 32]>) -> void on Topology::TensorCore {
  let x = transfer(t, Memory::VMEM);
  matmul_acc(acc, &x, &x);
}

fn k(a: &Tensor<f32, [32, 32]>) -> void on Topology::TensorCore {
  let mut acc = Tensor<f32>([32, 32]);
  finish(a, &mut acc);
  let v = transfer(a, Memory::VMEM);
  finish(&v, &mut acc);
}
"""


def _check(text: str, target: str) -> api.Checked:
    return api.check([api.Source("t.vx", text.encode())], target)


def _codes(checked: api.Checked) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for d in checked.diagnostics]


@pytest.mark.parametrize("target", ["cpu", "tpu"])
def test_helper_called_from_two_placements_checks(target):
    # One declaration, two placement instances (`finish<HBM, VMEM>`, `finish<VMEM, VMEM>`):
    # each instance has its own HIR, so checking the second does not disturb the first.
    checked = _check(FINISH_TWICE, target)
    assert _codes(checked) == []
    fns = checked.analysis.program.functions
    assert {"finish<HBM, VMEM>", "finish<VMEM, VMEM>"} <= set(fns)
    a, b = fns["finish<HBM, VMEM>"], fns["finish<VMEM, VMEM>"]
    assert a.decl is not b.decl
    assert a.params[0].ty.show() != b.params[0].ty.show()


def test_helper_called_from_two_placements_builds_on_cpu():
    analysis = api.analyze([api.Source("t.vx", FINISH_TWICE.encode())])
    result = api.build(analysis, "cpu", emit="vx-mlir")
    assert result.ok, result.diagnostics
    text = result.outputs["t.cpu.mlir"].decode()
    assert "@finish__HBM_VMEM" in text and "@finish__VMEM_VMEM" in text
