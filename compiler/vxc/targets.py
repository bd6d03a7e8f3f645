"""The targets, defined once. Everything that names a target reads this table.

Each target names its machine model and the backend module that turns a verified vx
module into its artifact. A backend module exposes

    emit(module, stem: str, emit: str, options: BackendOptions) -> dict[str, bytes]

where `emit` is "artifact" or "target-ir" (vx-mlir never reaches a backend), and
returns file name -> bytes; the driver writes them. Backends import lazily: a
`vxc check` never loads jaxlib, llvmlite, libtpu or the CUDA tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class DmaLimits:
    """What one copy of the target's DMA engine can move (checked by checks/dma.py, E6012):
    the NVIDIA TMA moves boxes of at most 256 elements per dimension whose rows are a
    multiple of 16 bytes, between the spaces named here."""

    engine: str
    spaces: tuple[str, str]
    box_max: int
    row_multiple: int


TMA = DmaLimits("TMA", ("HBM", "VMEM"), 256, 16)


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    model_file: str  # machine model shipped in vxc/machines/
    backend: str  # module under vxc.backends that builds its artifact
    dma: DmaLimits | None = None  # limits of one DMA copy, checked before the backend runs


@dataclass(frozen=True)
class BackendOptions:
    """Per-build options a backend may read (Pallas keeps the same per-backend
    CompilerParams). `cpu` is the x86-64 level of cpu artifacts; `tpu_aot` names the TPU
    topologies (comma-separated: v5e,v6e) libtpu compiles a tpu artifact for during the
    build, "none" for no check; `tpu_instances` is the launch grid a tpu artifact is built
    for (a Mosaic grid is static): 0 = a plain call (instance 0 of 1, results as declared),
    N >= 1 = N instances with their results stacked (LANGUAGE.md 4.1); `link` says who
    links the cpu artifact's shared library: "cc" (the backend, with `cc` on PATH: the
    CLI) or "none" (the caller: Bazel links it with its C++ toolchain; the manifest names
    it all the same)."""

    cpu: str = "native"
    tpu_aot: str = "none"
    tpu_instances: int = 0
    link: str = "cc"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("cpu", "the host CPU (x86-64 native object + C header)", "cpu.vx", "cpu"),
        Target("tpu", "TPU v5e class (Mosaic TPU module)", "tpu.vx", "tpu"),
        Target("b200", "NVIDIA B200, sm_100a (cubin + PTX fatbin)", "b200.vx", "nvidia", TMA),
        Target("h100", "NVIDIA H100/H200, sm_90a (cubin + PTX fatbin)", "h100.vx", "nvidia", TMA),
    ]
}

TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)

# What `vxc build --emit` (and the Bazel rules' `emit`) may ask for, and what each gives
# (the CLI's --help prints these).
EMIT_MEANING: dict[str, str] = {
    "vx-mlir": "the checked program as a vx dialect MLIR module (docs/IR.md), any target",
    "target-ir": "the target's own IR: LLVM IR (cpu), Mosaic MLIR (tpu), PTX (b200, h100)",
    "artifact": "the files a program links or loads: .o/.h/.so/.json (cpu), a jax.export "
    "and manifest (tpu), a fatbin and manifest (b200, h100)",
}
EMITS: tuple[str, ...] = tuple(EMIT_MEANING)

# Host CPU levels of cpu artifacts (`--cpu`, //vx_rules:cpu): this machine, or a named
# x86-64 psABI level that gives the same object on every build machine.
CPU_LEVELS: tuple[str, ...] = ("native", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")


def model_source(target: str) -> tuple[str, bytes]:
    """(display path, bytes) of a target's shipped machine model."""
    name = TARGETS[target].model_file
    data = resources.files("vxc.machines").joinpath(name).read_bytes()
    return (f"<{target} model>/{name}", data)
