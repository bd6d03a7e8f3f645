"""A flat control-flow graph of a function body, and variable liveness over it.

The scratchpad allocator (plan/scratchpad.py) needs real lifetimes: a variable
is live from its definition to its last use, across loop back edges. The
structured body is flattened into one `Instr` per statement (plus one for each
loop head and each `if` condition); liveness is the classic backward dataflow
over that graph, iterated to its fixed point.

Each instruction also records how buffers flow: which Transfer / TensorNew
nodes it evaluates (`makes`), which of them the defined variable ends up
holding (`source`), or which variable's buffer the defined variable takes over
(`flow`: `let cur = wait(inflight)`, `inflight = next`). Tensors and tokens are
move-only, so two live variables never hold the same buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.diagnostics import Span
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.tiles import tile_form
from vxc.hir.visit import StmtVisitor


@dataclass
class Instr:
    """One step of the flattened body.

    uses/defs are variable ids; `source` is the Transfer/TensorNew node whose
    result the defined variable holds, `flow` the variable whose buffer it takes
    over (at most one of the two is set); `makes` lists every Transfer/TensorNew
    evaluated here, innermost first; `succ` are successor indices, where
    `Cfg.exit` stands for the end of the function.
    """

    span: Span
    uses: frozenset[int] = frozenset()
    defs: frozenset[int] = frozenset()
    source: H.Expr | None = None
    flow: int | None = None
    makes: list[H.Expr] = field(default_factory=list)
    succ: list[int] = field(default_factory=list)
    stmt: H.Stmt | None = None  # the statement this instruction starts (None: loop heads)


@dataclass
class Cfg:
    """The flattened body with its liveness sets (one per instruction)."""

    instrs: list[Instr]
    live_in: list[frozenset[int]] = field(default_factory=list)
    live_out: list[frozenset[int]] = field(default_factory=list)

    @property
    def exit(self) -> int:
        return len(self.instrs)


class _Builder(StmtVisitor):
    def __init__(self, identity: set[int], store_sources: dict[int, frozenset[int]]):
        self.instrs: list[Instr] = []
        self.identity = identity  # nids of Transfer nodes with no hop (already in place)
        self.store_sources = store_sources

    def add(self, instr: Instr, preds: list[int]) -> int:
        idx = len(self.instrs)
        self.instrs.append(instr)
        for p in preds:
            self.instrs[p].succ.append(idx)
        return idx

    def block(self, block: H.Block, preds: list[int]) -> list[int]:
        for s in block.stmts:
            preds = self.stmt(s, preds)
        return preds

    def stmt(self, s: H.Stmt, preds: list[int]) -> list[int]:
        first = len(self.instrs)
        ends = self._stmt(s, preds)
        if first < len(self.instrs):
            self.instrs[first].stmt = s
        return ends

    def _stmt(self, s: H.Stmt, preds: list[int]) -> list[int]:
        """Add `s`'s instructions after `preds`; returns the ones control leaves it from."""
        return self.visit(s, preds)

    def visit_binding(self, s: H.Let | H.Assign, preds: list[int]) -> list[int]:
        return [self.add(self.binding(s), preds)]

    def visit_expr_stmt(self, s: H.ExprStmt, preds: list[int]) -> list[int]:
        return [self.add(self.expr_instr(s.span, [s.expr]), preds)]

    def visit_return(self, s: H.Return, preds: list[int]) -> list[int]:
        idx = self.add(self.expr_instr(s.span, [s.value] if s.value else []), preds)
        self.instrs[idx].succ.append(-1)  # patched to Cfg.exit once the size is known
        return []

    def visit_if(self, s: H.If, preds: list[int]) -> list[int]:
        cond = self.add(self.expr_instr(s.cond.span, [s.cond]), preds)
        then = self.block(s.then, [cond])
        return then + (self.block(s.orelse, [cond]) if s.orelse else [cond])

    def visit_for(self, s: H.For, preds: list[int]) -> list[int]:
        rng = self.add(self.expr_instr(s.span, [s.start, s.end]), preds)
        head = self.add(Instr(s.span, defs=frozenset({s.vid})), [rng])
        for end in self.block(s.body, [head]):
            self.instrs[end].succ.append(head)  # the back edge
        return [head]

    def visit_spawn(self, s: H.Spawn, preds: list[int]) -> list[int]:
        return self.block(s.body, preds)

    def binding(self, s: H.Let | H.Assign) -> Instr:
        instr = self.expr_instr(s.span, [s.value])
        instr.defs = frozenset({s.vid})
        instr.flow, instr.source = self.origin(s.value)
        return instr

    def expr_instr(self, span: Span, exprs: list[H.Expr]) -> Instr:
        uses: set[int] = set()
        makes: list[H.Expr] = []
        for e in exprs:
            _walk(e, uses, makes)
            for node in H.walk_expr(e) if e is not None else ():
                if isinstance(node, H.Wait) and isinstance(node.token, H.Name):
                    # A store reads its source until the wait: the tile stays live (and its
                    # slot unavailable) until then (LANGUAGE.md 4.2, E6043).
                    uses |= self.store_sources.get(node.token.vid, frozenset())
        return Instr(span, uses=frozenset(uses), makes=makes)

    def origin(self, e: H.Expr) -> tuple[int | None, H.Expr | None]:
        """Where the buffer of a bound value comes from: a variable, or a node that makes it."""
        if isinstance(e, H.Wait):
            return self.origin(e.token)
        if isinstance(e, H.Transfer) and e.nid in self.identity:
            return self.origin(e.src)
        if isinstance(e, H.Transfer | H.TensorNew) or makes_buffer(e):
            return None, e
        if isinstance(e, H.Name) and e.vid >= 0 and e.ty is not None and e.ty.movable:
            return e.vid, None
        return None, None


