"""`Kernel.to_jax()` for a tpu kernel: the artifact's `jax.export` (a Mosaic
`tpu_custom_call`) called inside the caller's `jax.jit`.

    gemm = vxc.compile("kernels/gemm.vx", target="tpu").to_jax()
    c = jax.jit(gemm)(a, b)                 # on a TPU host
    jax.jit(f).trace(*specs).lower().compile()   # elsewhere: AOT with libtpu's topologies

The calling convention is the cpu's (jax_ffi.py, docs/FRAMEWORKS.md): the parameters in
order without the shape parameters, `&mut` tensors as results (an initial value passed is
the aliased operand; left out, zeros), one result bare, several as a tuple; dtypes,
ranks, static dimensions, shape parameters and the `where` clauses the shapes decide are
checked at trace time. Scalars are operands in the kernel's SMEM types (the tpu backend
narrows `i64` to `i32`). A kernel whose `where` clause gives the grid from the shapes
(gemm's `instances() == (m / 128) * (n / 128)`) runs that grid; another's grid is static
in its Mosaic call, so `to_jax(instances=N)` builds it for N instances
(`vxc build --tpu-instances N`) unless it was built so.

Running needs a TPU; on any machine the function traces and lowers, and compiles ahead
of time for a topology libtpu describes (`vxc.backends.tpu.aot.topology`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vxc.frameworks.handler import Layout
from vxc.frameworks.jax_ffi import JaxKernel

if TYPE_CHECKING:
    from vxc.pyapi import Kernel

_DTYPES = {"bool": "i1"}  # the tpu manifest's names that are not Vx's


def layout(spec: dict) -> Layout:
    """A tpu manifest entry in the cpu's layout: a scalar is an SMEM parameter, a `&mut`
    a parameter a result aliases; a dimension named by a string is a shape parameter."""
    written = {a["param"] for a in spec.get("aliases", [])}
    params = []
    for i, p in enumerate(spec["params"]):
        dims = [d if isinstance(d, str) else "" for d in p["shape"]]
        params.append(
            {
                "name": p["name"],
                "dtype": _DTYPES.get(p["dtype"], p["dtype"]),
                "kind": "scalar" if p["space"] == "SMEM" else "tensor",
                "const": i not in written,
                "shape": [None if isinstance(d, str) else d for d in p["shape"]],
                "dims": dims,
            }
        )
    own = {a["result"] for a in spec.get("aliases", [])}
    results = tuple(r for j, r in enumerate(spec["results"]) if j not in own)
    shapes = tuple(spec.get("shape_params", []))
    return Layout(spec["name"], "", tuple(params), results, shapes)


def to_jax(kernel: Kernel, *, instances: int | None = None, threads: int = 0) -> TpuJaxKernel:
    """The tpu kernel as a function of jax.Arrays (see the module docstring). `threads`
    is ignored, as `Kernel.launch` ignores it: a TPU kernel has no host thread pool."""
    from vxc.frameworks import where

    if instances is not None and (not isinstance(instances, int) or instances < 1):
        raise ValueError(f"{kernel.name}: instances must be an integer >= 1, got {instances!r}")
    spec = kernel.spec
    bound = spec["grid"]["iteration_bounds"][0]
    if isinstance(bound, str):  # the shapes give the grid: the export computes it
        if instances is not None:
            raise ValueError(
                f"{kernel.name}: its `where` clause gives instances() from the shapes; "
                "to_jax() takes no instances="
            )
    elif instances is None:
        raise TypeError(
            f"{kernel.name}: a tpu kernel whose `where` clause does not give instances() "
            "from the shapes has a static grid: pass to_jax(instances=N)"
        )
    elif instances != spec["grid"]["instances"]:
        kernel = kernel.rebuilt(instances)
    lay = layout(kernel.spec)
    requires = list(kernel.spec.get("preconditions", []))
    grid = where.instances_expr(requires, set(lay.shape_params))
    exported = kernel.artifact().exported
    aliases = {a["param"]: a["result"] for a in kernel.spec.get("aliases", [])}
    return TpuJaxKernel(
        kernel.name, lay, requires, instances, 0, grid, exported=exported, aliases=aliases
    )


@dataclass(eq=False)  # hashed by identity: jax.jit keys its cache by the function
class TpuJaxKernel(JaxKernel):
    """A tpu kernel as a jax function; `exported` is its `jax.export.Exported`."""

    exported: Any = None
    aliases: dict[int, int] | None = None  # `&mut` parameter -> the result it aliases

    def __repr__(self) -> str:
        names = ", ".join(p["name"] for p in self.layout.operands)
        return f"<vxc to_jax {self.name}({names}) -> tpu_custom_call>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        bound = self._bind(args, kwargs)
        sizes = self._sizes(bound)
        self._count(sizes)  # the clauses the shapes decide, at trace time
        operands = [self._operand(p, bound, sizes) for p in self.layout.params]
        outs = jax.tree.leaves(self.exported.call(*operands))
        # the export returns the aliased results in its own order: `&mut` first, as
        # the cpu's function does, then the kernel's own results
        order = self.aliases or {}
        written = [outs[order[i]] for i, p in enumerate(self.layout.params) if not p["const"]]
        own = [o for j, o in enumerate(outs) if j not in set(order.values())]
        result = [*written, *own]
        return result[0] if len(result) == 1 else tuple(result)
