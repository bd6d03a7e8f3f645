"""Call a tpu artifact's kernels through JAX: each kernel's `jax.export` blob (a Mosaic
`tpu_custom_call`) deserialized and run with `jax.jit` on a TPU device.

    art = vxc.runtime.load("out/stream.tpu.json")
    out = art.stream(tiles, w)            # jax.Array in, jax.Array out, on a TPU host
    f = jax.jit(lambda t, w: art.stream.exported.call(t, w) * 2)   # inside your own jit

Loading reads the manifest and works on any machine (the kernels, their parameters, the
export); running needs a TPU: elsewhere a call raises `NoTpu`, one line saying so.
A `&mut` argument that overlaps another argument is refused first (`ArgumentError`,
LANGUAGE.md section 7).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vxc.arguments import check_distinct, launch_count
from vxc.errors import NotRunnableHere


class NoTpu(NotRunnableHere):
    """No TPU device answers here; the message is one line."""


def distinct_tensors(spec: dict, args: Sequence[Any]) -> list[tuple[str, Any, bool]]:
    """A tpu kernel's tensor arguments for `vxc.runtime.check_distinct`: (name, value,
    written), written for a `&mut` (a parameter an output aliases, the manifest's
    `aliases`)."""
    mut = {a["param"] for a in spec.get("aliases", [])}
    return [
        (p["name"], a, k in mut)
        for k, (p, a) in enumerate(zip(spec["params"], args, strict=False))
        if p["space"] != "SMEM"
    ]


def _tpu_devices() -> list[Any]:
    import jax

    try:
        return jax.devices("tpu")
    except RuntimeError:
        return []


def shape_bound(spec: dict) -> str | None:
    """The grid a kernel's `where` clause gives from the shapes (the manifest's iteration
    bound, an expression: gemm's `((m // 128) * (n // 128))`), or None: a static grid,
    fixed by the build (`vxc build --tpu-instances N`)."""
    bound = spec["grid"]["iteration_bounds"][0]
    return bound if isinstance(bound, str) else None


def shape_grid(expr: str, params: list[dict], arrays: list[Any]) -> int:
    """The instances a grid given by the shapes (`((m // 128) * (n // 128))`, the manifest's
    iteration bound) is for these arrays (the manifest's `params`, in order)."""
    from vxc.backends.tpu.export import shape_value

    sizes = {
        d: int(n)
        for p, a in zip(params, arrays, strict=True)
        for d, n in zip(p["shape"], getattr(a, "shape", ()), strict=True)
        if isinstance(d, str)
    }
    return shape_value(expr, sizes)


class TpuKernel:
    """One kernel of a tpu artifact; `kernel(*arrays)` runs the export on a TPU."""

    def __init__(self, directory: Path, spec: dict) -> None:
        self.name: str = spec["name"]
        self.params: list[dict] = spec["params"]
        self.results: list[dict] = spec["results"]
        self.instances: int = spec["grid"]["instances"]  # the static grid it was built for
        self.grid_expr: str | None = shape_bound(spec)  # None: the static grid above
        self.spec = spec
        self.export_path = directory / spec["files"]["export"]
        self._exported: Any = None
        self._jit: Any = None

    @property
    def exported(self) -> Any:
        """The `jax.export.Exported` (deserialized on first use: jax loads only then)."""
        if self._exported is None:
            from jax import export

            self._exported = export.deserialize(bytearray(self.export_path.read_bytes()))
        return self._exported

    def __call__(self, *args: Any) -> Any:
        check_distinct(self.name, distinct_tensors(self.spec, args))
        if not _tpu_devices():
            import jax

            here = ", ".join(sorted({d.platform for d in jax.devices()}))
            if jax.config.jax_platforms:  # a vxc tpu build in this process sets it to cpu
                here += f" with jax_platforms={jax.config.jax_platforms}"
            raise NoTpu(
                f"no TPU here (jax sees {here}): tpu kernel '{self.name}' is a Mosaic "
                "tpu_custom_call that runs only on a TPU host"
            )
        if self._jit is None:
            import jax

            self._jit = jax.jit(self.exported.call)
        return self._jit(*args)

    def launch(self, *args: Any, instances: int | None = None) -> Any:
        """A kernel whose `where` clause gives the grid from the shapes runs that many
        instances: another count is refused, naming it (the cpu's VX_ERR_WHERE). Else
        the artifact runs the launch it was built for (`vxc build --tpu-instances N`),
        results stacked; any other count is refused. `launch(N, *args)` is deprecated."""
        instances, args = launch_count(self.name, args, instances)
        if self.grid_expr is not None:
            grid = shape_grid(self.grid_expr, self.params, args)
            if instances != grid:
                raise ValueError(
                    f"tpu kernel '{self.name}' runs {self.grid_expr} = {grid} instances for "
                    f"these shapes (its where clause); a launch of {instances} is refused"
                )
            return self(*args)
        if instances != self.instances:
            built = f"{self.instances} instances" if self.instances else "a plain call"
            raise ValueError(
                f"tpu kernel '{self.name}' was built for {built}; rebuild with "
                f"--tpu-instances {instances} to launch {instances}"
            )
        return self(*args)


class TpuArtifact:
    """A tpu artifact's manifest and exports: `artifact.<kernel>` or `artifact.kernels`."""

    def __init__(self, manifest_path: Path) -> None:
        self.manifest: dict = json.loads(manifest_path.read_text())
        self.kernels = {
            k["name"]: TpuKernel(manifest_path.parent, k) for k in self.manifest["kernels"]
        }

    def __getattr__(self, name: str) -> TpuKernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"artifact has no kernel '{name}' (kernels: {sorted(kernels)})")
