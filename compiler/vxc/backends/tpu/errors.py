"""Errors of the TPU backend. Each is the user's to read, never a traceback: a refusal is a
coded diagnostic (exit 1), a libtpu rejection a plain error (exit 2)."""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.errors import Refusal, Unsupported
from vxc.ir.loc import inlined_notes, span_of


class TpuError(Refusal, ValueError):
    """The module uses something Mosaic cannot express: a coded refusal naming the value,
    the rule and, where the op has a source location, its span."""


class LibtpuRejected(Unsupported, ValueError):
    """libtpu's compiler rejected the Mosaic module; the message is its error, as one block."""


def fail(code: str, op: ir.Operation | None, message: str) -> TpuError:
    return TpuError(code, f"tpu backend: {message}", span_of(op), notes=inlined_notes(op))
