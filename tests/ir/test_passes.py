"""The pass stage (vxc/stages.py, vxc/ir/passes/): every pass named once and runnable,
every backend's stages made of them, the module verified after each, any pass's output
printable with `vxc build --emit vx-mlir:after=NAME`."""

from __future__ import annotations

import dataclasses
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


def _retarget(module, backend) -> None:
    """A broken pass for the test below: `vx.target` must be a string (ir/verify.py)."""
    from jaxlib.mlir import ir

    with module.context:
        module.operation.attributes["vx.target"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), 1
        )


def test_the_module_is_verified_after_each_pass(monkeypatch):
    monkeypatch.setitem(PASSES, "retarget", PassDef("retarget", "breaks", f"{__name__}:_retarget"))
    broken = dataclasses.replace(backend("cpu"), stages=("inline", "retarget"))
    with pytest.raises(PassError, match="after pass `retarget`: .*vx.target must be a string"):
        run_stages(_module("cpu"), broken)


def _after(src: str, target: str, stop: str = "fold-transpose") -> str:
    result = api.build(
        api.analyze([api.Source("k.vx", src.encode())]), target, f"vx-mlir:after={stop}"
    )
    assert result.ok, result.diagnostics
    (text,) = result.outputs.values()
    return text.decode()


def _mm(a: str, b: str, then: str = "", elem: str = "f32") -> str:
    """acc += a @ b over [128, 128] tiles x and y (a, b are expressions of them)."""
    t = f"Tensor<{elem}, [128, 128]>"
    return (
        f"fn k(x: &{t}, y: &{t}) -> {T} on Topology::TensorCore {{\n"
        "  let xv = transfer(x, Memory::VMEM);\n"
        "  let yv = transfer(y, Memory::VMEM);\n"
        f"  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);\n"
        f"  matmul_acc(&mut acc, &{a}, &{b});\n"
        f"  {then}\n"
        "  return transfer(acc, Memory::HBM);\n"
        "}\n"
    )


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_transpose_of_b_folds_into_the_matmul_on_every_target(target):
    text = _after(_mm("xv", "transpose(yv)"), target)
    assert "vx.transpose" not in text
    assert 'transpose = "b"' in text


@pytest.mark.parametrize(("target", "folds"), [("cpu", "ab"), ("tpu", "ab"), ("h100", "b")])
def test_only_the_operands_a_backend_reads_transposed_fold(target, folds):
    text = _after(_mm("transpose(xv)", "transpose(yv)", elem="bf16"), target)
    assert f'transpose = "{folds}"' in text
    assert text.count("vx.transpose") == (0 if folds == "ab" else 1)


def test_a_transpose_with_another_use_stays():
    src = _mm("xv", "yt", "let s = transfer(yt + yv, Memory::VMEM);").replace(
        "  matmul_acc", "  let yt = transpose(yv);\n  matmul_acc", 1
    )
    text = _after(src, "cpu")
    assert text.count("vx.transpose") == 1 and 'transpose = ""' in text


def test_every_backend_runs_every_pass_in_the_tables_order():
    """docs/IR.md says so (it cannot read the backends: ir/ sits below them). The
    backends fold no transposes themselves: without the pass, attention's `transpose(kt)`
    is refused on nvidia."""
    for family in sorted({t.family for t in TARGETS.values()}):
        assert backend(family).stages == tuple(PASSES), family
