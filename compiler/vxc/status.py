"""The run-time status codes of built kernels, defined once (no jaxlib, no llvmlite).

Every cpu kernel returns one as an int32; an nvidia kernel with `where` clauses writes one
to its status word. The cpu header's `#define`s, both manifests' `status` maps and the
Python runtime's error messages read this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    name: str
    code: int
    meaning: str  # what the runtime's KernelError says


STATUSES: tuple[Status, ...] = (
    Status("VX_OK", 0, "success"),
    Status("VX_ERR_INDEX", 1, "a Vec index was out of range (is the Vec empty?)"),
    Status("VX_ERR_ALLOC", 2, "the scratch arena could not be allocated"),
    Status("VX_ERR_CAPACITY", 3, "a dynamically shaped tensor does not fit its scratchpad slot"),
    Status(
        "VX_ERR_SHAPE", 4, "matmul_acc operand shapes disagree at run time, or a length is negative"
    ),
    Status("VX_ERR_LAUNCH", 5, "the instance count must be >= 1 and the thread count >= 0"),
    Status("VX_ERR_NULL", 6, "an output pointer was null, or an input with elements was null"),
    Status("VX_ERR_WHERE", 7, "the launch breaks the kernel's `where` clause"),
    Status("VX_ERR_SHAPE_PARAM", 8, "a tensor's size differs from the shape parameter naming it"),
    Status(
        "VX_ERR_ALIAS",
        9,
        "a `&mut` argument or an output overlaps another argument's bytes (LANGUAGE.md §7)",
    ),
)

STATUS: dict[str, int] = {s.name: s.code for s in STATUSES}
MEANING: dict[str, str] = {s.name: s.meaning for s in STATUSES if s.code}
