"""The tpu's `Way`s (vxc.backends.Runner): the kernel's `jax.export` on a TPU
(`runtime.TpuArtifact`), or its Mosaic module in vxc's interpreter on numpy arrays
anywhere (`interp.py`, with `interpret=True`).

A Mosaic grid is static, so the instance count is bound at build time: a launch of N
instances runs the kernel rebuilt with `tpu_instances=N` (`Runner.grid_option`), unless
the kernel's `where` clause gives the grid from the shapes (`instances() == (m // 128) *
(n // 128)`), when any other count is refused as the cpu refuses it (VX_ERR_WHERE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vxc.backends import Loaded, RunnableKernel, check_instances, one_result
from vxc.backends.tpu.runtime import distinct_tensors, shape_bound, shape_grid

# A tpu scalar parameter's dtype -> the numpy kinds a value of it may have
# (b: bool, i/u: integer, f: float).
_SCALAR_KINDS = {"bool": "b", "i32": "iub", "f32": "fiub"}


@dataclass(frozen=True)
class Export(Loaded):
    """The `jax.export` through `jax.jit` on a TPU (jax.Array in and out)."""

    def launch(
        self, kernel: RunnableKernel, named: dict[str, Any], instances: int, threads: int
    ) -> Any:
        check_instances(kernel.name, instances)
        if shape_bound(kernel.spec) is not None:
            # No rebuild: a launch override would add an export constraint that
            # contradicts the clause's.
            return kernel.artifact().launch(*kernel.ordered(named), instances=instances)
        k = kernel.rebuilt(instances)
        return k.artifact()(*k.ordered(named))


@dataclass(frozen=True)
class Interpreter:
    """The Mosaic module in vxc's interpreter on numpy arrays; `&mut` tensors written in
    place, as on the cpu."""

    def call(self, kernel: RunnableKernel, named: dict[str, Any]) -> Any:
        return one_result([r[0] for r in interpret(kernel, kernel.ordered(named))])

    def launch(
        self, kernel: RunnableKernel, named: dict[str, Any], instances: int, threads: int
    ) -> Any:
        check_instances(kernel.name, instances)
        bound = shape_bound(kernel.spec)
        if bound is None:
            k = kernel.rebuilt(instances)
            return one_result(interpret(k, k.ordered(named)))
        arrays = kernel.ordered(named)
        grid = _grid(kernel.spec, [np.asarray(a) for a in arrays])
        if instances != grid:  # refused as the cpu refuses it (VX_ERR_WHERE)
            from vxc.runtime import LaunchError
            from vxc.status import STATUS

            raise LaunchError(
                kernel.name,
                STATUS["VX_ERR_WHERE"],
                "VX_ERR_WHERE",
                f" (instances() == {bound}: {grid} for these shapes; a launch of "
                f"{instances} is refused)",
            )
        return one_result(interpret(kernel, arrays))


EXPORT = Export()
INTERPRETER = Interpreter()


def _grid(spec: dict, arrays: list[Any]) -> int:
    return shape_grid(shape_bound(spec), spec["params"], arrays)


def interpret(kernel: RunnableKernel, arrays: list[Any]) -> list[np.ndarray]:
    """Run the kernel's Mosaic module in the interpreter on the grid it was built for
    (or the one its shapes give): results stacked over the instances."""
    from vxc.arguments import check_distinct
    from vxc.backends.tpu import interp

    spec = kernel.spec
    arrays = [np.asarray(a) for a in arrays]
    params = spec["params"]
    check_args(kernel.name, params, arrays)
    check_distinct(kernel.name, distinct_tensors(spec, arrays))
    mosaic = (kernel.manifest_path.parent / spec["files"]["mosaic"]).read_text()
    aliases = [(a["param"], a["result"]) for a in spec.get("aliases", [])]
    inputs, names, at = interp.operands(params, arrays)
    grid = None if shape_bound(spec) is None else [_grid(spec, arrays)]
    outs = interp.run(mosaic, inputs, names, [(at[i], o) for i, o in aliases], grid).outputs
    # A `&mut` tensor is written in place, as on the cpu: the result its buffer aliases
    # goes back into the caller's array and is not returned.
    for i, o in aliases:
        np.copyto(arrays[i], outs[o])
    outs = [x for o, x in enumerate(outs) if o not in {o for _, o in aliases}]
    built = spec["grid"]["instances"]
    return outs if built else [o[None] for o in outs]


def check_args(kernel: str, params: list[dict], arrays: list[Any]) -> None:
    """The tpu manifest's dtypes and static dimensions, checked before the interpreter runs
    (a TPU's export refuses a mismatch too; the interpreter itself would compute on it)."""
    from vxc.runtime import ArgumentError, _dtype

    for p, a in zip(params, arrays, strict=True):
        who = f"{kernel}: argument '{p['name']}'"
        if p["space"] == "SMEM":  # a scalar parameter: a number of its kind
            _check_scalar(who, p["dtype"], a)
            continue
        want = _dtype(p["dtype"], who)
        if a.dtype != want:
            raise ArgumentError(f"{who} must have dtype {want}, got {a.dtype}")
        shape = [None if isinstance(d, str) else d for d in p["shape"]]
        if a.ndim != len(shape) or any(
            d is not None and d != s for d, s in zip(shape, a.shape, strict=True)
        ):
            raise ArgumentError(f"{who} has shape {a.shape}, the kernel takes {p['shape']}")


def _check_scalar(who: str, dtype: str, a: Any) -> None:
    from vxc.arguments import ArgumentError

    if a.ndim != 0 or a.dtype.kind not in _SCALAR_KINDS[dtype]:
        raise ArgumentError(f"{who} is a {dtype} scalar, got {a.dtype} of shape {a.shape}")
    if dtype == "i32" and not -(2**31) <= int(a) < 2**31:
        raise ArgumentError(f"{who} = {int(a)} does not fit the TPU's 32-bit scalar unit")
