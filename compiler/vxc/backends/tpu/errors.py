"""Errors of the TPU backend. Each is the user's to read: the driver prints the message
(exit 2), never a traceback."""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.errors import Unsupported
from vxc.ir.loc import where  # noqa: F401 - the backend's modules import it from here


class TpuError(Unsupported, ValueError):
    """The module uses something Mosaic cannot express; the message names the value,
    the rule and, where the op has a source location, the .vx line."""


class LibtpuRejected(TpuError):
    """libtpu's compiler rejected the Mosaic module; the message is its error, as one block."""


def fail(op: ir.Operation | None, message: str) -> TpuError:
    return TpuError(f"{where(op)}tpu backend: {message}")
