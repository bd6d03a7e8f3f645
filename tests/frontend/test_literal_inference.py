"""Integer literal types inferred from use within a function (Rust's rule,
hir/literals.py): `let kt = 8;` is the integer type its uses ask for, `i32` when they ask
for none, and a use that disagrees gets one E0201 whose help names `let kt: i64`."""

from __future__ import annotations

import pytest

from vxc import api

TILE = "Tensor<f32, [128, 128]>"

# The new user's kernel: each instance takes `kt` tiles from `instance() / kt`.
PER_INSTANCE = f"""\
fn k(tiles: &Vec<{TILE}>) -> {TILE} on Topology::TensorCore {{
  let kt = 8;
  let first = instance() / kt;
  let mut acc = transfer(tiles[first * kt], Memory::VMEM);
  let last = first * kt + kt - 1;
  for i in first * kt..last {{
    acc = transfer(tiles[i], Memory::VMEM);
  }}
  return transfer(acc, Memory::HBM);
}}
"""


def _types(text: str, fn: str = "k") -> tuple[list, dict[str, str]]:
    analysis = api.analyze([api.Source("t.vx", text.encode())])
    codes = [(d.code, d.span.line) for d in analysis.diagnostics]
    program = analysis.program
    types = {v.name: v.ty.show() for v in program.functions[fn].vars.values()}
    return codes, types


def test_a_literal_let_takes_the_type_its_uses_need():
    codes, types = _types(PER_INSTANCE)
    assert codes == []
    assert types["kt"] == "i64" and types["first"] == "i64" and types["last"] == "i64"


def test_the_whole_kernel_checks_and_builds_for_cpu():
    assert api.check([api.Source("t.vx", PER_INSTANCE.encode())], "cpu").ok


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ("let kt = 8; let x = tiles[kt];", "i64"),  # an index is i64
        ("let kt = 8; let a = kt + 1; let b = instance() / a;", "i64"),  # through `a`
        ("let kt = 2 * 4; let n: i32 = kt;", "i32"),  # a declared let
        ("let kt = 8; let s = small(kt);", "i8"),  # a callee's parameter
        ("let kt = 8; let y = kt;", "i32"),  # no use says: the default
        ("let kt = 8; for i in 0..kt { let t = tiles[i]; }", "i64"),  # via the loop variable
    ],
)
def test_uses_that_decide(body, want):
    text = (
        "fn small(v: i8) -> i8 on Topology::TensorCore { return v; }\n"
        f"fn k(tiles: &Vec<{TILE}>) -> void on Topology::TensorCore {{ {body} }}\n"
    )
    codes, types = _types(text)
    assert [c for c, _ in codes if c.startswith("E02")] == []
    assert types["kt"] == want


def test_a_returned_literal_takes_the_return_type():
    codes, types = _types("fn k() -> i64 on Topology::TensorCore { let n = 3; return n; }")
    assert codes == [] and types["n"] == "i64"


def test_shadowing_is_respected():
    # The inner `kt` is the one divided; the outer one stays i32 (its only use is i32).
    text = (
        "fn k(m: i32) -> i64 on Topology::TensorCore {\n"
        "  let kt = 8;\n  let a = m + kt;\n  let kt = 4;\n  return instance() / kt;\n}\n"
    )
    codes, types = _types(text)
    assert codes == []
    kts = [
        v.ty.show()
        for v in api.analyze([api.Source("t.vx", text.encode())])
        .program.functions["k"]
        .vars.values()
        if v.name == "kt"
    ]
    assert kts == ["i32", "i64"] and types["a"] == "i32"


def test_disagreeing_uses_get_one_error_naming_the_annotation():
    text = (
        "fn k(n: i32) -> i64 on Topology::TensorCore {\n"
        "  let kt = 8;\n  let a: i32 = n + kt;\n  let b = instance() / kt;\n  return b;\n}\n"
    )
    analysis = api.analyze([api.Source("t.vx", text.encode())])
    errors = [d for d in analysis.diagnostics if d.severity == "error"]
    assert [(d.code, d.span.line) for d in errors] == [("E0201", 4)]
    assert "`let kt: i64 = ...;`" in errors[0].help
    assert "line 2" in errors[0].help
