"""`--const NAME=V` names a const parameter of a generic kernel entry, or is E0111 naming
the entries' parameters (issue 36: a typo there was accepted silently)."""

from __future__ import annotations

import json

from clirun import KERNELS, assert_no_crash, run_vxc

GENERIC = """\
fn scale<const BLOCK: i64>(x: &Tensor<f32, [BLOCK, 128]>) -> Tensor<f32, [BLOCK, 128]>
    on Topology::TensorCore {
  let t = transfer(x, Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""


def _errors(err: str) -> list[dict]:
    return [json.loads(x) for x in err.splitlines() if x.startswith("{")]


def test_a_const_on_a_kernel_without_consts_is_refused():
    r = run_vxc("check", str(KERNELS / "stream.vx"), "--const", "N=5", "--error-format", "json")
    assert_no_crash(r)
    assert r.rc == 1
    [d] = _errors(r.err)
    assert d["code"] == "E0111" and "`--const N=...`" in d["message"]
    assert d["notes"] == ["the kernel entries' const parameters: none"]


def test_a_misspelt_const_is_refused_with_the_right_name(tmp_path):
    src = tmp_path / "scale.vx"
    src.write_text(GENERIC)
    r = run_vxc(
        "build",
        str(src),
        "--target",
        "cpu",
        "--const",
        "BLOCK=128",
        "--const",
        "BLOKC=64",
        "--emit",
        "vx-mlir",
        "--error-format",
        "json",
    )
    assert r.rc == 1
    codes = [d["code"] for d in _errors(r.err)]
    assert codes == ["E0111"], r.err
    [d] = _errors(r.err)
    assert (d["line"], d["help"]) == (1, "did you mean `--const BLOCK=...`?")
    assert d["notes"] == ["the kernel entries' const parameters: `BLOCK`"]


def test_a_named_const_builds(tmp_path):
    src = tmp_path / "scale.vx"
    src.write_text(GENERIC)
    r = run_vxc("build", str(src), "--target", "cpu", "--const", "BLOCK=128", "--emit", "vx-mlir")
    assert r.rc == 0, r.err
    assert "128x128" in r.out
