"""Incremental checking of one open document: what `vxc lsp` runs on every keystroke.

A cold `vxc.api.check` of a 10 000-line document takes seconds, most of it parsing. The
editor needs milliseconds, so the document is cut into *items* at top-level `fn`,
`extern fn`, `Memory` and `Topology` lines (brace depth 0, outside comments), and the
function items into *components*: two functions are in one component when either
names the other (a call, or the same name twice). A function's front half and checks
depend only on its component and the document's declarations (typecheck checks a
helper per call site, so callers and callees both count), so each component is checked
on its own, as a source of just its declarations and functions, one after the other.
Its results are then moved item by item to the lines the items have in the document
(spans, and the "line N" / "at FILE:N" in messages and notes).

Per keystroke the work follows the edit, not the document: the lines before and after
the edit that are unchanged (found by identity, as the server edits its copy in place:
document.py) keep their items, only the edited lines are cut again, and each component
is looked up among the document's own units of the previous version (a table as big
as the document, so no cache size to fall off: a fixed-size LRU of 4 096 entries made
every keystroke in a 4 200-function document a full re-check). Units that recent
versions dropped are kept too, as many as the document has had at most: an edit typed
back or undone finds them, and so does the `}` that closes a `{` which, while open,
made the rest of the document one item.

The merged result is what `vxc check` reports for the whole document (tests compare
them): a syntax error anywhere is the only diagnostic (the first one, as the parser
stops there); otherwise a front-half error anywhere that stops `check_target`
(`Analysis.checkable`) suppresses every target check; otherwise the union of every
component's checked diagnostics.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import cached_property

from vxc import api
from vxc.diagnostics import Diagnostic, Span
from vxc.hir import nodes as H
from vxc.hir.types import Type
from vxc.lsp.document import as_saved, split_lines

# Comments and braces decide where items start; an item starts at a line whose first
# word is one of the item keywords, at brace depth 0.
_ITEM_START = re.compile(r"[ \t]*(?:extern[ \t]+)?fn\b|[ \t]*(?:Memory|Topology)\b")
_COMMENT_OR_BRACE = re.compile(r"//|/\*|\*/|[{}]")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_FN_NAME = re.compile(r"\bfn\s+([A-Za-z_]\w*)")
_TRIVIA = re.compile(r"\s+|//[^\n]*|/\*[\s\S]*?\*/")
_LINE_REF = re.compile(r"\bline (\d+)\b")

RECENT_UNITS = 256  # dropped units kept at least, for a document that had fewer


@dataclass(frozen=True)
class Item:
    """Whole lines of the document: one or more top-level items, or leading text."""

    line: int  # 1-based first line
    text: str  # its lines, each with its newline
    kind: str  # "fn" | "decl" (Memory/Topology and leading text, part of every component)
    name: str = ""  # the function's name
    nlines: int = 0
    idents: frozenset[str] = frozenset()  # the names it mentions (components link by them)


# ---- cutting lines into items ---------------------------------------------------------
def _starts(lines: list[str], lo: int, hi: int) -> tuple[list[int], bool]:
    """Line indices in [lo, hi) where items start (lo always does), and whether the scan
    ends at brace depth 0 outside a comment (where the next item may start)."""
    starts = [lo]
    depth, in_comment = 0, False
    for n in range(lo, hi):
        line = lines[n]
        if n > lo and depth == 0 and not in_comment and _ITEM_START.match(line):
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
    return starts, depth == 0 and not in_comment


def _items(lines: list[str], bounds: list[int], leading: bool) -> list[Item]:
    """Items of the line ranges between successive `bounds`; `leading`: the first range
    is the document's first, which may be leading text instead of an item."""
    items: list[Item] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        chunk = "".join(lines[a:b])
        if not chunk:
            continue
        if not (leading and a == bounds[0]) or _ITEM_START.match(chunk):
            m = _FN_NAME.match(chunk.lstrip().removeprefix("extern").lstrip())
            kind, name = ("fn", m.group(1)) if m else ("decl", "")
        else:  # leading text: comments only, or something the parser must see
            kind, name = ("trivia" if not _TRIVIA.sub("", chunk) else "decl"), ""
        if kind != "trivia":
            items.append(Item(a + 1, chunk, kind, name, b - a, frozenset(_IDENT.findall(chunk))))
    return items


