"""The statement dispatch the HIR passes share.

A pass subclasses `StmtVisitor` and defines one method per statement kind it handles
(`visit_let`, `visit_assign`, `visit_expr_stmt`, `visit_return`, `visit_for`,
`visit_if`, `visit_spawn`), each taking the statement and the pass's own arguments
(a path condition, a topology, a predecessor list, ...). `visit(s, *args)` calls the
method for `type(s)` through a table built once per class from the methods themselves
(no names built from strings). `visit_let` and `visit_assign` default to
`visit_binding`, for passes that treat both alike; a kind a pass leaves undefined
reaches `visit_other`, which says so (a new statement kind cannot slip past a pass).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from vxc.hir import nodes as H


class StmtVisitor:
    _DISPATCH: ClassVar[dict[type, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._DISPATCH = {
            H.Let: cls.visit_let,
            H.Assign: cls.visit_assign,
            H.ExprStmt: cls.visit_expr_stmt,
            H.Return: cls.visit_return,
            H.For: cls.visit_for,
            H.If: cls.visit_if,
            H.Spawn: cls.visit_spawn,
        }

    def visit(self, s: H.Stmt, *args: Any) -> Any:
        method = self._DISPATCH.get(type(s))
        if method is None:
            return self.visit_other(s, *args)
        return method(self, s, *args)

    def visit_let(self, s: H.Let, *args: Any) -> Any:
        return self.visit_binding(s, *args)

    def visit_assign(self, s: H.Assign, *args: Any) -> Any:
        return self.visit_binding(s, *args)

    def visit_binding(self, s: H.Let | H.Assign, *args: Any) -> Any:
        return self.visit_other(s, *args)

    def visit_expr_stmt(self, s: H.ExprStmt, *args: Any) -> Any:
        return self.visit_other(s, *args)

    def visit_return(self, s: H.Return, *args: Any) -> Any:
        return self.visit_other(s, *args)

    def visit_for(self, s: H.For, *args: Any) -> Any:
        return self.visit_other(s, *args)

    def visit_if(self, s: H.If, *args: Any) -> Any:
        return self.visit_other(s, *args)

    def visit_spawn(self, s: H.Spawn, *args: Any) -> Any:
        return self.visit_other(s, *args)

    def visit_other(self, s: H.Stmt, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not handle `{type(s).__name__}`")
