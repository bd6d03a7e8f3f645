"""`Kernel.to_jax()` for a cpu kernel: an XLA FFI custom call into the kernel's object.

    gemm = vxc.compile("kernels/gemm.vx").to_jax()
    c = jax.jit(gemm)(a, b)                 # a: bf16[m, k], b: bf16[k, n] -> f32[m, n]

The function takes the kernel's parameters in order without the shape parameters (they
are read from the arrays' shapes; one given by keyword is checked against them). Each
`&mut` tensor is a result (functional form): the caller may pass its initial value, which
the custom call aliases to the result (`input_output_aliases`, so donating it costs no
copy); left out, it starts as zeros (XLA gives a fresh result uninitialised, and a
kernel need not write every element, LANGUAGE.md 4.2 `edge`). The kernel's own results
follow, with the instances axis in front as `Kernel.launch` returns them. One result
comes back bare, several as a tuple. A scalar parameter that is not a shape parameter is
an operand (a 0-d array of its dtype), so it may be traced.

At trace time every dtype, rank, static dimension and shape parameter is checked
(`vxc.runtime.ArgumentError`), and so is every `where` clause that the shapes decide
(`vxc.runtime.LaunchError`); the rest are checked by the C entry when XLA runs the call,
whose non-zero status XLA raises as `JaxRuntimeError` naming the status. The instance
count is the one a clause `instances() == E` gives from the shapes, else `instances=` of
`to_jax()`.

Distinct arguments (LANGUAGE.md section 7): XLA gives every result its own buffer, and an
aliased `&mut` result the buffer of its operand only when no other use reads that buffer
(XLA's copy insertion copies the operand otherwise), so the handler never receives a
written buffer that overlaps another operand; the C entry's VX_ERR_ALIAS check stays as a
guard.

`jax.vmap` runs the batch inside one custom call: the handler loops `K_launch` over the
batch elements, each on the kernel's thread pool, reading an unbatched operand in place
(a shared weight is not copied per element); a batched `&mut` initial value is per
element, an unbatched one is broadcast. A vmap inside that vmap batches the custom call
sequentially (`vmap_method="sequential"`, an XLA loop). There is no autodiff rule.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vxc.frameworks import calls, handler
from vxc.frameworks.handler import Layout
from vxc.runtime import ArgumentError, _dtype

if TYPE_CHECKING:
    from vxc.pyapi import Kernel

# handler library -> (registered target name, the loaded library, kept alive)
_TARGETS: dict[str, ctypes.CDLL] = {}  # registered target name -> its library, kept loaded


def register(kernel: Kernel, lay: Layout) -> tuple[str, Path]:
    """Build (or reuse) the kernel's handler and register it with XLA:CPU once per
    process; the target's name carries the handler's digest, so two builds of one
    kernel (other consts, say) are two targets."""
    import jax

    kernel.artifact()  # loads the externs (RTLD_GLOBAL) and checks the library's ABI
    files = kernel.manifest["files"]
    obj = kernel.manifest_path.parent / files["object"]
    text = handler.source(
        lay, files["header"], kernel.manifest["status"], kernel.spec.get("requires", [])
    )
    path = handler.build(text, obj, kernel.name, jax.ffi.include_dir())
    # By the digest, not the path: the same build in another cache directory (another
    # artifact directory, a test's tmp_path) is the same code, and XLA refuses a second
    # registration of one name with another library.
    name = f"vxc_{kernel.name}_{path.name.split('.')[-3]}"
    if name not in _TARGETS:
        lib = ctypes.CDLL(str(path))
        capsule = jax.ffi.pycapsule(getattr(lib, handler.symbol(lay)))
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        _TARGETS[name] = lib
    return name, path


def to_jax(kernel: Kernel, *, instances: int | None = None, threads: int = 0) -> JaxKernel:
    """The kernel as a function of jax.Arrays (see the module docstring)."""
    lay, grid = calls.validate(kernel, instances, threads, "to_jax")
    requires = list(kernel.spec.get("requires", []))
    target, path = register(kernel, lay)
    return JaxKernel(kernel.name, lay, requires, instances, threads, grid, target, path)


@dataclass(eq=False)  # hashed by identity: jax.jit keys its cache by the function
class JaxKernel(calls.FrameworkCall):
    """A cpu kernel as a jax function; `target` is its FFI target, `library` its
    handler. Call it as the module docstring says."""

    target: str = ""
    library: Path | None = None

    def __repr__(self) -> str:
        names = ", ".join(p["name"] for p in self.layout.operands)
        return f"<vxc to_jax {self.name}({names}) -> FFI target {self.target}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self._bind(args, kwargs)
        sizes = self._sizes(bound)
        n = self._count(sizes)
        operands = [self._operand(p, bound, sizes) for p in self.layout.operands]
        outs = self._ffi(sizes, n)(*operands)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _array(self, p: dict, value: Any) -> Any:
        """`value` as a jax array (a Python or numpy value is converted), checked."""
        import jax.numpy as jnp

        who = f"{self.name}: argument '{p['name']}'"
        a = value if hasattr(value, "shape") and hasattr(value, "dtype") else jnp.asarray(value)
        symbolic = [d for d in a.shape if not isinstance(d, int | np.integer)]
        if symbolic:  # jax.export's shape polymorphism: the shape attributes are static
            raise ArgumentError(
                f"{who} has symbolic dimension(s) {symbolic}: to_jax() needs concrete "
                "shapes (export with one shape per call)"
            )
        self._check_array(p, tuple(a.shape), np.dtype(a.dtype))
        return a

    def _operand(self, p: dict, bound: calls.Bound, sizes: dict[str, int]) -> Any:
        """The operand of parameter `p`: its array, zeros for a `&mut` left out, a 0-d
        array for a scalar."""
        import jax.numpy as jnp

        who = f"{self.name}: argument '{p['name']}'"
        dtype = _dtype(p["dtype"], who)
        if p["kind"] == "scalar":
            return _scalar(who, dtype, bound.values[p["name"]])
        if p["name"] in bound.values:
            return bound.values[p["name"]]
        return jnp.zeros(self._shape(p, sizes), dtype)

    # -- the call ------------------------------------------------------------------------
    def _results(self, sizes: dict[str, int], n: int, batch: tuple[int, ...] = ()) -> list[Any]:
        import jax

        out = []
        for p in self.layout.mutable:
            dtype = _dtype(p["dtype"], self.name)
            out.append(jax.ShapeDtypeStruct((*batch, *self._shape(p, sizes)), dtype))
        for r in self.layout.results:
            dtype = _dtype(r["dtype"], self.name)
            out.append(jax.ShapeDtypeStruct((*batch, n, *r["shape"]), dtype))
        return out

    def _aliases(self) -> dict[int, int]:
        at = {p["name"]: i for i, p in enumerate(self.layout.operands)}
        return {at[p["name"]]: j for j, p in enumerate(self.layout.mutable)}

    def _ffi(self, sizes: dict[str, int], n: int) -> Callable[..., tuple]:
        """The custom call for these shapes, with the batching rule that keeps a vmap in
        one call (the module docstring)."""
        import jax
        import jax.numpy as jnp

        attrs = {
            "vx_instances": np.int64(n),
            "vx_threads": np.int64(self.threads),
            **{k: np.int64(sizes[k]) for k in self.layout.shape_params},
        }

        def call(results: list[Any], *operands: Any) -> tuple:
            f = jax.ffi.ffi_call(
                self.target,
                results,
                vmap_method="sequential",
                input_output_aliases=self._aliases(),
            )
            return tuple(f(*operands, **attrs))

        @jax.custom_batching.custom_vmap
        def run(*operands: Any) -> tuple:
            return call(self._results(sizes, n), *operands)

        @run.def_vmap
        def batched(size: int, in_batched: list[bool], *operands: Any) -> tuple:
            ops = list(operands)
            for i in self._aliases():  # each batch element writes its own `&mut`
                if not in_batched[i]:
                    ops[i] = jnp.broadcast_to(ops[i], (size, *ops[i].shape))
            outs = call(self._results(sizes, n, (size,)), *ops)
            return outs, (True,) * len(outs)

        return run


def _scalar(who: str, dtype: np.dtype, value: Any) -> Any:
    """A scalar operand: a 0-d array of `dtype`; without jax's x64 mode, a 64-bit scalar
    travels as its bits in two u32 words (the handler reads 8 bytes either way), from a
    concrete number or a traced 32-bit integer (sign-extended)."""
    import jax
    import jax.numpy as jnp

    if np.ndim(value) != 0:
        raise ArgumentError(f"{who} is a {dtype} scalar, got shape {np.shape(value)}")
    if dtype.itemsize != 8 or jax.config.jax_enable_x64:
        return jnp.asarray(value, dtype)
    if not isinstance(value, jax.core.Tracer):
        try:
            bits = np.asarray(value).astype(dtype, casting="same_kind").reshape(1)
        except (OverflowError, TypeError) as e:
            raise ArgumentError(f"{who}: {value!r} is not a {dtype} ({e})") from None
        return jnp.asarray(bits.view(np.uint32))
    if dtype.kind in "iu" and np.dtype(value.dtype).kind in "iu":
        low = jax.lax.bitcast_convert_type(value.astype(jnp.int32), jnp.uint32)
        high = jnp.where(value < 0, jnp.uint32(0xFFFFFFFF), jnp.uint32(0))
        return jnp.stack([low, high], axis=-1)
    raise ArgumentError(
        f"{who} is a traced {value.dtype} for a {dtype} parameter: enable "
        "jax_enable_x64, or pass a Python number"
    )
