"""A misspelt name gets "did you mean" (rustc's rule, diagnostics/suggest.py), and the list
of declared spaces shows the aliases the program and the model declare."""

from __future__ import annotations

import random
import time

import pytest

from vxc import api
from vxc.diagnostics.suggest import MAX_EDITS, closest, edit_distance

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


def _full_distance(a: str, b: str) -> int:
    """The whole optimal-string-alignment table, for comparison with the banded one."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def test_the_banded_distance_is_the_full_one_up_to_its_limit():
    rng = random.Random(30)
    for _ in range(5000):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 9)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 9)))
        full = _full_distance(a, b)
        assert edit_distance(a, b) == full, (a, b)
        for limit in range(6):
            assert edit_distance(a, b, limit) == min(full, limit + 1), (a, b, limit)


def test_a_long_name_is_suggested_in_linear_time():
    """A fuzzed input's 4 000-character name, one letter off its declaration: the whole
    table was 16 M cells, 6 s of CPU; the band within MAX_EDITS of the diagonal is not."""
    name = "near" * 1000
    typo = name[:2000] + "e" + name[2001:]
    start = time.process_time()
    assert closest(typo, [name, "other"]) == name
    assert time.process_time() - start < 1.0  # about 0.05 s here
    assert closest("x" * 40, ["y" * 40]) is None  # at most MAX_EDITS, not a third of 40
    assert MAX_EDITS < 40 // 3
