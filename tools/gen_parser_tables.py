"""Regenerate compiler/vxc/frontend/grammar_tables.json: lark's LALR tables for grammar.lark,
prebuilt, so that no `vxc` process builds them at start-up.

    .venv/bin/python tools/gen_parser_tables.py          # rewrite the module
    .venv/bin/python tools/gen_parser_tables.py --check  # exit 1 when it is stale

The file holds the grammar's SHA-256 and lark's version next to the serialised parser
(JSON, tuples and integer-keyed dicts tagged; no pickle, and no Python source to compile:
a 200 KB literal module took longer to compile than the tables take to build).
`vxc.frontend.parser` uses it only when both stamps match, and otherwise builds the
tables as before; tests/frontend/test_parser_tables.py fails when it is stale, so a
grammar edit comes with regenerated tables.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

OUT = ROOT / "compiler" / "vxc" / "frontend" / "grammar_tables.json"


def render() -> str:
    import lark
    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    from vxc.frontend import parser

    grammar = parser.grammar_text()
    built = parser.build_lark(grammar)
    data, memo = built.memo_serialize([TerminalDef, Rule])
    # Callbacks are code, passed again at load time (lark allows lexer_callbacks there).
    data["options"] = {k: v for k, v in data["options"].items() if k != "lexer_callbacks"}
    data["parser"]["parser"] = canonical_tables(data["parser"]["parser"])
    doc = {
        "generated_by": "tools/gen_parser_tables.py from grammar.lark; do not edit",
        "grammar_sha256": hashlib.sha256(grammar.encode()).hexdigest(),
        "lark_version": lark.__version__,
        "data": _tag(data),
        "memo": _tag(memo),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"


def _tag(x: object) -> object:
    """JSON has no tuples and only string keys: tag both (parser.untag reverses it)."""
    if isinstance(x, tuple):
        return {"__tuple__": [_tag(v) for v in x]}
    if isinstance(x, list):
        return [_tag(v) for v in x]
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x):
            return {k: _tag(v) for k, v in x.items()}
        assert all(isinstance(k, int) for k in x), x.keys()
        return {"__intdict__": [[k, _tag(v)] for k, v in sorted(x.items())]}
    assert x is None or isinstance(x, str | int | float | bool), type(x)
    return x


def canonical_tables(tables: dict) -> dict:
    """lark numbers symbols and LALR states in set order, which changes run to run:
    renumber symbols by name and states breadth-first from the start state (symbols in
    name order), so the same grammar always gives the same module, byte for byte."""
    names = tables["tokens"]  # symbol id -> name
    sym = {old: new for new, old in enumerate(sorted(names, key=lambda i: names[i]))}
    states = tables["states"]
    order: dict[int, int] = {}
    todo = [*tables["start_states"].values(), *tables["end_states"].values()]
    while todo:
        st = todo.pop(0)
        if st in order:
            continue
        order[st] = len(order)
        for tok in sorted(states[st], key=lambda i: names[i]):
            action, arg = states[st][tok]
            if action == 0:  # shift (or goto): arg is a state
                todo.append(arg)
    for st in sorted(states):  # unreachable states, if any, keep a stable place at the end
        order.setdefault(st, len(order))

    def row(st: int) -> dict:
        return {
            sym[tok]: (action, order[arg] if action == 0 else arg)
            for tok, (action, arg) in states[st].items()
        }

    return {
        "end_states": {k: order[v] for k, v in tables["end_states"].items()},
        "start_states": {k: order[v] for k, v in tables["start_states"].items()},
        "states": {order[st]: row(st) for st in states},
        "tokens": {sym[i]: name for i, name in names.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the module is stale")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run tools/gen_parser_tables.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
