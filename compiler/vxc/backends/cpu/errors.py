"""Errors and run-time status codes of the CPU backend."""

from __future__ import annotations

from vxc.errors import Refusal, Unsupported


class BackendError(Refusal, ValueError):
    """The module uses something the CPU backend cannot lower: a coded refusal (E70xx)."""


class CpuOptionError(Unsupported, ValueError):
    """A cpu build option or the host cannot serve the build (an unknown `--cpu` or link
    mode, no `cc`, a failed link): a usage error, exit 2."""


# Every kernel returns an int32 status; the header and manifest carry this table.
STATUS = {
    "VX_OK": 0,
    "VX_ERR_INDEX": 1,  # vx.element index outside the Vec
    "VX_ERR_ALLOC": 2,  # the per-call scratch arena could not be allocated
    "VX_ERR_CAPACITY": 3,  # a dynamically shaped tensor does not fit its ring slot
    "VX_ERR_SHAPE": 4,  # dynamically shaped matmul_acc operands disagree
    "VX_ERR_LAUNCH": 5,  # K_launch: instance count < 1 or thread count < 0
    "VX_ERR_NULL": 6,  # a null output pointer, or a null input that holds elements
    "VX_ERR_WHERE": 7,  # the launch breaks the kernel's `where` clause (e.g. too many instances)
    "VX_ERR_SHAPE_PARAM": 8,  # a tensor's size differs from the shape parameter naming it
}
