"""The JSON manifest beside a fatbin: what a loader needs to launch each kernel.

    {"format": "vx-nvidia-1", "target": "h100", "arch": "sm_90a",
     "fatbin": "stream.h100.fatbin",
     "kernels": [{"name", "params": [...], "block": [128, 1, 1],
                  "grid": ["instances", 1, 1], "dynamic_smem", "tmem_columns",
                  "registers", "results": [...], "smem_layout": {...}}]}

Parameters are in kernel order: `tensormap` (encode with cuTensorMapEncodeTiled from
`dtype`, `tile`, `box`, `swizzle`; an argument's map covers the argument viewed as
[rows, tile[1]], a result's covers [instances * tile[0], tile[1]]), `pointer` (a
device pointer to the argument), `u64` (a Vec's length or a scalar argument).
Sorted keys, two-space indent: byte-identical for the same kernel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from vxc.backends import RUNNERS

FORMAT = RUNNERS["nvidia"].format  # what vxc.runtime.load knows it by


@dataclass
class Manifest:
    target: str
    arch: str
    fatbin: str
    kernels: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "target": self.target,
            "arch": self.arch,
            "fatbin": self.fatbin,
            "kernels": self.kernels,
        }

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n").encode()

    @staticmethod
    def from_bytes(data: bytes) -> Manifest:
        d = json.loads(data)
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest (format {d.get('format')!r})")
        return Manifest(d["target"], d["arch"], d["fatbin"], d["kernels"])

    def kernel(self, name: str) -> dict:
        for k in self.kernels:
            if k["name"] == name:
                return k
        raise KeyError(
            f"no kernel `{name}` in the manifest (has: {[k['name'] for k in self.kernels]})"
        )
