"""Incremental checking of one open document: what `vxc lsp` runs on every keystroke.

A cold `vxc.api.check` of a 10 000-line document takes seconds, most of it parsing. The
editor needs milliseconds, so the document is cut into *items* at top-level `fn`,
`extern fn`, `Memory` and `Topology` lines (brace depth 0, outside comments), and the
function items into *components*: two functions are in one component when either
names the other (a call, or the same name twice). A function's front half and checks
depend only on its component and the document's declarations (typecheck checks a
helper per call site, so callers and callees both count), so each component is checked
on its own, as a source in which every other function's lines are blank: line and
column numbers, and the "at line N" / "at FILE:N" in notes, are the document's own.

Each component's result is cached (a bounded LRU, the worker's `HirCache`) under its
text, the line offsets between its items, and the declarations. A keystroke changes
one item, so one component is re-checked; an inserted line moves the components below
it, whose cached results are reused with their lines shifted.

The merged result is what `vxc check` reports for the whole document (tests compare
them): a syntax error anywhere is the only diagnostic (the first one, as the parser
stops there); otherwise a front-half error anywhere that stops `check_target`
(`Analysis.checkable`) suppresses every target check; otherwise the union of every component's checked diagnostics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from vxc import api
from vxc.diagnostics import Diagnostic, Span
from vxc.hir import nodes as H
from vxc.hir.types import Type
from vxc.lsp.document import as_saved
from vxc.worker.action import HirCache

# Comments and braces decide where items start; an item starts at a line whose first
# word is one of the item keywords, at brace depth 0.
_ITEM_START = re.compile(r"[ \t]*(?:extern[ \t]+)?fn\b|[ \t]*(?:Memory|Topology)\b")
_COMMENT_OR_BRACE = re.compile(r"//|/\*|\*/|[{}]")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_FN_NAME = re.compile(r"\bfn\s+([A-Za-z_]\w*)")
_TRIVIA = re.compile(r"\s+|//[^\n]*|/\*[\s\S]*?\*/")
_LINE_REF = re.compile(r"\bline (\d+)\b")


@dataclass(frozen=True)
class Item:
    """Whole lines of the document: one or more top-level items, or leading text."""

    line: int  # 1-based first line
    text: str  # its lines, each with its newline
    kind: str  # "fn" | "decl" (Memory/Topology and leading text, part of every component)
    name: str = ""  # the function's name

    @property
    def nlines(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") else 1)


def split_items(text: str) -> list[Item]:
    lines = text.splitlines(keepends=True)
    starts = [0]  # line indices where items start
    depth, in_comment = 0, False
    for n, line in enumerate(lines):
        if n and depth == 0 and not in_comment and _ITEM_START.match(line):
            starts.append(n)
        if "/" not in line and not in_comment:  # the common case: no comment on the line
            depth += line.count("{") - line.count("}")
            continue
        for m in _COMMENT_OR_BRACE.finditer(line):
            tok = m.group()
            if in_comment:
                in_comment = tok != "*/"
            elif tok == "//":
                break
            elif tok == "/*":
                in_comment = True
            elif tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
    starts.append(len(lines))
    items: list[Item] = []
    for a, b in zip(starts, starts[1:], strict=False):
        chunk = "".join(lines[a:b])
        if not chunk:
            continue
        head = chunk.lstrip()
        if items or _ITEM_START.match(chunk):
            m = _FN_NAME.match(head.removeprefix("extern").lstrip())
            kind, name = ("fn", m.group(1)) if m else ("decl", "")
        else:  # leading text: comments only, or something the parser must see
            kind, name = ("trivia" if not _TRIVIA.sub("", chunk) else "decl"), ""
        if kind != "trivia":
            items.append(Item(a + 1, chunk, kind, name))
    return items


@lru_cache(maxsize=16384)
def _idents(text: str) -> frozenset[str]:
    return frozenset(_IDENT.findall(text))


def components(items: list[Item]) -> list[list[int]]:
    """Indices of function items, grouped: linked when one names the other."""
    fns = [i for i, it in enumerate(items) if it.kind == "fn"]
    parent = {i: i for i in fns}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_name: dict[str, list[int]] = {}
    for i in fns:
        by_name.setdefault(items[i].name, []).append(i)
    for i in fns:
        for name in _idents(items[i].text) & by_name.keys():
            for j in by_name[name]:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in fns:
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


@dataclass
class Unit:
    """One component checked with the document's declarations, in a source where every
    other line is blank. `ranges` are the [first, last] lines its items (declarations and
    functions, in document order) had then; reused after lines moved, its line numbers
    are moved item by item (`moves`: old first line -> new first line)."""

    path: str
    ranges: list[tuple[int, int]]
    analysis: api.Analysis
    checked: api.Checked | None  # None when the front half failed to parse

    def mover(self, starts: list[int]):
        """Old line -> new line, for items that now start at `starts` (None: none moved)."""
        table = [(a, b, new - a) for (a, b), new in zip(self.ranges, starts, strict=True)]
        return _piecewise(table) if any(d for _, _, d in table) else None

    def unmover(self, starts: list[int]):
        """New line -> old line: the inverse of `mover`."""
        table = [
            (new, new + b - a, a - new) for (a, b), new in zip(self.ranges, starts, strict=True)
        ]
        return _piecewise(table)


def _piecewise(table: list[tuple[int, int, int]]):
    """A line map: lines in [a, b] move by d, for each (a, b, d); others stay."""

    def move(line: int) -> int:
        for a, b, d in table:
            if a <= line <= b:
                return line + d
        return line

    return move


def _shift(d: Diagnostic, move, path: str) -> Diagnostic:
    if move is None:
        return d

    at_file = re.compile(rf"(?<={re.escape(path)}:)(\d+)")  # "declared at FILE:N"

    def text(s: str) -> str:
        s = _LINE_REF.sub(lambda m: f"line {move(int(m.group(1)))}", s)
        return at_file.sub(lambda m: str(move(int(m.group(1)))), s)

    s = d.span
    if s.file == path:
        s = replace(s, line=move(s.line), end_line=move(s.end_line) if s.end_line else 0)
    return Diagnostic(
        d.code, text(d.message), s, [text(n) for n in d.notes], d.help and text(d.help)
    )


@dataclass
class Placed:
    """A unit as it sits in the current version of the document."""

    items: list[int]  # indices into DocumentResult.items: declarations and functions
    unit: Unit
    move: object  # old line -> new line, or None when nothing moved
    unmove: object


@dataclass
class DocumentResult:
    diagnostics: list[Diagnostic]
    items: list[Item]
    units: list[Placed] = field(default_factory=list)
    rechecked: int = 0  # components checked (not found in the cache) for this version


class IncrementalChecker:
    """Checks successive versions of documents for one target, reusing unchanged components."""

    def __init__(self, target: str = "cpu", cache_entries: int = 4096):
        if target not in api.TARGETS:
            raise api.Unsupported(f"unknown target `{target}` (targets: {', '.join(api.TARGETS)})")
        self.target = target
        self.cache = HirCache(cache_entries)

    def check(self, path: str, text: str) -> DocumentResult:
        items = split_items(text)
        decls = [i for i, it in enumerate(items) if it.kind == "decl"]
        result = DocumentResult([], items)
        for comp in components(items) or [[]]:
            members = sorted(set(comp) | set(decls))
            key = (path, self.target, *(items[i].text for i in members))
            unit = self.cache.get(key)
            if unit is None:
                unit = self._check_unit(path, items, members)
                self.cache.put(key, unit)
                result.rechecked += 1
            starts = [items[i].line for i in members]
            result.units.append(Placed(members, unit, unit.mover(starts), unit.unmover(starts)))
        result.diagnostics = _merge(result.units)
        return result

    def _check_unit(self, path, items, members) -> Unit:
        keep = set(members)
        lead = "\n" * (items[0].line - 1) if items else ""  # comments before the first item
        text = lead + "".join(
            it.text if i in keep else "\n" * it.text.count("\n") for i, it in enumerate(items)
        )
        try:
            data = text.encode()
        except UnicodeEncodeError:  # a lone surrogate: checked as an editor saves it
            data = as_saved(text).encode()
        analysis = api.analyze([api.Source(path, data)])
        checked = api.check_target(analysis, self.target) if analysis.program else None
        ranges = [(items[i].line, items[i].line + items[i].nlines - 1) for i in members]
        return Unit(path, ranges, analysis, checked)


def _merge(units: list[Placed]) -> list[Diagnostic]:
    """The whole document's diagnostics, as `vxc check` would report them."""
    failed = [p for p in units if p.unit.analysis.program is None]
    if failed:
        diags = [
            _shift(x, p.move, p.unit.path) for p in failed for x in p.unit.analysis.diagnostics
        ]
        return [min(diags, key=Diagnostic.sort_key)] if diags else []
    front_ok = all(p.unit.analysis.checkable for p in units)  # check_target's own gate
    out: dict[tuple, Diagnostic] = {}
    for p in units:
        for x in p.unit.checked.diagnostics if front_ok else p.unit.analysis.diagnostics:
            x = _shift(x, p.move, p.unit.path)
            out.setdefault((x.code, x.message, x.span), x)
    return sorted(out.values(), key=Diagnostic.sort_key)


