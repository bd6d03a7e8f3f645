"""The tuning launch of one candidate: its kernel entry, the runtime sizes and the grid.

`--shapes NAME=V,...` names runtime sizes as `vxc report --size` does (a shape or scalar
parameter `n`, a Vec's length `tiles.len()`); every size not given is the report's
default where the kernel's `where` clauses allow it, else what they imply, and the grid
is what they give (checks/seams.py `where_sizes`, the one solver of such launches). A
non-integer scalar parameter (`scale: f32`, `causal: bool`) takes its value from
`--shapes` too, else 1.0 (a float) or false (a bool): the tuner times one fixed call.
"""

from __future__ import annotations

from dataclasses import dataclass

from vxc.api import Checked
from vxc.checks.seams import where_sizes
from vxc.checks.solver import Undecided
from vxc.report import DEFAULT_SIZE, entries

FLOAT_DEFAULT = 1.0


class LaunchError(ValueError):
    """No tuning launch: the message says why (a usage error of `vxc tune`)."""


@dataclass(frozen=True)
class Launch:
    kernel: str  # the entry's instance name (`rows__256`)
    sizes: dict[str, int]  # by the report's names: `n`, `tiles.len()`
    instances: int
    scalars: dict[str, float]  # every --shapes value, for the non-integer scalars


def launch_of(checked: Checked, shapes: dict[str, float]) -> Launch:
    """The launch of the one kernel entry of `checked` at the tuning shapes."""
    functions = checked.analysis.program.functions
    names = entries(functions)
    if len(names) != 1:
        raise LaunchError(
            f"`vxc tune` tunes a file with one kernel entry; this one has {len(names)}"
            + (f" ({', '.join(names)})" if names else "")
        )
    (name,) = names
    given = {k: int(v) for k, v in shapes.items() if float(v).is_integer()}
    try:
        found = where_sizes(functions[name], checked.machine, functions, given, DEFAULT_SIZE, None)
    except Undecided as u:
        raise LaunchError(
            f"`{name}`: z3 could not choose sizes ({u.reason}); give --shapes"
        ) from None
    if found is None:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(given.items())) or "no sizes"
        raise LaunchError(f"`{name}`: its `where` clauses rule out the tuning shapes ({shown})")
    return Launch(name, dict(sorted(found.sizes.items())), found.instances, dict(shapes))


def parse_shapes(items: list[str]) -> dict[str, float]:
    """`--shapes n=2048,scale=0.125` (repeatable) -> {"n": 2048, "scale": 0.125}."""
    out: dict[str, float] = {}
    for item in (i for group in items for i in group.split(",") if i):
        name, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not name or number is None:
            raise LaunchError(f"--shapes takes NAME=NUMBER, found `{item[:200]}`")
        out[name.strip()] = int(number) if number.is_integer() else number
    return out
