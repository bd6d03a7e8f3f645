"""The shared statement visitor (hir/visit.py): every pass that walks statements
dispatches through it, and a statement kind a pass does not handle is said, not
silently skipped."""

from __future__ import annotations

import pytest

from vxc.checks.seams import SeamChecker
from vxc.frontend import ast as A
from vxc.hir import nodes as H
from vxc.hir.liveness import _Builder
from vxc.hir.ownership import Ownership
from vxc.hir.typecheck import TypeChecker
from vxc.hir.visit import StmtVisitor
from vxc.plan.placement import _Placer

KINDS = (H.Let, H.Assign, H.ExprStmt, H.Return, H.For, H.If, H.Spawn)


@pytest.mark.parametrize("cls", [TypeChecker, Ownership, _Builder, _Placer, SeamChecker])
def test_passes_handle_every_statement_kind(cls):
    assert issubclass(cls, StmtVisitor)
    for kind in KINDS:
        method = cls._DISPATCH[kind]
        # Each pass overrides the kind itself or the shared binding rule for let/assign.
        own = method is not vars(StmtVisitor)[method.__name__]
        via_binding = method.__name__ in ("visit_let", "visit_assign") and (
            cls.visit_binding is not StmtVisitor.visit_binding
        )
        assert own or via_binding, (cls.__name__, kind.__name__)


def test_an_unhandled_kind_is_said():
    class OnlyLets(StmtVisitor):
        def visit_let(self, s, out):
            out.append(s.name)

    out: list[str] = []
    span = A.NO_SPAN
    OnlyLets().visit(H.Let(span, "x", False, None, H.IntLit(span, 1, nid=1), nid=0), out)
    assert out == ["x"]
    with pytest.raises(NotImplementedError, match="OnlyLets does not handle `ExprStmt`"):
        OnlyLets().visit(H.ExprStmt(span, H.IntLit(span, 1, nid=3), nid=2), out)
