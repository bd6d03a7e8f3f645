"""Flow-sensitive ownership: moves, borrows within a call, and token linearity (E6011).

An abstract interpreter over the structured body. The state maps each variable to
the set of statuses it may have on the paths reaching a point ("live", or
"moved@LINE:how"); joins are unions, so an error is reported exactly when some
path can reach it (the property tests compare with brute-force path enumeration).
Loops iterate to a fixed point: a token carried around a loop must be live at
the head on entry and at the end of every iteration.

Borrows bound to variables (`let r = &a;`) are loans: a loan lives while its
holder is live (non-lexical lifetimes, from hir/liveness.py), and while it
lives `a` may not be moved or assigned, nor used at all under a `&mut` loan
(E0302, Rust's rules).
"""

from __future__ import annotations

from vxc.diagnostics import DiagnosticSink, Span
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.liveness import build_cfg
from vxc.hir.program import Function, Var
from vxc.hir.visit import StmtVisitor

LIVE = "live"
# Variable id -> its possible statuses; the key LOANS holds (holder, owner, mutable, line)
# loans, so the same union join covers both. None: unreachable (after a return).
State = dict[int, frozenset] | None
LOANS = -2

DROP_HELP = "bind the result of `wait({name})` before the token goes out of scope"


def _join(a: State, b: State) -> State:
    if a is None:
        return None if b is None else dict(b)
    if b is None:
        return dict(a)
    return {k: a.get(k, frozenset()) | b.get(k, frozenset()) for k in a.keys() | b.keys()}


def _moved(statuses: frozenset[str]) -> str | None:
    for s in sorted(statuses):
        if s != LIVE:
            return s
    return None


