"""HIR -> vx lowering by rules, with source locations; the CPU backend's rules by op name.

Every op the lowering creates carries the location of the HIR node it came from, so a
verifier or backend message names the `.vx` line; the rule tables cover every node kind
and every vx op.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jaxlib.mlir import ir

from vxc import api
from vxc.backends.cpu import compile_module
from vxc.backends.cpu.lower import RULES as CPU_RULES
from vxc.diagnostics import Span
from vxc.errors import Refusal
from vxc.hir import nodes as H
from vxc.ir import OPS, parse_module
from vxc.ir.from_hir import EXPR_RULES, STMT_RULES, lower_program
from vxc.ir.loc import where

ROOT = Path(__file__).resolve().parents[2]


def _lower(path: Path, target: str = "cpu") -> ir.Module:
    rel = path.relative_to(ROOT).as_posix()
    checked = api.check([api.Source(rel, path.read_bytes())], target)
    assert checked.ok, checked.diagnostics
    return lower_program(checked.analysis.program, checked.plan)


def _ops(module: ir.Module) -> list[ir.Operation]:
    out: list[ir.Operation] = []

    def visit(op):
        out.append(op.operation if hasattr(op, "operation") else op)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        top.operation.walk(visit)
    return out


@pytest.mark.parametrize("kernel", ["seed.vx", "stream.vx", "stream_grid.vx"])
@pytest.mark.parametrize("target", ["cpu", "tpu", "b200"])
def test_every_op_points_at_its_source_line(kernel, target):
    path = ROOT / "kernels" / kernel
    module = _lower(path, target)
    with module.context:
        ops = _ops(module)
        assert ops
        lines = len(path.read_text().splitlines())
        for op in ops:
            at = where(op)
            assert at.startswith(f"kernels/{kernel}:"), (op.name, str(op.location))
            line = int(at.split(":")[1])
            assert 1 <= line <= lines


def test_seed_transfer_in_the_loop_is_line_8():
    module = _lower(ROOT / "kernels" / "seed.vx")
    with module.context:
        transfers = [op for op in _ops(module) if op.name == "vx.transfer_async"]
        assert [where(op) for op in transfers] == [
            "kernels/seed.vx:6:22: ",  # let mut inflight = transfer_async(tiles[0], ...)
            "kernels/seed.vx:8:16: ",  # let next = transfer_async(tiles[i], ...)
        ]


def test_backend_error_names_the_vx_line():
    text = """module attributes {vx.target = "cpu"} {
  func.func @k(%a: memref<4xf32, "HBM"> {vx.name = "a"}) {
    %z = memref.alloc() : memref<4xf32, "HBM"> loc("k.vx":3:7)
    return
  }
}"""
    with pytest.raises(
        Refusal, match=r"^k\.vx:3:7: cpu backend: cannot lower 'memref\.alloc'"
    ) as e:
        compile_module(parse_module(text), "k")
    assert e.value.code == "E7001" and e.value.span == Span("k.vx", 3, 7)


def test_rule_tables_cover_every_kind():
    # Every statement and expression class of the HIR that can reach lowering has a rule.
    stmts = {H.Let, H.Assign, H.ExprStmt, H.For, H.If, H.Spawn}
    assert stmts <= set(STMT_RULES)
    # Every expression class of the HIR (a subclass too: rules are looked up by exact
    # class) except the `Memory::X` / `Topology::X` paths, which only name a space.
    exprs = {
        c for c in vars(H).values()
        if isinstance(c, type) and issubclass(c, H.Expr) and c is not H.Expr
        and c not in (H.MemPath, H.TopoPath)
    }  # fmt: skip
    assert exprs <= set(EXPR_RULES)
    # The CPU backend has a rule for every op of the vx op table.
    assert set(OPS) <= set(CPU_RULES), set(OPS) - set(CPU_RULES)
