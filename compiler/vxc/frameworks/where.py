"""A kernel's `where` clauses (the manifest's `requires`, as vxc prints them) evaluated in
Python, so that a framework can check a call at trace time, from static shapes, and read
the instance count a clause `instances() == E` gives.

Only what can be evaluated exactly is: integers, names with known values, `+ - * / %`
(Vx's truncating `/` and `%` on signed integers), comparisons, `&&`, `||` and
`instances()`. A clause with anything else (`instance()`, a `!`, a call, an unknown
name, a division by zero) is left to the C entry, which checks every clause at run time
(VX_ERR_WHERE, raised by XLA). The text is parsed, never evaluated as Python.
"""

from __future__ import annotations

import ast
import operator
import re

INSTANCES = "__vx_instances__"  # what `instances()` reads as in the parsed clause


class Unknown(Exception):
    """The clause cannot be evaluated here (see the module docstring)."""


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        raise Unknown("division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _trunc_mod(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)


_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _trunc_div,
    ast.Mod: _trunc_mod,
}
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def parse(clause: str) -> ast.AST:
    """The clause as a Python expression tree; Unknown for what this module does not
    evaluate (a `!` other than `!=` would change meaning as Python's `not`)."""
    if re.search(r"!(?!=)", clause) or "instance()" in clause:
        raise Unknown(clause)
    text = clause.replace("instances()", INSTANCES).replace("&&", " and ").replace("||", " or ")
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        raise Unknown(clause) from None


def value(node: ast.AST, names: dict[str, int]) -> int | bool:
    """The value of a parsed clause or expression; Unknown where it cannot be computed."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise Unknown(node.id)
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -value(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](value(node.left, names), value(node.right, names))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
        left, right = value(node.left, names), value(node.comparators[0], names)
        return _CMP[type(node.ops[0])](left, right)
    if isinstance(node, ast.BoolOp):
        parts = [value(v, names) for v in node.values]
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    raise Unknown(ast.dump(node))


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def instances_expr(requires: list[str], known: set[str]) -> ast.AST | None:
    """The expression of a clause `instances() == E` (or `E == instances()`) whose names
    are all in `known`: the instance count the shapes give; None if no clause does."""
    for clause in requires:
        try:
            node = parse(clause)
        except Unknown:
            continue
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            continue
        if not isinstance(node.ops[0], ast.Eq):
            continue
        for side, other in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
            if isinstance(side, ast.Name) and side.id == INSTANCES and names_in(other) <= known:
                return other
    return None


def broken(requires: list[str], names: dict[str, int]) -> list[str]:
    """The clauses these values (shape parameters, `instances()` as INSTANCES) break;
    clauses that cannot be evaluated here are not in it (the C entry checks them)."""
    out = []
    for clause in requires:
        try:
            ok = value(parse(clause), names)
        except Unknown:
            continue
        if not ok:
            out.append(clause)
    return out
