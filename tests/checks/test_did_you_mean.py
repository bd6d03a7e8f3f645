"""A misspelt name gets "did you mean" (rustc's rule, diagnostics/suggest.py), and the list
of declared spaces shows the aliases the program and the model declare."""

from __future__ import annotations

import pytest

from vxc import api
from vxc.diagnostics.suggest import closest, edit_distance

KERNEL = """\
{decls}
fn f(tiles: &Vec<Tensor<f32, [8, 8]>>) -> void on Topology::{topo} {{
  let t = transfer_async(tiles[0], Memory::{space});
  let v = {wait}(t);
}}
"""


def _diag(code: str, target: str = "cpu", **kw):
    fields = {"decls": "", "topo": "TensorCore", "space": "VMEM", "wait": "wait", **kw}
    text = KERNEL.format(**fields)
    checked = api.check([api.Source("t.vx", text.encode())], target)
    found = [d for d in checked.diagnostics if d.code == code]
    assert len(found) == 1, [(d.code, d.message) for d in checked.diagnostics]
    return found[0]


def test_a_misspelt_keyword_call():
    d = _diag("E0203", wait="wiat")
    assert d.message == "cannot find function `wiat`" and d.help == "did you mean `wait`?"


def test_a_misspelt_variable():
    text = "fn f(tiles: &Vec<Tensor<f32, [8, 8]>>) -> i64 { return tiels.len(); }"
    (d,) = api.analyze([api.Source("t.vx", text.encode())]).diagnostics
    assert (d.code, d.help) == ("E0101", "did you mean `tiles`?")


@pytest.mark.parametrize(
    ("target", "alias"), [("cpu", "HBM (alias of CPU_DRAM)"), ("b200", "SMEM (alias of VMEM)")]
)
def test_a_misspelt_space_lists_the_aliases(target, alias):
    d = _diag("E6002", target, space="VMME")
    assert d.help == "did you mean `Memory::VMEM`?"
    (note,) = d.notes
    assert note.startswith("declared spaces: ") and alias in note and "VMEM" in note


def test_the_programs_own_alias_is_listed_and_suggested():
    decls = "Memory Stage { alias: Memory::VMEM }"
    d = _diag("E6002", "tpu", decls=decls, space="Stgae")
    assert d.help == "did you mean `Memory::Stage`?"
    assert "Stage (alias of VMEM)" in d.notes[0]


def test_a_misspelt_topology():
    d = _diag("E6002", "tpu", topo="TensorCroe")
    assert d.help == "did you mean `Topology::TensorCore`?"


def test_far_names_and_short_names_get_no_guess():
    assert _diag("E0203", wait="launch_now").help is None
    assert closest("g", ["f", "h"]) is None
    assert closest("vmem", ["VMEM", "HBM"]) == "VMEM"  # case alone always qualifies


def test_edit_distance_counts_a_swap_as_one():
    assert edit_distance("wiat", "wait") == 1
    assert edit_distance("VMME", "VMEM") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
