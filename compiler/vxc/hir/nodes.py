"""The HIR: one function instance's checked tree.

The type checker builds it from the frozen AST (hir/build.py), one copy per instance
(a helper once per tuple of its arguments' spaces and const-generic values), and fills
in what checking learns: every expression's type (`ty`), the variable a name or a
binding resolves to (`vid`), the instance a call runs (`Call.callee`). The forms
mirror the AST's expression and statement forms, field for field, so a pass reads a
HIR node as it would read the source; types as written (`A.TypeExpr`) are shared
with the AST, which is frozen.

Every node has a `nid`, unique in the program and the same on every run for the same
sources (numbered in order as the tree is built). Later passes key per-node facts by
it (the target plan, liveness, the seam checker), never by object identity, so a fact
survives a copy, a .vxhir round trip and a second instance of the same declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vxc.diagnostics import Span
from vxc.frontend import ast as A


@dataclass
class Node:
    span: Span
    nid: int = field(kw_only=True)


# ---- expressions -----------------------------------------------------------------
@dataclass
class Expr(Node):
    ty: Any = field(default=None, kw_only=True)  # a hir.types.Type, set by typecheck


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
    vid: int = -1  # the variable it resolves to; -1 until resolved


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
    callee: str  # the declared name; the instance's name once checked (`scale<128>`)
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
class Range(Node):
    """`lo .. hi` of one dimension of a view: half-open."""

    lo: Expr
    hi: Expr


@dataclass
class View(Expr):
    """`x[lo .. hi, ...]`: a rectangular region of a tensor, a place like `tiles[i]`."""

    obj: Expr
    ranges: list[Range]
    # `edge(x[..], fill)` (LANGUAGE.md 4.2): the region may reach past the tensor's end;
    # read there it is `fill` (None: a store's destination, which writes no element there)
    edge: bool = False
    fill: Expr | None = None


@dataclass
class Transfer(Expr):
    src: Expr
    space: str  # `Memory::X`; for a store, the output's space (filled by typecheck)
    is_async: bool
    dest: Expr | None = None  # a store: a view of a `&mut` output (LANGUAGE.md 4.2)


@dataclass
class Wait(Expr):
    token: Expr


@dataclass
class TensorNew(Expr):
    elem: A.TypeExpr
    dims: list[int | str]


@dataclass
class Iota(Expr):
    elem: A.TypeExpr
    dims: list[int | str]
    axis: int


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
    declared: A.TypeExpr | None
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


# ---- a function instance ---------------------------------------------------------
@dataclass
class Param(Node):
    name: str
    type: A.TypeExpr
    default: int | None = None  # a const parameter's default (the AST's)
    vid: int = -1


@dataclass
class FnDecl(Node):
    """One instance's declaration: const parameters substituted away in an instance of a
    const-generic function (`const_params` is then empty)."""

    name: str
    const_params: list[Param]
    params: list[Param]
    ret: A.TypeExpr | None
    topology: str | None
    where: list[Expr]
    body: Block | None  # None for `extern fn`
    name_span: Span = A.NO_SPAN


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
            return [e.src] if e.dest is None else [e.src, e.dest]
        case View():
            fill = [e.fill] if e.fill is not None else []
            return [e.obj, *(x for r in e.ranges for x in (r.lo, r.hi)), *fill]
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


# Binding strength of the binary operators (grammar.lark): higher binds tighter.
PRECEDENCE = {
    "||": 1,
    "&&": 2,
    **dict.fromkeys(("==", "!=", "<", "<=", ">", ">="), 3),
    "|": 3.3,
    "&": 3.6,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
}


def show_expr(e: Expr) -> str:
    """A scalar expression as Vx source (for messages and the IR's `clause` attribute)."""
    match e:
        case Binary():
            # Parentheses where precedence needs them: `(i + 1) * T`, `a - (b - c)`.
            rank = PRECEDENCE[e.op]
            lhs, rhs = show_expr(e.lhs), show_expr(e.rhs)
            if isinstance(e.lhs, Binary) and PRECEDENCE[e.lhs.op] < rank:
                lhs = f"({lhs})"
            if isinstance(e.rhs, Binary) and PRECEDENCE[e.rhs.op] <= rank:
                rhs = f"({rhs})"
            return f"{lhs} {e.op} {rhs}"
        case Name():
            return e.name
        case IntLit() | SizeLit() | FloatLit():
            return str(e.value)
        case Borrow():
            return ("&mut " if e.mutable else "&") + show_expr(e.operand)
        case Unary():
            return f"{e.op}{show_expr(e.operand)}"
        case Call():
            return f"{e.callee}({', '.join(show_expr(a) for a in e.args)})"
        case View():
            ranges = ", ".join(f"{show_expr(r.lo)} .. {show_expr(r.hi)}" for r in e.ranges)
            view = f"{show_expr(e.obj)}[{ranges}]"
            if not e.edge:
                return view
            return f"edge({view}" + (f", {show_expr(e.fill)})" if e.fill is not None else ")")
        case Index():
            return f"{show_expr(e.obj)}[{show_expr(e.index)}]"
        case MethodCall():
            return f"{show_expr(e.obj)}.{e.method}({', '.join(show_expr(a) for a in e.args)})"
        case Iota():
            return f"iota::<{e.elem.name}>([{', '.join(map(str, e.dims))}], {e.axis})"
    return type(e).__name__
