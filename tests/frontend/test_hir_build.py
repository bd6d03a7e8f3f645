"""The frozen AST and the HIR built from it (vxc/hir/build.py, vxc/hir/nodes.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vxc import api
from vxc.diagnostics import DiagnosticSink
from vxc.frontend import ast as A
from vxc.frontend.parser import parse_source
from vxc.hir import nodes as H
from vxc.hir import serial
from vxc.hir.build import TWINS
from vxc.hir.typecheck import typecheck
from vxc.machines.model import build_machine
from vxc.plan import plan_target
from vxc.targets import model_source

ROOT = Path(__file__).resolve().parents[2]

# One kernel calls a helper twice with its argument in two spaces (two placement
# instances) and a const-generic helper (an instance per value).
TWO_INSTANCES = """
fn finish(t: &Tensor<f32, [32, 32]>, acc: &mut Tensor<f32, [32, 32]>) -> void
    on Topology::TensorCore {
  let x = transfer(t, Memory::VMEM);
  matmul_acc(acc, &x, &x);
}
fn scale<const N: i64>(t: &Tensor<f32, [N, 32]>) -> i64 on Topology::TensorCore {
  let y = Tensor<f32>([N, 32]);
  return N;
}
fn k(a: &Tensor<f32, [32, 32]>) -> Tensor<f32, [32, 32]> on Topology::TensorCore {
  let mut acc = transfer(Tensor<f32>([32, 32]), Memory::ACC);
  let v = transfer(a, Memory::VMEM);
  finish(a, &mut acc);
  finish(&v, &mut acc);
  let n = scale(a);
  return transfer(acc, Memory::HBM);
}
"""


def analyze(text: str) -> api.Analysis:
    return api.analyze([api.Source("t.vx", text.encode())])


def hir_nodes(fn_decl: H.FnDecl) -> list[H.Node]:
    """Every HIR node of one instance's tree."""
    out: list[H.Node] = []
    stack: list[object] = [fn_decl]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
        elif isinstance(n, H.Node):
            out.append(n)
            stack.extend(vars(n).values())
    return out


def test_every_ast_form_has_a_hir_twin_with_the_same_fields():
    forms = {
        c
        for c in vars(A).values()
        if isinstance(c, type) and issubclass(c, A.Expr | A.Stmt) and c not in (A.Expr, A.Stmt)
    }
    assert forms | {A.Block, A.Param, A.Range} == set(TWINS)
    for ast_cls, hir_cls in TWINS.items():
        hir_fields = [f.name for f in dataclasses.fields(hir_cls)]
        ast_fields = [f.name for f in dataclasses.fields(ast_cls)]
        assert [f for f in hir_fields if f in ast_fields] == ast_fields, ast_cls.__name__
        assert "nid" in hir_fields


def parse(text: str) -> A.Module:
    sink = DiagnosticSink()
    module = parse_source(text.encode(), "t.vx", sink)
    assert module is not None and not sink.items
    return module


def test_the_parsed_tree_is_frozen():
    fn = next(i for i in parse(TWO_INSTANCES).items if isinstance(i, A.FnDecl))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fn.name = "other"  # type: ignore[misc]
    assert isinstance(fn.body.stmts, tuple)


def test_each_instance_has_its_own_tree_and_ids_are_unique():
    analysis = analyze(TWO_INSTANCES)
    program = analysis.hir.program
    assert analysis.ok, analysis.diagnostics
    names = sorted(program.functions)
    # the generic body of `scale` is checked once as written, beside its instance
    assert names == ["finish<HBM, ACC>", "finish<VMEM, ACC>", "k", "scale", "scale<32, HBM>"]
    seen: dict[int, str] = {}
    objects: set[int] = set()
    for name, fn in program.functions.items():
        for node in hir_nodes(fn.decl):
            assert node.nid >= 0, (name, node)
            assert node.nid not in seen, (name, seen.get(node.nid), node)
            seen[node.nid] = name
            objects.add(id(node))
    assert len(objects) == len(seen)  # no node object reached from two instances


def test_a_const_instance_substitutes_values():
    program = analyze(TWO_INSTANCES).hir.program
    inst = program.functions["scale<32, HBM>"].decl
    assert inst.const_params == []
    assert inst.params[0].type.inner.dims == (32, 32)
    let, ret = inst.body.stmts
    assert let.value.dims == [32, 32]
    assert isinstance(ret.value, H.ConstArg) and ret.value.value == 32
    assert ret.value.declared == "i64" and ret.value.ty.show() == "i64"


def test_node_ids_are_the_same_on_every_run_and_survive_the_cache():
    def ids(analysis) -> dict[str, list[tuple[str, int]]]:
        return {
            name: sorted((type(n).__name__, n.nid) for n in hir_nodes(fn.decl))
            for name, fn in analysis.hir.program.functions.items()
        }

    first, second = analyze(TWO_INSTANCES), analyze(TWO_INSTANCES)
    assert ids(first) == ids(second)
    data = serial.dump(first.hir, "key", "v")
    loaded = serial.load(data, "key", "v")
    assert {
        name: sorted((type(n).__name__, n.nid) for n in hir_nodes(fn.decl))
        for name, fn in loaded.program.functions.items()
    } == ids(first)


def test_checking_leaves_the_parsed_tree_as_parsed():
    text = (ROOT / "kernels" / "stream.vx").read_text()
    module, fresh = parse(text), parse(text)
    sink = DiagnosticSink()
    path, data = model_source("tpu")
    model = parse_source(data, path, sink)
    program = typecheck(module.items, model.items, sink)
    machine = build_machine([*model.items, *program.decls], sink)
    plan_target("tpu", program.functions, machine, sink)
    assert not sink.items
    # Typing and the target plan ran on trees built from `module`; it still equals a
    # fresh parse, field for field.
    assert module == fresh
