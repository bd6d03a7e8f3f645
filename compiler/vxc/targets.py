"""The targets, defined once. Everything that names a target reads this table."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    model_file: str  # machine model shipped in vxc/machines/


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("cpu", "the host CPU (x86-64 native object + C header)", "cpu.vx"),
        Target("tpu", "TPU v5e class (Mosaic TPU module)", "tpu.vx"),
        Target("b200", "NVIDIA B200, sm_100a (cubin + PTX fatbin)", "b200.vx"),
        Target("h100", "NVIDIA H100/H200, sm_90a (cubin + PTX fatbin)", "h100.vx"),
    ]
}


def model_source(target: str) -> tuple[str, bytes]:
    """(display path, bytes) of a target's shipped machine model."""
    name = TARGETS[target].model_file
    data = resources.files("vxc.machines").joinpath(name).read_bytes()
    return (f"<{target} model>/{name}", data)