class Ownership(StmtVisitor):
    def __init__(self, fn: Function, sink: DiagnosticSink):
        self.fn, self.sink = fn, sink
        self.scopes: list[list[int]] = []

    def run(self) -> None:
        cfg = build_cfg(self.fn.decl.body, set())
        self.live = {i.stmt.nid: cfg.live_in[n] for n, i in enumerate(cfg.instrs) if i.stmt}
        state: State = {p.vid: frozenset({LIVE}) for p in self.fn.params}
        self.scopes = [[p.vid for p in self.fn.params]]
        state = self._block(self.fn.decl.body, state)
        self._drop_scope(self.scopes.pop(), state, "it is dropped at the end of the function")
        if state is not None and self.fn.ret != T.VOID:
            self.sink.emit(
                "E0201",
                f"`{self.fn.decl.name}` returns `{self.fn.ret.show()}` but a path reaches the "
                "end of its body without a `return`",
                self.fn.decl.name_span,
                help="end every path with `return ...;`",
            )

    # ---- statements ---------------------------------------------------------------
    def _block(self, block: H.Block, state: State) -> State:
        self.scopes.append([])
        for s in block.stmts:
            if state is None:
                break  # code after a return is unreachable
            state = self._stmt(s, state)
        declared = self.scopes.pop()
        self._drop_scope(
            declared, state, f"it is dropped at the end of its scope (line {block.span.end_line})"
        )
        if state is not None:
            for vid in declared:
                state.pop(vid, None)
        return state

    def _stmt(self, s: H.Stmt, state: dict) -> State:
        live = self.live.get(s.nid)
        if live is not None and state.get(LOANS):  # a loan ends when its holder is dead
            state[LOANS] = frozenset(ln for ln in state[LOANS] if ln[0] in live)
        return self.visit(s, state)

    def visit_let(self, s: H.Let, state: dict) -> State:
        self._expr(s.value, state, move=not _reads_token(self.fn.vars[s.vid].ty, s.value))
        state[s.vid] = frozenset({LIVE})
        self.scopes[-1].append(s.vid)
        self._lend(s.vid, s.value, state)
        return state

    def visit_assign(self, s: H.Assign, state: dict) -> State:
        self._expr(s.value, state, move=True)
        self._loan_conflict(s.vid, s.name, s.span, state, "assign")
        self._lend(s.vid, s.value, state)
        var = self.fn.vars[s.vid]
        if isinstance(var.ty, T.TokenT) and LIVE in state.get(s.vid, frozenset()):
            self._dropped(var, f"it is overwritten at line {s.span.line}")
        state[s.vid] = frozenset({LIVE})
        return state

    def visit_expr_stmt(self, s: H.ExprStmt, state: dict) -> State:
        self._expr(s.expr, state, move=True)
        if isinstance(s.expr.ty, T.TokenT):
            self.sink.emit(
                "E6011",
                "transfer token is dropped without `wait`; the DMA may not have completed",
                s.expr.span,
                help="bind it (`let tok = ...;`) and `wait(tok)` before using the data",
            )
        return state

    def visit_return(self, s: H.Return, state: dict) -> State:
        if s.value is not None:
            self._expr(s.value, state, move=not _reads_token(self.fn.ret, s.value))
        for scope in self.scopes:
            self._drop_scope(scope, state, f"it is abandoned by the `return` at line {s.span.line}")
        return None

    def visit_for(self, s: H.For, state: dict) -> State:
        self._expr(s.start, state, move=False)
        self._expr(s.end, state, move=False)
        return self._loop(s, state)

    def visit_if(self, s: H.If, state: dict) -> State:
        self._expr(s.cond, state, move=False)
        then = self._block(s.then, dict(state))
        other = self._block(s.orelse, dict(state)) if s.orelse else dict(state)
        return _join(then, other)

    def visit_spawn(self, s: H.Spawn, state: dict) -> State:
        return self._block(s.body, state)

    def _loop(self, s: H.For, entry: dict) -> State:
        head: dict = dict(entry)
        for _ in range(64):  # statuses only grow; a handful of rounds reaches the fixed point
            body_in = dict(head)
            body_in[s.vid] = frozenset({LIVE})
            self.scopes.append([s.vid])
            end = self._block(s.body, body_in)
            self.scopes.pop()
            if end is not None:
                end.pop(s.vid, None)
            new_head = _join(head, end)
            if new_head == head:
                break
            head = new_head
        return head

    def _drop_scope(self, vids: list[int], state: State, where: str) -> None:
        if state is None:
            return
        for vid in vids:
            var = self.fn.vars[vid]
            if isinstance(var.ty, T.TokenT) and LIVE in state.get(vid, frozenset()):
                self._dropped(var, where)

    def _dropped(self, var: Var, note: str) -> None:
        self.sink.emit(
            "E6011",
            f"transfer token for '{var.name}' is dropped without `wait`; the "
            "DMA may not have completed",
            var.span,
            notes=[note],
            help=DROP_HELP.format(name=var.name),
        )

    # ---- expressions -------------------------------------------------------------------
    def _expr(self, e: H.Expr, state: dict, move: bool, loans_checked: bool = False) -> None:
        """Walk `e`; `move` says whether a movable value in this position is consumed."""
        match e:
            case H.Name() if e.vid >= 0:
                consume = move and e.ty is not None and e.ty.movable
                if not loans_checked:
                    kind = "move" if consume else "read"
                    self._loan_conflict(e.vid, e.name, e.span, state, kind)
                self._use(e, state, consume, "moved")
            case H.Borrow():
                root = _root_var(e.operand)
                if root is not None:
                    kind = "mut" if e.mutable else "shared"
                    self._loan_conflict(root.vid, root.name, e.span, state, kind)
                self._expr(e.operand, state, move=False, loans_checked=root is not None)
            case H.Index():
                self._expr(e.obj, state, move=False, loans_checked=loans_checked)
                self._expr(e.index, state, move=False)
            case H.MethodCall():
                self._expr(e.obj, state, move=False)
            case H.Unary():
                self._expr(e.operand, state, move=False)
            case H.Binary():
                self._expr(e.lhs, state, move=False)
                self._expr(e.rhs, state, move=False)
            case H.Transfer() if e.dest is not None:
                # A store reads its source (LANGUAGE.md 4.2): the tile stays usable.
                self._expr(e.src, state, move=False)
                self._expr(e.dest, state, move=False)
            case H.Transfer():
                self._expr(e.src, state, move=not isinstance(e.src.ty, T.TokenT))
            case H.View():
                self._expr(e.obj, state, move=False, loans_checked=loans_checked)
                for r in e.ranges:
                    self._expr(r.lo, state, move=False)
                    self._expr(r.hi, state, move=False)
            case H.Wait():
                if isinstance(e.token, H.Name) and e.token.vid >= 0:
                    self._use(e.token, state, True, "waited")
                else:
                    self._expr(e.token, state, move=True)
            case H.Call():
                self._call(e, state)

    def _call(self, e: H.Call, state: dict) -> None:
        callee = self.fn_lookup(e.callee)
        borrows: dict[int, list[str]] = {}
        for i, a in enumerate(e.args):
            param = callee.params[i].ty if callee is not None else None
            # Intrinsics and implicit token reads read their operands; by-value params consume.
            consumes = (
                param is not None
                and param.movable
                and not (isinstance(param, T.TensorT) and isinstance(a.ty, T.TokenT))
            )
            self._expr(a, state, move=consumes)
            root = _root_var(a)
            if root is not None:
                kind = (
                    "mut"
                    if isinstance(a, H.Borrow) and a.mutable
                    else ("move" if consumes and isinstance(a, H.Name) else "shared")
                )
                borrows.setdefault(root.vid, []).append(kind)
        for vid, kinds in borrows.items():
            if "mut" in kinds and len(kinds) > 1 or "move" in kinds and len(kinds) > 1:
                name = self.fn.vars[vid].name
                self.sink.emit(
                    "E0302",
                    f"`{name}` is borrowed mutably (or moved) and used again "
                    f"in the same call to `{e.callee}`",
                    e.span,
                    notes=["one writer or many readers: `&mut` excludes every other use"],
                )

    fn_lookup = staticmethod(lambda name: None)  # replaced per program by check_ownership

    # ---- loans -------------------------------------------------------------------------
    def _lend(self, holder: int, value: H.Expr, state: dict) -> None:
        """`holder = &a` takes a loan on `a`; `holder = r` shares r's loans."""
        loans = {ln for ln in state.get(LOANS, frozenset()) if ln[0] != holder}
        root = _root_var(value.operand) if isinstance(value, H.Borrow) else None
        if root is not None:
            loans.add((holder, root.vid, value.mutable, value.span.line))
        elif isinstance(value, H.Name) and isinstance(value.ty, T.RefT):
            loans |= {(holder, o, m, ln) for h, o, m, ln in loans if h == value.vid}
        state[LOANS] = frozenset(loans)

    def _loan_conflict(self, vid: int, name: str, span: Span, state: dict, kind: str) -> None:
        """Using `name` as `kind` (move, assign, mut, shared, read) against live loans."""
        for holder, owner, mutable, line in sorted(state.get(LOANS, frozenset())):
            if owner != vid or holder == vid:
                continue
            if kind in ("move", "assign", "mut") or mutable:
                what = {
                    "move": "move",
                    "assign": "assign to",
                    "mut": "borrow mutably",
                    "shared": "borrow",
                    "read": "use",
                }[kind]
                how = "mutably borrowed" if mutable else "borrowed"
                self.sink.emit(
                    "E0302",
                    f"cannot {what} `{name}` while it is {how}",
                    span,
                    notes=[
                        f"`{self.fn.vars[holder].name}` borrows it at line {line} and is used later"
                    ],
                    help=f"use `{name}` after the last use of `{self.fn.vars[holder].name}`",
                )
                return

    def _use(self, e: H.Name, state: dict, consume: bool, how: str) -> None:
        statuses = state.get(e.vid, frozenset({LIVE}))
        moved = _moved(statuses)
        if moved is not None:
            where = moved.split("@", 1)[1]
            line, what = where.split(":", 1)
            self.sink.emit(
                "E0301",
                f"use of moved value `{e.name}`",
                e.span,
                notes=[
                    f"`{e.name}` was {what} at line {line}"
                    + (" on some path" if LIVE in statuses else "")
                ],
                help=_moved_help(e),
            )
        if consume:
            state[e.vid] = frozenset({f"moved@{e.span.line}:{how}"})


