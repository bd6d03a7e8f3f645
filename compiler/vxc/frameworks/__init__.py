"""Calling vxc kernels from other frameworks' programs (docs/FRAMEWORKS.md).

`jax_ffi` makes a cpu kernel an XLA FFI custom call (`vxc.Kernel.to_jax`); `handler`
writes and builds the C++ handler it calls. Nothing here is imported by `vxc check` or
`vxc build`: jax loads only when `to_jax()` is called.
"""
