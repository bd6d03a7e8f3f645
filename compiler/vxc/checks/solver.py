"""The one z3 solver of a compilation, shared by every obligation (push/pop).

Seam obligations are QF_BV (a 2-bit tag and an 8-bit value per buffer);
`where`-bound obligations are QF_LIA. Both go to the same instance. Every
function's obligations assume the launch facts of LANGUAGE.md section 4.1
(checks/seams.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # z3 is imported when the first obligation is raised
    import z3

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
# reading as a proof. The checker's linear queries use a tiny fraction of it; nonlinear
# integer arithmetic (`where x * x * x + ...`) is where it stops a query (~0.2 s).
RLIMIT = 2_000_000


class Undecided(Exception):
    """z3 answered `unknown`: the obligation is neither proved nor refuted."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Solver:
    def __init__(self, rlimit: int = RLIMIT) -> None:
        self.rlimit = rlimit
        self._z3: z3.Solver | None = None
        self.stats = SolverStats()
        self._fresh = 0

    @property
    def z3(self) -> z3.Solver:
        if self._z3 is None:
            import z3

            self._z3 = z3.Solver()
            self._z3.set("rlimit", self.rlimit)
        return self._z3

    def fresh_name(self, base: str) -> str:
        self._fresh += 1
        return f"{base}!{self._fresh}"

    def counterexample(self, constraints: list[z3.BoolRef]) -> z3.ModelRef | None:
        """Model of `constraints` if satisfiable (the obligation fails), None if they are
        unsatisfiable (it holds); `Undecided` when z3 answers `unknown` (it is neither)."""
        import z3

        start = time.perf_counter()
        self.z3.push()
        try:
            self.z3.add(*constraints)
            result = self.z3.check()
            if result == z3.unknown:
                why = self.z3.reason_unknown()
                raise Undecided("resource limit reached" if why == "canceled" else why)
            model = self.z3.model() if result == z3.sat else None
        finally:
            self.z3.pop()
        took = time.perf_counter() - start
        self.stats.obligations += 1
        self.stats.seconds += took
        self.stats.per_obligation.append(took)
        return model


def format_model(model: z3.ModelRef, consts: list[z3.ExprRef]) -> str:
    """`((tag_cur #b11) (val_cur #x00))`: the SMT-LIB get-value form of the named consts."""
    parts = [f"({c.sexpr()} {model.eval(c, model_completion=True).sexpr()})" for c in consts]
    return "(" + " ".join(parts) + ")"
