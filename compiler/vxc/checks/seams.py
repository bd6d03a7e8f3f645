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

import operator
import re
from dataclasses import dataclass

import z3

from vxc.checks.externs import check_extern_outputs
from vxc.checks.loops import Head, classify
from vxc.checks.regions import (
    Ideal,
    Overflow,
    Proofs,
    Store,
    constants,
    holds,
    machine_div,
    named_values,
    trunc_div,
)
from vxc.checks.solver import (
    CONST,
    QUICK_RLIMIT,
    SHORTCUT_RLIMIT,
    TAG_BITS,
    TOP,
    VAL_BITS,
    Budget,
    Solver,
    Undecided,
    format_model,
)
from vxc.diagnostics import DiagnosticSink, Span
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function
from vxc.hir.tiles import tile_form, tile_operands
from vxc.hir.visit import StmtVisitor
from vxc.machines.model import Machine
from vxc.plan.placement import FnPlacement

STALE = "a consumer may read stale data"
UNDECIDED = object()  # `SeamChecker._model`'s answer to a query z3 could not decide

# The launch grid (LANGUAGE.md section 4.1): one pair of constants for every function of
# a compilation, because a helper runs in the instance of the kernel that called it.
INSTANCE = z3.Int("instance()")
ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}
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
    # Read by the checks that take a checker (externs.py) rather than import this module.
    INSTANCES = INSTANCES
    UNDECIDED = UNDECIDED

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
        # Stores (LANGUAGE.md 4.2): store nid -> "in flight" (a z3 condition), a token
        # variable -> the stores it may hold, a store -> the variable it reads.
        self.inflight: dict[int, z3.BoolRef] = {}
        self.token_stores: dict[int, frozenset[int]] = {}
        self.store_src: dict[int, tuple[int, str, int]] = {}
        self.store_dest: dict[int, tuple] = {}  # an async store -> its region, its line
        self.stores: list[Store] = []
        self.proved_races: set[tuple[int, ...]] = set()  # `_race_key`s of proved pairs
        self.proofs = Proofs()
        self.divs: dict[tuple, tuple] = {}
        # What Vx's division computes by 0 and -1 (checks/regions.py `trunc_div`): true
        # facts, given to the queries that report (`_precise`), not to the fast forms.
        self.pinned: list[z3.BoolRef] = []
        self.bounds: list[tuple] = []  # view bounds of the emitting pass, proved at the end
        # Constants of one instance's own (loop variables, quotients, unknown values): a
        # second instance has its own copies (E6042); parameters and lengths are shared.
        self.owned: list = [INSTANCE]
        # Every wrapping integer operation, and the exact form of every term built from
        # them (by z3 id): the view and race proofs read index terms exactly, with the
        # obligation that none of their operations overflows (checks/regions.py).
        self.wraps: list[Overflow] = []
        self.ideals: dict[int, Ideal] = {}
        self.wrapping_clauses: list[z3.BoolRef] = []  # `where` clauses with a wrap in them
        # Those clauses over the mathematical integers, where z3 proves from the other
        # facts that none of their operations overflows (`n == h * s` under `h <= 4096`,
        # `s <= 16777216`): the race proofs read these, not the wrapped form.
        self.exact_clauses: list[z3.BoolRef] = []
        self.per_instance: set[int] = set()  # variables whose value depends on instance()

    # ---- entry -------------------------------------------------------------------
    def run(self) -> None:
        self.solver.begin_function()
        self.assume.extend(launch_facts())
        for p in self.fn.params:
            self._bind_param(p.vid, p.name, p.ty)
        clauses = []
        for w in self.fn.decl.where:
            before = len(self.wraps)
            clauses.append(self._bool(w))
            if len(self.wraps) > before:
                self.wrapping_clauses.append(clauses[-1])
        self.assume.extend(clauses)
        self._exact_where()
        if clauses and not self.fn.generic_of:
            # (an instance's clauses have its const arguments substituted: a false one is
            # its caller's E6005, at the call that chose them)
            self._satisfiable_where(clauses)
        self._block(self.fn.decl.body, z3.BoolVal(True))
        if self._prove_bounds():
            # The race queries assume the stores' regions lie in their outputs (E6041
            # proves it); with a view out of bounds the program is rejected already, and
            # z3 can spend its whole budget three times over on a race query of the
            # broken indices (a fuzz input took 6 s of CPU so).
            self._races()
        self.placement.proved |= self.proofs.all()

    def _exact_where(self) -> None:
        """`exact_clauses`: each wrapping `where` clause in its exact form, kept only when
        the facts without the wrapping clauses prove that none of its operations overflows
        (then the exact and the wrapped clause say the same). An undecided or failed proof
        keeps the clause out: fewer facts, never a wrong one."""
        if not self.wrapping_clauses:
            return
        facts = [x for x in self.assume if not any(x is c for c in self.wrapping_clauses)]
        for clause in self.wrapping_clauses:
            exact, ops = self._exact_bool(clause)
            if not ops:
                continue
            fits = z3.And(*(self.wraps[i].fits for i in sorted(ops)))
            verdict, _ = self.solver.decide([*facts, z3.Not(fits)])
            if verdict == "unsat":
                self.exact_clauses.append(exact)
        self.assume.extend(self.exact_clauses)  # implied by the facts: every proof reads them

    def _exact_bool(self, b: z3.BoolRef) -> tuple[z3.BoolRef, frozenset[int]]:
        """A clause with every wrapped integer operand replaced by its exact form, and the
        wrapping operations that were replaced."""
        if z3.is_and(b) or z3.is_or(b) or z3.is_not(b):
            parts = [self._exact_bool(c) for c in b.children()]
            rebuilt = b.decl()(*(p for p, _ in parts))
            return rebuilt, frozenset().union(*(o for _, o in parts))
        if b.num_args() == 2 and z3.is_arith(b.arg(0)):
            lhs, rhs = b.arg(0), b.arg(1)
            ops = self._ops(lhs) | self._ops(rhs)
            return b.decl()(self._exact(lhs), self._exact(rhs)), ops
        return b, frozenset()

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
            model = self.solver.counterexample(constraints)
            if model is None or not self.pinned:
                return model
            return self.solver.counterexample(self._precise(constraints))  # as `_decide`
        except Undecided as u:
            self.sink.emit(
                "E6015",
                f"z3 could not decide {what} ({u.reason})",
                span,
                notes=["an undecided proof is an error, never a pass"],
                help="simplify the integer arithmetic the obligation depends on",
            )
            return UNDECIDED

    def _precise(self, facts: list[z3.BoolRef]) -> list[z3.BoolRef]:
        """`facts` with the division facts of `pinned`: for the queries whose answer is
        reported, so that a counterexample is one the machine can run."""
        return [*facts, *self.pinned] if self.pinned else facts

    def _budget(self, before: int = 0) -> Budget:
        """One obligation's budget for its forms: `before` quick forms, then the reported
        query (`_decide`: one form, or two with the pinned division facts)."""
        return self.solver.shared_budget(attempts=before + (1 if self.pinned else 0))

    def _decide(self, query: list[z3.BoolRef], small: list, budget: Budget | None = None) -> tuple:
        """A reported query: proved without the pinned division facts (fewer facts, the
        form z3 decides best), else asked with them, whose model the machine can run.
        The forms share one obligation's budget (each had a whole one: a fuzzed attention
        whose two views z3 could not decide took 5.3 s of CPU to say so)."""
        budget = budget or self._budget()
        # Small values are searched only in the model that is printed: without the pinned
        # facts the form is a proof attempt.
        verdict, model = self.solver.decide(query, [] if self.pinned else small, budget=budget)
        if verdict == "unsat" or not self.pinned:
            return verdict, model
        return self.solver.decide(self._precise(query), small, budget=budget)

    def _bind_param(self, vid: int, name: str, ty: T.Type) -> None:
        if T.is_int(ty):
            self.ints[vid] = z3.Int(name)
            lo, hi = T.int_range(ty.name)
            self.assume.append(z3.And(lo <= self.ints[vid], self.ints[vid] <= hi))
            if name in _shape_names(self.fn):
                self.assume.append(self.ints[vid] >= 0)  # a shape parameter is a size
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
        how = "assigned" if isinstance(s, H.Assign) else "bound again (its slot is reused)"
        self._changed(s.vid, s.span, how, pc)
        self._token_flow(s.vid, s.value)
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

    def _per_instance(self, e: H.Expr) -> bool:
        """Whether `e` depends on `instance()`, directly or through a variable."""
        return any(
            isinstance(n, H.Call)
            and n.callee == "instance"
            and n.callee not in self.functions
            or isinstance(n, H.Name)
            and n.vid in self.per_instance
            for n in H.walk_expr(e)
        )

    def _define(self, vid: int, value: H.Expr, pc: z3.BoolRef) -> None:
        if self._per_instance(value):
            self.per_instance.add(vid)
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

    def _snapshot(self) -> tuple[dict, ...]:
        return (
            dict(self.bufs),
            dict(self.ints),
            dict(self.bools),
            dict(self.inflight),
            dict(self.token_stores),
        )

    def _restore(self, snap: tuple[dict, ...]) -> None:
        self.bufs, self.ints, self.bools, self.inflight, self.token_stores = (dict(x) for x in snap)

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

    def _merge(self, cond: z3.BoolRef, then: tuple[dict, ...]) -> None:
        tb, ti, tbo, tin, tts = then
        for nid in tin.keys() | self.inflight.keys():
            t, e = tin.get(nid, z3.BoolVal(False)), self.inflight.get(nid, z3.BoolVal(False))
            if t is not e:
                self.inflight[nid] = z3.If(cond, t, e)
        for vid, stores in tts.items():
            self.token_stores[vid] = self.token_stores.get(vid, frozenset()) | stores
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
                e = self.ints[vid]
                self.ints[vid] = self._keep(
                    z3.If(cond, t, e),
                    z3.If(cond, self._exact(t), self._exact(e)),
                    self._ops(t) | self._ops(e),
                )
        for vid, t in tbo.items():
            if vid in self.bools and self.bools[vid] is not t:
                self.bools[vid] = z3.If(cond, t, self.bools[vid])

    def _for(self, s: H.For, pc: z3.BoolRef) -> None:
        lo, hi = self._int(s.start), self._int(s.end)
        entry = self._snapshot()
        # The loop head's integers and bools (checks/loops.py): each one the body assigns
        # is, at iteration `i`, a closed form in `i` (a counter stepped by a loop-invariant
        # amount), an interval (stepped by one of a few constants), or any value of its
        # type. Without this the head held "the entry value, or one step past it", and a
        # counter's third value was never seen (issue 30, S1).
        heads = self._induction(s, pc, lo, hi, entry)
        # Silent passes build the loop-head state of the buffers "entry, or the end of
        # some earlier iteration": head_k = entry | body(head_k-1). A stale buffer rotated
        # through n variables (`a = b; b = c; c = <relaxed>`) reaches the first of them only
        # after n iterations, so one pass per assigned variable, plus one, covers every
        # chain. The last pass starts from that head and reports.
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
            end_pc, _ = self._iteration(s, pc, lo, hi, heads)
            if end_pc is None:
                break
            end = self._snapshot()
            self._restore(entry)
            self._merge(z3.And(self._own(z3.Bool(self.solver.fresh_name("iterated"))), end_pc), end)
            before, head = head, self._snapshot()
            if _signature(head[0]) == _signature(before[0]):
                break
        self.emit = emit
        self._restore(head)
        end_pc, i = self._iteration(s, pc, lo, hi, heads)
        if end_pc is None:
            self._restore(entry)
            return
        self._after_loop(s, lo, hi, i, end_pc, entry)

    def _after_loop(self, s: H.For, lo, hi, i, end_pc, entry) -> None:
        """The state after the loop: the end of its last iteration (`i = hi - 1`) where the
        loop ran, the entry state where it did not. Integers and bools are read at the last
        iteration exactly (a counter's final value); buffers keep the last pass's terms,
        whose other iterations' constants stay free (sound: any iteration may be last)."""
        after = self._snapshot()
        last = [(i, hi - 1)]
        ints = {vid: self._subst_int(t, last) for vid, t in after[1].items()}
        bools = {vid: z3.substitute(b, *last) for vid, b in after[2].items()}
        after = (after[0], ints, bools, *after[3:])
        self._restore(entry)
        ran = z3.simplify(lo < hi)
        if not any(isinstance(x, H.Return) for x in H.walk_stmts(s.body)):
            if z3.is_true(ran):  # every path past the loop ran its last iteration
                self._restore(after)
                return
        else:  # where the last iteration returned, no path continues
            ran = z3.And(ran, z3.substitute(end_pc, *last))
        if not z3.is_false(ran):
            self._merge(ran, after)

    def _induction(self, s: H.For, pc: z3.BoolRef, lo, hi, entry) -> dict:
        """How each integer and bool the body assigns (and the loop's entry knew) is set at
        the loop head of an iteration: one silent pass from symbolic head values, then
        checks/loops.py classifies what one iteration does to each."""
        carried = [v for v in sorted(H.assigned_vars(s.body)) if v in entry[1] or v in entry[2]]
        if not carried:
            return {}
        self._restore(entry)
        emit, self.emit = self.emit, False
        mark = len(self.owned)
        symbols = {}
        for vid in carried:
            name = f"{self.fn.vars[vid].name}@head"
            if vid in entry[1]:
                symbols[vid] = self._own(z3.Int(self.solver.fresh_name(name)))
                self.ints[vid] = symbols[vid]
            else:
                symbols[vid] = self._own(z3.Bool(self.solver.fresh_name(name)))
                self.bools[vid] = symbols[vid]
        end_pc, _ = self._iteration(s, pc, lo, hi, {})  # the head symbols stay as set
        ends = {vid: self.ints.get(vid, self.bools.get(vid)) for vid in carried}
        new = {c.get_id() for c in self.owned[mark:]}
        self.emit = emit
        self._restore(entry)
        if end_pc is None:  # no iteration reaches the next: the head is the entry state
            return {}
        heads = {}
        for vid in carried:
            end = ends[vid] if ends[vid] is not None else symbols[vid]
            exact = self._exact(end) if vid in entry[1] else end
            before = entry[1].get(vid, entry[2].get(vid))
            heads[vid] = classify(symbols[vid], end, exact, new, before)
        return heads

    def _iteration(self, s: H.For, pc: z3.BoolRef, lo, hi, heads: dict) -> tuple:
        """One pass over the body: the condition under which it completes (or None), and
        the pass's loop variable."""
        i = self._own(z3.Int(self.solver.fresh_name(s.var)))
        self.ints[s.vid] = i
        for vid, head in heads.items():
            self._set_head(vid, head, i, lo)
        return self._block(s.body, z3.And(pc, lo <= i, i < hi)), i

    def _set_head(self, vid: int, head: Head, i, lo) -> None:
        """Bind one carried variable at the head of iteration `i` (checks/loops.py)."""
        ty = self.fn.vars[vid].ty
        if ty == T.BOOL:
            if head.kind == "invariant":
                self.bools[vid] = z3.If(i == lo, head.entry, head.value)
            else:
                self.bools[vid] = self._own(z3.Bool(self.solver.fresh_name("loop_bool")))
            return
        k = i - lo  # completed iterations before this one
        base = self._exact(head.entry)
        if head.kind == "invariant":  # set to the same value every iteration
            first = i == lo
            self.ints[vid] = self._keep(
                z3.If(first, head.entry, head.value),
                z3.If(first, base, self._exact(head.value)),
                self._ops(head.entry) | self._ops(head.value),
            )
            return
        if head.kind == "affine":  # entry + k * step, as the machine wraps it
            exact = base + k * head.value
        elif head.kind == "interval":  # each step one of some constants
            x = self._own(z3.Int(self.solver.fresh_name("%step")))
            self.assume.append(z3.And(k * head.low <= x, x <= k * head.high))
            exact = base + x
        else:  # any value of its type
            v = self._own(z3.Int(self.solver.fresh_name(f"{self.fn.vars[vid].name}@loop")))
            tlo, thi = T.int_range(ty.name)
            self.assume.append(z3.And(tlo <= v, v <= thi))
            self.ints[vid] = v
            return
        tlo, thi = T.int_range(ty.name)
        ops = self._ops(head.entry) | {len(self.wraps)}
        text = f"{self.fn.vars[vid].name} (stepped each iteration)"
        self.wraps.append(Overflow(z3.And(tlo <= exact, exact <= thi), text, ty.name))
        self.ints[vid] = self._keep(_wrap(exact, ty), exact, ops)

    def _subst_int(self, term: z3.ArithRef, pairs: list) -> z3.ArithRef:
        """`term` with `pairs` substituted, its exact form and overflow obligations too."""
        out = z3.substitute(term, *pairs)
        known = self.ideals.get(term.get_id())
        if known is None or out.eq(term):
            return out
        ops = set()
        for j in known.ops:
            w = self.wraps[j]
            ops.add(len(self.wraps))
            self.wraps.append(Overflow(z3.substitute(w.fits, *pairs), w.text, w.ty))
        return self._keep(out, z3.substitute(known.exact, *pairs), frozenset(ops))

    # ---- expressions: effects and reads -------------------------------------------------
    def _effects(self, e: H.Expr, pc: z3.BoolRef) -> None:
        """Check every read inside `e` (calls, intrinsics, transfers of in-flight buffers)."""
        for node in _calls(e):
            if isinstance(node, H.Transfer):
                if isinstance(node.src.ty, T.TokenT):
                    self._read(node.src, pc, None)
                self._transfer_places(node, pc)
                continue
            if isinstance(node, H.Wait):
                self._waited(node)
                continue
            if isinstance(node, H.Borrow):
                root = _strip(node.operand)
                if isinstance(root, H.Name):
                    self._changed(root.vid, node.span, "borrowed `&mut` (written)", pc)
                continue
            if isinstance(node, H.Index):
                self._vec_index(node, pc)
                continue
            if not isinstance(node, H.Call):  # tile arithmetic reads its tile operands (4.3)
                for a in tile_operands(node):
                    if _is_tensorish(a.ty):
                        self._read(a, pc, None)
                continue
            if node.callee == "assert" and node.callee not in self.functions:
                self._assert(node, pc)
                continue
            if _int_cast(node, self.functions):
                self._cast_range(node, pc)
                continue
            callee = self.functions.get(node.callee)
            params = [p.ty for p in callee.params] if callee else [None] * len(node.args)
            for a, want in zip(node.args, params, strict=False):
                # A token passed where a token is expected moves it; anywhere else it is read.
                if _is_tensorish(a.ty) and not isinstance(want, T.TokenT):
                    self._read(a, pc, None)
                if isinstance(a, H.Name) and want is not None and want.movable:
                    self._changed(a.vid, a.span, "moved away", pc)
            if callee is not None:
                self._bounds(node, callee, pc)
                check_extern_outputs(self, node, callee, pc)  # checks/externs.py: E6042

    def _cast_range(self, call: H.Call, pc: z3.BoolRef) -> None:
        """E6045: `cast::<E>(n)` of an integer with an allowed value outside `E`'s range.
        A query z3 does not decide leaves the conversion saturating (LANGUAGE.md 4.3:
        the error is for what is shown)."""
        if not self.emit or ("cast", call.nid) in self.reported:
            return
        x = self._int(call.args[0])
        lo, hi = T.int_range(call.ty.name)
        if z3.is_int_value(x) and lo <= x.as_long() <= hi:
            return
        verdict, model = self._decide(
            [*self.assume, pc, z3.Or(x < lo, x > hi)], self._program_values()
        )
        if verdict != "sat":
            return
        self.reported.add(("cast", call.nid))
        values = named_values(model, [*self._program_values(), pc], self._order())
        shown = _show(call.args[0])
        value = model.eval(x, model_completion=True)
        # An integer scalar adapted to an integer tile (hir/typecheck.py `_tile_scalar`)
        # is a cast the checker wrote: it shares its operand's span.
        implicit = call.span == call.args[0].span
        where = (
            f"`{call.ty.name}`, the element type of the tile it is combined with"
            if implicit
            else "in this conversion"
        )
        self.sink.emit(
            "E6045",
            f"`{shown}` may lie outside `{call.ty.name}` ({lo} ..= {hi})"
            + (f": it adapts to {where}" if implicit else f" {where}"),
            call.span,
            notes=[
                f"z3 counterexample: {values}"
                + ("" if isinstance(call.args[0], H.Name) else f" (`{shown}` = {value})")
            ],
            help=f"bound `{shown}` with a `where` clause, or cast to a wider integer type",
        )

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
        name = _shown_value(base)
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
        zname = re.sub(r"\W+", "_", name).strip("_")  # a z3 constant's name, as SMT-LIB prints it
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
        # its divisions' facts are ours
        sub.assume, sub.divs, sub.pinned = self.assume, self.divs, self.pinned
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

    # ---- views, stores and indices (LANGUAGE.md 4.2, checks/regions.py) ----------------------
    def _transfer_places(self, t: H.Transfer, pc: z3.BoolRef) -> None:
        """A transfer's view source and store destination: bounds, races, in-flight source."""
        for side in (t.src, t.dest):
            if isinstance(side, H.View):
                self._view_bounds(side, pc)
        src = _strip(t.src)
        read = self._output_region(t.src)
        if read is not None:  # a load from an output: races and in-flight stores (S4, S5)
            self._against_inflight(read, t.src.span, "read", pc)
            if self.emit:
                self.stores.append(self._store(t, read, pc, t.src, writes=False))
        if t.dest is None:
            if isinstance(src, H.Name) and not isinstance(src.ty, T.TokenT):
                self._changed(src.vid, src.span, "moved away", pc)  # a transfer moves it
            return
        dest = self._output_region(t.dest) if isinstance(t.dest, H.View) else None
        if dest is not None:
            self._against_inflight(dest, t.dest.span, "stored to", pc)
            if self.emit:
                self.stores.append(self._store(t, dest, pc, t.dest, writes=True))
        if t.is_async:
            self.inflight[t.nid] = pc
            if dest is not None:
                self.store_dest[t.nid] = (dest, t.span.line)
            if isinstance(src, H.Name):
                self.store_src[t.nid] = (src.vid, src.name, t.span.line)

    def _view_bounds(self, v: H.View, pc: z3.BoolRef) -> None:
        """E6041: `0 <= lo` and `hi <= dim` in every dimension, for every allowed value."""
        if not self.emit:
            return
        dims = T.deref(v.obj.ty).dims
        for r, dim in zip(v.ranges, dims, strict=True):
            lo, hi, size = self._int(r.lo), self._int(r.hi), self._dim(dim)
            bounds = [(self._exact(lo) >= 0, f"{_show(r.lo)} >= 0", lo)]
            if not v.edge:  # an `edge` view may reach past the end (LANGUAGE.md 4.2)
                bounds.append((self._exact(hi) <= size, f"{_show(r.hi)} <= {dim}", hi))
            for within, text, term in bounds:
                ops = sorted(self._ops(term))
                fails = z3.Or(z3.Not(within), *(z3.Not(self.wraps[j].fits) for j in ops))
                self.bounds.append((v, r, text, fails, pc, ops))
        self.proofs.views.add(v.nid)

    def _quick_answer(self, query: list) -> tuple:
        """A view bound in its reported form (with the pinned division facts) at a small
        limit, before the proof attempts: the disjunction of every bound was satisfiable,
        so some bound fails, and a failing bound's counterexample usually takes z3 a few
        thousand units, where the equation-eliminating attempt may spend its whole million
        undecided first (1.9 s of CPU for each of two views of a fuzzed gemm, 4.4 s for its
        four targets). "unknown" leaves the bound to the forms below."""
        small = self._program_values()
        return self.solver.decide(self._precise(query), small, rlimit=QUICK_RLIMIT)

    def _bound_answer(self, query: list) -> tuple:
        """One view bound the quick form did not decide: first with the equations
        eliminated (the query holds `let` values as equations: `nx == hb + ...`,
        `hb == i / t * s`): attention.vx's 64-key views take 0.15 M units so and the whole
        5 M budget undecided without. Its `unsat` is a proof; its `sat` says the bound
        fails, so only the form whose counterexample the diagnostic prints is left (with
        the pinned division facts, which the form without them, a proof attempt, would
        only repeat: 0.7 s of CPU for three views of a fuzzed attention)."""
        budget = self._budget(before=1)  # the eqs form, then the reported one(s)
        verdict, _ = self.solver.decide(query, eqs=True, rlimit=SHORTCUT_RLIMIT, budget=budget)
        if verdict == "unsat":
            return verdict, None
        if verdict == "sat" and self.pinned:
            budget.skip()
            return self.solver.decide(self._precise(query), self._program_values(), budget=budget)
        return self._decide(query, self._program_values(), budget)

    def _prove_bounds(self) -> bool:
        """Every view bound of the function in one query (a kernel's views usually all
        hold); only when some may fail is each asked on its own, for its counterexample.
        Whether every bound is proved (nothing reported)."""
        if not self.bounds:
            return True
        some = z3.Or(*(z3.And(pc, fails) for _, _, _, fails, pc, _ in self.bounds))
        verdict, _ = self.solver.decide([*self.assume, some], rlimit=SHORTCUT_RLIMIT)
        if verdict == "unsat":
            return True
        proved = True
        for v, r, text, fails, pc, ops in self.bounds:
            key = ("view", v.nid, r.nid, text)
            if key in self.reported:
                proved = False
                continue
            query = [*self.assume, pc, fails]
            verdict, model = self._quick_answer(query)
            if verdict == "unknown":
                verdict, model = self._bound_answer(query)
            if verdict == "unsat":
                continue
            proved = False
            self.reported.add(key)
            over = [
                self.wraps[j]
                for j in ops
                if verdict == "sat" and z3.is_false(model.eval(self.wraps[j].fits, True))
            ]
            terms = [*self._program_values(), pc]
            self._out_of_bounds(v, r, text, verdict, model, terms, over[:1])
        return proved

    def _out_of_bounds(
        self, v: H.View, r: H.Range, text: str, verdict, model, terms, over: list[Overflow]
    ) -> None:
        obj = _show(v.obj)
        help_ = (
            f"add a `where` clause that makes it hold (`where {text}`, or a bound on "
            "the parameters it follows from), or use a different index"
        )
        if verdict == "sat" and over:
            # the exact value may be inside, but the machine computes the wrapped one
            values = named_values(model, terms, self._order())
            msg = (
                f"this view of `{obj}` may lie outside it: `{over[0].text}` may overflow "
                f"`{over[0].ty}`"
            )
            note = f"z3 counterexample: {values} (integer arithmetic wraps)"
            help_ = (
                f"bound the parameters with `where` clauses that keep `{over[0].text}` "
                f"within `{over[0].ty}`, or use a wider integer type"
            )
        elif verdict == "sat":
            values = named_values(model, terms, self._order())
            msg = f"this view of `{obj}` may lie outside it: `{text}` does not hold"
            note = f"z3 counterexample: {values}"
        else:
            msg = f"this view of `{obj}` could not be proved inside it: `{text}`"
            note = "z3 did not decide the bound within the compilation's solver budget"
        self.proofs.views.discard(v.nid)
        self.sink.emit("E6041", msg, r.span, notes=[note], help=help_)

    def _dim(self, dim: int | str) -> z3.ArithRef:
        """A tensor dimension as a z3 term: a literal, or the shape parameter it names."""
        if isinstance(dim, int):
            return z3.IntVal(dim)
        for p in self.fn.params:
            if p.name == dim and p.vid in self.ints:
                return self.ints[p.vid]
        key = ("dim", dim)
        if key not in self.lens:  # not a parameter: an unknown size, the same each time
            self.lens[key] = z3.Int(self.solver.fresh_name(dim))
            self.assume.append(self.lens[key] >= 0)
        return self.lens[key]

    def _vec_index(self, e: H.Index, pc: z3.BoolRef) -> None:
        """`tiles[i]`: out of bounds for every allowed value is E6041; proved in bounds drops
        the run-time check; anything else keeps it."""
        if not isinstance(T.deref(e.obj.ty), T.VecT) or not self.emit:
            return
        i, n = self._int(e.index), self._int(H.MethodCall(e.span, e.obj, "len", [], nid=-1))
        inside = z3.And(i >= 0, i < n)
        # Only drops the run-time check: the short budget, so that a proof z3 finds in
        # some processes and not in others (stream_grid's `tiles[i]`: 3.3 M units once,
        # undecided at 5 M another time) is never found, and the artifact never differs.
        verdict, _ = self.solver.decide([*self.assume, pc, z3.Not(inside)], rlimit=SHORTCUT_RLIMIT)
        if verdict == "unsat":
            self.proofs.index.add(e.nid)
            return
        self.proofs.index.discard(e.nid)
        key = ("index", e.nid)
        if key in self.reported:
            return
        # E6041 only where z3 shows it quickly; otherwise the run-time check stays and
        # reports the index that is out of bounds when it runs.
        reachable, _ = self.solver.decide([*self.assume, pc], rlimit=SHORTCUT_RLIMIT)
        verdict, _ = self.solver.decide([*self.assume, pc, inside], rlimit=SHORTCUT_RLIMIT)
        if reachable == "sat" and verdict == "unsat":
            self.reported.add(key)
            self.sink.emit(
                "E6041",
                f"index `{_show(e.index)}` is out of bounds of `{_show(e.obj)}` for every "
                "value the `where` clauses allow",
                e.index.span,
                notes=[f"no allowed value has `0 <= {_show(e.index)} < {_show(e.obj)}.len()`"],
                help="index within the Vec, or fix the `where` clause on its length",
            )

    def _output_region(self, e: H.Expr) -> tuple | None:
        """`(vid, name, region, inside)` for a view of an output, or a whole output read
        (`&mut` tensor): the region's exact terms (a view's bounds query proves that none of
        their operations overflows, E6041 otherwise), and its bounds in the output, which
        the race query may assume (`_view_bounds` proves them, or nothing is built)."""
        obj = e.obj if isinstance(e, H.View) else e
        root = _strip(obj)
        ty = root.ty if isinstance(root, H.Name) else None
        if not (isinstance(ty, T.RefT) and ty.mutable and isinstance(ty.inner, T.TensorT)):
            return None
        dims = [self._dim(d) for d in ty.inner.dims]
        if isinstance(e, H.View):
            region = [
                (self._exact(self._int(r.lo)), self._exact(self._int(r.hi))) for r in e.ranges
            ]
            edge = e.edge
        else:
            region, edge = [(z3.IntVal(0), d) for d in dims], False
        if edge:  # only its elements inside the output are written (or read): `e < dim` too
            region = [(lo, hi, d) for (lo, hi), d in zip(region, dims, strict=True)]
            inside = z3.And(*(lo >= 0 for lo, _, _ in region))
        else:
            region = [(lo, hi, None) for lo, hi in region]
            inside = z3.And(
                *(z3.And(lo >= 0, hi <= d) for (lo, hi, _), d in zip(region, dims, strict=True))
            )
        return root.vid, root.name, region, inside

    def _store(self, t: H.Transfer, place: tuple, pc, e: H.Expr, writes: bool) -> Store:
        vid, name, region, inside = place
        ranges = e.ranges if isinstance(e, H.View) else []
        uses = any(self._per_instance(b) for r in ranges for b in (r.lo, r.hi))
        span = t.span if writes else e.span
        return Store(vid, name, region, pc, span, uses, t.nid, inside=inside, writes=writes)

    def _against_inflight(self, place: tuple, span, how: str, pc: z3.BoolRef) -> None:
        """E6043: a read of, or another store to, elements of an output that a store still
        in flight writes (the DMA may land before or after it), on some feasible path."""
        vid, name, region, inside = place
        for nid, flying in self.inflight.items():
            known = self.store_dest.get(nid)
            if known is None or known[0][0] != vid or not self.emit:
                continue
            key = ("inflight-dest", span, nid)
            if key in self.reported:
                continue
            (_, _, theirs, their_inside), line = known
            elems = [z3.Int(self.solver.fresh_name(f"%e{d}")) for d in range(len(region))]
            both = [*holds(region, elems), *holds(theirs, elems)]
            query = [*self.assume, pc, flying, inside, their_inside, *both]
            verdict, model = self._decide(query, [*self._program_values(), *elems])
            if verdict == "unsat":
                continue
            self.reported.add(key)
            notes = [f"the store at line {line} writes `{name}` until its token is waited"]
            if verdict == "sat":
                at = ", ".join(str(model.eval(x, model_completion=True)) for x in elems)
                path = named_values(model, [*self._program_values(), pc], self._order())
                notes.append(
                    f"z3 counterexample: both touch `{name}[{at}]`" + (f" ({path})" if path else "")
                )
            else:
                notes.append("z3 did not decide whether the regions overlap while it is in flight")
            self.sink.emit(
                "E6043",
                f"`{name}` is {how} while the store at line {line} into it is in flight",
                span,
                notes=notes,
                help=f"`wait` the store's token before this {'read' if how == 'read' else 'store'}",
            )

    def _races(self) -> None:
        """E6042: for instances p != q, every pair of their stores to one output is disjoint."""
        self.proofs.disjoint = {s.nid for s in self.stores if s.writes}
        for k, a in enumerate(self.stores):
            for b in self.stores[k:]:
                if a.out_vid != b.out_vid or not (a.writes or b.writes):
                    continue  # reads by two instances never race
                if not self._race(a, b):
                    self.proofs.disjoint -= {a.nid, b.nid}

    def _race(self, a: Store, b: Store) -> bool:
        """Whether the two stores are proved disjoint across instances (E6042 if not).
        A pair whose regions, paths and bounds are the terms of a pair proved before (z3
        hash-conses them: the same ids) is that proof again: a store, its async twin and a
        read of one view are three pairs of one query (3 x 0.8 s of CPU in a fuzzed
        kernel). A pair that fails is asked again, for its own diagnostic."""
        key = _race_key(a, b)
        if key in self.proved_races:
            return True
        proved = self._race_query(a, b)
        if proved:
            self.proved_races |= {key, _race_key(b, a)}  # p and q swap: the same query
        return proved

    def _race_query(self, a: Store, b: Store) -> bool:
        elems = [z3.Int(self.solver.fresh_name(f"%e{d}")) for d in range(len(a.region))]
        inside_b = holds(b.region, elems)
        # The second instance: b's facts, path and region with every owned constant renamed,
        # in one substitution (the element is shared: both instances write it).
        pairs = [(c, z3.Const(c.decl().name() + "'", c.sort())) for c in self.owned]
        q = pairs[0][1]
        overlap = holds(a.region, elems)
        # First without the `where` clauses that wrap (fewer facts: a proof there holds
        # with all of them, and z3's nonlinear core is lost in a wrapped product that a
        # race rarely depends on; the regions' proved bounds stand in for what they said,
        # `n >= 128` in gemm.vx), then with every fact, for the proof or the counterexample.
        weak = [x for x in self.assume if not any(x is c for c in self.wrapping_clauses)]
        weak = _cone(
            weak,
            [a.pc, a.inside, b.pc, b.inside, *(t for r in a.region for t in r if t is not None)],
        )
        # The weak query is a proof attempt only (equations eliminated first, which z3's
        # nonlinear core needs here); the full one also finds the counterexample. The forms
        # of the one obligation spend one budget (solver.py, `shared_budget`).
        forms = [(weak, True), (weak, False), (self.assume, False)]
        if self.pinned:  # the counterexample's query: one the machine can run
            forms.append((self._precise(self.assume), False))
        budget = self.solver.shared_budget(attempts=2)  # the two weak forms
        for n, (facts, eqs) in enumerate(forms, 1):
            side_b = z3.substitute(z3.And(*facts, b.pc, b.inside, *inside_b), *pairs)
            verdict, model = self.solver.decide(
                [*facts, a.pc, a.inside, side_b, INSTANCE != q, *overlap],
                # small values only in the model that is printed (the last form's): a
                # search in one that is not cost 2 M units in a fuzzed race
                [*self._program_values(), q, *elems] if n == len(forms) else [],
                eqs=eqs,
                budget=budget,
            )
            if verdict == "unsat":
                return True
        at = b.span if b is not a else a.span
        if verdict == "sat":
            p_val = model.eval(INSTANCE, model_completion=True)
            q_val = model.eval(q, model_completion=True)
            elem = ", ".join(str(model.eval(x, model_completion=True)) for x in elems)
            values = named_values(model, [*self._program_values()[:-2], a.pc], self._order())
            if a.writes and b.writes:
                msg = f"instances may write overlapping regions of `{a.out}`"
                seen = f"instances {p_val} and {q_val} both write `{a.out}[{elem}]`"
            else:  # instance p runs `a`, q runs `b`: name the writer and the reader
                writer, reader = (p_val, q_val) if a.writes else (q_val, p_val)
                msg = f"an instance may read a region of `{a.out}` that another instance writes"
                seen = f"instance {reader} reads `{a.out}[{elem}]`, which instance {writer} writes"
            notes = [f"z3 counterexample: {seen}" + (f" ({values})" if values else "")]
        else:
            what = (
                "write disjoint regions"
                if a.writes and b.writes
                else "never read what another writes"
            )
            msg = f"could not prove that instances {what} of `{a.out}`"
            notes = ["z3 did not decide it within the compilation's solver budget"]
        if b is not a:
            other = "store" if a.writes else "read"
            notes.append(f"the other {other} is at line {a.span.line}")
        help_ = (
            "the region does not depend on `instance()`: if the kernel runs once, say so "
            "with `where instances() == 1`"
            if not (a.mentions_instance or b.mentions_instance)
            else "make each instance's region depend on `instance()` so that no two overlap"
        )
        self.sink.emit("E6042", msg, at, notes=notes, help=help_)
        return False

    def _arith(self, e: H.Expr, op, *args: z3.ArithRef) -> z3.ArithRef:
        """`op(*args)` as the machine computes it (wrapped in `e`'s type), with its exact
        form and the wrapping operations it is made of kept for the index proofs."""
        value = _wrap(op(*args), e.ty)
        exact = op(*(self._exact(a) for a in args))
        ops = frozenset().union(*(self._ops(a) for a in args))
        if value is not exact and T.is_int(e.ty):
            lo, hi = T.int_range(e.ty.name)
            ops |= {len(self.wraps)}
            self.wraps.append(Overflow(z3.And(lo <= exact, exact <= hi), _show(e), e.ty.name))
        return self._keep(value, exact, ops)

    def _keep(self, term: z3.ArithRef, exact: z3.ArithRef, ops: frozenset[int]):
        if ops:
            self.ideals[term.get_id()] = Ideal(term, exact, ops)
        return term

    def _exact(self, term: z3.ArithRef) -> z3.ArithRef:
        """`term` over the mathematical integers (the same term where nothing wraps)."""
        known = self.ideals.get(term.get_id())
        return known.exact if known is not None else term

    def _ops(self, term: z3.ArithRef) -> frozenset[int]:
        known = self.ideals.get(term.get_id())
        return known.ops if known is not None else frozenset()

    def _own(self, c):
        self.owned.append(c)
        return c

    def _token_flow(self, vid: int, value: H.Expr) -> None:
        """Which stores a token variable holds after `let st = transfer_async(t, c[..])`,
        `st = other`; any other value holds none."""
        v = _strip(value)
        if isinstance(v, H.Transfer) and v.dest is not None and v.is_async:
            self.token_stores[vid] = frozenset({v.nid})
        elif isinstance(v, H.Name) and v.vid in self.token_stores:
            self.token_stores[vid] = self.token_stores[v.vid]
        else:
            self.token_stores.pop(vid, None)

    def _waited(self, w: H.Wait) -> None:
        tok = _strip(w.token)
        if isinstance(tok, H.Name):
            for nid in self.token_stores.get(tok.vid, frozenset()):
                self.inflight[nid] = z3.BoolVal(False)

    def _changed(self, vid: int, span, how: str, pc: z3.BoolRef) -> None:
        """E6043: `vid` is written, moved into or away while a store that reads it is in
        flight, on some feasible path."""
        for nid, flying in self.inflight.items():
            src = self.store_src.get(nid)
            if src is None or src[0] != vid or not self.emit:
                continue
            key = ("inflight", span, nid)
            if key in self.reported:
                continue
            verdict, model = self._decide([*self.assume, pc, flying], self._program_values())
            if verdict == "unsat":
                continue
            self.reported.add(key)
            name, line = src[1], src[2]
            notes = [f"the store at line {line} reads `{name}` until its token is waited"]
            if verdict == "sat":
                path = named_values(model, [pc], self._order())
                notes.append(f"z3 path: {path}" if path else "on every path that reaches it")
            else:
                notes.append("z3 did not decide whether the store is still in flight")
            self.sink.emit(
                "E6043",
                f"`{name}` is {how} while the store at line {line} is in flight",
                span,
                notes=notes,
                help=f"`wait` the store's token before changing `{name}`",
            )

    def _program_values(self) -> list:
        """What a counterexample names: the integer parameters and the launch grid."""
        params = [self.ints[p.vid] for p in self.fn.params if p.vid in self.ints]
        return [*params, INSTANCE, INSTANCES]

    def _order(self) -> list[str]:
        """Names in counterexamples: parameters in declaration order, then the launch grid."""
        return [p.name for p in self.fn.params] + ["instance()", "instances()"]

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
                return self._arith(e, operator.neg, self._int(e.operand))
            case H.Binary(op="+" | "-" | "*"):
                return self._arith(e, ARITH[e.op], self._int(e.lhs), self._int(e.rhs))
            case H.Binary(op="/" | "%"):
                # Vx's truncating division, its quotient and remainder as fresh constants
                # (checks/regions.py): linear for a literal divisor, and the form z3's
                # nonlinear core decides for a non-literal one (`instance() / (n / 128)`).
                lhs, rhs = self._int(e.lhs), self._int(e.rhs)
                ty = e.ty if T.is_int(e.ty) else T.I64
                if z3.is_int_value(lhs) and z3.is_int_value(rhs):
                    q, rem = machine_div(lhs.as_long(), rhs.as_long(), ty.name)
                    return z3.IntVal(q if e.op == "/" else rem)
                key = ("div", lhs.get_id(), rhs.get_id())
                if key not in self.divs:  # `n / 128` twice is one quotient
                    q, r, pinned = trunc_div(lhs, rhs, ty.name, self.assume, self.solver.fresh_name)
                    self.divs[key] = (self._own(q), self._own(r))
                    self.pinned.extend(pinned)
                q, r = self.divs[key]
                return q if e.op == "/" else r
            case H.Call(callee="instance" | "instances") if e.callee not in self.functions:
                return INSTANCE if e.callee == "instance" else INSTANCES
            case H.Call(callee="cast") if _int_cast(e, self.functions):
                # saturating at the destination's range (ir/scalar_cast.py); a value the
                # checks find outside it is E6045 (`_cast_range`)
                x = self._int(e.args[0])
                lo, hi = T.int_range(e.ty.name)
                return z3.If(x < lo, z3.IntVal(lo), z3.If(x > hi, z3.IntVal(hi), x))
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
                n = self._own(z3.Int(self.solver.fresh_name("len")))
                self.assume.append(n >= 0)
                return n
        return self._own(z3.Int(self.solver.fresh_name("int")))

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
        return self._own(z3.Bool(self.solver.fresh_name("cond")))


