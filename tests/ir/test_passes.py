"""The pass stage (vxc/stages.py, vxc/ir/passes/): every pass named once and runnable,
every backend's stages made of them, the module verified after each, any pass's output
printable with `vxc build --emit vx-mlir:after=NAME`."""

from __future__ import annotations

import importlib
import os

import pytest

from vxc import api, cli
from vxc.backends import backend, run_target_stages
from vxc.errors import Unsupported
from vxc.ir.from_hir import lower_program
from vxc.ir.passes import PassError, run_stages
from vxc.stages import PASSES, PassDef
from vxc.targets import TARGETS

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

T = "Tensor<f32, [128, 128]>"
HELPER = f"""
fn acc_into(acc: &mut {T}, x: &{T}, w: &{T}) on Topology::TensorCore {{
  matmul_acc(acc, x, w);
}}
fn k(x: &{T}, w: &{T}) -> {T} on Topology::TensorCore {{
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  acc_into(&mut acc, &xv, &wv);
  return transfer(acc, Memory::HBM);
}}
"""


def _module(target: str):
    checked = api.check_target(api.analyze([api.Source("k.vx", HELPER.encode())]), target)
    assert checked.ok, checked.diagnostics
    return lower_program(checked.analysis.program, checked.plan)


def test_every_pass_names_a_function():
    for p in PASSES.values():
        modname, _, fn = p.impl.partition(":")
        assert callable(getattr(importlib.import_module(modname), fn)), p.name


@pytest.mark.parametrize("family", sorted({t.family for t in TARGETS.values()}))
def test_every_backend_runs_known_passes_and_inlines(family):
    stages = backend(family).stages
    assert set(stages) <= set(PASSES)
    assert len(set(stages)) == len(stages)
    assert "inline" in stages  # no backend lowers a call to a Vx helper


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_emit_after_inline_shows_the_module_the_backend_gets(target, tmp_path, capsys):
    src = tmp_path / "k.vx"
    src.write_text(HELPER)
    assert cli.main(["build", str(src), "--target", target, "--emit", "vx-mlir"]) == 0
    before = capsys.readouterr().out
    args = ["build", str(src), "--target", target, "--emit", "vx-mlir:after=inline"]
    assert cli.main(args) == 0
    after = capsys.readouterr().out
    assert "call @acc_into" in before and "@acc_into" not in after
    assert after.count("vx.matmul_acc") == 1
    assert cli.main([*args, "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / f"k.{target}.after-inline.mlir").read_text() == after


def test_an_unknown_pass_is_a_usage_error(tmp_path, capsys):
    src = tmp_path / "k.vx"
    src.write_text(HELPER)
    with pytest.raises(SystemExit) as e:
        cli.main(["build", str(src), "--target", "cpu", "--emit", "vx-mlir:after=nope"])
    assert e.value.code == 2
    assert "unknown pass `nope`" in capsys.readouterr().err
    with pytest.raises(Unsupported, match="unknown pass `nope`"):
        api.build(api.analyze([api.Source("k.vx", HELPER.encode())]), "cpu", "vx-mlir:after=nope")


def test_a_pass_the_target_does_not_run_is_refused():
    with pytest.raises(Unsupported, match="the cpu build runs no pass `absent`"):
        run_target_stages(_module("cpu"), "cpu", stop_after="absent")


def _retarget(module) -> None:
    """A broken pass for the test below: `vx.target` must be a string (ir/verify.py)."""
    from jaxlib.mlir import ir

    with module.context:
        module.operation.attributes["vx.target"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), 1
        )


def test_the_module_is_verified_after_each_pass(monkeypatch):
    monkeypatch.setitem(PASSES, "retarget", PassDef("retarget", "breaks", f"{__name__}:_retarget"))
    module = _module("cpu")
    with pytest.raises(PassError, match="after pass `retarget`: .*vx.target must be a string"):
        run_stages(module, ("inline", "retarget"))
