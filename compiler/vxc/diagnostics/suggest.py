""" "Did you mean" for a misspelt name (rustc's rule): the closest candidate by edit
distance, a swap of two neighbours counting as one edit (`wiat` -> `wait`, `VMME` ->
`VMEM`), within a third of the name's length (at least one edit, at most MAX_EDITS); a name of one or
two characters gets none (any other short name is "close"), and a candidate that differs
only in case always qualifies. Ties go to the first candidate in sorted order,
so the suggestion does not depend on declaration order."""

from __future__ import annotations

from collections.abc import Iterable

# Edits a suggestion may be away at most, whatever the name's length: a third of a
# 4 000-character name (a fuzzed input) made one lookup 16 M cells and 6 s of CPU.
MAX_EDITS = 8


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and
    transpositions of adjacent characters each cost one. With `limit`, any distance
    above it is `limit + 1`, and only the band of cells within `limit` of the diagonal is
    computed (a cell outside it is more than `limit` edits away): O(len * limit)."""
    far = len(a) + len(b) + 1 if limit is None else limit + 1
    if abs(len(a) - len(b)) >= far:
        return far
    band = max(len(a), len(b)) if limit is None else limit
    prev2: list[int] = []
    prev = [min(j, far) for j in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        cur = [far] * (len(b) + 1)
        cur[0] = min(i, far)
        for j in range(max(1, i - band), min(len(b), i + band) + 1):
            cb = b[j - 1]
            d = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                d = min(d, prev2[j - 2] + 1)
            cur[j] = min(d, far)
        if limit is not None and min(cur) >= far:
            return far  # every alignment is already past the limit
        prev2, prev = prev, cur
    return prev[-1]


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` most likely misspells, or None when none is close."""
    limit = min(max(1, len(name) // 3), MAX_EDITS) if len(name) > 2 else 0
    best: tuple[int, str] | None = None
    for c in sorted(set(candidates)):
        if c == name:
            continue
        d = 0 if c.lower() == name.lower() else edit_distance(name, c, limit)
        if d <= limit and (best is None or d < best[0]):
            best = (d, c)
    return best[1] if best else None


def did_you_mean(name: str, candidates: Iterable[str], shown: str = "{}") -> str | None:
    """A help line for a misspelt name (`shown` formats the suggestion: `Memory::{}`)."""
    c = closest(name, candidates)
    return None if c is None else f"did you mean `{shown.format(c)}`?"
