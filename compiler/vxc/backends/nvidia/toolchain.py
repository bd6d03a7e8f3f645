"""ptxas, fatbinary and cuobjdump from the `nvidia-cuda-nvcc` / `-cuobjdump` /
`-nvdisasm` wheels, found through the installed `nvidia` package (never PATH).

Each tool runs in a private temporary directory on files with fixed names, so the
outputs do not depend on where the build ran.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vxc.errors import Unsupported
from vxc.targets import NVIDIA_ARCHES

# Per-thread register limit (sm_90, sm_100).
MAX_REGISTERS = 255
SM = {a.sm: a.sm.removeprefix("sm_") for a in NVIDIA_ARCHES.values()}  # ptxas -arch


class ToolchainError(Unsupported, RuntimeError):
    """A CUDA tool is missing or rejected the code; the message carries its output."""


def bin_dir() -> Path:
    """site-packages/nvidia/cu13/bin of the installed wheels."""
    try:
        import nvidia  # namespace package of the nvidia-* wheels
    except ImportError:
        raise ToolchainError(
            "the CUDA tool wheels are not installed (nvidia-cuda-nvcc, nvidia-cuda-cuobjdump, "
            "nvidia-cuda-nvdisasm; see requirements.lock)"
        ) from None
    for root in nvidia.__path__:
        for sub in ("cu13", "cu12", "cuda_nvcc"):
            d = Path(root) / sub / "bin"
            if (d / "ptxas").exists():
                return d
    raise ToolchainError("ptxas not found in the installed nvidia wheels")


def tool(name: str) -> Path:
    path = bin_dir() / name
    if not path.exists():
        raise ToolchainError(f"`{name}` not found in {bin_dir()} (is its wheel installed?)")
    return path


def _run(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    env = {"PATH": str(bin_dir()), "LC_ALL": "C"}  # cuobjdump finds nvdisasm beside it
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class PtxasReport:
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    log: str


def _report(log: str, kernel: str) -> PtxasReport:
    m = re.search(
        rf"Function properties for {re.escape(kernel)}\n\s*(\d+) bytes stack frame, "
        rf"(\d+) bytes spill stores, (\d+) bytes spill loads",
        log,
    )
    regs = re.search(
        rf"Compiling entry function '{re.escape(kernel)}'.*?Used (\d+) registers", log, re.S
    )
    if not m or not regs:
        raise ToolchainError(f"could not read ptxas -v output for {kernel}:\n{log}")
    return PtxasReport(int(regs.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(1)), log)


def ptxas(ptx: str, arch: str, kernels: list[str]) -> tuple[bytes, dict[str, PtxasReport]]:
    """Assemble for `arch` with -v; refuse spills and more than 255 registers."""
    with tempfile.TemporaryDirectory(prefix="vxc-ptxas-") as d:
        Path(d, "kernel.ptx").write_text(ptx)
        p = _run([str(tool("ptxas")), f"-arch={arch}", "-v", "kernel.ptx", "-o", "kernel.cubin"], d)
        if p.returncode < 0 or p.returncode == ABORTED:
            if len(kernels) < 2:
                raise ToolchainError(f"ptxas -arch={arch} crashed:\n{p.stderr.strip()}")
            return _ptxas_apart(ptx, arch, kernels)
        if p.returncode:
            raise ToolchainError(f"ptxas -arch={arch} rejected the PTX:\n{p.stderr.strip()}")
        cubin = Path(d, "kernel.cubin").read_bytes()
    return cubin, _checked({k: _report(p.stderr, k) for k in kernels})


# ptxas's exit status when it aborts (SIGABRT through the shell convention: 128 + 6).
ABORTED = 134


def _ptxas_apart(ptx: str, arch: str, kernels: list[str]) -> tuple[bytes, dict[str, PtxasReport]]:
    """The module's entries assembled one by one (`ptxas -c`) and linked by nvlink into one
    cubin: ptxas 13.5 aborts ("double free or corruption") on some modules of several
    entries that each assemble alone (a b200 GEMM followed by a kernel without tcgen05,
    found by the fuzzer). Each entry keeps its own registers and code; the shared-memory
    symbol is `.extern` in every part, so the parts link as one module."""
    head, *entries = ptx.split(ENTRY)
    reports: dict[str, PtxasReport] = {}
    with tempfile.TemporaryDirectory(prefix="vxc-ptxas-") as d:
        objects = []
        for n, entry in enumerate(entries):
            Path(d, f"part{n}.ptx").write_text(head + ENTRY + entry)
            args = [f"-arch={arch}", "-v", "-c", f"part{n}.ptx", "-o", f"part{n}.o"]
            p = _run([str(tool("ptxas")), *args], d)
            if p.returncode:
                raise ToolchainError(f"ptxas -arch={arch} rejected the PTX:\n{p.stderr.strip()}")
            reports |= {k: _report(p.stderr, k) for k in kernels if f"'{k}'" in p.stderr}
            objects.append(f"part{n}.o")
        p = _run([str(tool("nvlink")), f"-arch={arch}", *objects, "-o", "kernel.cubin"], d)
        if p.returncode:
            raise ToolchainError(f"nvlink -arch={arch} failed:\n{p.stderr.strip()}")
        cubin = Path(d, "kernel.cubin").read_bytes()
    return cubin, _checked(reports)


ENTRY = ".visible .entry "  # how ptx.Module starts each kernel: the split point


def _checked(reports: dict[str, PtxasReport]) -> dict[str, PtxasReport]:
    for k, r in reports.items():
        if r.spill_stores or r.spill_loads:
            raise ToolchainError(
                f"ptxas spilled registers in {k} ({r.spill_stores} bytes stored, "
                f"{r.spill_loads} loaded); the backend keeps every kernel spill-free"
            )
        if r.registers > MAX_REGISTERS:
            raise ToolchainError(f"{k} uses {r.registers} registers (limit {MAX_REGISTERS})")
    return reports


def fatbinary(cubin: bytes, ptx: str, arch: str) -> bytes:
    """A fatbin with the cubin for `arch` and its PTX (for the driver's JIT)."""
    sm = SM[arch]
    with tempfile.TemporaryDirectory(prefix="vxc-fatbin-") as d:
        Path(d, "kernel.cubin").write_bytes(cubin)
        Path(d, "kernel.ptx").write_text(ptx)
        p = _run(
            [
                str(tool("fatbinary")),
                "--64",
                "--create=kernel.fatbin",
                f"--image3=kind=elf,sm={sm},file=kernel.cubin",
                f"--image3=kind=ptx,sm={sm},file=kernel.ptx",
            ],
            d,
        )
        if p.returncode:
            raise ToolchainError(f"fatbinary failed:\n{p.stderr.strip()}")
        return Path(d, "kernel.fatbin").read_bytes()


def _cuobjdump(binary: bytes, name: str, *args: str) -> str:
    """Run `cuobjdump ARGS name` on `binary` written to a scratch folder; its stdout."""
    with tempfile.TemporaryDirectory(prefix="vxc-sass-") as d:
        Path(d, name).write_bytes(binary)
        p = _run([str(tool("cuobjdump")), *args, name], d)
        if p.returncode:
            raise ToolchainError(f"cuobjdump {' '.join(args)} failed:\n{p.stderr.strip()}")
        return p.stdout


def sass(binary: bytes, suffix: str = "fatbin") -> str:
    """`cuobjdump -sass` of a cubin or fatbin."""
    return _cuobjdump(binary, f"kernel.{suffix}", "-sass")


def list_images(fatbin: bytes) -> str:
    """`cuobjdump -lelf -lptx`: the images a fatbin holds."""
    return _cuobjdump(fatbin, "kernel.fatbin", "-lelf", "-lptx")


def extract_ptx(fatbin: bytes) -> str:
    """The PTX image of a fatbin (`cuobjdump -xptx all`)."""
    with tempfile.TemporaryDirectory(prefix="vxc-sass-") as d:
        Path(d, "kernel.fatbin").write_bytes(fatbin)
        p = _run([str(tool("cuobjdump")), "-xptx", "all", "kernel.fatbin"], d)
        found = sorted(Path(d).glob("kernel.*.ptx"))
        if p.returncode or len(found) != 1:
            raise ToolchainError(f"cuobjdump -xptx found {len(found)} PTX images:\n{p.stderr}")
        return found[0].read_text()


# Instructions that must appear in the SASS of a kernel with TMA, mbarrier and MMA.
EXPECTED_SASS = {a.sm: a.sass for a in NVIDIA_ARCHES.values()}


def missing_sass(text: str, arch: str) -> list[str]:
    return [m for m in EXPECTED_SASS[arch] if m not in text]


__all__ = [
    "EXPECTED_SASS",
    "PtxasReport",
    "ToolchainError",
    "bin_dir",
    "extract_ptx",
    "fatbinary",
    "list_images",
    "missing_sass",
    "ptxas",
    "sass",
]
