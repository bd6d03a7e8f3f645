"""Text form of vx modules: `vxc build --emit vx-mlir` prints it and
`parse_module` reads it back; print(parse(print(m))) == print(m).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.ir.context import make_context
from vxc.ir.verify import check_module


class IRParseError(ValueError):
    """The text is not a parseable MLIR module."""


def print_module(module: ir.Module, *, debug_info: bool = False) -> str:
    """Canonical text: custom syntax for func/scf/arith, generic form for vx ops.

    Locations are printed only with `debug_info`, so the default text is stable
    under parse/print round trips whatever the source locations were.
    """
    text = module.operation.get_asm(enable_debug_info=debug_info, assume_verified=False)
    return text if text.endswith("\n") else text + "\n"


def parse_module(text: str, *, context: ir.Context | None = None, verify: bool = True) -> ir.Module:
    """Parse vx-MLIR text; with `verify`, also run `verify_module` and raise on errors."""
    ctx = context if context is not None else make_context()
    try:
        module = ir.Module.parse(text, context=ctx)
    except ir.MLIRError as e:
        msgs = [f"{d.location}: {d.message}" for d in e.error_diagnostics] or [str(e)]
        raise IRParseError("cannot parse vx-MLIR:\n" + "\n".join(f"  {m}" for m in msgs)) from e
    return check_module(module) if verify else module
