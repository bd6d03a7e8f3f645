"""A `Vec` index the checker proved in bounds for every allowed value has no run-time
check in the CPU lowering; one that may be out of bounds keeps it (LANGUAGE.md 4.2,
issue 20 item 6): the IR carries the proof (`vx.element {proved}`), the LLVM IR shows
the check, and the unproved one still refuses an empty Vec at run time."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vxc import api, runtime
from vxc.backends.cpu import host_target, lower_to_llvm
from vxc.ir import parse_module
from vxc.status import STATUS

PROGRAM = """
fn {name}(tiles: &Vec<Tensor<f32, [128, 128]>>) -> Tensor<f32, [128, 128]>
    on Topology::TensorCore {where} {{
  let t = transfer(tiles[3], Memory::VMEM);
  return transfer(t, Memory::HBM);
}}
"""
KERNELS = {"proved": "where tiles.len() == 4", "unproved": ""}
INDEX_ERROR = STATUS["VX_ERR_INDEX"]


def _source(name: str) -> api.Source:
    text = PROGRAM.format(name=name, where=KERNELS[name])
    return api.Source(f"{name}.vx", text.encode())


def _build(name: str, emit: str) -> str:
    result = api.build(api.analyze([_source(name)]), "cpu", emit=emit)
    assert result.ok, api.render(result.diagnostics, [_source(name)])
    return next(iter(result.outputs.values())).decode()


@pytest.mark.parametrize(("name", "proved"), [("proved", 1), ("unproved", 0)])
def test_the_element_op_carries_the_proof(name, proved):
    mlir = _build(name, "vx-mlir")
    assert re.search(rf'"vx.element"\([^)]*\) \{{proved = {proved} : i64\}}', mlir), mlir


@pytest.mark.parametrize(("name", "checked"), [("proved", False), ("unproved", True)])
def test_the_run_time_check_is_dropped_only_where_proved(name, checked):
    # The lowering's own LLVM IR, before LLVM's passes (which may fold a check the `where`
    # clause's launch check implies): a check's failure path stores VX_ERR_INDEX.
    module = parse_module(_build(name, "vx-mlir"))
    ll, _ = lower_to_llvm(module, host_target())
    assert bool(re.search(rf"store i32 {INDEX_ERROR}, ", str(ll))) == checked


def test_the_unproved_index_still_refuses_a_short_vec(tmp_path):
    result = api.build(api.analyze([_source("unproved")]), "cpu")
    art = runtime.load_outputs(result.outputs, tmp_path)
    tiles = np.arange(4 * 128 * 128, dtype=np.float32).reshape(4, 128, 128)
    np.testing.assert_array_equal(art.unproved(tiles), tiles[3])
    with pytest.raises(runtime.KernelError, match="VX_ERR_INDEX"):
        art.unproved(tiles[:2])