# ---- hover and definitions ------------------------------------------------------------
@dataclass(frozen=True)
class Symbol:
    span: Span  # in document lines
    text: str  # markdown-free: the name and its placed type
    definition: Span | None = None


def _contains(s: Span, line: int, col: int) -> bool:
    end = (s.end_line, s.end_column) if s.end_line else (s.line, s.column + 1)
    return (s.line, s.column) <= (line, col) < end


def _placed(ty: Type, machine) -> str:
    """The placed type, plus the space an alias resolves to on this target."""
    shown = ty.show()
    space = getattr(ty, "space", None)
    canon = machine.space(space) if machine is not None and space else None
    if canon and canon != space:
        shown += f"  (Memory::{space} is Memory::{canon} on this target)"
    return shown


def symbol_at(result: DocumentResult, line: int, col: int) -> Symbol | None:
    """The variable (binding or use) at a 1-based line and column, with its placed type."""
    for p in result.units:
        fn_items = [result.items[i] for i in p.items if result.items[i].kind == "fn"]
        if not any(it.line <= line < it.line + it.nlines for it in fn_items):
            continue
        program = p.unit.analysis.program
        if program is None:
            return None
        machine = p.unit.checked.machine if p.unit.checked else None
        at = p.unmove(line)
        found = []  # (span size, span, var): the innermost wins (a loop's `i` spans the loop)
        for fn in program.functions.values():
            found += [
                (_size(v.span), v.span, v) for v in fn.vars.values() if _contains(v.span, at, col)
            ]
            found += [
                (_size(u.span), u.span, fn.vars[u.vid])
                for u in _names(fn.decl)
                if u.vid in fn.vars and _contains(u.span, at, col)
            ]
        if not found:
            return None
        _, span, hit = min(found, key=lambda f: f[0])
        kind = {"param": "parameter", "for": "loop variable"}.get(hit.kind, "let")
        mut = "mut " if hit.mutable else ""
        text = f"{kind} {mut}{hit.name}: {_placed(hit.ty, machine)}"
        return Symbol(_move(span, p.move), text, _move(hit.span, p.move))
    return None


