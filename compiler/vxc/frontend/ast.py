"""The Vx AST: plain dataclasses, every node with a source span.

The type checker annotates these nodes in place (`Expr.ty`, `Name.vid`, the
instance name in `Call.callee`): the checked HIR of a function is its declaration's
tree plus those fields. A helper is typed once per instance (placement or const
generic) on its own deep copy of the parsed declaration, so instances never share
nodes; a kernel entry (one instance) is typed on the parsed tree itself. Later passes
key per-node facts by node identity within one instance (checks/plan.py). The tree
serialises to protobuf generically (hir/serial.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vxc.diagnostics import Span

NO_SPAN = Span("<builtin>", 0, 0)


@dataclass
class Node:
    span: Span


# ---- syntactic types -------------------------------------------------------------
@dataclass
class TypeExpr(Node):
    """A type as written in the source (resolved to hir.types by the typechecker)."""


@dataclass
class NamedType(TypeExpr):
    name: str


@dataclass
class RefType(TypeExpr):
    mutable: bool
    inner: TypeExpr


@dataclass
class TensorType(TypeExpr):
    elem: TypeExpr
    dims: list[int | str]  # literal, or a const-generic / runtime name


@dataclass
class VecType(TypeExpr):
    elem: TypeExpr


@dataclass
class TokenType(TypeExpr):
    inner: TypeExpr
    space: str


# ---- expressions -----------------------------------------------------------------
@dataclass
class Expr(Node):
    ty: Any = field(default=None, kw_only=True)  # set by hir.typecheck


@dataclass
class IntLit(Expr):
    value: int


@dataclass
class ConstArg(IntLit):
    """A const-generic parameter's value in an instance (`N` of `pick::<7>`): an integer of
    the parameter's declared type, not a literal that takes its context's type."""

    declared: str = "i64"


@dataclass
class FloatLit(Expr):
    value: float


@dataclass
class BoolLit(Expr):
    value: bool


@dataclass
class SizeLit(Expr):
    value: int  # bytes


@dataclass
class Name(Expr):
    name: str
    vid: int = -1  # the variable it resolves to (hir.typecheck); -1 for const params


@dataclass
class MemPath(Expr):
    name: str


@dataclass
class TopoPath(Expr):
    name: str


@dataclass
class Unary(Expr):
    op: str  # "-" | "!"
    operand: Expr


@dataclass
class Binary(Expr):
    op: str
    lhs: Expr
    rhs: Expr


@dataclass
class Borrow(Expr):
    mutable: bool
    operand: Expr


@dataclass
class Call(Expr):
    callee: str
    args: list[Expr]
    const_args: list[Expr] | None = None  # f::<128>(...)


@dataclass
class MethodCall(Expr):
    obj: Expr
    method: str
    args: list[Expr]


@dataclass
class Index(Expr):
    obj: Expr
    index: Expr


@dataclass
class Transfer(Expr):
    src: Expr
    space: str
    is_async: bool


@dataclass
class Wait(Expr):
    token: Expr


@dataclass
class TensorNew(Expr):
    elem: TypeExpr
    dims: list[int | str]


# ---- statements ------------------------------------------------------------------
@dataclass
class Stmt(Node):
    """Base of the statement forms (LANGUAGE.md section 4)."""


@dataclass
class Block(Node):
    stmts: list[Stmt]


@dataclass
class Let(Stmt):
    name: str
    mutable: bool
    declared: TypeExpr | None
    value: Expr
    vid: int = -1


@dataclass
class Assign(Stmt):
    name: str
    value: Expr
    vid: int = -1


@dataclass
class ExprStmt(Stmt):
    expr: Expr


@dataclass
class Return(Stmt):
    value: Expr | None


@dataclass
class For(Stmt):
    var: str
    start: Expr
    end: Expr
    body: Block
    vid: int = -1


@dataclass
class If(Stmt):
    cond: Expr
    then: Block
    orelse: Block | None


@dataclass
class Spawn(Stmt):
    topology: str
    body: Block


# ---- items -----------------------------------------------------------------------
@dataclass
class Facet(Node):
    name: str
    kind: str  # "memory" | "topology" | "list" | "size" | "rate" | "int" | "word"
    value: Any  # str, int, or list[str]
    unit: str = ""  # for rates: "s" or "cyc"


@dataclass
class Edge(Node):
    src: str
    dst: str
    cost: int
    relaxed: bool


@dataclass
class MemoryDecl(Node):
    name: str
    facets: list[Facet]


@dataclass
class TopologyDecl(Node):
    name: str
    facets: list[Facet]
    edges: list[Edge]


@dataclass
class Param(Node):
    name: str
    type: TypeExpr
    vid: int = -1


@dataclass
class FnDecl(Node):
    name: str
    const_params: list[Param]
    params: list[Param]
    ret: TypeExpr | None
    topology: str | None
    where: list[Expr]
    body: Block | None  # None for `extern fn`
    name_span: Span = NO_SPAN


@dataclass
class Module(Node):
    items: list[Node]


# ---- traversal (iterative: a deep program cannot exhaust the stack) --------------------------
def sub_blocks(s: Node) -> list[Block]:
    """The blocks directly nested in a statement."""
    if isinstance(s, If):
        return [s.then] + ([s.orelse] if s.orelse else [])
    if isinstance(s, For | Spawn):
        return [s.body]
    return []


def walk_stmts(block: Block | None):
    """Every statement in `block`, including those in nested if/for/spawn bodies."""
    stack: list[Block] = [block] if block else []
    while stack:
        b = stack.pop()
        for s in b.stmts:
            yield s
            stack.extend(sub_blocks(s))


def expr_children(e: Node) -> list[Expr]:
    """The direct sub-expressions of an expression, in evaluation order."""
    match e:
        case Call():
            return list(e.args)
        case Transfer():
            return [e.src]
        case Wait():
            return [e.token]
        case Borrow() | Unary():
            return [e.operand]
        case Binary():
            return [e.lhs, e.rhs]
        case Index():
            return [e.obj, e.index]
        case MethodCall():
            return [e.obj, *e.args]
    return []


def walk_calls(block: Block | None):
    """Every call expression in `block`, nested statements and sub-expressions included."""
    for s in walk_stmts(block):
        stack = [x for x in vars(s).values() if isinstance(x, Expr)]
        while stack:
            e = stack.pop()
            if isinstance(e, Call):
                yield e
            stack.extend(expr_children(e))


def walk_expr(e: Expr):
    """`e` and every sub-expression of it."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(expr_children(node))


def assigned_vars(block: Block | None) -> set[int]:
    """Variables assigned (`x = e;`, not declared) anywhere inside `block`."""
    return {s.vid for s in walk_stmts(block) if isinstance(s, Assign)}


def show_expr(e: Expr) -> str:
    """A scalar expression as Vx source (for messages and the IR's `clause` attribute)."""
    match e:
        case Binary():
            return f"{show_expr(e.lhs)} {e.op} {show_expr(e.rhs)}"
        case Name():
            return e.name
        case IntLit() | SizeLit():
            return str(e.value)
        case Unary():
            return f"{e.op}{show_expr(e.operand)}"
        case Call():
            return f"{e.callee}({', '.join(show_expr(a) for a in e.args)})"
        case MethodCall():
            return f"{show_expr(e.obj)}.{e.method}({', '.join(show_expr(a) for a in e.args)})"
    return type(e).__name__