# ---- helpers ------------------------------------------------------------------------------
def _wrap(exact: z3.ArithRef, ty: T.Type | None) -> z3.ArithRef:
    """The value of `exact` in `ty`: Vx integer arithmetic wraps (two's complement, modulo
    2^bits, on every target: docs/DESIGN.md), so the model wraps too, or a proof about
    `x + 1` would assume the mathematical integer that the machine does not compute."""
    if ty is None or not T.is_int(ty):
        return exact
    lo, hi = T.int_range(ty.name)
    # The same value as `lo + (exact - lo) % 2^bits`, with the common case apart: z3 splits
    # on the condition, and where the bounds keep `exact` in range (every index of a tile
    # kernel) the modulo never enters the proof; gemm.vx's nonlinear view bounds were
    # undecided with the modulo alone.
    return z3.If(z3.And(lo <= exact, exact <= hi), exact, lo + (exact - lo) % (hi - lo + 1))


def _cone(facts: list[z3.BoolRef], about: list) -> list[z3.BoolRef]:
    """The facts that constrain the constants of `about`, directly or through other such
    facts (a sound weakening: the rest says nothing of them, and only slows z3 down)."""
    names = set().union(*(_constant_ids(t) for t in about))
    mine = [(f, _constant_ids(f)) for f in facts]
    kept: list[z3.BoolRef] = []
    grew = True
    while grew:
        grew = False
        for f, cs in mine:
            if cs & names and not any(f is k for k in kept):
                kept.append(f)
                names |= cs
                grew = True
    return [f for f in facts if any(f is k for k in kept)]


