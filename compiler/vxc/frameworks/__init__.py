"""Calling vxc kernels from other frameworks' programs (docs/FRAMEWORKS.md).

`jax_ffi` makes a cpu kernel an XLA FFI custom call (`vxc.Kernel.to_jax`), `torch_op` a
torch custom op (`vxc.Kernel.to_torch`), `calls` holds what both check; `handler`
writes and builds the C++ handler the first calls. Nothing here is imported by `vxc check`
or `vxc build`: jax loads only when `to_jax()` is called, torch when `to_torch()` is.
"""
