"""The targets, defined once. Everything that names a target reads this table.

Each `Target` names its machine model, its backend family (the package under
`vxc.backends` that builds its artifact, see `vxc.backends.Backend`) and an arch record
with the facts of the chip the backend needs (for the NVIDIA targets: sm, compute
capability, where the accumulator lives, the MMA family, the shared-memory limit and
the SASS opcodes a built kernel must contain). A backend is handed the `Target` record;
nothing reads the target back out of the IR.

Per-build options are one frozen dataclass per backend family (`CpuOptions`,
`TpuOptions`, `NvidiaOptions`); each field's metadata names its command-line flag, so
the CLI's and the worker's flags are generated from them (`option_fields`) and a test
checks `api.build`'s keywords and the Bazel rules' flags against them. Backends import
lazily: a `vxc check` never loads jaxlib, llvmlite, libtpu or the CUDA tools.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path


@dataclass(frozen=True)
class DmaLimits:
    """What one copy of the target's DMA engine can move (checked by checks/dma.py, E6012,
    and by the NVIDIA backend's tensor-map encoder, `encoders.check_box`): the NVIDIA TMA
    moves boxes of at most 256 elements per dimension whose rows are a multiple of 16
    bytes, between the spaces named here."""

    engine: str
    spaces: tuple[str, str]
    box_max: int
    row_multiple: int


TMA = DmaLimits("TMA", ("HBM", "VMEM"), 256, 16)


@dataclass(frozen=True)
class NvidiaArch:
    """The facts of one NVIDIA architecture that the backend, the runtime and the
    artifact validator read (each written here once)."""

    sm: str  # PTX target, `sm_90a`
    capability: tuple[int, int]  # the compute capability the `a` cubin runs on exactly
    acc_space: str  # where `Memory::ACC` lives: the register file or tensor memory
    mma: str  # MMA family: "wgmma" (warpgroup, registers) | "tcgen05" (one thread, TMEM)
    mma_ptx: str  # the PTX instruction a kernel with matmul_acc contains
    mma_sass: str  # the SASS opcode it assembles to
    mma_n_max: int  # the largest N of one MMA
    smem_limit: int  # opt-in dynamic shared memory per CTA, bytes
    sass: tuple[str, ...]  # opcodes the SASS of a kernel with TMA, mbarrier and MMA contains
    sms: int  # streaming multiprocessors of the part (`vxc tune`'s model: waves of CTAs)

    @property
    def uses_tmem(self) -> bool:
        return self.acc_space == "TMEM"

    @property
    def smem_tiles(self) -> int:
        """The shared memory a CTA's tiles may take: the machine models' VMEM capacity
        (a test checks that they say so)."""
        return self.smem_limit - SMEM_RESERVE


_SMEM_OPT_IN = 232448  # 227 KiB: the per-block opt-in limit on sm_90 and sm_100
# What the nvidia backend keeps of it besides the tiles: 1 KiB to align the base at run
# time (the 128-byte swizzle repeats every 1 KiB) and 1 KiB for the mbarriers (8 bytes
# per slot of a TMA ring, one for the MMA) and the TMEM address.
SMEM_RESERVE = 2048

HOPPER = NvidiaArch(
    "sm_90a", (9, 0), "REG", "wgmma", "wgmma.mma_async", "HGMMA", 128, _SMEM_OPT_IN,
    ("UTMALDG", "SYNCS", "HGMMA"), 132,
)  # fmt: skip
BLACKWELL = NvidiaArch(
    "sm_100a", (10, 0), "TMEM", "tcgen05", "tcgen05.mma", "UTCHMMA", 256, _SMEM_OPT_IN,
    ("UTMALDG", "SYNCS", "UTCHMMA"), 148,
)  # fmt: skip
NVIDIA_ARCHES: dict[str, NvidiaArch] = {a.sm: a for a in (HOPPER, BLACKWELL)}


def _flag(flag: str, help: str, **argparse) -> dict:
    """Field metadata: the `--flag` of an option and its argparse settings."""
    return {"flag": flag, "help": help, "argparse": argparse}


# Host CPU levels of cpu artifacts (`--cpu`, //vx_rules:cpu): this machine, or a named
# x86-64 psABI level that gives the same object on every build machine.
CPU_LEVELS: tuple[str, ...] = ("native", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")
LINK_MODES: tuple[str, ...] = ("cc", "none")


@dataclass(frozen=True)
class CpuOptions:
    """cpu builds: the x86-64 level the object is tuned for, and who links the shared
    library: "cc" (the backend, with `cc` on PATH: the CLI) or "none" (the caller: Bazel
    links it with its C++ toolchain; the manifest names it all the same)."""

    cpu: str = field(
        default="native",
        metadata=_flag(
            "--cpu",
            "cpu target: native (default: this machine's CPU) or x86-64[-v2|-v3|-v4] (an "
            "object that runs on any CPU of that level); Bazel's vx_kernel builds x86-64-v3 "
            "(--//vx_rules:cpu), so pass --cpu x86-64-v3 for the same object",
            choices=CPU_LEVELS,
        ),
    )
    link: str = field(
        default="cc",
        metadata=_flag(
            "--link",
            "cpu target: who links the shared library: cc (default) or none (the caller)",
            choices=LINK_MODES,
        ),
    )


# What an f32 `matmul_acc` computes on the TPU's MXU (docs/TPU.md, "Precision"): Mosaic's
# fp32 contract precision (exact to f32 rounding, the default) or one bf16 pass.
TPU_MATMUL_PRECISIONS: tuple[str, ...] = ("f32", "bf16")


@dataclass(frozen=True)
class TpuOptions:
    """tpu builds: the TPU topologies libtpu compiles the artifact for during the build
    (comma-separated, "none" for no check), and the launch grid the artifact is built for
    (a Mosaic grid is static): 0 = a plain call, N >= 1 = N instances with their results
    stacked (LANGUAGE.md 4.1)."""

    tpu_aot: str = field(
        default="none",
        metadata=_flag(
            "--tpu-aot",
            "tpu target: compile the artifact with libtpu for these topologies "
            "(comma-separated, e.g. v5e,v6e; default none)",
            metavar="TOPOLOGIES",
        ),
    )
    tpu_instances: int = field(
        default=0,
        metadata=_flag(
            "--tpu-instances",
            "tpu target: build the kernel for a launch of N instances (results stacked); "
            "default 0, a plain call",
            type=int,
            metavar="N",
        ),
    )

    tpu_matmul_precision: str = field(
        default="f32",
        metadata=_flag(
            "--tpu-matmul-precision",
            "tpu target: what an f32 matmul_acc computes: f32 (default; exact to f32 "
            "rounding like the cpu, several MXU passes) or bf16 (one MXU pass: inputs "
            "rounded to bf16, products summed in f32; faster, about 3 significant digits)",
            choices=TPU_MATMUL_PRECISIONS,
        ),
    )

    @property
    def aot_topologies(self) -> tuple[str, ...]:
        spec = self.tpu_aot
        return () if spec in ("", "none") else tuple(s for s in spec.split(",") if s)


# The topologies a Bazel tpu artifact is compiled for (vx_rules/private/kernel.bzl passes
# `--tpu-aot` with this value; a test checks the copy).
BAZEL_TPU_AOT = "v5e,v6e"


@dataclass(frozen=True)
class NvidiaOptions:
    """b200/h100 builds take no options yet: the arch record decides everything."""


OPTIONS: dict[str, type] = {"cpu": CpuOptions, "tpu": TpuOptions, "nvidia": NvidiaOptions}


@dataclass(frozen=True)
class OptionField:
    name: str  # the keyword of `api.build` and the dataclass field
    family: str
    flag: str
    help: str
    default: object
    argparse: dict


def option_fields() -> tuple[OptionField, ...]:
    """Every per-family build option, in a stable order (the CLI's, the worker's and
    `api.build`'s keywords are these)."""
    out = []
    for family, cls in OPTIONS.items():
        for f in fields(cls):
            assert f.default is not MISSING, f"{cls.__name__}.{f.name} needs a default"
            m = f.metadata
            out.append(OptionField(f.name, family, m["flag"], m["help"], f.default, m["argparse"]))
    return tuple(out)


def add_option_flags(parser) -> None:
    """Add one `--flag` per build option to an argparse (sub)parser."""
    for o in option_fields():
        parser.add_argument(o.flag, dest=o.name, default=o.default, help=o.help, **o.argparse)


# The analysis's inputs besides the sources and the machine model (`api.analyze`'s
# keywords): `vxc check`, `vxc build` and the worker's `hir` and `build` requests (Bazel's
# `vx_kernel(consts = ...)`) take these flags, all from this one table.
ANALYSIS_FLAGS: tuple[OptionField, ...] = (
    OptionField(
        "consts",
        "analysis",
        "--const",
        "instantiate the generic kernel entries' const parameter NAME as VALUE "
        "(repeatable); an entry with const parameters is built once per instantiation",
        None,
        {"action": "append", "metavar": "NAME=VALUE"},
    ),
)


def add_analysis_flags(parser) -> None:
    """Add the analysis flags (`--const NAME=VALUE`) to an argparse (sub)parser."""
    for o in ANALYSIS_FLAGS:
        parser.add_argument(o.flag, dest=o.name, default=o.default, help=o.help, **o.argparse)


def analysis_from(values: dict) -> dict:
    """`api.analyze`'s keywords from parsed flags; ValueError names a malformed one."""
    return {"consts": parse_consts(values.get("consts") or [])}


def parse_consts(pairs: list[str]) -> dict[str, int]:
    """`--const N=1024` -> {"N": 1024}; anything else is a ValueError naming it."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            if not sep or not name.isidentifier():
                raise ValueError
            out[name] = int(value)
        except ValueError:
            raise ValueError(f"--const takes NAME=INTEGER, found `{pair[:200]}`") from None
    return out


def options_from(values: dict) -> dict:
    """The build options among `values` (an argparse namespace's vars, or keywords)."""
    return {o.name: values[o.name] for o in option_fields() if o.name in values}


def family_options(family: str, values: dict):
    """The options dataclass of `family` built from the flat option values."""
    cls = OPTIONS[family]
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    model_file: str  # machine model shipped in vxc/machines/
    family: str  # backend family: the package under vxc.backends that builds it
    arch: NvidiaArch | None = None  # the chip's facts (NVIDIA targets)
    dma: DmaLimits | None = None  # limits of one DMA copy, checked before the backend runs
    # The width of the index type its kernels compute shapes and indices in: a literal
    # dimension past its signed range is E0406 at check time (vxc/checks/dims.py).
    index_bits: int = 64


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("cpu", "the host CPU (x86-64 native object + C header)", "cpu.vx", "cpu"),
        Target("tpu", "TPU v5e class (Mosaic TPU module)", "tpu.vx", "tpu", index_bits=32),
        Target(
            "b200", "NVIDIA B200, sm_100a (cubin + PTX fatbin)", "b200.vx", "nvidia",
            BLACKWELL, TMA,
        ),
        Target(
            "h100", "NVIDIA H100/H200, sm_90a (cubin + PTX fatbin)", "h100.vx", "nvidia",
            HOPPER, TMA,
        ),
    ]
}  # fmt: skip

TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)

# What `vxc build --emit` (and the Bazel rules' `emit`) may ask for, and what each gives
# (`report`: `vxc report`'s table and roofline SVG)
# (the CLI's --help prints these).
EMIT_MEANING: dict[str, str] = {
    "vx-mlir": "the checked program as a vx dialect MLIR module (docs/IR.md), any target",
    "target-ir": "the target's own IR: LLVM IR (cpu), Mosaic MLIR (tpu), PTX (b200, h100)",
    "artifact": "the files a program links or loads: .o/.h/.so/.json (cpu), a jax.export "
    "and manifest (tpu), a fatbin and manifest (b200, h100)",
    "report": "the cost report: per kernel bytes per edge, FLOPs, intensity, rings and the "
    "roofline bound, as a table and a roofline SVG (vxc report, docs/REPORT.md)",
}
EMITS: tuple[str, ...] = tuple(EMIT_MEANING)


def model_source(target: str) -> tuple[str, bytes]:
    """(display path, bytes) of a target's shipped machine model."""
    name = TARGETS[target].model_file
    # Read beside this file, not through importlib.resources: that module's imports
    # (tempfile, zipfile, inspect) cost ~10 ms of every cold `vxc check` (Zen 4).
    data = (Path(__file__).parent / "machines" / name).read_bytes()
    return (f"<{target} model>/{name}", data)