def _moved_help(e: H.Name) -> str:
    """What to write instead, for the kind of value that was moved: a token is spent by its
    `wait`; a tensor by a transfer or a by-value argument, where a borrow would only read it."""
    if isinstance(e.ty, T.TokenT):
        return "a token is consumed by its one `wait`; use the tensor it returned"
    return (
        f"a transfer or a by-value argument moves `{e.name}`: use the value it was moved "
        f"into, or let a callee that only reads it take `&Tensor` and pass `&{e.name}`"
    )


def _reads_token(want: T.Type, value: H.Expr) -> bool:
    """A token where its tensor is expected is read (E6004), not consumed: it must still
    be waited."""
    return isinstance(want, T.TensorT) and isinstance(value.ty, T.TokenT)


def _root_var(e: H.Expr) -> H.Name | None:
    while isinstance(e, H.Borrow | H.Index | H.View):
        e = e.operand if isinstance(e, H.Borrow) else e.obj
    return e if isinstance(e, H.Name) and e.vid >= 0 else None


def check_ownership(functions: dict[str, Function], sink: DiagnosticSink) -> None:
    for fn in functions.values():
        if not fn.has_code:
            continue
        checker = Ownership(fn, sink)
        checker.fn_lookup = functions.get
        checker.run()


__all__ = ["check_ownership", "Span"]
