"""`stage<8192>()` (the Vx design documents' call form) is two chained comparisons in an
expression; the syntax error says how to write const arguments (issue 9 item 2)."""

from __future__ import annotations

import pytest

from vxc.diagnostics import DiagnosticSink
from vxc.frontend.parser import parse_source


def errors(src: str):
    sink = DiagnosticSink()
    parse_source(src.encode(), "t.vx", sink)
    return sink.items


@pytest.mark.parametrize(
    ("stmt", "help_"),
    [
        ("let a = stage<8192>();", "write `stage::<8192>(...)`"),
        ("stage<8192>();", "write `stage::<8192>(...)`"),
        ("let a = stage<8, 4>(x) + 1;", "write `stage::<8, 4>(...)`"),
        ("let a = g(x, stage<N>(y));", "write `stage::<N>(...)`"),
        ("return 2 * stage<  64 >(x);", "write `stage::<64>(...)`"),
    ],
)
def test_angle_call_gets_the_turbofish_help(stmt, help_):
    (d,) = errors(f"fn f() -> i64 {{\n  {stmt}\n}}\n")
    assert d.code == "E0002" and d.help == help_, (d.message, d.help)
    assert "chained comparisons" in d.message and d.span.line == 2


@pytest.mark.parametrize(
    "stmt",
    [
        "let a = b < c;",  # an ordinary error-free comparison
        "let t = Tensor<f32>([4, 4]);",
        "let a = stage::<8192>();",
        "let a = (b < c) && (d > (e));",
    ],
)
def test_comparisons_and_turbofish_parse(stmt):
    assert errors(f"fn f() -> i64 {{\n  {stmt}\n}}\n") == []


def test_unrelated_syntax_errors_keep_their_message():
    (d,) = errors("fn f() -> i64 {\n  let t = Tensor<f32>([4, 4]) + ;\n}\n")
    assert d.message == "unexpected `;`" and d.help is None
