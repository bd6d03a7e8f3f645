"""Loop-carried integers and bools (issue 30, S1): what the loop head holds at iteration `i`.

The seam checker walks a loop body from a head state. For buffers the head is built by a
few silent passes (checks/seams.py `_for`); an integer or bool the body assigns is read
here instead, from one silent pass whose head values are fresh symbols `h`: the value at
the end of that pass, over `h`, says what one iteration does to the variable.

- `invariant`: the end value does not depend on anything the iteration made (`r = n;`):
  the head holds the entry value at the first iteration and that value after.
- `affine`: on every path the end is `h + d` with `d` loop-invariant (`r = r + 128;`,
  the step under an `if` whose both arms step alike): at iteration `i` the head holds
  `entry + (i - lo) * d`, exactly (as the machine wraps it).
- `interval`: each path adds one of some integer constants (`if c { r = r + 128; }`):
  the head holds `entry + x` with `(i - lo) * min <= x <= (i - lo) * max`.
- `any`: everything else (`r = r * 2;`, a value read from a Vec length computed in the
  body): any value of the variable's type. Sound, and imprecise only where the kernel's
  arithmetic is beyond these forms.

Soundness: each form holds every value the variable takes at that iteration's head in
every execution, so a proof over the head's term is a proof over every iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from vxc.checks.regions import constants


@dataclass(frozen=True)
class Head:
    kind: str  # "invariant" | "affine" | "interval" | "any"
    entry: z3.ExprRef  # the value before the loop
    value: z3.ExprRef | None = None  # invariant: the value set; affine: the step
    low: int = 0  # interval: the smallest and largest step
    high: int = 0


def classify(symbol, end, end_exact, fresh: set[int], entry_value) -> Head:
    """The head form of one variable: `symbol` its head value in the probing pass, `end`
    (and `end_exact`, for integers) its value at the end of that pass, `fresh` the ids of
    the constants the pass made (the head symbols, the loop variable, unknowns)."""
    if not _mentions(end_exact, fresh):
        return Head("invariant", entry_value, end)
    if z3.is_bool(symbol):
        return Head("any", entry_value)
    steps = [z3.simplify(leaf - symbol) for leaf in _leaves(end_exact)]
    if any(_mentions(d, fresh) for d in steps):
        return Head("any", entry_value)
    if all(d.eq(steps[0]) for d in steps):
        return Head("affine", entry_value, steps[0])
    if all(z3.is_int_value(d) for d in steps):
        values = [d.as_long() for d in steps]
        return Head("interval", entry_value, None, min(values), max(values))
    return Head("any", entry_value)


def _leaves(term: z3.ExprRef) -> list[z3.ExprRef]:
    """The values an `If` tree may take (a merge of paths is an `If` on their condition)."""
    if z3.is_app_of(term, z3.Z3_OP_ITE):
        return _leaves(term.arg(1)) + _leaves(term.arg(2))
    return [term]


def _mentions(term: z3.ExprRef, ids: set[int]) -> bool:
    return any(c.get_id() in ids for c in constants([term]))
