"""MLIR context for the vx dialect.

jaxlib ships no IRDL, so vx ops are unregistered generic operations and vx
types are opaque (`!vx.token<...>`); the upstream dialects we use (func, scf,
arith, memref) come from jaxlib's registry.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext

_REGISTRY: ir.DialectRegistry | None = None


def _registry() -> ir.DialectRegistry:
    # Building the registry walks every dialect jaxlib knows: do it once.
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(_REGISTRY)
    return _REGISTRY


def make_context() -> ir.Context:
    """A fresh context with func/scf/arith/memref loaded and `vx` allowed unregistered."""
    ctx = ir.Context()
    ctx.append_dialect_registry(_registry())
    ctx.load_all_available_dialects()
    ctx.allow_unregistered_dialects = True
    return ctx
