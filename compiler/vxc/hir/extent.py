"""A view's extents (`hi - lo` per dimension), decided without a solver.

LANGUAGE.md 4.2: every extent must be a compile-time constant once const parameters are
substituted (`r .. r + 128`, `i * 128 .. (i + 1) * 128`). Both bounds are normalised to
polynomials over atoms (variables, and any other subexpression such as `instance()` or
`n / 128`, compared as written); the extent is constant exactly when every monomial but
the constant cancels. In a generic body a const parameter is a constant not yet known,
so monomials of const parameters alone may remain (`(i + 1) * T - i * T` is `T`). This is
the type checker's question, so it needs no z3 (`vxc check` imports z3 only for proofs).
"""

from __future__ import annotations

from collections import Counter

from vxc.hir import nodes as H

# A polynomial: monomial (a sorted tuple of atoms; () is the constant) -> coefficient.
Poly = Counter
MAX_TERMS = 64  # a bound's expansion larger than this is not read (it is not a tile's)


def poly(e: H.Expr) -> Poly | None:
    """`e` as a polynomial over its atoms, or None when it grows past MAX_TERMS."""
    match e:
        case H.IntLit():
            return Counter({(): e.value})
        case H.Unary(op="-"):
            inner = poly(e.operand)
            return None if inner is None else _times(inner, Counter({(): -1}))
        case H.Binary(op="+" | "-" | "*"):
            lhs, rhs = poly(e.lhs), poly(e.rhs)
            if lhs is None or rhs is None:
                return None
            if e.op == "*":
                return _times(lhs, rhs)
            out = Counter(lhs)
            out.update(rhs if e.op == "+" else _times(rhs, Counter({(): -1})))
            return out
    return Counter({(_key(e),): 1})  # an atom: equal when written alike


def _times(a: Poly, b: Poly) -> Poly | None:
    out: Poly = Counter()
    for ma, ca in a.items():
        for mb, cb in b.items():
            out[tuple(sorted(ma + mb))] += ca * cb
    return out if len(out) <= MAX_TERMS else None


def _key(e: H.Expr) -> tuple:
    """A structural key of an expression (names by variable id; no spans, no node ids)."""
    match e:
        case H.IntLit():
            return ("int", e.value)
        case H.Name():
            return ("var", e.vid, e.name)
        case H.Binary() | H.Unary():
            return (e.op, *(_key(c) for c in H.expr_children(e)))
        case H.Call():
            return ("call", e.callee, *(_key(a) for a in e.args))
        case H.MethodCall():
            return ("method", e.method, _key(e.obj), *(_key(a) for a in e.args))
    return (type(e).__name__, e.nid)  # anything else is never equal to another node


def extent(lo: H.Expr, hi: H.Expr, symbolic: frozenset[int] = frozenset()) -> int | str | None:
    """`hi - lo` when it is a constant, else None. Const parameters of a generic body
    (variable ids `symbolic`) may remain: the extent is then returned as text (`T`),
    as the body's types name their dimensions."""
    a, b = poly(lo), poly(hi)
    if a is None or b is None:
        return None
    diff = Counter(b)
    diff.subtract(a)
    terms = {m: c for m, c in diff.items() if m != () and c != 0}
    if any(atom[0] != "var" or atom[1] not in symbolic for m in terms for atom in m):
        return None
    if not terms:
        return diff[()]
    parts = [
        " * ".join(([str(c)] if c != 1 else []) + [atom[2] for atom in m])
        for m, c in sorted(terms.items())
    ]
    if diff[()]:
        parts.append(str(diff[()]))
    return " + ".join(parts)
