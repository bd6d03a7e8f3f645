"""E6004 keeps z3's counterexample note (`((tag_cur #b11) (val_cur #x00))`) and follows it
with one plain line: the path the data came over and the buffer's state in words."""

from __future__ import annotations

import pytest

from vxc import api

TOKEN = """\
fn f(tiles: &Vec<Tensor<f32, [32, 32]>>, w: &Tensor<f32, [32, 32]>) -> Tensor<f32, [32, 32]> on Topology::TensorCore {
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let cur = transfer_async(tiles[0], Memory::VMEM);
  matmul_acc(&mut acc, &cur, &wv);
  let c = wait(cur);
  return transfer(acc, Memory::HBM);
}
"""

CONTRACT = """\
fn f(a: &Tensor<f32, [4, 4]>) -> void on Topology::TensorCore {
  let t = Tensor<f32>([4, 4]);
  assert(t == 7);
}
"""


def _notes(text: str, target: str) -> list[str]:
    checked = api.check([api.Source("t.vx", text.encode())], target)
    (d,) = [d for d in checked.diagnostics if d.code == "E6004"]
    return d.notes


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_an_unwaited_read_names_the_dma_and_the_stale_state(target):
    notes = _notes(TOKEN, target)
    assert notes[0] == "z3 counterexample: ((tag_cur #b11) (val_cur #x00))"
    # The same words on every target: the spaces as the program wrote them.
    assert notes[1] == (
        "in words: on this path nothing waits the DMA HBM -> VMEM that fills `cur`, so "
        "`cur` is stale (tag TOP: it may hold any value, such as 0x00) when it is read"
    )


def test_a_broken_value_contract_says_what_the_buffer_holds():
    notes = _notes(CONTRACT, "cpu")
    assert notes[0] == "z3 counterexample: ((tag_t #b01) (val_t #x00))"
    assert notes[1] == "in words: `t` must hold 7 here, but on this path it holds 0 (tag CONST)"
