"""Integer types of literal-valued `let`s, inferred from their uses in the function
(Rust's rule): `let kt = 8;` is an `i64` when the function uses it as one
(`instance() / kt`, `tiles[kt]`, an `i64` parameter), and `i32` only when nothing says
otherwise.

One pass over a function instance's HIR before it is type-checked. Each `let` without a
declared type whose value is made of integer literals (and other such variables: `let
a = kt + 1;` shares `kt`'s type) is a *flexible* variable; flexible variables that meet
in one expression form a group. Wherever a group meets an expression whose integer type
is already known (a parameter, a declared `let`, `instance()`, `.len()`, an index, a
callee's parameter, the return type), that type is demanded of the group. A group with
exactly one demanded type takes it; with none it stays `i32`; with two the type checker
reports the mismatch as before (its help names the `let` to annotate). The estimate is
conservative: an expression this pass cannot type demands nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from vxc.frontend import ast as A
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.build import scalar_name

LAUNCH = {"instance", "instances"}  # i64 intrinsics (a program's own functions shadow them)


class _Literal:
    """An expression of integer literals only: it takes any integer type."""


LITERAL = _Literal()


@dataclass(eq=False)
class _Group:
    lets: list[H.Let] = field(default_factory=list)
    demands: set[T.Type] = field(default_factory=set)
    parent: _Group | None = None

    def root(self) -> _Group:
        g = self
        while g.parent is not None:
            g = g.parent
        return g


Estimate = T.Type | _Group | _Literal | None


class _Inference:
    def __init__(self, fns: dict[str, A.FnDecl], ret: T.Type):
        self.fns = fns
        self.ret = ret
        self.groups: list[_Group] = []

    # ---- constraints ---------------------------------------------------------------
    def meet(self, a: Estimate, b: Estimate) -> Estimate:
        """Two estimates that must have one type; returns that type's estimate."""
        if isinstance(a, _Group) and isinstance(b, _Group):
            ra, rb = a.root(), b.root()
            if ra is not rb:
                rb.parent = ra
                ra.lets += rb.lets
                ra.demands |= rb.demands
            return ra
        for flex, other in ((a, b), (b, a)):
            if isinstance(flex, _Group):
                if isinstance(other, T.Type) and T.is_int(other):
                    flex.root().demands.add(other)
                    return other
                return flex.root() if other is LITERAL else None
        if a is LITERAL:
            return b
        if b is LITERAL:
            return a
        return a if a == b else None

    # ---- expressions -------------------------------------------------------------
    def expr(self, e: H.Expr, scope: list[dict[str, Estimate]]) -> Estimate:
        match e:
            case H.ConstArg():
                return T.Scalar(e.declared)
            case H.IntLit():
                return LITERAL
            case H.Name():
                return _lookup(scope, e.name)
            case H.Unary(op="-"):
                return self.expr(e.operand, scope)
            case H.Binary(op="&&" | "||"):
                self.expr(e.lhs, scope), self.expr(e.rhs, scope)
                return T.BOOL
            case H.Binary():
                both = self.meet(self.expr(e.lhs, scope), self.expr(e.rhs, scope))
                return both if e.op in "+-*/%" else T.BOOL
            case H.Index():
                self.expr(e.obj, scope)
                self.meet(self.expr(e.index, scope), T.I64)
                return None
            case H.MethodCall():
                self.expr(e.obj, scope)
                for a in e.args:
                    self.expr(a, scope)
                return T.I64 if e.method == "len" and not e.args else None
            case H.Call():
                return self.call(e, scope)
        self.children(e, scope)
        return None

    def call(self, e: H.Call, scope: list[dict[str, Estimate]]) -> Estimate:
        decl = self.fns.get(e.callee)
        args = [self.expr(a, scope) for a in e.args]
        if decl is None:
            return T.I64 if e.callee in LAUNCH and not e.args else None
        if len(args) == len(decl.params) and not decl.const_params:
            for a, p in zip(args, decl.params, strict=True):
                self.meet(a, _scalar(p.type))
        return _scalar(decl.ret) if decl.ret is not None and not decl.const_params else None

    def children(self, node: H.Node, scope: list[dict[str, Estimate]]) -> None:
        """Any other node (a syntax this pass does not know): its sub-expressions still
        constrain, and it demands nothing itself."""
        for f in fields(node):
            value = getattr(node, f.name)
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, H.Expr):
                    self.expr(v, scope)
                elif isinstance(v, H.Block):
                    self.block(v, scope)

    # ---- statements ------------------------------------------------------------------
    def block(self, b: H.Block, scope: list[dict[str, Estimate]]) -> None:
        inner = [*scope, {}]
        for s in b.stmts:
            self.stmt(s, inner)

    def stmt(self, s: H.Stmt, scope: list[dict[str, Estimate]]) -> None:
        match s:
            case H.Let():
                value = self.expr(s.value, scope)
                if s.declared is not None:
                    declared = _scalar(s.declared)
                    self.meet(value, declared)
                    scope[-1][s.name] = declared
                    return
                if value is LITERAL:
                    value = _Group()
                    self.groups.append(value)
                if isinstance(value, _Group):
                    value.root().lets.append(s)
                scope[-1][s.name] = value
            case H.Assign():
                self.meet(self.expr(s.value, scope), _lookup(scope, s.name))
            case H.Return() if s.value is not None:
                self.meet(self.expr(s.value, scope), self.ret)
            case H.For():
                bound = self.meet(self.expr(s.start, scope), self.expr(s.end, scope))
                inner: list[dict[str, Estimate]] = [*scope, {}]
                inner[-1][s.var] = bound if bound is not LITERAL else None
                self.block(s.body, inner)
            case _:
                self.children(s, scope)

    def pins(self) -> dict[int, T.Type]:
        out: dict[int, T.Type] = {}
        for g in {g.root() for g in self.groups}:
            if len(g.demands) == 1:
                (ty,) = g.demands
                out.update({let.nid: ty for let in g.lets})
        return out


def _lookup(scope: list[dict[str, Estimate]], name: str) -> Estimate:
    for names in reversed(scope):
        if name in names:
            return names[name]
    return None


def _scalar(t: A.TypeExpr | None) -> T.Type | None:
    name = scalar_name(t) if t is not None else None
    return T.Scalar(name) if name else None


def literal_types(
    decl: H.FnDecl, params: dict[str, T.Type], ret: T.Type, fns: dict[str, A.FnDecl]
) -> dict[int, T.Type]:
    """The `let` nid -> integer type of each flexible variable whose uses in `decl`'s
    body demand exactly one type (`params`: the parameters' checked types)."""
    if decl.body is None:
        return {}
    inference = _Inference(fns, ret)
    scope: list[dict[str, Estimate]] = [dict(params)]
    for w in decl.where:
        inference.expr(w, scope)
    inference.block(decl.body, scope)
    return inference.pins()
