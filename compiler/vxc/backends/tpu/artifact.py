"""The JSON manifest that describes a TPU artifact to its users."""

from __future__ import annotations

import json

from vxc.backends import RUNNERS
from vxc.backends.tpu.lower import Kernel, Param

SERIALIZATION_FORMAT = 1  # the Mosaic stable serialization as_tpu_kernel writes


def manifest(name: str, kernels: list[Kernel], files: dict[str, dict[str, str]]) -> str:
    import jax

    doc = {
        "format": RUNNERS["tpu"].format,  # what vxc.runtime.load knows it by
        "version": 1,
        "name": name,
        "target": "tpu",
        "platform": "tpu",
        "jax": jax.__version__,
        "kernels": [
            {
                "name": k.name,
                "files": files[k.name],
                "custom_call": "tpu_custom_call",
                "mosaic_serialization_format": SERIALIZATION_FORMAT,
                "params": [p.to_json() for p in k.params()],
                "results": [p.to_json() for p in k.outputs],
                "dimension_variables": k.symbols,
                "grid": {
                    "instances": k.instances,
                    "iteration_bounds": [k.grid_expr or k.grid],
                    "dimension_semantics": ["parallel"],
                },
                "shape_params": k.shape_params,
                "aliases": [{"param": k.param_position(i), "result": o} for i, o in k.aliases],
                "bounds_checks": not k.bounds_proved,
                "preconditions": k.preconditions,
                "constraints": k.constraints,
                "scratch": k.scratch,
            }
            for k in kernels
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def kernels_from_manifest(text: str) -> list[Kernel]:
    """The kernels a manifest describes (no Mosaic module): what `aot.compile_export` and
    `export.arg_specs` need to specialise and compile an artifact someone else built."""
    doc = json.loads(text)
    out = []
    for k in doc["kernels"]:

        def param(p: dict) -> Param:
            shape = tuple(None if isinstance(d, str) else d for d in p["shape"])
            syms = tuple(d if isinstance(d, str) else None for d in p["shape"])
            return Param(p["name"], p["dtype"], shape, syms, p["space"] == "SMEM")

        params = [param(p) for p in k["params"]]
        ins = [p for p in params if not p.smem]
        scalars = [(pos, p) for pos, p in enumerate(params) if p.smem]
        outs = [param(p) for p in k["results"]]
        out.append(
            Kernel(
                k["name"],
                ins,
                outs,
                list(k["scratch"]),
                None,
                k["grid"]["instances"],
                list(k["preconditions"]),
                list(k["constraints"]),
                [(ins.index(params[a["param"]]), a["result"]) for a in k.get("aliases", [])],
                _grid_expr(k["grid"]),
                list(k.get("shape_params", [])),
                not k.get("bounds_checks", True),
                scalars,
            )
        )
    return out


def _grid_expr(grid: dict) -> str | None:
    bound = grid["iteration_bounds"][0]
    return bound if isinstance(bound, str) else None
