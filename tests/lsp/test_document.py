"""The server's copy of a document (document.py): edits in the client's units, and
positions outside the document clamped as LSP says, with a note for the client."""

from __future__ import annotations

import pytest

from vxc.lsp.document import Document, as_saved


@pytest.mark.parametrize(("encoding", "col"), [("utf-16", 5), ("utf-8", 7), ("utf-32", 4)])
def test_columns_are_the_clients_units(encoding: str, col: int):
    # x="😋" : the closing quote is at 5 UTF-16 units, 7 UTF-8 bytes, 4 code points.
    doc = Document.of("u", 1, 'x="😋"\nnext\n', encoding)
    assert doc.apply((0, col), (0, col + 1), "'") == []
    assert doc.text == "x=\"😋'\nnext\n"


def test_edits_replace_only_the_lines_they_touch():
    doc = Document.of("u", 1, "a\nb\nc\n")
    before = list(doc.lines)
    assert doc.apply((1, 0), (1, 1), "B1\nB2") == []
    assert doc.lines == ["a\n", "B1\n", "B2\n", "c\n", ""]
    assert doc.lines[0] is before[0] and doc.lines[3] is before[2]
    doc.apply((0, 1), (3, 0), "")  # joins lines
    assert doc.text == "ac\n"


def test_out_of_range_positions_are_clamped_and_said():
    doc = Document.of("u", 1, "ab\r\ncd")
    (note,) = doc.apply((0, 9), (0, 9), "!")  # past the line's end: at its end, before \r\n
    assert "character 9 on line 1 is past the end of the line (2 utf-16 units)" in note
    assert doc.text == "ab!\r\ncd"
    (note,) = doc.apply((7, 0), (7, 0), "?")
    assert "line 8 is past the end of the document (2 lines)" in note
    assert doc.text == "ab!\r\ncd?"
    (note,) = doc.apply((1, 2), (1, 0), "")
    assert "ends before it starts" in note and doc.text == "ab!\r\n?"


def test_lone_surrogates_become_the_replacement_character():
    assert as_saved("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert as_saved("😀") == "😀"
    doc = Document.of("u", 1, "x\ud83d")
    doc.apply((0, 0), (0, 0), "\udc00")
    assert doc.text == "\ufffdx\ufffd"
