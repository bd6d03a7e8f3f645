"""What the tpu lowering's rules share, below both `lower.py` (the walk over a function)
and `vregs.py` (the tile-arithmetic rules): the rule table, the `Ref` a tensor is in
Mosaic, and a vx type's placed memref. Kept apart so the rule files import it, not the
walk, and the walk imports the rule files to register them: no import cycle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxlib.mlir import ir

from vxc.ir import types as T
from vxc.rules import registrar

if TYPE_CHECKING:
    from vxc.backends.tpu.lower import FunctionLowering


def placed(t: ir.Type) -> ir.MemRefType:
    """The memref a vx value occupies (a token's: the tile it carries)."""
    return ir.MemRefType(T.token_inner(t) if T.is_token(t) else t)


@dataclass(frozen=True)
class Ref:
    """A tensor in Mosaic: a base memref, optionally indexed by one leading index (a Vec
    tile, a ring slot), optionally the region at `starts` (a view, LANGUAGE.md 4.2; one
    i32 per dimension after the index) of the size of `vx_type`."""

    base: ir.Value
    index: ir.Value | None
    vx_type: ir.MemRefType
    name: str
    starts: tuple[ir.Value, ...] | None = None


Rule = Callable[["FunctionLowering", ir.Operation], None]
RULES: dict[str, Rule] = {}
rule = registrar(RULES)
