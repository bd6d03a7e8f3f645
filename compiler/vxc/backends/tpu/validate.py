"""Validation of a built TPU artifact directory, for the vx_test checks (and anyone who
received one): the Mosaic module verifies, libtpu compiles the export, JAX lowers it for
platform tpu, and the interpreter runs what libtpu compiled.

    art = Artifact.load(directory)
    art.verify(); art.aot("v5e", n=4); art.lower(n=8)
    outputs = art.interpret([tiles, w])            # the module libtpu specialised to n
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Artifact:
    kernel: object  # lower.Kernel as the manifest describes it (no module)
    mosaic: str
    export: bytes

    @classmethod
    def load(cls, directory: Path) -> Artifact:
        from vxc.backends.tpu.artifact import kernels_from_manifest

        (manifest,) = Path(directory).glob("*.tpu.json")
        doc = json.loads(manifest.read_text())
        (kernel,) = kernels_from_manifest(manifest.read_text())
        files = doc["kernels"][0]["files"]
        d = Path(directory)
        return cls(kernel, (d / files["mosaic"]).read_text(), (d / files["export"]).read_bytes())

    def verify(self) -> None:
        from vxc.backends.tpu.context import parse_mosaic

        parse_mosaic(self.mosaic)

    def aot(self, topo: str, n: int):
        from vxc.backends.tpu.aot import compile_export

        return compile_export(self.export, self.kernel, topo, n)

    def lower(self, n: int) -> str:
        """Deserialize, call inside jax.jit, lower for platform tpu: the StableHLO text."""
        import jax
        from jax import export

        from vxc.backends.tpu.export import arg_specs

        exp = export.deserialize(bytearray(self.export))
        specs = arg_specs(self.kernel, {s: n for s in self.kernel.symbols})
        f = jax.jit(lambda *a: exp.call(*a))
        return f.trace(*specs).lower(lowering_platforms=("tpu",)).as_text()

    def interpret(self, args, topo: str = "v5e", specialised: bool = True):
        """Run the kernel in the interpreter: by default the module libtpu compiled for
        these inputs' sizes (specialised), else the artifact's own Mosaic text."""
        from vxc.backends.tpu.aot import compile_export, specialised_mosaic
        from vxc.backends.tpu.export import shape_value
        from vxc.backends.tpu.interp import operands, run

        k = self.kernel
        text, grid = self.mosaic, None
        params = [p.to_json() for p in k.params()]
        inputs, names, at = operands(params, list(args))  # `args` in the Vx order
        sizes = {
            s: int(d)
            for a, p in zip(inputs[len(k.scalars) :], k.inputs, strict=True)
            for s, d in zip(p.symbols, a.shape, strict=True)
            if s
        }
        if specialised and k.symbols:
            (text,) = specialised_mosaic(compile_export(self.export, k, topo, sizes))
            if k.grid_operands:  # the grid bound is then a run-time operand
                grid = [shape_value(k.grid_expr, sizes)]
        aliases = [(at[k.param_position(i)], o) for i, o in k.aliases]
        return run(text, inputs, names, aliases, grid)