def _lines_from(text_or_lines) -> list[str]:
    """The document's lines (a copy: the server edits its own in place), without the
    empty one after a final newline."""
    lines = split_lines(text_or_lines) if isinstance(text_or_lines, str) else list(text_or_lines)
    if lines and not lines[-1]:
        lines.pop()
    return lines


def split_items(text: str) -> list[Item]:
    return split_items_lines(_lines_from(text))


def _common(a: list[str], b: list[str], reverse: bool = False) -> int:
    """How many lines `a` and `b` share at their start (end with `reverse`): doubling,
    then halving, comparing only the window not yet known equal (C speed, identity
    first), so the cost is that of the shared lines once or twice."""
    n = min(len(a), len(b))

    def same(k0: int, k: int) -> bool:  # lines k0..k (from the end with reverse) agree
        if reverse:
            return a[len(a) - k : len(a) - k0] == b[len(b) - k : len(b) - k0]
        return a[k0:k] == b[k0:k]

    lo, step = 0, 64
    while lo + step <= n and same(lo, lo + step):
        lo, step = lo + step, step * 2
    hi = min(n, lo + step)
    while lo < hi:  # the first lo lines agree; the first hi + 1 may not
        mid = (lo + hi + 1) // 2
        if same(lo, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class Edit:
    """How a version's items differ from the last one's: items [0, head) are the same
    (and where they were), the last version's items [head, head + old) were replaced by
    items [head, head + new), and the ones after are the same, `lines` lines lower."""

    head: int
    old: int
    new: int
    lines: int

    @property
    def tail(self) -> int:
        """The first unchanged item after the edit, in the new version."""
        return self.head + self.new


def resplit(old_lines: list[str], old: list[Item], lines: list[str]) -> tuple[list[Item], Edit]:
    """The items of `lines`, reusing those of `old` (the items of `old_lines`) that lie in
    lines the edit left alone: only the edited lines are cut again."""
    if not old:
        items = split_items_lines(lines)
        return items, Edit(0, 0, len(items), len(lines) - len(old_lines))
    prefix = _common(old_lines, lines)
    suffix = _common(old_lines, lines, reverse=True)
    suffix = min(suffix, len(old_lines) - prefix, len(lines) - prefix)
    delta = len(lines) - len(old_lines)
    # An item is kept before the edit if the line after it (where the next one starts)
    # is unchanged too; after the edit, if all of it is.
    head = [it for it in old if it.line - 1 + it.nlines < prefix]
    tail_from = len(old_lines) - suffix
    tail = [it for it in old if it.line - 1 >= tail_from] if suffix else []
    lo = head[-1].line - 1 + head[-1].nlines if head else 0
    hi = tail[0].line - 1 + delta if tail else len(lines)
    starts, closed = _starts(lines, lo, hi)
    if tail and not closed:
        tail, hi = [], len(lines)  # an open brace or comment runs into the tail: cut it too
        starts, _ = _starts(lines, lo, hi)
    middle = _items(lines, [*starts, hi], leading=not head)
    if delta:
        tail = [
            Item(it.line + delta, it.text, it.kind, it.name, it.nlines, it.idents) for it in tail
        ]
    edit = Edit(len(head), len(old) - len(head) - len(tail), len(middle), delta)
    return head + middle + tail, edit


def split_items_lines(lines: list[str]) -> list[Item]:
    starts, _ = _starts(lines, 0, len(lines))
    return _items(lines, [*starts, len(lines)], leading=True)


@dataclass
class Components:
    """The function items grouped: linked when one names the other."""

    groups: list[list[int]]  # item indices, each group ascending, groups by first index
    names: frozenset[str]  # every function's name

    @staticmethod
    def of(items: list[Item]) -> Components:
        fns = [i for i, it in enumerate(items) if it.kind == "fn"]
        return Components(_group(items, fns), frozenset(items[i].name for i in fns))

    def regroup(
        self, old: list[Item], items: list[Item], edit: Edit
    ) -> tuple[Components, list[int | None]] | None:
        """The groups of `items` after an edit that replaced functions one for one but
        changed the names they have or name: only the groups that have or name a changed
        name are grouped again (any other link is as it was). Returns the groups and,
        per group, the index of the same group here (None: grouped again); None when
        the edit is not of that kind."""
        mid = range(edit.head, edit.tail)
        if edit.old != edit.new or not self.groups:
            return None
        if any(old[i].kind != "fn" or items[i].kind != "fn" for i in mid):
            return None
        names = frozenset(it.name for it in items if it.kind == "fn")
        changed: set[str] = set()
        for i in mid:
            changed |= {old[i].name, items[i].name}
            changed |= (old[i].idents & self.names) | (items[i].idents & names)
        of = self.group_of
        hit = {of[i] for i in mid}
        hit |= {
            of[i]
            for i, it in enumerate(items)
            if i in of and (it.name in changed or not it.idents.isdisjoint(changed))
        }
        again = _group(items, sorted(i for g in hit for i in self.groups[g]))
        kept = [(comp, g) for g, comp in enumerate(self.groups) if g not in hit]
        pairs = sorted(kept + [(comp, None) for comp in again], key=lambda p: p[0][0])
        return Components([c for c, _ in pairs], names), [g for _, g in pairs]

    @cached_property
    def group_of(self) -> dict[int, int]:
        """Item index -> its group's index."""
        return {i: g for g, comp in enumerate(self.groups) for i in comp}

    def links(self, it: Item) -> tuple[str, str, frozenset[str]]:
        """What decides an item's place in the groups."""
        return it.kind, it.name, it.idents & self.names

    def still(self, old: list[Item], items: list[Item], edit: Edit) -> bool:
        """Whether these groups (of `old`) are the groups of `items` too: the edit replaced
        items one for one, each naming the same functions as the one it replaced."""
        return edit.old == edit.new and all(
            self.links(old[i]) == self.links(items[i]) for i in range(edit.head, edit.tail)
        )


def _group(items: list[Item], fns: list[int]) -> list[list[int]]:
    """The function items `fns` grouped (union-find): linked when one names the other."""
    parent = {i: i for i in fns}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_name: dict[str, list[int]] = {}
    for i in fns:
        by_name.setdefault(items[i].name, []).append(i)
    names = frozenset(by_name)  # a set: `idents & names` walks the item's few names
    for i in fns:
        for name in items[i].idents & names:
            same = by_name[name]
            if len(same) == 1 and same[0] == i:
                continue  # its own name: most functions name no other
            for j in same:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in fns:
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


def components(items: list[Item]) -> list[list[int]]:
    """Indices of function items, grouped: linked when one names the other."""
    return Components.of(items).groups


# ---- units: a component checked on its own --------------------------------------------
@dataclass
class Unit:
    """One component checked with the document's declarations, as a source of just those
    items, one after the other. `ranges` are the [first, last] lines its items
    (declarations and functions, in document order) have in that source; the results
    are moved item by item to where the items are in the document (`mover`)."""

    path: str
    ranges: list[tuple[int, int]]
    analysis: api.Analysis
    checked: api.Checked | None  # None when the front half failed to parse
    placed: Placed | None = field(default=None, repr=False)  # where it was last placed
    # What the target's backend refuses of it (api.lowering_refusals); None until it is
    # lowered, which the server does after a save (lowering costs more than a keystroke).
    refusals: list[Diagnostic] | None = field(default=None, repr=False)

    @property
    def lowerable(self) -> bool:
        """Checked clean and not lowered yet."""
        return self.refusals is None and self.checked is not None and self.checked.ok

    def lower(self) -> None:
        self.refusals = api.lowering_refusals(self.checked, whole_program=False)

    @cached_property
    def parsed(self) -> bool:
        return self.analysis.program is not None

    @cached_property
    def checkable(self) -> bool:
        return self.analysis.checkable

    @cached_property
    def loud(self) -> bool:
        """Whether it counts in the merged result (a silent unit adds nothing to it)."""
        return bool(
            not self.parsed
            or not self.checkable
            or self.analysis.diagnostics
            or self.checked.diagnostics
        )

    def mover(self, starts: list[int]):
        """Unit line -> document line, for items that now start at `starts` (None: none
        moved). Lines past the last item (the end of input) move with it."""
        table = [(a, b, new - a) for (a, b), new in zip(self.ranges, starts, strict=True)]
        if not any(d for _, _, d in table):
            return None
        a, _, d = table[-1]
        return _piecewise([*table[:-1], (a, 1 << 62, d)])

    def unmover(self, starts: list[int]):
        """Document line -> unit line: the inverse of `mover`."""
        table = [
            (new, new + b - a, a - new) for (a, b), new in zip(self.ranges, starts, strict=True)
        ]
        return _piecewise(table)

    def place(self, starts: tuple[int, ...], members: list[int]) -> Placed:
        """The unit at `starts`, reusing the last placement (and its moved diagnostics)
        when its items have not moved since."""
        if self.placed is None or self.placed.starts != starts:
            self.placed = Placed(members, self, starts)
        elif self.placed.items != members:
            self.placed = replace(self.placed, items=members)
        return self.placed


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
    """A unit as it sits in the current version of the document. Its line maps are
    made when first needed: after a line is inserted, every unit below moves, and most
    have no diagnostic to move."""

    items: list[int]  # indices into DocumentResult.items: declarations and functions
    unit: Unit
    starts: tuple[int, ...]  # the document lines its items start at
    _moved: dict[bool | str, list[Diagnostic]] = field(default_factory=dict, repr=False)

    @cached_property
    def move(self):
        """Unit line -> document line, or None when nothing moved."""
        return self.unit.mover(list(self.starts))

    @cached_property
    def unmove(self):
        return self.unit.unmover(list(self.starts))

    def diagnostics(self, checked: bool) -> list[Diagnostic]:
        """The unit's diagnostics (the target checks', or the front half's) in document
        lines, moved once per placement."""
        if checked not in self._moved:
            u = self.unit
            src = u.checked.diagnostics if checked else u.analysis.diagnostics
            self._moved[checked] = [_shift(x, self.move, u.path) for x in src] if src else []
        return self._moved[checked]

    def refusals(self) -> list[Diagnostic]:
        """The backend's refusals of the unit, in document lines (none until lowered)."""
        src = self.unit.refusals
        if not src:
            return []
        if "refusals" not in self._moved:
            self._moved["refusals"] = [_shift(x, self.move, self.unit.path) for x in src]
        return self._moved["refusals"]


_UNKNOWN_FN = re.compile(r"cannot find function `([^`]+)`")


def _document_help(diags: list[Diagnostic], fn_names: frozenset[str]) -> list[Diagnostic]:
    """A group is checked without the functions it does not name, so its "did you mean"
    for an unknown function saw only its own: the help is taken again over every function
    of the document, as `vxc check` of the whole file takes it."""
    from vxc.diagnostics.suggest import did_you_mean
    from vxc.hir.typecheck import CALL_KEYWORDS, INTRINSICS

    out = []
    for d in diags:
        m = _UNKNOWN_FN.fullmatch(d.message) if d.code == "E0203" else None
        if m:
            names = [*fn_names, *INTRINSICS, *CALL_KEYWORDS]
            d = dataclasses.replace(d, help=did_you_mean(m.group(1), names))
        out.append(d)
    return out


@dataclass
class DocumentResult:
    diagnostics: list[Diagnostic]
    items: list[Item]
    units: list[Placed] = field(default_factory=list)
    rechecked: int = 0  # components checked (not found in the cache) for this version


@dataclass
class _Version:
    """What the checker keeps of a document's last version: per group of `comps`, its
    unit's key, the unit, and where it was placed."""

    lines: list[str]
    items: list[Item]
    comps: Components
    decls: list[int]  # the declarations' item indices
    keys: list[tuple]
    units: list[Unit]
    placed: list[Placed]
    loud: list[int]  # the groups whose unit has diagnostics or did not get through

    @cached_property
    def by_key(self) -> dict[tuple, Unit]:
        return dict(zip(self.keys, self.units, strict=True))


class IncrementalChecker:
    """Checks successive versions of documents for one target, reusing unchanged components."""

    def __init__(self, target: str = "cpu", recent_units: int = RECENT_UNITS):
        if target not in api.TARGETS:
            raise api.Unsupported(f"unknown target `{target}` (targets: {', '.join(api.TARGETS)})")
        self.target = target
        self.versions: dict[str, _Version] = {}
        self.spare: dict[str, OrderedDict[tuple, Unit]] = {}  # per document: dropped units
        self.peak: dict[str, int] = {}  # per document: the most units a version had
        self.recent_units = recent_units

    def forget(self, path: str) -> None:
        """The document was closed."""
        for table in (self.versions, self.spare, self.peak):
            table.pop(path, None)

    def check(self, path: str, text) -> DocumentResult:
        """Check `text` (a str, or the document's lines as document.py keeps them)."""
        lines = _lines_from(text)
        last = self.versions.get(path)
        same = regrouped = None
        if last is None:
            items, edit = split_items_lines(lines), None
            comps = Components.of(items)
        else:
            items, edit = resplit(last.lines, last.items, lines)
            same = last.comps.still(last.items, items, edit)
            regrouped = None if same else last.comps.regroup(last.items, items, edit)
            if same:
                comps = last.comps
            elif regrouped:
                comps, old_of = regrouped
            else:
                comps = Components.of(items)
        if last is not None and (same or regrouped):  # replaced one for one, same kinds
            decls = last.decls
        else:
            decls = [i for i, it in enumerate(items) if it.kind == "decl"]
        edited = self._edited(last, comps, edit, decls)
        if last is not None:
            self.peak[path] = max(self.peak.get(path, 0), len(last.units))
        result = DocumentResult([], items)
        if last is not None and regrouped:
            version = self._mapped(path, lines, items, comps, decls, last, edit, old_of, result)
        else:
            version = (self._all if edited is None else self._some)(
                path, lines, items, comps, decls, last, edit, edited, result
            )
        self.versions[path] = version
        result.units = version.placed
        result.diagnostics = self.diagnostics(path)
        return result

    def diagnostics(self, path: str) -> list[Diagnostic]:
        """The current version's diagnostics: the checks' (as `vxc check` of the whole
        document reports them), then what the backend refuses of the parts lowered so far
        (as `vxc build` of each part would)."""
        v = self.versions[path]
        checked = _document_help(_merge([v.placed[g] for g in v.loud]), v.comps.names)
        refused = {x.sort_key(): x for p in v.placed for x in p.refusals()}
        return checked + [refused[k] for k in sorted(refused)]

    def unlowered(self, path: str) -> list[Unit]:
        """The current version's parts that checked clean and are not lowered yet."""
        v = self.versions.get(path)
        if v is None:
            return []
        out = {id(u): u for u in v.units if u.lowerable}
        return list(out.values())

    def _all(self, path, lines, items, comps, decls, last, edit, edited, result) -> _Version:
        """Every group looked up (or checked) again."""
        by_key = last.by_key if last else {}
        fresh = [
            self._unit(path, items, comp, decls, by_key, result) for comp in comps.groups or [[]]
        ]
        keys, units, placed = (list(x) for x in zip(*fresh, strict=True))
        loud = [g for g, u in enumerate(units) if u.loud]
        version = _Version(lines, items, comps, decls, keys, units, placed, loud)
        for key in last.keys if last else []:
            if key not in version.by_key:
                self._remember(path, key, by_key[key])
        return version

    def _some(self, path, lines, items, comps, decls, last, edit, edited, result) -> _Version:
        """The last version's groups, but for the edited ones and those the edit moved."""
        keys, units, placed = list(last.keys), list(last.units), list(last.placed)
        groups = comps.groups or [[]]
        for g in edited:
            keys[g], units[g], placed[g] = self._unit(path, items, groups[g], decls, {}, result)
            if keys[g] != last.keys[g]:
                self._remember(path, last.keys[g], last.units[g])
        if edit.lines:
            tail = edit.tail
            moved_decl = bool(decls and decls[-1] >= tail)
            for g, comp in enumerate(groups):
                if g not in edited and (moved_decl or (comp and comp[-1] >= tail)):
                    at = placed[g].items
                    placed[g] = units[g].place(tuple(items[i].line for i in at), at)
        loud = sorted({*last.loud, *edited} - {g for g in edited if not units[g].loud})
        return _Version(lines, items, comps, decls, keys, units, placed, loud)

    def _mapped(self, path, lines, items, comps, decls, last, edit, old_of, result) -> _Version:
        """The last version's units for the groups that are as they were (`old_of`: their
        index there), looked up or checked for the others."""
        keys, units, placed = [], [], []
        tail = edit.tail
        moved_decl = bool(edit.lines and decls and decls[-1] >= tail)
        for comp, o in zip(comps.groups, old_of, strict=True):
            if o is None:
                key, unit, at = self._unit(path, items, comp, decls, last.by_key, result)
            else:
                key, unit, at = last.keys[o], last.units[o], last.placed[o]
                if edit.lines and (moved_decl or comp[-1] >= tail):
                    at = unit.place(tuple([items[i].line for i in at.items]), at.items)
            keys.append(key)
            units.append(unit)
            placed.append(at)
        loud = [g for g, u in enumerate(units) if u.loud]
        version = _Version(lines, items, comps, decls, keys, units, placed, loud)
        kept = set(old_of)
        for o, key in enumerate(last.keys):
            if o not in kept and key not in version.by_key:
                self._remember(path, key, last.units[o])
        return version

    def _unit(self, path, items, comp, decls, by_key, result) -> tuple[tuple, Unit, Placed]:
        """A group's key, unit (cached, or checked now) and placement."""
        members = sorted([*comp, *decls]) if decls else comp
        key = (path, self.target, *[items[i].text for i in members])
        unit = by_key.get(key) or self.spare.get(path, {}).pop(key, None)
        if unit is None:
            unit = self._check_unit(path, items, members)
            result.rechecked += 1
        return key, unit, unit.place(tuple([items[i].line for i in members]), members)

    @staticmethod
    def _edited(last: _Version | None, comps: Components, edit: Edit | None, decls) -> set | None:
        """The groups the edit touched, when the groups are the last version's and no
        declaration changed (every unit holds them); None: every group may have."""
        if last is None or comps is not last.comps:
            return None
        if any(edit.head <= i < edit.tail for i in decls):
            return None
        of = comps.group_of
        return {of[i] for i in range(edit.head, edit.tail) if i in of}

    def _remember(self, path: str, key: tuple, unit: Unit) -> None:
        """Keep a unit a version dropped, the oldest going first once the document's
        spares outnumber the most units it has had (or `recent_units`)."""
        spare = self.spare.setdefault(path, OrderedDict())
        spare[key] = unit
        bound = max(self.recent_units, self.peak.get(path, 0))
        while len(spare) > bound:
            spare.popitem(last=False)

    def _check_unit(self, path: str, items: list[Item], members: list[int]) -> Unit:
        text = "".join(items[i].text for i in members)
        ranges, line = [], 1
        for i in members:
            ranges.append((line, line + items[i].nlines - 1))
            line += items[i].nlines
        try:
            data = text.encode()
        except UnicodeEncodeError:  # a lone surrogate: checked as an editor saves it
            data = as_saved(text).encode()
        analysis = api.analyze([api.Source(path, data)])
        checked = api.check_target(analysis, self.target) if analysis.program else None
        return Unit(path, ranges, analysis, checked)


def _merge(units: list[Placed]) -> list[Diagnostic]:
    """The whole document's diagnostics, as `vxc check` would report them, from its
    loud units (the others have no diagnostics and let every check run)."""
    failed = [p for p in units if not p.unit.parsed]
    if failed:
        diags = [x for p in failed for x in p.diagnostics(checked=False)]
        return [min(diags, key=Diagnostic.sort_key)] if diags else []
    front_ok = all(p.unit.checkable for p in units)  # check_target's own gate
    out: dict[tuple, Diagnostic] = {}
    for p in units:
        for x in p.diagnostics(checked=front_ok):
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
