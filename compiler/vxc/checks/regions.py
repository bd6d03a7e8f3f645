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

from vxc.hir.types import int_range

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
    """One store (or load) of an output in the emitting pass: its region's terms, the path."""

    out_vid: int
    out: str
    # per dimension `(lo, hi, cap)`: the elements `lo <= e < hi`, and `e < cap` where the
    # region is an `edge` view's (its elements past the output's end are not written)
    region: list[tuple[z3.ArithRef, z3.ArithRef, z3.ArithRef | None]]
    pc: z3.BoolRef
    span: object
    mentions_instance: bool
    nid: int = -1  # the store's Transfer node
    inside: z3.BoolRef | None = None  # the region's bounds in its output (E6041 proves them)
    writes: bool = True  # a store; False: a load from the output (raced against stores)


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


def holds(region: list[tuple], elems: list[z3.ArithRef]) -> list[z3.BoolRef]:
    """That element `elems` is one a region touches: `lo <= e < hi` in every dimension,
    and `e < cap` where the region is an `edge` view's (LANGUAGE.md 4.2)."""
    facts = []
    for (lo, hi, cap), e in zip(region, elems, strict=True):
        facts += [lo <= e, e < hi] + ([e < cap] if cap is not None else [])
    return facts


def trunc_div(a: z3.ArithRef, b: z3.ArithRef, ty: str, facts: list, fresh) -> tuple:
    """Vx's `a / b` and `a % b` for a non-literal `b`, as fresh constants `q`, `r`, and
    the facts that pin them at the divisors where Vx division is total and wraps
    (docs/DESIGN.md: `x / 0 == 0`, `x % 0 == x`, `x / -1 == 0 - x`, so `MIN / -1 ==
    MIN`, and `x % -1 == 0`). The truncating facts go to `facts`; the pinning ones are
    returned apart: without them `q` is free at 0 and -1, every value the machine computes
    is among the model's, and a proof is sound (the model said `q == -a` by -1, 2^63 at
    MIN, which the machine never computes: issue 30, S2). The checker adds them to the
    queries that report (checks/seams.py `_precise`): any fact more left gemm-shaped race
    proofs undecided in the fast forms (z3's nonlinear core is sensitive to what it is
    given), and a counterexample must be one the machine can run."""
    q, r = z3.Int(fresh(f"{INTERNAL}q")), z3.Int(fresh(f"{INTERNAL}r"))
    lo, _ = int_range(ty)
    signed = lo < 0
    facts += [
        z3.Implies(z3.And(b != 0, b != -1) if signed else b != 0, a == b * q + r),
        z3.Implies(b != 0, z3.If(a >= 0, r >= 0, r <= 0)),
        z3.Implies(b > 0, z3.And(r < b, -r < b)),
        z3.Implies(b < 0, z3.And(r < -b, -r < -b)),
        # Implied, and stated for z3's sake: a quotient of naturals is between 0 and `a`.
        z3.Implies(z3.And(a >= 0, b > 0), z3.And(q >= 0, q <= a)),
    ]
    pinned = [z3.Implies(b == 0, z3.And(q == 0, r == a))]
    if signed:
        pinned.append(z3.Implies(b == -1, z3.And(r == 0, q == z3.If(a == lo, lo, -a))))
    return q, r, pinned


def machine_div(a: int, b: int, ty: str) -> tuple[int, int]:
    """The quotient and remainder the generated code computes for literals (as `trunc_div` models it)."""
    if b == 0:
        return 0, a
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    rem = a - q * b
    lo, hi = int_range(ty)
    return (q - lo) % (hi - lo + 1) + lo, rem


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
