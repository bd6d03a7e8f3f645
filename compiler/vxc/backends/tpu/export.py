"""Mosaic kernel -> `tpu_custom_call` -> `jax.export` for platform tpu -> serialized bytes.

The wrapping is jax's own `jax.experimental.mosaic.as_tpu_kernel` (the custom call
Pallas also emits, a target `jax.export` guarantees stable); the kernel's Vec lengths
are `jax.export.symbolic_shape` dimension variables, so one artifact serves every length.
The one Python location in the exported module is a fixed pseudo file, so its bytes do
not depend on where vxc is installed: the same vx module gives byte-identical output.
"""

from __future__ import annotations

from vxc.backends.tpu.env import prepare
from vxc.backends.tpu.lower import Kernel

DTYPES = {
    "f32": "float32",
    "bf16": "bfloat16",
    "f16": "float16",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
}


def arg_specs(kernel: Kernel, lengths: dict[str, int] | None = None, sharding=None) -> list:
    """ShapeDtypeStructs of the kernel's inputs: symbolic Vec lengths, or `lengths`."""
    prepare()
    import jax
    import jax.numpy as jnp
    from jax import export

    syms = {}
    if kernel.symbols and lengths is None:
        dims = export.symbolic_shape(", ".join(kernel.symbols), constraints=kernel.constraints)
        syms = dict(zip(kernel.symbols, dims, strict=True))
    specs = []
    for p in kernel.params():
        if p.smem:  # a scalar parameter, passed as a 0-d array
            specs.append(jax.ShapeDtypeStruct((), jnp.dtype(DTYPES[p.dtype]), sharding=sharding))
            continue
        shape = tuple(
            (lengths[p.symbol] if lengths is not None else syms[p.symbol]) if d is None else d
            for d in p.shape
        )
        specs.append(jax.ShapeDtypeStruct(shape, jnp.dtype(DTYPES[p.dtype]), sharding=sharding))
    return specs


def export_kernel(kernel: Kernel):
    """The serialized `jax.export.Exported` of the kernel (bytes)."""
    return exported(kernel).serialize()


def exported(kernel: Kernel):
    prepare()
    import jax
    import jax.numpy as jnp
    from jax import export
    from jax.experimental import mosaic

    outs = tuple(jax.ShapeDtypeStruct(p.shape, jnp.dtype(DTYPES[p.dtype])) for p in kernel.outputs)
    call = mosaic.as_tpu_kernel(
        kernel.module,
        outs if len(outs) != 1 else outs[0],
        kernel_name=kernel.name,
        # libtpu otherwise checks at the kernel's exit that every DMA semaphore is back
        # to zero (12 bundles a launch): every DMA a built kernel starts is waited on
        # every path, which E6011 proved before the backend ran.
        disable_semaphore_checks=True,
    )
    with _locations_off():
        return _EXPORT_SITE(
            export.export(_in_vx_order(call, kernel), platforms=["tpu"]), arg_specs(kernel)
        )


def _in_vx_order(call, kernel: Kernel):
    """`call` (operands: the SMEM scalars, then the HBM inputs) taking the kernel's
    parameters in the Vx function's order, each scalar a 0-d array; `call` itself when
    the kernel has no scalar parameter (so those exports are unchanged)."""
    if not kernel.scalars:
        return call
    import jax
    import jax.numpy as jnp

    at = {pos for pos, _ in kernel.scalars}

    def ordered(*args):
        smem = [
            jnp.reshape(jnp.asarray(args[pos], DTYPES[p.dtype]), (1,)) for pos, p in kernel.scalars
        ]
        return call(*smem, *(a for i, a in enumerate(args) if i not in at))

    return jax.jit(ordered)


# jax records the Python call site of the traced function as a location in the exported
# module. The call is made from a function compiled under a fixed pseudo file name, so
# that location is `loc("<vxc tpu export>":1:...)` whatever the install path or the line
# numbers of this file: artifacts stay byte-identical across vxc installs and edits.
_NS: dict = {}
exec(compile("def site(f, specs):\n    return f(*specs)\n", "<vxc tpu export>", "exec"), _NS)
_EXPORT_SITE = _NS["site"]


class _locations_off:
    """Context manager: no full tracebacks in locations (jax's config switch), so the only
    Python location in an export is the fixed call site above."""

    SETTINGS = {
        "jax_include_full_tracebacks_in_locations": False,
    }

    def __enter__(self):
        import jax

        self._old = {k: getattr(jax.config, k) for k in self.SETTINGS}
        for k, v in self.SETTINGS.items():
            jax.config.update(k, v)

    def __exit__(self, *exc):
        import jax

        for k, v in self._old.items():
            jax.config.update(k, v)
