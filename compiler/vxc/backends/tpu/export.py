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
    "bool": "bool",
}


def arg_specs(kernel: Kernel, lengths: dict[str, int] | None = None, sharding=None) -> list:
    """ShapeDtypeStructs of the kernel's parameters in the Vx order (a scalar is a 0-d
    array): symbolic dimensions, or `lengths`."""
    prepare()
    import jax
    import jax.numpy as jnp
    from jax import export

    sizes: dict = dict(lengths or {})
    if kernel.symbols and lengths is None:
        dims = export.symbolic_shape(", ".join(kernel.symbols), constraints=kernel.constraints)
        sizes = dict(zip(kernel.symbols, dims, strict=True))
    return [
        jax.ShapeDtypeStruct(_shape(p, sizes), jnp.dtype(DTYPES[p.dtype]), sharding=sharding)
        for p in kernel.params()
    ]


def _shape(p, sizes: dict) -> tuple:
    syms = p.symbols or (None,) * len(p.shape)
    return tuple(sizes[s] if d is None else d for d, s in zip(p.shape, syms, strict=True))


def export_kernel(kernel: Kernel):
    """The serialized `jax.export.Exported` of the kernel (bytes)."""
    return exported(kernel).serialize()


def exported(kernel: Kernel):
    prepare()
    import jax
    import jax.numpy as jnp
    from jax import export
    from jax._src.tpu_custom_call import MemorySpace
    from jax.experimental import mosaic

    specs = arg_specs(kernel)
    aliased = {k: kernel.param_position(i) for i, k in kernel.aliases}
    # Operand indices count the grid bound and the SMEM scalars before the inputs.
    lead = kernel.grid_operands + len(kernel.scalars)
    outs = tuple(
        jax.ShapeDtypeStruct(
            specs[aliased[k]].shape if k in aliased else p.shape, jnp.dtype(DTYPES[p.dtype])
        )
        for k, p in enumerate(kernel.outputs)
    )
    call = mosaic.as_tpu_kernel(
        kernel.module,
        outs if len(outs) != 1 else outs[0],
        kernel_name=kernel.name,
        # A `&mut` tensor's output is its input's buffer: the kernel writes in place.
        input_output_aliases=tuple((i + lead, k) for i, k in kernel.aliases),
        # libtpu otherwise checks at the kernel's exit that every DMA semaphore is back
        # to zero (12 bundles a launch): every DMA a built kernel starts is waited on
        # every path, which E6011 proved before the backend ran.
        disable_semaphore_checks=True,
        # Every DMA's region was proved inside its tensor (E6041) and no Vec is indexed:
        # Mosaic's per-DMA run-time bounds check can only pass.
        disable_bounds_checks=kernel.bounds_proved,
        # A tensor parameter lives in HBM (LANGUAGE.md 4.1): the kernel moves it with its
        # own DMAs. Left to choose, XLA copies an operand that fits into VMEM before the
        # call (a blocking copy outside the kernel) and libtpu turns the kernel's DMAs of
        # it into vector load/store loops. (An output aliasing a coloured input must be
        # coloured as well.)
        input_memory_spaces=(None,) * lead + (MemorySpace.HBM,) * len(kernel.inputs),
        output_memory_spaces=(MemorySpace.HBM,) * len(outs),
    )
    if kernel.grid_operands or kernel.scalars:

        def bound_of(tensors):  # the grid bound from the shapes (no traced op: a dim expr)
            if not kernel.grid_operands:
                return []
            sizes = {
                s: d
                for p, a in zip(kernel.inputs, tensors, strict=True)
                for s, d in zip(p.symbols, a.shape, strict=True)
                if s
            }
            return [shape_value(kernel.grid_expr, sizes)]

        # The custom call takes the grid bound, the SMEM scalars (each a 1-element array
        # of its word), then the inputs; the export takes the Vx order. The ops doing it
        # are traced in the fixed pseudo file, so no path of this install is recorded.
        at = {pos: jnp.dtype(DTYPES[p.word]) for pos, p in kernel.scalars}
        call = jax.jit(_NS["operand_call"](call, bound_of, at, jnp))

    with _locations_off():
        return _EXPORT_SITE(export.export(call, platforms=["tpu"]), specs)


def shape_value(text: str, sizes: dict):
    """The grid expression `text` (Kernel.grid_expr: names, integers, + - * // %) for
    `sizes` (integers, or jax's symbolic dimensions at export time). Parsed, never
    evaluated as Python."""
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}  # fmt: skip

    def value(n: ast.AST):
        if isinstance(n, ast.Name):
            return sizes[n.id]
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](value(n.left), value(n.right))
        raise ValueError(f"not a grid expression: {text}")

    return value(ast.parse(text, mode="eval").body)


# jax records the Python call site of the traced function as a location in the exported
# module. The call is made from a function compiled under a fixed pseudo file name, so
# that location is `loc("<vxc tpu export>":1:...)` whatever the install path or the line
# numbers of this file: artifacts stay byte-identical across vxc installs and edits.
_NS: dict = {}
_SITE = """def site(f, specs):
    return f(*specs)

def operand_call(kernel_call, bound_of, at, jnp):
    def call(*args):
        smem = [jnp.reshape(jnp.asarray(args[k]).astype(at[k]), (1,)) for k in sorted(at)]
        tensors = [a for k, a in enumerate(args) if k not in at]
        bound = [jnp.asarray(b, jnp.int32) for b in bound_of(tensors)]
        return kernel_call(*bound, *smem, *tensors)
    return call
"""
exec(compile(_SITE, "<vxc tpu export>", "exec"), _NS)
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
