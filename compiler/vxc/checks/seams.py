"""Seam obligations (E6004) and `where`-bound obligations (E6005), proved with z3.

A symbolic walk of each function: every tensor value carries a z3 state
(tag, val); a synchronizing hop is the identity, a relaxed hop (a declared
`relaxed` edge, or a token read before its `wait`) sends it to TOP. Branches
merge states with `If(cond, then, else)` and reads are checked under the path
condition, so a read that no feasible path reaches stale is accepted.
Integers are z3 Ints: parameters are bounded by their `where` clauses, loop
variables by their ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from vxc.checks.machine import Machine
from vxc.checks.solver import CONST, TAG_BITS, TOP, VAL_BITS, Solver, Undecided, format_model
from vxc.diagnostics import DiagnosticSink, Span
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function
from vxc.hir.visit import StmtVisitor
from vxc.plan.placement import FnPlacement

STALE = "a consumer may read stale data"
UNDECIDED = object()  # `SeamChecker._model`'s answer to a query z3 could not decide

# The launch grid (LANGUAGE.md section 4.1): one pair of constants for every function of
# a compilation, because a helper runs in the instance of the kernel that called it.
INSTANCE = z3.Int("instance()")
INSTANCES = z3.Int("instances()")


def launch_facts() -> list[z3.BoolRef]:
    """What every instance knows (QF_LIA): `0 <= instance() < instances()`, `instances() >= 1`."""
    return [INSTANCE >= 0, INSTANCE < INSTANCES, INSTANCES >= 1]


@dataclass(frozen=True)
class BufState:
    """Abstract state of one buffer: z3 tag and value, plus why it may be stale."""

    tag: z3.BitVecRef
    val: z3.BitVecRef
    seam: str | None = None  # the relaxed seam it crossed, or "token" for an unwaited read
    const: int | None = None  # the producer's compile-time constant, when known
    route: str | None = None  # the spaces it came over ("HBM -> VMEM"), for messages


def _bv(v: int, bits: int) -> z3.BitVecNumRef:
    return z3.BitVecVal(v, bits)


class SeamChecker(StmtVisitor):
    def __init__(
        self,
        fn: Function,
        machine: Machine,
        functions: dict[str, Function],
        placement: FnPlacement,
        solver: Solver,
        sink: DiagnosticSink,
    ):
        self.fn, self.machine, self.functions = fn, machine, functions
        self.placement = placement
        self.solver, self.sink = solver, sink
        self.bufs: dict[int, BufState] = {}
        self.token_routes: dict[int, str] = {}  # token vid -> the spaces its DMA crosses
        self.ints: dict[int, z3.ArithRef] = {}
        self.bools: dict[int, z3.BoolRef] = {}
        self.assume: list[z3.BoolRef] = []
        self.lens: dict[tuple[str, int], z3.ArithRef] = {}
        self.emit = True
        self.reported: set[tuple] = set()
        self.contracts = _contracts(fn.decl.body) if fn.decl.body else {}

    # ---- entry -------------------------------------------------------------------
    def run(self) -> None:
        self.assume.extend(launch_facts())
        for p in self.fn.params:
            self._bind_param(p.vid, p.name, p.ty)
        clauses = [self._bool(w) for w in self.fn.decl.where]
        self.assume.extend(clauses)
        if clauses and not self.fn.generic_of:
            # (an instance's clauses have its const arguments substituted: a false one is
            # its caller's E6005, at the call that chose them)
            self._satisfiable_where(clauses)
        self._block(self.fn.decl.body, z3.BoolVal(True))

    def _satisfiable_where(self, clauses: list[z3.BoolRef]) -> None:
        """E0403: `where` clauses no launch satisfies. Under them every obligation of the
        body would hold vacuously (a token read in flight would pass), and no launch could
        ever run the function: the clauses themselves are the error."""
        what = f"whether `{self.fn.decl.name}`'s `where` clauses can hold"
        if self._model(self.assume, self.fn.decl.where[0].span, what) is not None:
            return
        # The facts without the clauses (launch, parameter ranges, lengths >= 0), to name a
        # clause that is false on its own.
        facts = [a for a in self.assume if not any(a is c for c in clauses)]
        alone = [
            w
            for w, c in zip(self.fn.decl.where, clauses, strict=True)
            if self._model([*facts, c], w.span) is None
        ]
        at = alone[0] if alone else self.fn.decl.where[0]
        shown = ", ".join(f"`{_show(w)}`" for w in self.fn.decl.where)
        self.sink.emit(
            "E0403",
            f"`{self.fn.decl.name}`'s `where` clauses can never hold: no launch or call "
            "could run it",
            at.span,
            notes=[
                f"z3 finds no values satisfying {shown} with `0 <= instance() < "
                "instances()` and `instances() >= 1`"
            ],
            help="remove the clause, or write the precondition the function needs",
        )

    def _model(
        self, constraints: list[z3.BoolRef], span: Span, what: str = "this obligation"
    ) -> z3.ModelRef | object | None:
        """A model of the constraints, or None when they are unsatisfiable. An undecided
        query is E6015 here (an error, so the program never builds on it) and UNDECIDED:
        neither a model nor a proof."""
        try:
            return self.solver.counterexample(constraints)
        except Undecided as u:
            self.sink.emit(
                "E6015",
                f"z3 could not decide {what} ({u.reason})",
                span,
                notes=["an undecided proof is an error, never a pass"],
                help="simplify the integer arithmetic the obligation depends on",
            )
            return UNDECIDED

    def _bind_param(self, vid: int, name: str, ty: T.Type) -> None:
        if T.is_int(ty):
            self.ints[vid] = z3.Int(name)
            lo, hi = T.int_range(ty.name)
            self.assume.append(z3.And(lo <= self.ints[vid], self.ints[vid] <= hi))
        elif ty == T.BOOL:
            self.bools[vid] = z3.Bool(name)
        else:
            self.bufs[vid] = self._opaque(name)

    def _opaque(self, name: str) -> BufState:
        """A published buffer of unknown content (arguments, call results)."""
        return BufState(
            _bv(CONST, TAG_BITS), z3.BitVec(self.solver.fresh_name(f"val_{name}"), VAL_BITS)
        )

    def _stale(self, name: str, seam: str) -> BufState:
        return BufState(
            _bv(TOP, TAG_BITS), z3.BitVec(self.solver.fresh_name(f"val_{name}"), VAL_BITS), seam
        )

    # ---- statements ------------------------------------------------------------------
    def _block(self, block: H.Block, pc: z3.BoolRef) -> z3.BoolRef | None:
        """Walk a block under path condition `pc`. Returns the condition under which it
        completes (after `if c { return; }` the rest runs under `!c`), None if it never does."""
        for s in block.stmts:
            pc = self._stmt(s, pc)
            if pc is None:
                return None
        return pc

    def _stmt(self, s: H.Stmt, pc: z3.BoolRef) -> z3.BoolRef | None:
        """The path condition after `s` (None: no path gets past it)."""
        return self.visit(s, pc)

    def visit_binding(self, s: H.Let | H.Assign, pc: z3.BoolRef) -> z3.BoolRef:
        self._define(s.vid, s.value, pc)
        return pc

    def visit_expr_stmt(self, s: H.ExprStmt, pc: z3.BoolRef) -> z3.BoolRef:
        self._effects(s.expr, pc)
        return pc

    def visit_return(self, s: H.Return, pc: z3.BoolRef) -> None:
        if s.value is not None:
            self._effects(s.value, pc)
            self._read_as_tensor(s.value, self.fn.ret, pc, returned=True)
        return None

    def visit_if(self, s: H.If, pc: z3.BoolRef) -> z3.BoolRef | None:
        return self._if(s, pc)

    def visit_for(self, s: H.For, pc: z3.BoolRef) -> z3.BoolRef:
        self._for(s, pc)
        return pc

    def visit_spawn(self, s: H.Spawn, pc: z3.BoolRef) -> z3.BoolRef | None:
        return self._block(s.body, pc)

    def _define(self, vid: int, value: H.Expr, pc: z3.BoolRef) -> None:
        ty = self.fn.vars[vid].ty
        self._effects(value, pc)
        self._read_as_tensor(value, ty, pc)
        if T.is_int(ty):
            self.ints[vid] = self._int(value)
        elif ty == T.BOOL:
            self.bools[vid] = self._bool(value)
        elif ty.movable or isinstance(ty, T.RefT):
            self.bufs[vid] = self._buf(value, pc, read=False)
        base = _strip(value)
        if isinstance(base, H.Transfer) and base.is_async:
            self.token_routes[vid] = self._path(base)
        elif isinstance(base, H.Name) and base.vid in self.token_routes:
            self.token_routes[vid] = self.token_routes[base.vid]  # `inflight = next;`

    def _path(self, t: H.Transfer) -> str:
        """Where a transfer's data comes from and goes, in the spaces the program wrote
        (the same words on every target; the plan's hops use canonical names)."""
        src = T.deref(t.src.ty) if t.src.ty is not None else None
        space = getattr(src, "space", None)
        return f"{space} -> {t.space}" if space else f"into {t.space}"

    def _read_as_tensor(
        self, value: H.Expr, want: T.Type, pc: z3.BoolRef, returned: bool = False
    ) -> None:
        """A token bound or returned where its tensor is expected (`let x: Tensor<..> =
        tok;`, `return tok;` from a tensor-returning function) reads its buffer. A returned
        tensor is read too: the caller takes a call's result as published."""
        if not isinstance(T.deref(want), T.TensorT):
            return
        if isinstance(T.deref(value.ty), T.TokenT) or (
            returned and isinstance(T.deref(value.ty), T.TensorT)
        ):
            self._read(value, pc, None)

    def _snapshot(self) -> tuple[dict, dict, dict]:
        return dict(self.bufs), dict(self.ints), dict(self.bools)

    def _restore(self, snap: tuple[dict, dict, dict]) -> None:
        self.bufs, self.ints, self.bools = (dict(x) for x in snap)

    def _if(self, s: H.If, pc: z3.BoolRef) -> z3.BoolRef | None:
        cond = self._bool(s.cond)
        entry = self._snapshot()
        then_pc = self._block(s.then, z3.And(pc, cond))
        then_state = self._snapshot()
        self._restore(entry)
        else_pc = z3.And(pc, z3.Not(cond))
        if s.orelse:
            else_pc = self._block(s.orelse, else_pc)
        if then_pc is None:
            return else_pc
        if else_pc is None:
            self._restore(then_state)
            return then_pc
        self._merge(cond, then_state)
        return z3.Or(then_pc, else_pc)

    def _merge(self, cond: z3.BoolRef, then: tuple[dict, dict, dict]) -> None:
        tb, ti, tbo = then
        for vid, t in tb.items():
            e = self.bufs.get(vid)
            if e is not None and e is not t:
                self.bufs[vid] = BufState(
                    z3.If(cond, t.tag, e.tag),
                    z3.If(cond, t.val, e.val),
                    t.seam or e.seam,
                    t.const if t.const == e.const else None,
                    t.route or e.route,
                )
        for vid, t in ti.items():
            if vid in self.ints and self.ints[vid] is not t:
                self.ints[vid] = z3.If(cond, t, self.ints[vid])
        for vid, t in tbo.items():
            if vid in self.bools and self.bools[vid] is not t:
                self.bools[vid] = z3.If(cond, t, self.bools[vid])

    def _for(self, s: H.For, pc: z3.BoolRef) -> None:
        lo, hi = self._int(s.start), self._int(s.end)
        entry = self._snapshot()
        # Silent passes build the loop-head state "entry, or the end of some earlier
        # iteration": head_k = entry | body(head_k-1). A stale buffer rotated through n
        # variables (`a = b; b = c; c = <relaxed>`) reaches the first of them only after
        # n iterations, so one pass per assigned variable, plus one, covers every chain.
        # The last pass starts from that head and reports.
        # Passes stop early once no buffer changes whether it may be stale or which
        # constant it holds (the seed's loop needs one pass, as before).
        # A body whose every path returns never reaches the head again, nor the code after
        # the loop: only the entry state does.
        # The end of an iteration carries over only where the iteration completed (`end_pc`:
        # not where `if c { return; }` left the loop).
        emit, self.emit = self.emit, False
        head = entry
        for _ in range(len(H.assigned_vars(s.body)) + 1):
            self._restore(head)
            end_pc = self._iteration(s, pc, lo, hi)
            if end_pc is None:
                break
            end = self._snapshot()
            self._restore(entry)
            self._merge(z3.And(z3.Bool(self.solver.fresh_name("iterated")), end_pc), end)
            before, head = head, self._snapshot()
            if _signature(head[0]) == _signature(before[0]):
                break
        self.emit = emit
        self._restore(head)
        end_pc = self._iteration(s, pc, lo, hi)
        after = self._snapshot()
        self._restore(entry)
        if end_pc is not None:
            self._merge(z3.And(z3.Bool(self.solver.fresh_name("entered")), end_pc), after)

    def _iteration(self, s: H.For, pc: z3.BoolRef, lo, hi) -> z3.BoolRef | None:
        """One pass over the body: the condition under which it completes, or None."""
        i = z3.Int(self.solver.fresh_name(s.var))
        self.ints[s.vid] = i
        return self._block(s.body, z3.And(pc, lo <= i, i < hi))

    # ---- expressions: effects and reads -------------------------------------------------
    def _effects(self, e: H.Expr, pc: z3.BoolRef) -> None:
        """Check every read inside `e` (calls, intrinsics, transfers of in-flight buffers)."""
        for node in _calls(e):
            if isinstance(node, H.Transfer):
                if isinstance(node.src.ty, T.TokenT):
                    self._read(node.src, pc, None)
                continue
            if node.callee == "assert" and node.callee not in self.functions:
                self._assert(node, pc)
                continue
            callee = self.functions.get(node.callee)
            params = [p.ty for p in callee.params] if callee else [None] * len(node.args)
            for a, want in zip(node.args, params, strict=False):
                # A token passed where a token is expected moves it; anywhere else it is read.
                if _is_tensorish(a.ty) and not isinstance(want, T.TokenT):
                    self._read(a, pc, None)
            if callee is not None:
                self._bounds(node, callee, pc)

    def _assert(self, call: H.Call, pc: z3.BoolRef) -> None:
        cond = call.args[0]
        if isinstance(cond, H.Binary) and cond.op == "==" and _is_tensorish(cond.lhs.ty):
            value = _const_int(cond.rhs)
            self._read(cond.lhs, pc, value)

    def _read(self, e: H.Expr, pc: z3.BoolRef, contract: int | None) -> None:
        """The obligation of one read: the buffer is not TOP, or holds the contracted value."""
        base = _strip(e)
        if not isinstance(base, H.Name | H.Wait | H.Transfer):
            return  # a fresh element or call result: published, nothing crossed a seam
        name = (
            base.name
            if isinstance(base, H.Name)
            else "transfer_async(...)"
            if isinstance(base, H.Transfer) and base.is_async
            else "tmp"
        )
        # One report per read (a reassigned token is a new transfer; each stale read counts);
        # the loop's second pass re-walks the same reads, and reports them once.
        key = (e.span, base.vid if isinstance(base, H.Name) else base.nid)
        state = self._buf(base, pc, read=True)
        if (
            state.seam is None
            and contract is None
            and (base.vid if isinstance(base, H.Name) else -1) not in self.contracts
        ):
            return  # never crossed a relaxed seam and no value is required: nothing to prove
        if contract is None and isinstance(base, H.Name):
            contract = self.contracts.get(base.vid)
        if contract is None:
            contract = state.const
        if not self.emit or key in self.reported:
            return
        zname = name.removesuffix("(...)")
        tag, val = z3.BitVec(f"tag_{zname}", TAG_BITS), z3.BitVec(f"val_{zname}", VAL_BITS)
        if contract is None:
            violated = tag == TOP
        else:
            violated = z3.Not(z3.And(tag == CONST, val == contract % (1 << VAL_BITS)))
        model = self._model(
            [*self.assume, pc, tag == state.tag, val == state.val, violated], e.span
        )
        if model is None and state.seam == "token":
            self._token_read(e, name, key)
        if model is None or model is UNDECIDED:
            return
        self.reported.add(key)
        note = f"z3 counterexample: {format_model(model, [tag, val])}"
        words = self._in_words(
            name,
            base,
            state,
            contract,
            model.eval(tag, model_completion=True),
            model.eval(val, model_completion=True),
        )
        if state.seam == "token":
            msg = f"'{name}' is read before its transfer token is waited — {STALE}"
            help_ = f"read `wait({name})` instead: it blocks until the DMA completed"
        elif state.seam is not None:
            msg = f"'{name}' is read after crossing the relaxed seam `{state.seam}` — {STALE}"
            help_ = "route the transfer over a synchronizing edge, or declare the edge `sync`"
        else:
            msg = f"'{name}' may not hold the value {contract} its consumer requires"
            help_ = None
        self.sink.emit("E6004", msg, e.span, notes=[note, words], help=help_)

    def _in_words(
        self,
        name: str,
        base: H.Expr,
        state: BufState,
        contract: int | None,
        tag: z3.ExprRef,
        val: z3.ExprRef,
    ) -> str:
        """The counterexample as a sentence: which path the data came over and what the
        buffer holds when it is read (the tags of LANGUAGE.md section 6)."""
        value = val.as_long() if isinstance(val, z3.BitVecNumRef) else None
        tag_v = tag.as_long() if isinstance(tag, z3.BitVecNumRef) else TOP
        held = (
            "is stale (tag TOP: it may hold any value"
            + (f", such as {value:#04x})" if value is not None else ")")
            if tag_v == TOP
            else f"holds {value} (tag CONST)"
            if tag_v == CONST and value is not None
            else "was never written (tag BOT)"
        )
        if state.seam == "token":
            vid = base.vid if isinstance(base, H.Name) else -1
            route = self.token_routes.get(vid) or (
                self._path(base) if isinstance(base, H.Transfer) else "its DMA"
            )
            return (
                f"in words: on this path nothing waits the DMA {route} that fills `{name}`, "
                f"so `{name}` {held} when it is read"
            )
        if state.seam is not None:
            route = state.route or state.seam
            return (
                f"in words: `{name}` came {route} over the relaxed seam `{state.seam}`, which "
                f"does not order the copy before this read, so `{name}` {held}"
            )
        return f"in words: `{name}` must hold {contract} here, but on this path it {held}"

    def _token_read(self, e: H.Expr, name: str, key: tuple) -> None:
        """E0404: a token read as its tensor on a path the solver proves infeasible. No
        stale state exists there (no E6004), but a token is never a tensor: the read
        would reach the backends as one, whatever the path condition says."""
        self.reported.add(key)
        self.sink.emit(
            "E0404",
            f"'{name}' is a transfer token where its tensor is expected",
            e.span,
            notes=[
                "z3 finds no path that reaches this read with the transfer in flight "
                "(E6004): the path condition here is infeasible; a token is still not a "
                "tensor"
            ],
            help=f"read `wait({name})` instead, or remove the unreachable read",
        )

    def _bounds(self, call: H.Call, callee: Function, pc: z3.BoolRef) -> None:
        """Each `where` bound of the callee must follow from the caller's facts (E6005)."""
        if not callee.decl.where or not self.emit:
            return
        # Only the callee's `where` clauses are evaluated: no transfers, so no plan part.
        sub = SeamChecker(
            callee, self.machine, self.functions, FnPlacement(callee.name), self.solver, self.sink
        )
        for p, a in zip(callee.params, call.args, strict=False):
            if T.is_int(p.ty):
                sub.ints[p.vid] = self._int(a)
        template = self.functions.get(callee.generic_of) if callee.generic_of else None
        for k, w in enumerate(callee.decl.where):
            model = self._model([*self.assume, pc, z3.Not(sub._bool(w))], call.span)
            if model is None or model is UNDECIDED:
                continue
            params = [p for p in callee.params if _mentions(w, p.vid)]
            if not params and template is not None and k < len(template.decl.where):
                # A bound on const parameters: the instance's clause has the values
                # substituted (`128 <= 64`); name the parameter and show the clause as written.
                written = template.decl.where[k]
                consts = [c.name for c in template.decl.const_params if _names(written, c.name)]
                if consts:
                    self.sink.emit(
                        "E6005",
                        f"cannot prove `{_show(written)}` for const parameter `{consts[0]}`"
                        f" of `{callee.decl.name}`",
                        call.span,
                        notes=[f"this call instantiates it as `{_show(w)}`"],
                        help=f"call it with a `{consts[0]}` that satisfies `{_show(written)}`",
                    )
                    continue
            args = [a for p, a in zip(callee.params, call.args, strict=False) if p in params]
            values = " ".join(
                f"({p.name} {model.eval(sub.ints[p.vid], model_completion=True)})"
                for p in params
                if p.vid in sub.ints
            )
            text = _show(w)
            self.sink.emit(
                "E6005",
                f"cannot prove `{text}` for argument `{params[0].name if params else '?'}`"
                f" of `{callee.decl.name}`",
                args[0].span if args else call.span,
                notes=[f"z3 counterexample: ({values})"],
                help=f"bound it in the caller (`where ...`) or pass a value satisfying `{text}`",
            )

    # ---- values ----------------------------------------------------------------------------
    def _buf(self, e: H.Expr, pc: z3.BoolRef, read: bool) -> BufState:
        base = _strip(e)
        if isinstance(base, H.Name) and base.vid >= 0:
            state = self.bufs.get(base.vid) or self._opaque(base.name)
            if isinstance(base.ty, T.TokenT) and read:
                return self._stale(base.name, "token")  # not yet waited: the hop is relaxed
            return state
        if isinstance(base, H.Transfer):
            if base.is_async and read:  # the result of transfer_async, read unwaited
                return self._stale("transfer_async", "token")
            # Transferring an in-flight buffer is a read of the token, reported there
            # (`_effects`); the copy is not reported again where it is read.
            return self._route(base, self._buf(base.src, pc, read=False))
        if isinstance(base, H.Wait):
            return self._buf(base.token, pc, read=False)
        if isinstance(base, H.TensorNew):
            return BufState(_bv(CONST, TAG_BITS), _bv(0, VAL_BITS), None, 0)
        return self._opaque("tmp")

    def _route(self, t: H.Transfer, src: BufState) -> BufState:
        """The buffer after the hops the target plan routed `t` over (the topology the
        code runs on: a `spawn` block's, not its function's); unrouted: no hops."""
        node = self.placement.nodes.get(t.nid)
        for hop in node.hops if node is not None else []:
            if hop.relaxed:
                return BufState(
                    _bv(TOP, TAG_BITS),
                    z3.BitVec(self.solver.fresh_name("val"), VAL_BITS),
                    hop.seam,
                    src.const,
                    self._path(t),
                )
        return src

    def _int(self, e: H.Expr) -> z3.ArithRef:
        match e:
            case H.IntLit() | H.SizeLit():
                return z3.IntVal(e.value)
            case H.Name() if e.vid in self.ints:
                return self.ints[e.vid]
            case H.Unary(op="-"):
                return _wrap(-self._int(e.operand), e.ty)
            case H.Binary(op="+" | "-" | "*"):
                lhs, rhs = self._int(e.lhs), self._int(e.rhs)
                exact = lhs + rhs if e.op == "+" else lhs - rhs if e.op == "-" else lhs * rhs
                return _wrap(exact, e.ty)
            case H.Binary(op="/" | "%") if isinstance(e.rhs, H.IntLit) and e.rhs.value > 0:
                # Division by a positive constant stays linear; Vx's `/` truncates, which
                # z3's floor division matches for a non-negative dividend only.
                lhs = self._int(e.lhs)
                d = z3.IntVal(e.rhs.value)
                q = z3.If(lhs >= 0, lhs / d, -((-lhs) / d))
                return q if e.op == "/" else lhs - d * q
            case H.Call(callee="instance" | "instances") if e.callee not in self.functions:
                return INSTANCE if e.callee == "instance" else INSTANCES
            case H.MethodCall(method="len"):
                base = _strip(e.obj)
                if isinstance(base, H.Name) and base.vid >= 0:
                    # One length per Vec variable, so `where n <= tiles.len()` and a later
                    # `tiles.len()` talk about the same number.
                    key = ("len", base.vid)
                    if key not in self.lens:
                        self.lens[key] = z3.Int(self.solver.fresh_name(f"len_{base.name}"))
                        self.assume.append(self.lens[key] >= 0)
                    return self.lens[key]
                n = z3.Int(self.solver.fresh_name("len"))
                self.assume.append(n >= 0)
                return n
        return z3.Int(self.solver.fresh_name("int"))

    def _bool(self, e: H.Expr) -> z3.BoolRef:
        match e:
            case H.BoolLit():
                return z3.BoolVal(e.value)
            case H.Name() if e.vid in self.bools:
                return self.bools[e.vid]
            case H.Unary(op="!"):
                return z3.Not(self._bool(e.operand))
            case H.Binary(op="&&"):
                return z3.And(self._bool(e.lhs), self._bool(e.rhs))
            case H.Binary(op="||"):
                return z3.Or(self._bool(e.lhs), self._bool(e.rhs))
            case H.Binary(op="==" | "!=" | "<" | "<=" | ">" | ">=") if T.is_int(e.lhs.ty):
                lhs, rhs = self._int(e.lhs), self._int(e.rhs)
                return {
                    "==": lhs == rhs,
                    "!=": lhs != rhs,
                    "<": lhs < rhs,
                    "<=": lhs <= rhs,
                    ">": lhs > rhs,
                    ">=": lhs >= rhs,
                }[e.op]
        return z3.Bool(self.solver.fresh_name("cond"))


# ---- helpers ------------------------------------------------------------------------------
def _wrap(exact: z3.ArithRef, ty: T.Type | None) -> z3.ArithRef:
    """The value of `exact` in `ty`: Vx integer arithmetic wraps (two's complement, modulo
    2^bits, on every target: docs/DESIGN.md), so the model wraps too, or a proof about
    `x + 1` would assume the mathematical integer that the machine does not compute."""
    if ty is None or not T.is_int(ty):
        return exact
    lo, hi = T.int_range(ty.name)
    return lo + (exact - lo) % (hi - lo + 1)


def _strip(e: H.Expr) -> H.Expr:
    while isinstance(e, H.Borrow):
        e = e.operand
    return e


def _is_tensorish(t: T.Type | None) -> bool:
    t = T.deref(t) if t is not None else None
    return isinstance(t, T.TensorT | T.TokenT)


def _const_int(e: H.Expr) -> int | None:
    if isinstance(e, H.IntLit):
        return e.value
    if isinstance(e, H.FloatLit) and float(e.value).is_integer():
        return int(e.value)
    if isinstance(e, H.Unary) and e.op == "-":
        inner = _const_int(e.operand)
        return None if inner is None else -inner
    return None


def _calls(e: H.Expr) -> list[H.Call | H.Transfer]:
    """Calls and transfers inside `e`, innermost first (arguments are evaluated first)."""
    out: list[H.Call | H.Transfer] = []
    stack: list[tuple[H.Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            out.append(node)
            continue
        if isinstance(node, H.Call | H.Transfer):
            stack.append((node, True))
        stack.extend((c, False) for c in H.expr_children(node))
    return out


def _contracts(body: H.Block) -> dict[int, int]:
    """Pre-scan (into spawn/if/loop bodies) for consumers' `assert(buf == v)`."""
    out: dict[int, int] = {}
    for s in H.walk_stmts(body):
        call = s.expr if isinstance(s, H.ExprStmt) else None
        if not (isinstance(call, H.Call) and call.callee == "assert" and len(call.args) == 1):
            continue
        cond = call.args[0]
        if isinstance(cond, H.Binary) and cond.op == "==":
            lhs, value = _strip(cond.lhs), _const_int(cond.rhs)
            if isinstance(lhs, H.Name) and value is not None:
                out[lhs.vid] = value
    return out


def _signature(bufs: dict[int, BufState]) -> dict[int, tuple]:
    """What a loop pass can change about a buffer besides its z3 terms."""
    return {vid: (b.seam, b.const) for vid, b in bufs.items()}


def _names(e: H.Expr, name: str) -> bool:
    """Whether `e` mentions `name` (a const parameter: it has no variable id)."""
    return any(isinstance(n, H.Name) and n.name == name for n in H.walk_expr(e))


def _mentions(e: H.Expr, vid: int) -> bool:
    return any(isinstance(n, H.Name) and n.vid == vid for n in H.walk_expr(e))


_show = H.show_expr  # bounds and contracts as the program wrote them


def check_seams(
    fn: Function,
    machine: Machine,
    functions: dict[str, Function],
    placement: FnPlacement,
    solver: Solver,
    sink: DiagnosticSink,
) -> None:
    """Prove the seam and bound obligations of one placed function (its plan part)."""
    if fn.is_extern or not fn.ok:
        return
    SeamChecker(fn, machine, functions, placement, solver, sink).run()
