"""The prebuilt LALR tables (frontend/grammar_tables.json) are those of grammar.lark.

`vxc` loads them instead of building the tables at every start (~0.2 s). They must be
regenerated with tools/gen_parser_tables.py whenever the grammar (or lark) changes:
this test fails until they are.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import lark
import pytest

from vxc.frontend import parser

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "compiler" / "vxc" / "frontend" / "grammar_tables.json"


def test_tables_are_fresh():
    doc = json.loads(TABLES.read_text())
    grammar = parser.grammar_text()
    assert doc["grammar_sha256"] == hashlib.sha256(grammar.encode()).hexdigest(), (
        "grammar.lark changed: run tools/gen_parser_tables.py"
    )
    assert doc["lark_version"] == lark.__version__, "lark changed: run tools/gen_parser_tables.py"
    # Regenerating gives the file byte for byte (the generator is deterministic).
    check = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_parser_tables.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_parser_uses_the_prebuilt_tables():
    parser._lark.cache_clear()
    try:
        assert parser._lark().source_path == "<deserialized>"  # loaded, not built
    finally:
        parser._lark.cache_clear()


SOURCES = sorted(
    [*ROOT.glob("kernels/*.vx"), *ROOT.glob("compiler/vxc/machines/*.vx"),
     *ROOT.glob("tests/golden/cases/*.vx")]
)  # fmt: skip


@pytest.fixture(scope="module")
def parsers():
    built = parser.build_lark(parser.grammar_text())
    parser._lark.cache_clear()
    return parser._lark(), built


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_prebuilt_and_built_tables_parse_alike(parsers, path):
    loaded, built = parsers
    text = path.read_bytes().decode("utf-8", "replace")
    outcomes = []
    for p in (loaded, built):
        try:
            outcomes.append(p.parse(text))
        except Exception as e:  # a rejected source is rejected by both, at the same place
            outcomes.append(
                (type(e).__name__, getattr(e, "line", None), getattr(e, "column", None))
            )
    assert outcomes[0] == outcomes[1]
