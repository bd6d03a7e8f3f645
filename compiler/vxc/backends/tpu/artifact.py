"""The JSON manifest that describes a TPU artifact to its users."""

from __future__ import annotations

import json

from vxc.backends.tpu.lower import Kernel

SERIALIZATION_FORMAT = 1  # the Mosaic stable serialization as_tpu_kernel writes


def manifest(name: str, kernels: list[Kernel], files: dict[str, dict[str, str]]) -> str:
    import jax

    doc = {
        "format": "vx-tpu-artifact",
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
                "params": [p.to_json() for p in k.inputs],
                "results": [p.to_json() for p in k.outputs],
                "dimension_variables": k.symbols,
                "grid": {"iteration_bounds": [1], "dimension_semantics": ["parallel"]},
                "scratch": k.scratch,
            }
            for k in kernels
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
