"""Errors of the TPU backend. Each is the user's to read: the driver prints the message
(exit 2), never a traceback."""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.errors import Unsupported


class TpuError(Unsupported, ValueError):
    """The module uses something Mosaic cannot express; the message names the value,
    the rule and, where the op has a source location, the .vx line."""


class LibtpuRejected(TpuError):
    """libtpu's compiler rejected the Mosaic module; the message is its error, as one block."""


def where(op: ir.Operation | None) -> str:
    """`file:line:col: ` of an op's source location, or "" when it has none."""
    if op is None:
        return ""
    loc = op.location
    try:
        return f"{loc.filename}:{loc.start_line}:{loc.start_col}: "
    except AttributeError:  # unknown / fused / name locations carry no file position
        return ""


def fail(op: ir.Operation | None, message: str) -> TpuError:
    return TpuError(f"{where(op)}tpu backend: {message}")
