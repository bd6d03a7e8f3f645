"""What every launcher checks of a launch's arguments, below all of them: `vxc.runtime`
(the cpu), the tpu and nvidia runtimes and interpreters, and `vxc.compile`'s kernels
import it from here (vxc.runtime re-exports both names), so no runner imports another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class ArgumentError(ValueError):
    """Arguments do not match the kernel's parameters in the manifest."""


DISTINCT = "a `&mut` argument must share no memory with another (LANGUAGE.md §7)"


def check_distinct(kernel: str, tensors: Sequence[tuple[str, Any, bool]]) -> None:
    """Refuse a launch whose `&mut` argument overlaps another argument (LANGUAGE.md
    section 7: the proofs assume distinct arguments). `tensors` holds each tensor or Vec
    argument as (parameter name, value, written: a `&mut` the kernel writes), in parameter
    order. numpy arrays are compared by `np.shares_memory` (exact: disjoint slices of one
    array are distinct, overlapping ones are not, and an empty array overlaps nothing);
    any other array (a jax.Array) is the same argument only when it is the same object.
    The one check of every Python launcher: `vxc.runtime`, `vxc.compile`'s kernels, and
    the tpu and nvidia runtimes and interpreters."""
    for i, (name_i, a, written_i) in enumerate(tensors):
        for name_j, b, written_j in tensors[i + 1 :]:
            if not (written_i or written_j):
                continue
            both = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
            if np.shares_memory(a, b) if both else a is b:
                raise ArgumentError(
                    f"{kernel}: arguments `{name_i}` and `{name_j}` overlap: {DISTINCT}"
                )


def launch_count(kernel: str, args: tuple, instances: Any) -> tuple[Any, tuple]:
    """The instance count and the kernel's arguments of a runtime `launch` call, in the
    one spelling every launcher takes, `launch(*args, instances=N)` (that of `vxc.Kernel`),
    or the older `launch(N, *args)` with a DeprecationWarning (kept for a release: issue
    36). The keyword decides: without it the first positional argument is the count."""
    if instances is not None:
        return instances, args
    if not args:
        raise ArgumentError(f"{kernel}: launch needs `instances=N`")
    import warnings

    warnings.warn(
        f"{kernel}: launch(N, *args) is deprecated; pass the count as launch(*args, "
        "instances=N), as vxc.Kernel.launch takes it",
        DeprecationWarning,
        stacklevel=3,
    )
    return args[0], args[1:]