_CONSTANT_IDS: dict[int, tuple[z3.ExprRef, frozenset[int]]] = {}


def _constant_ids(term: z3.ExprRef) -> frozenset[int]:
    """The ids of `term`'s constants, remembered by the term's z3 id (terms are hash-consed
    and the entry keeps the term, so the id stays its own): a warm check asks again."""
    known = _CONSTANT_IDS.get(term.get_id())
    if known is None:
        if len(_CONSTANT_IDS) >= 8192:
            _CONSTANT_IDS.clear()
        known = (term, frozenset(c.get_id() for c in constants([term])))
        _CONSTANT_IDS[term.get_id()] = known
    return known[1]


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


def _calls(e: H.Expr) -> list[H.Expr]:
    """Calls, transfers, waits, `Vec` indices and `&mut` borrows inside `e`, innermost
    first (arguments are evaluated first)."""
    out: list[H.Expr] = []
    stack: list[tuple[H.Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            out.append(node)
            continue
        if (
            isinstance(node, H.Call | H.Transfer | H.Wait | H.Index)
            or (isinstance(node, H.Borrow) and node.mutable)
            or tile_form(node) is not None
        ):
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


def _shape_names(fn: Function) -> set[str]:
    """Integer parameters named in another parameter's type: sizes (LANGUAGE.md 3)."""
    out: set[str] = set()
    for p in fn.params:
        t = T.deref(p.ty)
        t = t.elem if isinstance(t, T.VecT) else t
        t = T.deref(t)
        if isinstance(t, T.TensorT):
            out |= {d for d in t.dims if isinstance(d, str)}
    return out


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


def _shown_value(base: H.Name | H.Wait | H.Transfer) -> str:
    """How a read value is named in E6004: a variable by its name, an unnamed transfer or
    wait by the expression the user wrote (never an internal temporary)."""
    if isinstance(base, H.Name):
        return base.name
    if isinstance(base, H.Wait):
        inner = base.token
        return f"wait({inner.name})" if isinstance(inner, H.Name) else "wait(...)"
    src = _strip(base.src)
    shown = src.name if isinstance(src, H.Name) else "..."
    return f"{'transfer_async' if base.is_async else 'transfer'}({shown}, ...)"


@dataclass(frozen=True)
class LaunchSizes:
    """Runtime sizes of one launch that satisfy a kernel's `where` clauses (vxc report)."""

    sizes: dict[str, int]  # by the report's names: `n`, `tiles.len()`, a dimension
    instances: int


RLIMIT_SIZES = 1_000_000  # a few satisfiability queries per report, not one per obligation


def where_sizes(
    fn: Function,
    machine: Machine,
    functions: dict[str, Function],
    given: dict[str, int],
    default: int,
    instances: int | None,
) -> LaunchSizes | None:
    """Sizes for a launch of `fn` that its `where` clauses allow: the given ones as given,
    each other size `default` where the clauses let it be (in parameter order), what the
    clauses then determine solved for (`n == h * s`; the grid of `instances() == m / 128`),
    and one instance unless given or determined. None when the given values contradict
    the clauses; `Undecided` when z3 cannot tell within its budget."""
    checker = SeamChecker(fn, machine, functions, FnPlacement(fn.name), Solver(), DiagnosticSink())
    checker.assume.extend(launch_facts())
    for p in fn.params:
        checker._bind_param(p.vid, p.name, p.ty)
    checker.assume.extend(checker._bool(w) for w in fn.decl.where)
    terms: dict[str, z3.ArithRef] = {}
    for p in fn.params:
        if p.vid in checker.ints:
            terms[p.name] = checker.ints[p.vid]
        elif ("len", p.vid) in checker.lens:
            terms[f"{p.name}.len()"] = checker.lens[("len", p.vid)]
    facts = [
        *checker._precise(checker.assume),
        *(terms[n] == v for n, v in given.items() if n in terms),
    ]
    if instances is not None:
        facts.append(INSTANCES == instances)
    for term, value in [
        *((t, default) for n, t in terms.items() if n not in given),
        (INSTANCES, 1),
    ]:
        try:
            if _model_of([*facts, term == value]) is not None:
                facts.append(term == value)
        except Undecided:
            pass  # left to the clauses: the final model chooses it
    model = _model_of(facts)
    if model is None:
        return None
    chosen = {n: model.eval(t, model_completion=True).as_long() for n, t in terms.items()}
    return LaunchSizes({**given, **chosen}, model.eval(INSTANCES, model_completion=True).as_long())


def _model_of(facts: list[z3.BoolRef]) -> z3.ModelRef | None:
    """A model of the facts, None when there is none (a solver of its own each time: z3's
    incremental mode loses the preprocessing its nonlinear core needs)."""
    one = z3.Solver()
    one.set("rlimit", RLIMIT_SIZES)
    one.add(*facts)
    answer = one.check()
    if answer == z3.unknown:
        raise Undecided(one.reason_unknown())
    return one.model() if answer == z3.sat else None


def _race_key(a: Store, b: Store) -> tuple[int, ...]:
    """The z3 terms a race query between `a` and `b` is made of, by id."""
    terms = [x for st in (a, b) for x in (st.pc, st.inside, *(t for r in st.region for t in r))]
    return tuple(-1 if t is None else t.get_id() for t in terms)


def _int_cast(e: H.Expr, functions: dict) -> bool:
    """`cast::<E>(n)` from an integer to an integer (the intrinsic, not a declared `cast`)."""
    return (
        isinstance(e, H.Call)
        and e.callee == "cast"
        and e.callee not in functions
        and T.is_int(e.ty)
        and bool(e.args)
        and T.is_int(e.args[0].ty)
    )
