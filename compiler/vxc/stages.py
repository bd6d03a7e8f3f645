"""The vx -> vx passes by name: the one table of them (vxc/ir/passes/ runs them).

Kept out of `vxc.ir` (which loads jaxlib) so the CLI can list the passes in `--help`
and validate `--emit vx-mlir:after=NAME` without loading MLIR. Each entry names the
function that implements it as `module:function`, imported only when the pass runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassDef:
    name: str
    summary: str  # one line: `vxc build --help`, docs/IR.md
    # "vxc.ir.passes.MODULE:FUNCTION", called as FUNCTION(module, backend): it rewrites the
    # module in place, reading what it needs of the target from the `Backend`.
    impl: str


PASSES: dict[str, PassDef] = {
    p.name: p
    for p in (
        PassDef(
            "inline",
            "each call to a Vx helper becomes its body, in the caller's frame (ir/passes/inline.py)",
            "vxc.ir.passes.inline:run",
        ),
        PassDef(
            "fold-transpose",
            "a `vx.transpose` feeding `vx.matmul_acc` becomes its `transpose` attribute: the "
            "matmul reads the source transposed (ir/passes/fold_transpose.py)",
            "vxc.ir.passes.fold_transpose:run",
        ),
    )
}

AFTER = "vx-mlir:after="  # `--emit vx-mlir:after=NAME`: the module after pass NAME


def emit_after(emit: str) -> str | None:
    """The pass named by an `--emit vx-mlir:after=NAME`, or None for another emit."""
    return emit[len(AFTER) :] if emit.startswith(AFTER) else None


def emit_error(emit: str, emits: tuple[str, ...]) -> str | None:
    """Why `emit` is no `--emit` value (None if it is one): one of `emits`, or
    `vx-mlir:after=NAME` for a pass NAME."""
    after = emit_after(emit)
    if emit in emits or (after is not None and after in PASSES):
        return None
    if after is not None:
        return f"unknown pass `{after}` in `--emit {emit}` (passes: {', '.join(PASSES)})"
    return f"unknown --emit `{emit}` (one of: {', '.join(emits)}, or {AFTER}PASS)"


def emit_help() -> str:
    """The `--emit vx-mlir:after=PASS` line of `--help`: every pass and what it does."""
    passes = "; ".join(f"{p.name}: {p.summary}" for p in PASSES.values())
    return f"{AFTER}PASS: the vx module after that pass of the target's stages ({passes})"
