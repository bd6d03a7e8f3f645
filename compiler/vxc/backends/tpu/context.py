"""The MLIR context Mosaic modules are built and verified in: jaxlib's upstream
dialects plus the `tpu` dialect jaxlib registers, and nothing unregistered (so
`verify()` is the real Mosaic verifier, not a permissive one)."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mosaic.python import tpu

from vxc.ir.context import make_context


def mosaic_context() -> ir.Context:
    ctx = make_context()
    tpu.register_dialect(ctx)
    ctx.load_all_available_dialects()
    ctx.allow_unregistered_dialects = False
    return ctx


def parse_mosaic(text: str, context: ir.Context | None = None) -> ir.Module:
    """Parse Mosaic text in a strict context and run the verifier (raises on failure)."""
    ctx = context or mosaic_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(text)
        if not module.operation.verify():
            raise ValueError("Mosaic module does not verify")
    return module
