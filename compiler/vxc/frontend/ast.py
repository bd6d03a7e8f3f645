"""The Vx AST: what the parser read, frozen; every node has a source span.

Nothing after the parser changes these nodes: the type checker builds the HIR
(vxc/hir/nodes.py) from them, one copy per function instance, and annotates that.
A parsed tree can therefore be shared freely (between instances, between the
LSP's document versions). Sequences are tuples for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vxc.diagnostics import Span

NO_SPAN = Span("<builtin>", 0, 0)


@dataclass(frozen=True)
class Node:
    span: Span


# ---- syntactic types -------------------------------------------------------------
@dataclass(frozen=True)
class TypeExpr(Node):
    """A type as written in the source (resolved to hir.types by the typechecker)."""


@dataclass(frozen=True)
class NamedType(TypeExpr):
    name: str


@dataclass(frozen=True)
class RefType(TypeExpr):
    mutable: bool
    inner: TypeExpr


@dataclass(frozen=True)
class DimExpr:
    """A dimension computed from literals and const parameters (`2 * BK`, `D / 2`):
    `op` is one of + - * /; evaluated when the function is monomorphised (LANGUAGE.md 3;
    hir/dims.py), E0110 when `/` does not divide or the result is not positive. Not a
    `Node`: it is part of a type, which the HIR builder copies as it is."""

    span: Span
    op: str
    lhs: int | str | DimExpr
    rhs: int | str | DimExpr


Dim = int | str | DimExpr  # a literal, a const-generic or runtime name, or an expression


@dataclass(frozen=True)
class TensorType(TypeExpr):
    elem: TypeExpr
    dims: tuple[Dim, ...]


@dataclass(frozen=True)
class VecType(TypeExpr):
    elem: TypeExpr


@dataclass(frozen=True)
class TokenType(TypeExpr):
    inner: TypeExpr
    space: str


# ---- expressions -----------------------------------------------------------------
@dataclass(frozen=True)
class Expr(Node):
    """Base of the expression forms."""


@dataclass(frozen=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True)
class FloatLit(Expr):
    value: float


@dataclass(frozen=True)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True)
class SizeLit(Expr):
    value: int  # bytes


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class MemPath(Expr):
    name: str


@dataclass(frozen=True)
class TopoPath(Expr):
    name: str


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-" | "!"
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Borrow(Expr):
    mutable: bool
    operand: Expr


@dataclass(frozen=True)
class Call(Expr):
    callee: str
    args: tuple[Expr, ...]
    const_args: tuple[Expr, ...] | None = None  # f::<128>(...)


@dataclass(frozen=True)
class MethodCall(Expr):
    obj: Expr
    method: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Index(Expr):
    obj: Expr
    index: Expr


@dataclass(frozen=True)
class Range(Node):
    """`lo .. hi` of one dimension of a view: half-open."""

    lo: Expr
    hi: Expr


@dataclass(frozen=True)
class View(Expr):
    """`x[lo .. hi, ...]`: a rectangular region of a tensor, a place like `tiles[i]`."""

    obj: Expr
    ranges: tuple[Range, ...]
    # `edge(x[..], fill)` (LANGUAGE.md 4.2): the region may reach past the tensor's end;
    # read there it is `fill` (None: a store's destination, which writes no element there)
    edge: bool = False
    fill: Expr | None = None


@dataclass(frozen=True)
class Transfer(Expr):
    src: Expr
    space: str  # `Memory::X`; for a store, the output's space (filled by typecheck)
    is_async: bool
    dest: Expr | None = None  # a store: a view of a `&mut` output (LANGUAGE.md 4.2)


@dataclass(frozen=True)
class Wait(Expr):
    token: Expr


@dataclass(frozen=True)
class TensorNew(Expr):
    elem: TypeExpr
    dims: tuple[Dim, ...]


@dataclass(frozen=True)
class Iota(Expr):
    """`iota::<E>([dims], axis)`: a new integer tile counting along `axis`."""

    elem: TypeExpr
    dims: tuple[Dim, ...]
    axis: int


# ---- statements ------------------------------------------------------------------
@dataclass(frozen=True)
class Stmt(Node):
    """Base of the statement forms (LANGUAGE.md section 4)."""


@dataclass(frozen=True)
class Block(Node):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class Let(Stmt):
    name: str
    mutable: bool
    declared: TypeExpr | None
    value: Expr


@dataclass(frozen=True)
class Assign(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None


@dataclass(frozen=True)
class For(Stmt):
    var: str
    start: Expr
    end: Expr
    body: Block


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Block
    orelse: Block | None


@dataclass(frozen=True)
class Spawn(Stmt):
    topology: str
    body: Block


# ---- items -----------------------------------------------------------------------
@dataclass(frozen=True)
class Facet(Node):
    name: str
    kind: str  # "memory" | "topology" | "list" | "size" | "rate" | "int" | "word"
    value: Any  # str, int, or tuple[str, ...]
    unit: str = ""  # for rates: "s" or "cyc"


@dataclass(frozen=True)
class Edge(Node):
    src: str
    dst: str
    cost: int
    relaxed: bool


@dataclass(frozen=True)
class MemoryDecl(Node):
    name: str
    facets: tuple[Facet, ...]


@dataclass(frozen=True)
class TopologyDecl(Node):
    name: str
    facets: tuple[Facet, ...]
    edges: tuple[Edge, ...]


@dataclass(frozen=True)
class Param(Node):
    name: str
    type: TypeExpr
    # A const parameter's default (`const BK: i64 = 64`), taken when neither `--const`
    # nor the call site gives a value (LANGUAGE.md 3); None for every other parameter.
    default: int | None = None


@dataclass(frozen=True)
class FnDecl(Node):
    name: str
    const_params: tuple[Param, ...]
    params: tuple[Param, ...]
    ret: TypeExpr | None
    topology: str | None
    where: tuple[Expr, ...]
    body: Block | None  # None for `extern fn`
    name_span: Span = NO_SPAN


@dataclass(frozen=True)
class Module(Node):
    items: tuple[Node, ...]


# ---- traversal ----------------------------------------------------------------------
def calls(node: Node):
    """Every call in `node` (any order): which functions a declaration calls. Iterative,
    so a deeply nested program cannot exhaust the stack."""
    stack: list[object] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Call):
            yield n
        if isinstance(n, tuple):
            stack.extend(n)
        elif isinstance(n, Node):
            stack.extend(vars(n).values())
