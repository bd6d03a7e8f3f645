"""AST -> HIR: one function instance's tree, built from its frozen declaration.

The type checker asks for one tree per instance (a kernel entry, each placement of a
helper, each const-generic instance), so no two instances share a node, and then fills
in the facts it learns (hir/nodes.py). An instance of a const-generic function gets its
const parameters' values here: a name `N` becomes `ConstArg(value)` and the dimensions
of its types and new tensors become the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from vxc.frontend import ast as A
from vxc.hir import nodes as H
from vxc.hir.types import SCALARS

# Each AST expression / statement form and the HIR form built from it (same fields, plus
# what checking fills in); tests/hir/test_build.py checks the fields agree.
TWINS: dict[type, type] = {
    a: getattr(H, a.__name__)
    for a in (
        A.IntLit,
        A.FloatLit,
        A.BoolLit,
        A.SizeLit,
        A.Name,
        A.MemPath,
        A.TopoPath,
        A.Unary,
        A.Binary,
        A.Borrow,
        A.Call,
        A.MethodCall,
        A.Index,
        A.Transfer,
        A.View,
        A.Range,
        A.Wait,
        A.TensorNew,
        A.Iota,
        A.Block,
        A.Let,
        A.Assign,
        A.ExprStmt,
        A.Return,
        A.For,
        A.If,
        A.Spawn,
        A.Param,
    )
}


@dataclass(frozen=True)
class _Consts:
    """A const-generic instance's parameter values, and each parameter's declared type."""

    values: Mapping[str, int]
    types: Mapping[str, str]

    def dims(self, dims: tuple[int | str, ...]) -> tuple[int | str, ...]:
        return tuple(self.values.get(d, d) if isinstance(d, str) else d for d in dims)

    def type(self, t: A.TypeExpr) -> A.TypeExpr:
        if not self.values:
            return t
        match t:
            case A.TensorType():
                return replace(t, elem=self.type(t.elem), dims=self.dims(t.dims))
            case A.RefType() | A.TokenType():
                return replace(t, inner=self.type(t.inner))
            case A.VecType():
                return replace(t, elem=self.type(t.elem))
        return t


class HirBuilder:
    """Numbers nodes across every instance it builds, so ids are unique in a program and,
    the build order being fixed by the sources, the same on every run."""

    def __init__(self) -> None:
        self._next_nid = 0

    def function(self, decl: A.FnDecl, consts: Mapping[str, int] | None = None) -> H.FnDecl:
        """The HIR of `decl`, its const parameters replaced by `consts` when given."""
        types = {c.name: scalar_name(c.type) or "i64" for c in decl.const_params}
        sub = _Consts(dict(consts or {}), types)
        nid = self._nid()
        return H.FnDecl(
            decl.span,
            decl.name,
            [] if sub.values else [self._node(p, sub) for p in decl.const_params],
            [self._node(p, sub) for p in decl.params],
            sub.type(decl.ret) if decl.ret is not None else None,
            decl.topology,
            [self._node(w, sub) for w in decl.where],
            self._node(decl.body, sub) if decl.body is not None else None,
            decl.name_span,
            nid=nid,
        )

    def _nid(self) -> int:
        self._next_nid += 1
        return self._next_nid - 1

    def fresh_nid(self) -> int:
        """An id for a node the type checker adds (an implicit cast), numbered in the same
        sequence, so ids stay unique and the same on every run."""
        return self._nid()

    def _node(self, node: A.Node, sub: _Consts) -> H.Node:
        if isinstance(node, A.Name) and node.name in sub.values:
            value = sub.values[node.name]
            return H.ConstArg(node.span, value, sub.types[node.name], nid=self._nid())
        nid = self._nid()  # parents before children: ids grow down the tree
        values = {f.name: self._value(getattr(node, f.name), sub) for f in fields(node)}
        if isinstance(node, A.TensorNew | A.Iota):
            values["dims"] = list(sub.dims(node.dims))
        return TWINS[type(node)](**values, nid=nid)

    def _value(self, v: object, sub: _Consts) -> object:
        if isinstance(v, A.TypeExpr):
            return sub.type(v)
        if isinstance(v, A.Node):
            return self._node(v, sub)
        if isinstance(v, tuple):
            return [self._value(x, sub) for x in v]
        return v


def scalar_name(t: A.TypeExpr) -> str | None:
    """The scalar a type names (`i64`), or None for any other type."""
    return t.name if isinstance(t, A.NamedType) and t.name in SCALARS else None
