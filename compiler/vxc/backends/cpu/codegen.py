"""LLVM IR -> optimised host object code, and linking a shared library."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from vxc.backends.cpu.errors import CpuOptionError
from vxc.targets import CPU_LEVELS

CpuId = tuple[str, int, int]  # (vendor, family, model), as CPUID and /proc/cpuinfo give them


@dataclass(frozen=True)
class HostTarget:
    triple: str
    cpu: str
    features: str
    # The build machine's CPUID for a `native` target (tuning tables are keyed by it: the
    # feature bits do not say which instruction is faster); None for a named level.
    cpuid: CpuId | None = None


# One cached TargetMachine is shared by every build in the process; LLVM does not
# promise it is safe to run passes/emission on it from several threads at once.
_LLVM_LOCK = threading.Lock()


@functools.cache
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def host_target() -> HostTarget:
    """The machine we are running on; recorded in the manifest (objects are host-tuned)."""
    _init()
    return HostTarget(
        llvm.get_process_triple(),
        llvm.get_host_cpu_name(),
        llvm.get_host_cpu_features().flatten(),
        host_cpuid(),
    )


@functools.cache
def host_cpuid() -> CpuId | None:
    """This machine's (vendor, family, model), None where /proc/cpuinfo does not say."""
    try:
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        return None


def parse_cpuinfo(text: str) -> CpuId | None:
    """(vendor, family, model) of the first processor of a /proc/cpuinfo text, None where
    it has none of them (not x86)."""
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    try:
        return fields["vendor_id"], int(fields["cpu family"]), int(fields["model"])
    except (KeyError, ValueError):
        return None


# The x86-64 micro-architecture levels (psABI): a named level gives the same object on
# every build machine, which is what a shared (remote) build cache needs. The features
# are spelled out because the matmul micro-kernel is chosen from them.
_V2 = "+cx16,+popcnt,+sse3,+sse4.1,+sse4.2,+ssse3"
_V3 = _V2 + ",+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"
_V4 = _V3 + ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl"
X86_LEVELS = {"x86-64": "+sse2", "x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4}
CPU_CHOICES = CPU_LEVELS  # the table in vxc/targets.py; X86_LEVELS has each named one


def cpu_target(cpu: str = "native") -> HostTarget:
    """`native` (this machine, fastest, not portable) or a named x86-64 level."""
    if cpu == "native":
        return host_target()
    if cpu not in X86_LEVELS:
        raise CpuOptionError(f"unknown --cpu `{cpu}`; choose one of: {', '.join(CPU_CHOICES)}")
    _init()
    triple = llvm.get_process_triple()
    if not triple.startswith("x86_64"):
        raise CpuOptionError(f"--cpu {cpu} names an x86-64 level, but this host is {triple}")
    return HostTarget(triple, cpu, X86_LEVELS[cpu])


@functools.cache
def target_machine(target: HostTarget) -> llvm.TargetMachine:
    # Creating a target machine costs milliseconds; builds of the same target reuse it.
    _init()
    t = llvm.Target.from_triple(target.triple)
    return t.create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, reloc="pic", codemodel="default"
    )


def data_layout(target: HostTarget) -> str:
    return str(target_machine(target).target_data)


def optimize(llvm_ir: str, target: HostTarget) -> llvm.ModuleRef:
    """Parse, verify and run the O3 pipeline (loop + SLP vectorisation on)."""
    tm = target_machine(target)
    with _LLVM_LOCK:
        return _optimize(tm, llvm_ir)


def _optimize(tm: llvm.TargetMachine, llvm_ir: str) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(llvm_ir)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    mod.verify()
    return mod


def emit_object(mod: llvm.ModuleRef, target: HostTarget) -> bytes:
    tm = target_machine(target)
    with _LLVM_LOCK:
        return tm.emit_object(mod)


def link_shared(obj: bytes, soname: str) -> bytes:
    """`cc -shared` the object into a shared library (in a private temp dir)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise CpuOptionError("cpu backend: no C compiler (cc) found to link the shared library")
    with tempfile.TemporaryDirectory(prefix="vxc-link-") as tmp:
        o, so = Path(tmp) / "kernel.o", Path(tmp) / "kernel.so"
        o.write_bytes(obj)
        cmd = [cc, "-shared", f"-Wl,-soname,{soname}", "-o", str(so), str(o)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CpuOptionError(f"cpu backend: linking {soname} failed:\n{proc.stderr.strip()}")
        return so.read_bytes()
