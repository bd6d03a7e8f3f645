"""Errors of the CPU backend; its kernels' status codes are vxc/status.py's."""

from __future__ import annotations

from vxc.errors import Refusal, Unsupported
from vxc.status import STATUS

__all__ = ["STATUS", "BackendError", "CpuOptionError"]


class BackendError(Refusal, ValueError):
    """The module uses something the CPU backend cannot lower: a coded refusal (E70xx)."""


class CpuOptionError(Unsupported, ValueError):
    """A cpu build option or the host cannot serve the build (an unknown `--cpu` or link
    mode, no `cc`, a failed link): a usage error, exit 2."""
