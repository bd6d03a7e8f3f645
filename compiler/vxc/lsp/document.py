"""The server's copy of an open document: its lines, edited in place per keystroke.

Lines end at "\\n" (the compiler's lexer counts lines the same way), each keeping its
end. An edit replaces only the lines it touches, so unchanged lines stay the same
string objects and the checker (incremental.py) finds the unchanged items by identity
instead of rereading the document.

Positions arrive in the client's units (UTF-16 unless the client chose another
encoding). One outside the document is clamped as LSP says ("if the character value
is greater than the line length it defaults back to the line length"; a line past the
end means the document's end) and `apply` says so, for the server to tell the client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SURROGATE = re.compile("[\ud800-\udfff]")


def as_saved(text: str) -> str:
    """`text` as an editor writes it to disk: a lone surrogate (a JSON `\\ud800` with no
    pair, which no UTF-8 file can hold) becomes U+FFFD, one character for one."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def split_lines(text: str) -> list[str]:
    """Lines with their "\\n"; the last one has none (it is "" after a final newline)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def client_units(s: str, encoding: str) -> int:
    if encoding == "utf-32" or s.isascii():
        return len(s)
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _index(content: str, units: int, encoding: str) -> int:
    """The code-point index of a client column (`units` <= the line's length in units)."""
    if encoding == "utf-32" or content.isascii():
        return units
    seen = 0
    for i, c in enumerate(content):
        if seen >= units:
            return i
        seen += client_units(c, encoding)
    return len(content)


def line_content(line: str) -> str:
    """A line without its end ("\\n" or "\\r\\n")."""
    line = line.removesuffix("\n")
    return line.removesuffix("\r")


@dataclass
class Document:
    uri: str
    version: int
    lines: list[str]
    encoding: str = "utf-16"
    _text: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, uri: str, version: int, text: str, encoding: str = "utf-16") -> Document:
        text = as_saved(text)
        return cls(uri, version, split_lines(text), encoding, text)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self.lines)
        return self._text

    def offset(self, line: int, character: int) -> tuple[int, int, str | None]:
        """(line, code-point column) of a client position, clamped into the document,
        and what was clamped (None when the position is in the document)."""
        last = len(self.lines) - 1
        if line > last:
            end = len(line_content(self.lines[last]))
            return last, end, f"line {line + 1} is past the end of the document ({last + 1} lines)"
        content = line_content(self.lines[line])
        width = client_units(content, self.encoding)
        if character > width:
            return (
                line,
                len(content),
                f"character {character} on line {line + 1} is past the end of the line "
                f"({width} {self.encoding} units)",
            )
        return line, _index(content, character, self.encoding), None

    def replace_all(self, text: str) -> None:
        text = as_saved(text)
        self.lines, self._text = split_lines(text), text

    def apply(self, start: tuple[int, int], end: tuple[int, int], text: str) -> list[str]:
        """Replace the range [start, end) (client positions) by `text`; returns what was
        clamped or reversed, for the client to be told (empty when the edit fit)."""
        notes = []
        a_line, a_col, note = self.offset(*start)
        notes += [note] if note else []
        b_line, b_col, note = self.offset(*end)
        notes += [note] if note else []
        if (b_line, b_col) < (a_line, a_col):
            notes.append(
                f"the range ends before it starts (line {end[0] + 1}, character {end[1]} is "
                f"before line {start[0] + 1}, character {start[1]}); its span was replaced"
            )
            (a_line, a_col), (b_line, b_col) = (b_line, b_col), (a_line, a_col)
        head = self.lines[a_line][:a_col]
        tail = self.lines[b_line][b_col:]
        new = split_lines(head + as_saved(text) + tail)
        if b_line < len(self.lines) - 1:
            new.pop()  # `tail` kept its "\n": the "" after it is the next line's business
        self.lines[a_line : b_line + 1] = new
        self._text = None
        return list(dict.fromkeys(notes))  # an empty range clamped once, told once
