"""Views, outputs and stores (LANGUAGE.md 4.2): what the seam checker proves about them.

The seam checker (checks/seams.py) walks each function with a z3 term for every integer
and a path condition; the facts here read those terms:

- E6041: a view lies inside its tensor in every dimension (`0 <= lo`, `hi <= dim`), and
  a `Vec` index that no allowed value keeps in bounds is rejected (one that may be out of
  bounds keeps its run-time check; one proved in bounds drops it, `Proofs.index`).
- E6042: two instances `p != q` never store to overlapping regions of one output: the
  stores' facts, paths and regions are copied for a second instance (the constants an
  instance owns renamed: `instance()`, loop variables, quotients; the parameters, Vec
  lengths and `instances()` shared) and z3 looks for an element both write.
- E6043: a store's source is not written, moved into, re-bound or moved away while the
  store is in flight (path-sensitive: "in flight" is a z3 condition merged at joins).

Integer division by a non-literal goes to z3 as it is, with its quotient and remainder
as fresh constants (`a = b*q + r`, `|r| < |b|`, the sign of `a`): z3's nonlinear core
decides the kernels' index arithmetic that way, where its native `div` often does not.
An undecided query is the error with "could not be proved", never a pass.

Integer arithmetic wraps (docs/DESIGN.md), and the facts the proofs assume (`where`
clauses, path conditions, quotients) keep the wrapped model. The index terms a proof
is about (view bounds, store regions) are read over the mathematical integers instead,
with the obligation that none of their operations overflows (`Overflow`): where no
operation of an index overflows, its value is the exact one, so the proof is sound;
where one may, that is E6041 with the values that overflow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

INTERNAL = "%"  # prefix of constants that are no program value (quotients, remainders)


@dataclass
class Overflow:
    """One wrapping `+ - *` in an index: `fits` holds when its exact value (over exact
    operands) is in its type's range, so the machine computes the exact value."""

    fits: z3.BoolRef
    text: str  # the operation as the program wrote it
    ty: str


@dataclass
class Ideal:
    """An integer term over the mathematical integers (`exact`), and the wrapping
    operations it is made of (indices into the checker's `Overflow` list)."""

    term: z3.ArithRef  # the wrapped term (kept alive: the table is keyed by its z3 id)
    exact: z3.ArithRef
    ops: frozenset[int]


@dataclass
class Store:
    """One store of the emitting pass: the output, its region's terms, the path."""

    out_vid: int
    out: str
    region: list[tuple[z3.ArithRef, z3.ArithRef]]
    pc: z3.BoolRef
    span: object
    mentions_instance: bool
    nid: int = -1  # the store's Transfer node
    inside: z3.BoolRef | None = None  # the region's bounds in its output (E6041 proves them)


@dataclass
class Proofs:
    """What the checker proved about one function's nodes (by nid), for the lowering:
    `index` holds the Vec indices proved in bounds (their run-time check is dropped),
    `views` the views proved inside their tensors."""

    index: set[int] = field(default_factory=set)
    views: set[int] = field(default_factory=set)
    disjoint: set[int] = field(default_factory=set)

    def all(self) -> set[int]:
        return self.index | self.views | self.disjoint


def trunc_div(a: z3.ArithRef, b: z3.ArithRef, facts: list, fresh) -> tuple:
    """Vx's truncating `a / b` and `a % b` for a non-literal `b`, as fresh constants."""
    q, r = z3.Int(fresh(f"{INTERNAL}q")), z3.Int(fresh(f"{INTERNAL}r"))
    facts += [
        z3.Implies(b != 0, a == b * q + r),
        z3.Implies(b != 0, z3.If(a >= 0, r >= 0, r <= 0)),
        z3.Implies(b > 0, z3.And(r < b, -r < b)),
        z3.Implies(b < 0, z3.And(r < -b, -r < -b)),
        # Implied, and stated for z3's sake: a quotient of naturals is between 0 and `a`.
        z3.Implies(z3.And(a >= 0, b > 0), z3.And(q >= 0, q <= a)),
    ]
    return q, r


def constants(exprs) -> list[z3.ExprRef]:
    """The uninterpreted constants of z3 terms, in first-seen order."""
    seen: dict[int, z3.ExprRef] = {}
    stack = list(exprs)
    visited: set[int] = set()
    while stack:
        e = stack.pop()
        if e.get_id() in visited:
            continue
        visited.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            seen.setdefault(e.get_id(), e)
        stack.extend(e.children())
    return list(seen.values())


def shown_name(c: z3.ExprRef) -> str:
    """A constant as the program names it: a loop variable's `kk!3` is `kk`."""
    return str(c).split("!", 1)[0]


def named_values(model: z3.ModelRef, exprs, order: list[str]) -> str:
    """`m = 192, instance() = 1`: the program values in `exprs`, parameters first."""
    ints = [
        c
        for c in constants(exprs)
        if not str(c).startswith(INTERNAL)
        and (c.sort() == z3.IntSort() or (c.sort() == z3.BoolSort() and "!" not in str(c)))
    ]
    rank = {n: i for i, n in enumerate(order)}
    ints.sort(key=lambda c: (rank.get(shown_name(c), len(rank)), str(c)))
    parts, done = [], set()
    for c in ints:
        name = shown_name(c)
        if name in done:
            continue
        done.add(name)
        parts.append(f"{name} = {model.eval(c, model_completion=True)}")
    return ", ".join(parts)