def _walk(e: H.Expr | None, uses: set[int], makes: list[H.Expr]) -> None:
    """Collect variable uses and buffer-making nodes of an expression, innermost first."""
    if e is None:
        return
    if isinstance(e, H.Name) and e.vid >= 0:
        uses.add(e.vid)
    for child in children(e):
        _walk(child, uses, makes)
    if isinstance(e, H.Transfer | H.TensorNew) or makes_buffer(e):
        makes.append(e)


def makes_buffer(e: H.Expr) -> bool:
    """A call whose result is a tensor or token: the caller holds the buffer it returns; and
    tile arithmetic (LANGUAGE.md section 4.3), whose result is a new tile."""
    return (isinstance(e, H.Call) and isinstance(e.ty, T.TensorT | T.TokenT)) or tile_form(
        e
    ) is not None


children = H.expr_children  # one definition of an expression's operands, in ast.py


def store_sources(body: H.Block) -> dict[int, frozenset[int]]:
    """Token variable -> the variables whose tiles the stores it may hold read
    (`let st = transfer_async(acc, c[...])`, `st = st2`); flow-insensitive, a union."""
    out: dict[int, frozenset[int]] = {}
    bindings = [s for s in H.walk_stmts(body) if isinstance(s, H.Let | H.Assign)]
    for _ in range(len(bindings) + 1):  # copies between token variables reach a fixed point
        before = dict(out)
        for s in bindings:
            v = s.value
            if isinstance(v, H.Transfer) and v.dest is not None and v.is_async:
                src = _strip_borrow(v.src)
                if isinstance(src, H.Name) and src.vid >= 0:
                    out[s.vid] = out.get(s.vid, frozenset()) | {src.vid}
            elif isinstance(v, H.Name) and v.vid in out:
                out[s.vid] = out.get(s.vid, frozenset()) | out[v.vid]
        if out == before:
            break
    return out


def _strip_borrow(e: H.Expr) -> H.Expr:
    while isinstance(e, H.Borrow):
        e = e.operand
    return e


def build_cfg(body: H.Block, identity: set[int]) -> Cfg:
    """Flatten `body`; `identity` holds the nids of transfers that move nothing (no hop)."""
    b = _Builder(identity, store_sources(body))
    b.add(Instr(body.span), [])  # entry: parameters are defined before it
    ends = b.block(body, [0])
    cfg = Cfg(b.instrs)
    for instr in cfg.instrs:
        instr.succ = [cfg.exit if s == -1 else s for s in instr.succ]
    for end in ends:
        cfg.instrs[end].succ.append(cfg.exit)
    _liveness(cfg)
    return cfg


def _liveness(cfg: Cfg) -> None:
    n = len(cfg.instrs)
    live_in: list[frozenset[int]] = [frozenset()] * (n + 1)  # index n: the exit, nothing live
    live_out: list[frozenset[int]] = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            instr = cfg.instrs[i]
            out = frozenset().union(*(live_in[s] for s in instr.succ))
            new_in = instr.uses | (out - instr.defs)
            if out != live_out[i] or new_in != live_in[i]:
                live_out[i], live_in[i] = out, new_in
                changed = True
    cfg.live_in, cfg.live_out = live_in[:n], live_out