def _size(s: Span) -> tuple[int, int]:
    return ((s.end_line or s.line) - s.line, (s.end_column or s.column + 1) - s.column)


def _names(decl: H.FnDecl):
    for s in H.walk_stmts(decl.body):
        for x in vars(s).values():
            if isinstance(x, H.Expr):
                for e in H.walk_expr(x):
                    if isinstance(e, H.Name):
                        yield e
    for w in decl.where:
        for e in H.walk_expr(w):
            if isinstance(e, H.Name):
                yield e


def _move(s: Span, move) -> Span:
    if move is None:
        return s
    return replace(s, line=move(s.line), end_line=move(s.end_line) if s.end_line else 0)


_PATH = re.compile(r"\b(Memory|Topology)::([A-Za-z_]\w*)")
_DECL = re.compile(r"^[ \t]*(Memory|Topology)[ \t]+([A-Za-z_]\w*)", re.M)


def path_at(line_text: str, col: int) -> tuple[str, str, int, int] | None:
    """(kind, name, start column, end column) of a `Memory::X`/`Topology::X` at a 1-based
    column, or of the name in a `Memory X {` declaration."""
    for pat in (_PATH, _DECL):
        for m in pat.finditer(line_text):
            if m.start() < col <= m.end():
                return m.group(1), m.group(2), m.start() + 1, m.end() + 1
    return None


def declaration(result: DocumentResult, path: str, kind: str, name: str, target: str):
    """Where `Memory::name`/`Topology::name` is declared: the document's own declaration
    (which replaces the model's), else the target's shipped model. Returns (file, Span,
    the declaration's first line) or None (CPU_DRAM is built in)."""
    for it in reversed(result.items):
        if it.kind != "decl":
            continue
        for m in _DECL.finditer(it.text):
            if (m.group(1), m.group(2)) == (kind, name):
                line = it.line + it.text.count("\n", 0, m.start())
                col = m.start(2) - (it.text.rfind("\n", 0, m.start(2)) + 1) + 1
                first = it.text[m.start() :].split("\n", 1)[0]
                return path, Span(path, line, col, line, col + len(name)), first.strip()
    model_path, data = api.model_source(target)
    text = data.decode()
    for m in _DECL.finditer(text):
        if (m.group(1), m.group(2)) == (kind, name):
            line = text.count("\n", 0, m.start()) + 1
            col = m.start(2) - (text.rfind("\n", 0, m.start(2)) + 1) + 1
            first = text[m.start() :].split("\n", 1)[0]
            return model_path, Span(model_path, line, col, line, col + len(name)), first.strip()
    return None


def function_at(result: DocumentResult, word: str) -> Span | None:
    """The declaration of function `word` in the document (the first one)."""
    for it in result.items:
        if it.kind == "fn" and it.name == word:
            m = re.search(rf"\bfn\s+({re.escape(word)})\b", it.text)
            line = it.line + it.text.count("\n", 0, m.start(1))
            col = m.start(1) - (it.text.rfind("\n", 0, m.start(1)) + 1) + 1
            return Span("", line, col, line, col + len(word))
    return None


def word_at(line_text: str, col: int) -> str | None:
    """The identifier under a 1-based column."""
    for m in _IDENT.finditer(line_text):
        if m.start() < col <= m.end():
            return m.group()
    return None
