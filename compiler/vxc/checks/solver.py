"""The z3 queries of a compilation: each in a fresh z3 context, under a resource limit.

Seam obligations are QF_BV (a 2-bit tag and an 8-bit value per buffer);
`where`-bound obligations are QF_LIA, view and race proofs may be nonlinear. A query's
answer depends only on the query: no solver state or context is shared between them. Every
function's obligations assume the launch facts of LANGUAGE.md section 4.1
(checks/seams.py).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # z3 is imported when the first obligation is raised
    import z3

# The compilation's solver budget for one query that z3 may not decide quickly (the
# nonlinear view, race and index proofs of LANGUAGE.md 4.2): past it the query is
# "could not be proved", an error, never a silent pass. A resource limit, not a timeout
# (a timeout made check and build disagree under load): one process gets the same answer
# each time it asks. Between processes z3's count of units for one query varies (25.8 M,
# 30.4 M and 28.1 M for one race query in three runs, nothing else changed), so a query
# whose count lies near the budget is decided in some runs and not in others: the
# kernels' proofs are kept far below it (tests/checks/test_solver_budget.py: every
# kernel's largest decided query under a quarter; 0.75 M at most for every kernel and
# golden case).
DECIDE_RLIMIT = 5_000_000
# A query that only saves work or drops a run-time check gets a fifth: all of a
# function's view bounds in one disjunction (asked one by one when it is not decided:
# attention.vx's one-loop form, before 2026-12-07, took the whole 5 M undecided, 1.3 s,
# before its bounds were proved one at a time in 0.3 s), and a Vec index's proofs (in bounds: the run-time check is dropped;
# out of bounds for every value: E6041; neither: the run-time check stays).
SHORTCUT_RLIMIT = 1_000_000
# All the `decide` queries of one function together (`Solver.begin_function`): past it
# each query gets only AFTER_FUNCTION_RLIMIT, and one it does not decide there is
# reported as not proved, never passed. Each obligation's budget bounds its own cost, not a
# function's: a fuzzed attention with two undecidable views spent 2 x 5 M units (5.5 s
# of CPU, a hang to the fuzzer; tests/checks/attention_issue30.vx keeps that source). The shipped kernels and golden cases spend 3.4 M at
# most (E6041_division_min_by_minus_one; the kernels 2 M, stream_grid.vx's two Vec
# indices that keep their run-time checks; tests/checks/test_solver_budget.py).
FUNCTION_RLIMIT = 6_000_000
# What each query of a function gets once the function's budget is spent: the easy
# proofs still pass (the view bounds z3 proves in a few thousand units), the hard ones
# are reported undecided at this cost each.
AFTER_FUNCTION_RLIMIT = 100_000
# An obligation asked in several forms (a race: without the wrapping `where` clauses, with
# equations eliminated or not, then with every fact) spends one budget over all of them
# (`Solver.shared_budget`), where each form had a whole budget: an undecidable race cost
# three (2.7 s of CPU for one mutant of gemm_epilogue.vx) before it said so. The first
# forms are quick proof attempts and get a share each (1/10 of it: 0.5 M, where the
# kernels' decided attempts take 0.21 M units at most; it was 3/10, and a race both
# attempts give up on spent 3 M units, 0.6 s, before the form that decides it); the forms
# after them, the one with every fact first, get what is left in turn (4 M and more:
# E6042_ok_heads_exact_where is proved there in 0.59 M when both attempts give up).
# A failing view bound's counterexample, asked before its proof attempts
# (`SeamChecker._quick_answer`): the fuzzed bounds that fail are found in 3 k-460 k units;
# a bound this does not decide is asked in the forms above as before, so it adds at most
# this much to any bound.
QUICK_RLIMIT = 200_000
SMALL_BOUNDS = (256, 4096)  # tried in turn for a counterexample's values
# Decided queries by the SHA-256 of their SMT-LIB text: a compilation names its constants
# the same way every time, so checking a program again (the worker, the LSP, a warm
# `vxc check`) asks the same queries, and z3's answer to a query does not change.
# A satisfiable answer keeps its model, and the model keeps the z3 context it was found in
# (every term of the query): those are few and kept apart, or 4 096 of them held gigabytes
# (the fuzzer's child grew 160 KB an input). Proved and undecided answers hold no context.
DECIDED_MAX = 4096
SAT_KEPT_MAX = 64
_DECIDED: dict[str, tuple] = {}
# The same answers by the z3 ids of the query's terms, which skips printing them: z3
# hash-conses the terms of a context (building `m + 1` again gives the same term, the
# same id), and the entry holds its terms so an id is never reused for another term.
_BY_IDS: dict[tuple[int, ...], tuple[tuple, str]] = {}
_SAT_KEPT: dict[str, tuple] = {}

BOT, CONST, TOP = 0b00, 0b01, 0b11  # the buffer tags of LANGUAGE.md section 6
TAG_BITS, VAL_BITS = 2, 8


@dataclass
class SolverStats:
    obligations: int = 0
    seconds: float = 0.0
    per_obligation: list[float] = field(default_factory=list)


# Every query is bounded by z3's resource limit (per query; deterministic, unlike a
# timeout, so the same program gets the same diagnostics on any machine and load): one z3
# cannot decide within it is `unknown`, which the caller reports (E6015) rather than
# reading as a proof. The checker's queries use at most ~600 units on every golden case
# and kernel (the limit leaves 160x); nonlinear integer arithmetic (`where x * x * x +
# ...`) is where it stops a query: 0.03 s of CPU (2 000 000 units took 2.4 s there once
# the model wrapped integers, a hang to the fuzzer over four targets).
RLIMIT = 100_000


@dataclass
class Budget:
    """The units an obligation has left for its forms (`Solver.shared_budget`): each of
    the first `attempts` forms gets at most `share`, every later one all that is `left`."""

    left: int
    share: int
    attempts: int  # attempts not yet asked

    def grant(self, rlimit: int) -> int:
        """The units the next form may spend (`rlimit` at most)."""
        self.attempts -= 1
        return min(rlimit, self.left if self.attempts < 0 else min(self.share, self.left))

    def skip(self) -> None:
        """A quick form not asked: the forms after it get its share."""
        self.attempts -= 1


class Undecided(Exception):
    """z3 answered `unknown`: the obligation is neither proved nor refuted."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Solver:
    def __init__(self, rlimit: int = RLIMIT, function_rlimit: int = FUNCTION_RLIMIT) -> None:
        self.rlimit = rlimit
        self.stats = SolverStats()
        self._fresh = 0
        self.function_rlimit = function_rlimit
        self.function_left = function_rlimit

    def begin_function(self) -> None:
        """A function's obligations start with the whole of `FUNCTION_RLIMIT`."""
        self.function_left = self.function_rlimit

    def fresh_name(self, base: str) -> str:
        self._fresh += 1
        return f"{base}!{self._fresh}"

    def shared_budget(self, attempts: int, rlimit: int = DECIDE_RLIMIT) -> Budget:
        """One budget for the forms of one obligation, asked in order: pass it to each
        `decide` of them. The first `attempts` forms get 1/10 of it each at most (after
        two, the next form has at least 4/5)."""
        return Budget(rlimit, rlimit // 10, attempts)

    def decide(
        self,
        constraints: list[z3.BoolRef],
        small: list[z3.ArithRef] = (),
        eqs: bool = False,
        rlimit: int = DECIDE_RLIMIT,
        budget: Budget | None = None,
    ) -> tuple[str, z3.ModelRef | None]:
        """Whether `constraints` (an obligation's negation) can hold: ("sat", model) — the
        obligation fails —, ("unsat", None) — proved —, or ("unknown", None) when z3 did
        not decide within the budget (reported as not proved). `eqs`: eliminate the
        equations first (`simplify; solve-eqs; smt`), which z3's default strategy leaves to
        its nonlinear core: gemm.vx's race query takes 0.2 M units so, 3.3 M without.
        `budget`: the obligation's shared budget; the query gets its grant of it (nothing
        left: "unknown" without asking z3) and spends what z3 counted."""
        import z3

        if budget is not None:
            rlimit = budget.grant(rlimit)
        rlimit = min(rlimit, max(self.function_left, AFTER_FUNCTION_RLIMIT))
        if rlimit <= 0:
            return ("unknown", None)

        # A solver of its own, not a scope of the shared one: z3 runs a pushed solver in
        # incremental mode, without the preprocessing its nonlinear core needs (the gemm
        # kernel's `r + 128 <= m` was undecided there in 5 s, and is proved in ms here).
        # In a context of its own too: z3's search (and so the model it returns) depends on
        # the terms its context has seen, so the counterexamples of one program would
        # differ between a CLI run and a worker that checked other programs before.
        def solve() -> tuple:
            ctx = z3.Context()
            one = _eqs_solver(ctx) if eqs else z3.Solver(ctx=ctx)
            one.set("rlimit", rlimit)
            one.add(*(c.translate(ctx) for c in constraints))
            result = one.check()
            # What the query spent: all it was given when z3 gave up (the count overshoots
            # the limit a little), else z3's count (kept with the answer, so a remembered
            # answer spends the same as a fresh one).
            spent = rlimit if result == z3.unknown else _units(one)
            model = one.model() if result == z3.sat else None
            if model is not None and small:
                model = _smaller(one, [t.translate(ctx) for t in small]) or model
            return (str(result), _Model(model) if model is not None else None, spent)

        start = time.perf_counter()
        verdict, model, spent = _answer(f"decide {eqs} {rlimit}", constraints, small, solve)
        self._count(time.perf_counter() - start)
        if budget is not None:
            budget.left -= min(spent, rlimit)
        self.function_left -= min(spent, rlimit)
        return verdict, model

    def _count(self, took: float) -> None:
        self.stats.obligations += 1
        self.stats.seconds += took
        self.stats.per_obligation.append(took)

    def counterexample(self, constraints: list[z3.BoolRef]) -> z3.ModelRef | None:
        """Model of `constraints` if satisfiable (the obligation fails), None if they are
        unsatisfiable (it holds); `Undecided` when z3 answers `unknown` (it is neither)."""
        import z3

        # In a context of its own, like `decide`: z3's search at the resource limit
        # depends on the terms its context has seen, so a query asked after other
        # programs' (the fuzzer, a worker, the LSP) could come out `unknown` in one
        # process and decided in another, and a clean check disagree with its build.
        def solve() -> tuple:
            ctx = z3.Context()
            one = z3.Solver(ctx=ctx)
            one.set("rlimit", self.rlimit)
            one.add(*(c.translate(ctx) for c in constraints))
            result = one.check()
            why = one.reason_unknown() if result == z3.unknown else ""
            return (str(result), _Model(one.model()) if result == z3.sat else None, why)

        start = time.perf_counter()
        result, model, why = _answer(f"model {self.rlimit}", constraints, (), solve)
        self._count(time.perf_counter() - start)
        if result == "unknown":
            raise Undecided("resource limit reached" if why == "canceled" else why)
        return model


def _units(one) -> int:
    """The resource units z3 counted for a query (its context is its own)."""
    try:
        return int(one.statistics().get_key_value("rlimit count"))
    except Exception:  # no count reported (a trivial query): it spent next to nothing
        return 0


def _eqs_solver(ctx):
    import z3

    steps = [z3.Tactic(t, ctx=ctx) for t in ("simplify", "solve-eqs", "smt")]
    return z3.Then(*steps).solver()


def _answer(kind: str, constraints, small, solve) -> tuple:
    """The answer to a query: remembered (the same query in this compilation or an earlier
    one: a worker, the LSP, a warm check), or `solve()`d. `unknown` is kept too: the
    budget is a resource limit, so a query gets the same answer however often it is asked
    (and it stays an error)."""
    ids, key = _keys(kind, constraints, small)
    answer = _DECIDED.get(key) or _SAT_KEPT.get(key) or solve()
    _remember(ids, [*constraints, *small], key, answer)
    return answer


def _keys(kind: str, constraints, small) -> tuple[tuple[int, ...], str]:
    """A query's id key and its SHA-256 key: the ids first (no printing), the text where
    the ids are not known (another compilation's terms, freed since)."""
    ids = (hash(kind), len(constraints), *(c.get_id() for c in constraints))
    ids += tuple(t.get_id() for t in small)
    known = _BY_IDS.get(ids)
    if known is not None:
        return ids, known[1]
    text = "\n".join(
        [kind, *(c.sexpr() for c in constraints), "small", *(t.sexpr() for t in small)]
    )
    return ids, hashlib.sha256(text.encode()).hexdigest()


def _remember(ids: tuple[int, ...], terms: list, key: str, answer: tuple) -> None:
    # A model keeps its whole z3 context: satisfiable answers are few and kept apart.
    answers, bound = (_SAT_KEPT, SAT_KEPT_MAX) if answer[1] is not None else (_DECIDED, DECIDED_MAX)
    for table, k, most in ((answers, key, bound), (_BY_IDS, ids, DECIDED_MAX)):
        if k not in table and len(table) >= most:
            table.pop(next(iter(table)))
    answers[key] = answer
    _BY_IDS[ids] = (tuple(terms), key)


def _smaller(one, terms) -> object | None:
    """A model whose `terms` are small, when there is one: a counterexample reads better
    as `m = 192` than as `m = 21376`, and is the same on every run."""
    import z3

    for bound in SMALL_BOUNDS:
        one.push()
        one.add(*(z3.And(t >= -bound, t <= bound) for t in terms))
        found = one.model() if one.check() == z3.sat else None
        one.pop()
        if found is not None:
            return found
    return None


class _Model:
    """A model of another context, evaluated on terms of the main one."""

    def __init__(self, model: z3.ModelRef):
        self.model = model

    def eval(self, term: z3.ExprRef, model_completion: bool = False) -> z3.ExprRef:
        return self.model.eval(term.translate(self.model.ctx), model_completion=model_completion)


def format_model(model: z3.ModelRef, consts: list[z3.ExprRef]) -> str:
    """`((tag_cur #b11) (val_cur #x00))`: the SMT-LIB get-value form of the named consts."""
    parts = [f"({c.sexpr()} {model.eval(c, model_completion=True).sexpr()})" for c in consts]
    return "(" + " ".join(parts) + ")"
