"""`to_jax()` and `to_torch()` of an interpreted kernel (`vxc.compile(..., interpret=True)`
for tpu, b200 or h100): the kernel runs in vxc's Mosaic interpreter or PTX simulator on
the host, so a program that calls a GPU or TPU kernel runs and is tested on any machine.

The calling convention and the checks are the cpu's (calls.py, docs/FRAMEWORKS.md), bound
by the source's signature (`Kernel.signature_layout`) rather than a manifest's; the run
is `Kernel.launch` on numpy arrays: under JAX a `jax.pure_callback` (so `jax.jit` and
`jax.vmap` work, one launch per batch element), under PyTorch the custom op's CPU
implementation (torch_op.py). Scalars are Python numbers, fixed when the call is traced.
Simulators are slow (seconds for a 256 x 256 gemm): this is for testing, not speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vxc.frameworks import where
from vxc.frameworks.handler import Layout
from vxc.frameworks.jax_ffi import JaxKernel
from vxc.runtime import ArgumentError, _dtype

if TYPE_CHECKING:
    from vxc.pyapi import Kernel


def validate(kernel: Kernel, instances: int | None, how: str) -> tuple[Layout, Any, list[str]]:
    """The layout, the parsed `E` of `instances() == E` and the `where` clauses, after the
    options are checked."""
    sig = kernel.signature_layout
    other = [p["name"] for p in sig["params"] if p["kind"] == "other"]
    if other:
        raise NotImplementedError(
            f"{how}() of an interpreted kernel takes tensors and scalars; {other} of "
            f"`{kernel.name}` is neither (a Vec): not yet"
        )
    if instances is not None and (not isinstance(instances, int) or instances < 1):
        raise ValueError(f"{kernel.name}: instances must be an integer >= 1, got {instances!r}")
    named = {d for p in sig["params"] for d in p.get("dims", []) if d}
    shapes = tuple(p["name"] for p in sig["params"] if p["kind"] == "scalar" and p["name"] in named)
    lay = Layout(kernel.name, "", tuple(sig["params"]), tuple(sig["results"]), shapes)
    if not lay.mutable and not lay.results:
        raise ValueError(f"{kernel.name}: has no `&mut` tensor and no result: nothing to return")
    requires = list(sig["requires"])
    grid = where.instances_expr(requires, set(shapes))
    if instances is None and grid is None:
        raise TypeError(
            f"{kernel.name}: its `where` clause does not give instances() from the shapes; "
            f"pass {how}(instances=N)"
        )
    return lay, grid, requires


def launch(kernel: Kernel, lay: Layout, values: list[Any], n: int) -> list[np.ndarray]:
    """`Kernel.launch` on numpy arrays (the operands in order, `&mut` ones copied: what
    the host is handed is read-only); the `&mut` arrays after it, then its results."""
    named, written = {}, []
    for p, v in zip(lay.operands, values, strict=True):
        if p["kind"] == "tensor" and not p["const"]:
            v = np.array(v, copy=True)
            written.append(v)
        named[p["name"]] = v
    out = kernel.launch(instances=n, **named)
    own = [] if out is None else list(out) if isinstance(out, tuple) else [out]
    return [*written, *own]


def to_jax(kernel: Kernel, *, instances: int | None = None) -> InterpretedJax:
    lay, grid, requires = validate(kernel, instances, "to_jax")
    return InterpretedJax(kernel.name, lay, requires, instances, 0, grid, kernel=kernel)


@dataclass(eq=False)  # hashed by identity: jax.jit keys its cache by the function
class InterpretedJax(JaxKernel):
    """An interpreted kernel as a jax function (a host callback into `Kernel.launch`)."""

    kernel: Any = None

    def __repr__(self) -> str:
        names = ", ".join(p["name"] for p in self.layout.operands)
        return f"<vxc to_jax {self.name}({names}) -> interpreted {self.kernel.target}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        bound = self._bind(args, kwargs)
        sizes = self._sizes(bound)
        n = self._count(sizes)
        operands = [self._operand(p, bound, sizes) for p in self.layout.operands]
        scalars = {i for i, p in enumerate(self.layout.operands) if p["kind"] == "scalar"}
        for i in scalars:
            if isinstance(operands[i], jax.core.Tracer):
                raise ArgumentError(
                    f"{self.name}: argument '{self.layout.operands[i]['name']}' is traced; an "
                    "interpreted kernel takes its scalars as Python numbers"
                )
        fixed = {i: bound.values[self.layout.operands[i]["name"]] for i in scalars}
        tensors = [o for i, o in enumerate(operands) if i not in scalars]

        def host(*arrays: np.ndarray) -> list[np.ndarray]:
            it = iter(arrays)
            values = [fixed[i] if i in scalars else next(it) for i in range(len(operands))]
            return launch(self.kernel, self.layout, values, n)

        outs = jax.pure_callback(host, self._results(sizes, n), *tensors, vmap_method="sequential")
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _results(self, sizes: dict[str, int], n: int, batch: tuple[int, ...] = ()) -> list[Any]:
        import jax

        out = [
            jax.ShapeDtypeStruct((*batch, *self._shape(p, sizes)), _dtype(p["dtype"], self.name))
            for p in self.layout.mutable
        ]
        for r in self.layout.results:
            shape = (*batch, n, *r["shape"])
            out.append(jax.ShapeDtypeStruct(shape, _dtype(r["dtype"], self.name)))
        return out
