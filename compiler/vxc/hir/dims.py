"""Dimension expressions (LANGUAGE.md 3): `Tensor<f32, [BQ, 2 * BK]>`, evaluated from
integer literals and const parameters when the function is monomorphised.

In an instance every name is a const parameter with a value, so the expression is a
number; a `/` that does not divide exactly, or a result that is not positive, is E0110
at the dimension, naming the values. In a generic body as written (the template, whose
const parameters have no values) an expression over const parameters stays a symbol, as
a bare const name does, in a canonical form (`BK * 2` and `2 * BK` are one symbol, and
`(BK + BK) / 2` is `BK`), so a template's types agree where the instances' will. A name
that is no const parameter (a runtime value) is E0110:
the expression must be known when the function is monomorphised.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, replace
from fractions import Fraction

from vxc.diagnostics import Span
from vxc.frontend import ast as A


@dataclass
class DimError(Exception):
    span: Span
    message: str
    notes: list[str]


def show(d: A.Dim) -> str:
    """The expression as written (parenthesised where precedence needs it)."""
    if not isinstance(d, A.DimExpr):
        return str(d)
    lhs, rhs = show(d.lhs), show(d.rhs)
    if isinstance(d.rhs, A.DimExpr) and (d.op in "*/" or d.rhs.op in "+-"):
        rhs = f"({rhs})"
    if isinstance(d.lhs, A.DimExpr) and d.op in "*/" and d.lhs.op in "+-":
        lhs = f"({lhs})"
    return f"{lhs} {d.op} {rhs}"


def names(d: A.Dim) -> list[str]:
    if isinstance(d, str):
        return [d]
    if isinstance(d, A.DimExpr):
        return [*names(d.lhs), *names(d.rhs)]
    return []


def rename(d: A.Dim, to: Mapping[str, int | str]) -> A.Dim:
    """`d` with names replaced (a callee's const parameters by the caller's values)."""
    if isinstance(d, str):
        return to.get(d, d)
    if isinstance(d, A.DimExpr):
        return replace(d, lhs=rename(d.lhs, to), rhs=rename(d.rhs, to))
    return d


def evaluate(d: A.Dim, values: Mapping[str, int], generic: Set[str]) -> int | str:
    """An instance's dimension: literals and names pass through; an expression is its
    value, or (in a template, over `generic` const parameters without values) the symbol
    `show(d)`. DimError for a name that is neither, an inexact `/` or a result <= 0."""
    if not isinstance(d, A.DimExpr):
        return d
    runtime = [n for n in names(d) if n not in values and n not in generic]
    if runtime:
        raise DimError(
            d.span,
            f"dimension `{show(d)}` uses `{runtime[0]}`, which is not a const parameter",
            [
                "a dimension expression is evaluated when the function is monomorphised, "
                "from integer literals and const parameters only"
            ],
        )
    if any(n not in values for n in names(d)):
        return symbol(d, values)
    value = _value(d, values)
    if value <= 0:
        raise DimError(
            d.span,
            f"dimension `{show(d)}` is {value}{_given(d, values)}: a dimension is positive",
            [],
        )
    return value


def _given(d: A.Dim, values: Mapping[str, int]) -> str:
    used = dict.fromkeys(n for n in names(d) if n in values)
    return f" with {', '.join(f'{n} = {values[n]}' for n in used)}" if used else ""


def _value(d: A.Dim, values: Mapping[str, int]) -> int:
    if isinstance(d, str):
        return values[d]
    if not isinstance(d, A.DimExpr):
        return d
    lhs, rhs = _value(d.lhs, values), _value(d.rhs, values)
    if d.op == "+":
        return lhs + rhs
    if d.op == "-":
        return lhs - rhs
    if d.op == "*":
        return lhs * rhs
    if rhs == 0 or lhs % rhs:
        raise DimError(
            d.span,
            f"dimension `{show(d)}` does not divide exactly: {lhs} / {rhs}{_given(d, values)}",
            ["`/` in a dimension is exact division"],
        )
    return lhs // rhs


# A polynomial over const names: monomial (sorted names, with repeats) -> coefficient.
Poly = dict[tuple[str, ...], Fraction]


def symbol(d: A.Dim, values: Mapping[str, int]) -> str:
    """A template's dimension as a canonical symbol: the polynomial `d` is, written in a
    fixed order; `show(d)` itself when it divides by something that is not a number."""
    poly = _poly(d, values)
    if poly is None:
        return show(d)
    terms = [(m, c) for m, c in sorted(poly.items()) if c]
    if not terms:
        return "0"
    parts = []
    for m, c in terms:
        factors = [str(c)] if c != 1 or not m else []
        parts.append(" * ".join([*factors, *m]))
    return " + ".join(parts).replace("+ -", "- ")


def _poly(d: A.Dim, values: Mapping[str, int]) -> Poly | None:
    if isinstance(d, int):
        return {(): Fraction(d)}
    if isinstance(d, str):
        return {(): Fraction(values[d])} if d in values else {(d,): Fraction(1)}
    lhs, rhs = _poly(d.lhs, values), _poly(d.rhs, values)
    if lhs is None or rhs is None:
        return None
    if d.op in "+-":
        sign = 1 if d.op == "+" else -1
        out = dict(lhs)
        for m, c in rhs.items():
            out[m] = out.get(m, Fraction(0)) + sign * c
        return out
    if d.op == "*":
        out: Poly = {}
        for m1, c1 in lhs.items():
            for m2, c2 in rhs.items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, Fraction(0)) + c1 * c2
        return out
    divisor = [c for m, c in rhs.items() if c]
    if set(rhs) - {()} or not divisor:
        return None  # a division by a polynomial (or by zero): no canonical form
    return {m: c / divisor[0] for m, c in lhs.items()}
