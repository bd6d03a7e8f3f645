"""The one compile API that the CLI, the worker and the tests drive.

Pipeline: frontend (parse) -> hir (resolve, types, ownership, token linearity)
-> [Analysis: target-independent, cacheable] -> checks (placement, seams, bounds,
allocation; per target) -> ir (vx dialect) -> backends/<target> -> artifacts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.diagnostics import Diagnostic

TARGETS = ("cpu", "tpu", "b200", "h100")
EMITS = ("vx-mlir", "target-ir", "artifact")


@dataclass(frozen=True)
class Source:
    """One input file: its display path (relative, as the user named it) and its bytes."""

    path: str
    data: bytes


@dataclass
class BuildResult:
    diagnostics: list[Diagnostic]
    # File name (no directory) -> bytes. Names carry the target: stream.cpu.o, ...
    outputs: dict[str, bytes] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)
