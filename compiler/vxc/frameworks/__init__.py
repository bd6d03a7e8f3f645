"""Calling vxc kernels from other frameworks' programs (docs/FRAMEWORKS.md).

`jax_ffi` makes a cpu kernel an XLA FFI custom call (`vxc.Kernel.to_jax`), `jax_tpu` a
tpu kernel its export's Mosaic call, `torch_op` a cpu kernel a torch custom op
(`vxc.Kernel.to_torch`), `interpreted` an interpreted kernel of either a host callback;
`calls` holds what the cpu's check; `handler` writes and builds the C++ handler the first
calls. Nothing here is imported by `vxc check` or `vxc build`: jax loads only when
`to_jax()` is called, torch when `to_torch()` is.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The module whose `to_jax` binds a natively run kernel of each backend family
# (vxc.backends.RUNNERS). A family without one goes to jax_ffi, whose check
# (calls.validate) refuses a kernel that is not a cpu one, naming its target.
JAX_BINDINGS = {"cpu": "jax_ffi", "tpu": "jax_tpu"}


def jax_binding(family: str) -> ModuleType:
    """The framework module that makes `family`'s kernels jax functions."""
    return importlib.import_module(f"vxc.frameworks.{JAX_BINDINGS.get(family, 'jax_ffi')}")
