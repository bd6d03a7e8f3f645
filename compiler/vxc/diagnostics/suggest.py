""" "Did you mean" for a misspelt name (rustc's rule): the closest candidate by edit
distance, a swap of two neighbours counting as one edit (`wiat` -> `wait`, `VMME` ->
`VMEM`), within a third of the name's length (at least one edit); a name of one or
two characters gets none (any other short name is "close"), and a candidate that differs
only in case always qualifies. Ties go to the first candidate in sorted order,
so the suggestion does not depend on declaration order."""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and
    transpositions of adjacent characters each cost one."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` most likely misspells, or None when none is close."""
    limit = max(1, len(name) // 3) if len(name) > 2 else 0
    best: tuple[int, str] | None = None
    for c in sorted(set(candidates)):
        if c == name:
            continue
        d = 0 if c.lower() == name.lower() else edit_distance(name, c)
        if d <= limit and (best is None or d < best[0]):
            best = (d, c)
    return best[1] if best else None


def did_you_mean(name: str, candidates: Iterable[str], shown: str = "{}") -> str | None:
    """A help line for a misspelt name (`shown` formats the suggestion: `Memory::{}`)."""
    c = closest(name, candidates)
    return None if c is None else f"did you mean `{shown.format(c)}`?"
