"""The LSP's incremental checker reports exactly what `vxc check` reports for the whole
document: on every golden case and kernel, and on edits of them (a line inserted or
deleted, a token removed), with the cache warm from the previous version."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from vxc import api
from vxc.lsp.incremental import IncrementalChecker, components, split_items, symbol_at

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "tests/golden/cases").glob("*.vx")) + sorted((ROOT / "kernels").glob("*.vx"))
TARGET = re.compile(r"^// target: (\w+)")


def _target(text: str) -> str:
    m = TARGET.match(text)
    return m.group(1) if m else "cpu"


def _full(path: str, text: str, target: str):
    return api.check([api.Source(path, text.encode())], target).diagnostics


def _edits(text: str, rng: random.Random):
    """A few edits a person makes: a blank line inserted, a line deleted, a `;` dropped,
    a wait removed, and the original back."""
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    yield "\n".join(lines[:k] + [""] + lines[k:])
    yield "\n".join(lines[:k] + lines[k + 1 :])
    if ";" in text:
        i = rng.choice([m.start() for m in re.finditer(";", text)])
        yield text[:i] + text[i + 1 :]
    yield text.replace("wait(", "(", 1)
    yield text


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_same_diagnostics_as_vxc_check(path: Path):
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        pytest.skip("an editor's document is text; the non-UTF-8 case has no LSP form")
    target = _target(text)
    checker = IncrementalChecker(target)
    rng = random.Random(path.name)
    for version in [text, *_edits(text, rng)]:
        got = checker.check(path.name, version).diagnostics
        assert got == _full(path.name, version, target), version


def _many(n: int) -> str:
    body = (ROOT / "kernels/stream.vx").read_text()
    body = body[body.index("fn stream") :]
    return "\n".join(body.replace("fn stream(", f"fn stream{i}(") for i in range(n))


def test_an_edit_rechecks_one_component_and_moved_ones_keep_their_results():
    text = _many(12)
    checker = IncrementalChecker()
    first = checker.check("many.vx", text)
    assert first.rechecked == 12 and first.diagnostics == []
    lines = text.split("\n")
    k = max(i for i, line in enumerate(lines) if "let last = wait(inflight);" in line)
    lines[k] = lines[k].replace("wait(inflight)", "inflight")
    edited = "\n".join(lines)
    r = checker.check("many.vx", edited)
    assert r.rechecked == 1
    assert sorted(d.code for d in r.diagnostics) == ["E6004", "E6011"]
    # Three lines inserted at the top move every function: nothing is re-checked, and
    # the line numbers (span and the note's "line N") move with them.
    moved = "// a\n// b\nfn extra() {}\n" + edited
    r2 = checker.check("many.vx", moved)
    assert r2.rechecked == 1  # only the new function
    assert r2.diagnostics == _full("many.vx", moved, "cpu")
    assert [d.span.line for d in r2.diagnostics] == [d.span.line + 3 for d in r.diagnostics]


def test_items_and_components():
    text = (
        "// leading comment\n"
        "Memory X { alias: Memory::VMEM }\n"
        "fn helper(t: &Tensor<f32, [8]>) -> Tensor<f32, [8]> { return transfer(t, Memory::VMEM); }\n"
        "/* fn not_an_item() { */\n"
        "fn a(t: &Tensor<f32, [8]>) -> Tensor<f32, [8]> {\n"
        "  return helper(t);\n"
        "}\n"
        "extern fn b(t: &Tensor<f32, [8]>) -> Tensor<f32, [8]>;\n"
    )
    items = split_items(text)
    assert [(it.line, it.kind, it.name) for it in items] == [
        (2, "decl", ""),
        (3, "fn", "helper"),
        (5, "fn", "a"),
        (8, "fn", "b"),
    ]
    assert components(items) == [[1, 2], [3]]


def test_hover_types_follow_the_target():
    text = (ROOT / "kernels/stream.vx").read_text()
    lines = text.split("\n")

    def at(word: str, target: str):
        n = next(
            i for i, line in enumerate(lines) if f"let {word} " in line or f"mut {word} " in line
        )
        col = lines[n].index(word) + 1
        return symbol_at(IncrementalChecker(target).check("stream.vx", text), n + 1, col)

    assert at("wv", "cpu").text == "let wv: Tensor<f32, [128, 128]> @ VMEM"
    assert at("inflight", "cpu").text == (
        "let mut inflight: Token<Tensor<f32, [128, 128]>, Memory::VMEM>"
    )
    assert "Memory::ACC is Memory::TMEM on this target" in at("acc", "b200").text
    assert "Memory::ACC is Memory::VMEM on this target" in at("acc", "cpu").text


def test_more_components_than_the_cache_holds_recheck_one_per_keystroke():
    """The cache of units dropped by earlier versions is small (here 16 entries); a
    document's own units are kept whatever its size. With one LRU for both, a document
    of more components than it held re-checked all of them on every keystroke."""
    text = _many(40)
    checker = IncrementalChecker("cpu", 16)
    assert checker.check("many.vx", text).rechecked == 40
    edited = text.replace("fn stream7(", "fn stream7x(", 1)
    assert checker.check("many.vx", edited).rechecked == 1
    assert checker.check("many.vx", text).rechecked == 0  # typed back: a recent unit
    assert checker.check("many.vx", "// top\n" + text).rechecked == 0  # all moved down


_EDIT_TEXTS = ["{", "}", "/*", "*/", "//", "\n", "fn g() {}\n", "Memory M { }\n", "x", ""]


@pytest.mark.parametrize("seed", range(12))
def test_items_of_an_edited_document_are_its_items(seed: int):
    """Cutting only the edited lines gives the items that cutting the whole document
    does, through random edits that open and close braces and comments, add items and
    join lines; and the checker's diagnostics stay those of `vxc check`."""
    rng = random.Random(seed)
    text = _many(3) + "\nMemory X { alias: Memory::VMEM }\n" + _many(2).replace("stream", "s")
    checker = IncrementalChecker()
    checker.check("e.vx", text)
    for _ in range(12):
        a = rng.randrange(len(text) + 1)
        b = min(len(text), a + rng.choice([0, 0, 1, 5, 40]))
        text = text[:a] + rng.choice(_EDIT_TEXTS) + text[b:]
        r = checker.check("e.vx", text)
        assert r.items == split_items(text)
        assert r.diagnostics == _full("e.vx", text, "cpu"), text


def test_a_brace_opened_and_closed_rechecks_nothing_it_swallowed():
    """An unclosed `{` makes the rest of the document one item (as for the parser); the
    `}` that closes it brings the functions back, and their units with them: they were
    kept (as many as the document had), not re-checked."""
    text = _many(30)
    checker = IncrementalChecker("cpu", 4)
    checker.check("b.vx", text)
    at = text.index("fn stream10(")
    body = text.index("{\n", at) + 2
    opened = text[:body] + "{\n" + text[body:]
    r = checker.check("b.vx", opened)
    assert len(r.items) == 11 and [d.code for d in r.diagnostics] == ["E0002"]
    closed = text[:body] + "{ }\n" + text[body:]
    r = checker.check("b.vx", closed)
    assert len(r.items) == 30 and r.rechecked == 1  # stream10 itself
    assert r.diagnostics == _full("b.vx", closed, "cpu")
