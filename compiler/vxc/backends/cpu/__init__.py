"""CPU backend: vx module -> x86-64 object + C header + JSON manifest (+ .so); `BACKEND`
is its `vxc.backends.Backend` (options: `vxc.targets.CpuOptions`).

    outputs = compile_module(module, "stream")
    # {"stream.cpu.o", "stream.cpu.h", "stream.cpu.json", "stream.cpu.so"} -> bytes

Nothing is written to disk here; the driver writes the outputs.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.backends import Backend
from vxc.backends.cpu.artifact import embed_abi, header, manifest
from vxc.backends.cpu.codegen import (
    CPU_CHOICES,
    HostTarget,
    cpu_target,
    data_layout,
    emit_object,
    host_target,
    link_shared,
    optimize,
)
from vxc.backends.cpu.errors import STATUS, BackendError, CpuOptionError
from vxc.backends.cpu.lower import RULES, ModuleLowering
from vxc.backends.cpu.matmul import blocking_for
from vxc.ir.verify import check_module
from vxc.targets import LINK_MODES, CpuOptions, Target

__all__ = [
    "CPU_CHOICES",
    "STATUS",
    "BACKEND",
    "BackendError",
    "CpuOptionError",
    "HostTarget",
    "compile_module",
    "cpu_target",
    "emit",
    "host_target",
    "lower_to_llvm",
    "target_ir",
]


def emit(
    module: ir.Module, target: Target, options: CpuOptions, stem: str, emit: str
) -> dict[str, bytes]:
    """The backend entry point (`BACKEND.emit`, called by `vxc.backends.emit_target`)."""
    host = cpu_target(options.cpu)
    if emit == "target-ir":
        return {f"{stem}.cpu.ll": target_ir(module, host).encode()}
    if options.link not in LINK_MODES:
        raise CpuOptionError(f"cpu backend: unknown link mode {options.link!r} (cc or none)")
    return compile_module(module, stem, target=host, link=options.link == "cc")


def _lower(module: ir.Module, target: Target, options: CpuOptions) -> None:
    """The lowering to LLVM IR alone (`BACKEND.lower`): it raises every refusal of the
    build; LLVM's optimiser after it refuses nothing (~40 ms of a cold check on Zen 4)."""
    lower_to_llvm(module, cpu_target(options.cpu))


BACKEND = Backend("cpu", CpuOptions, emit, RULES, stages=("inline", "fold-transpose"), lower=_lower)


def lower_to_llvm(
    module: ir.Module, target: HostTarget | None = None
) -> tuple[str, ModuleLowering]:
    """Verified vx module -> unoptimised LLVM IR text (plus the lowering, for signatures)."""
    check_module(module)
    target = target or host_target()
    lowering = ModuleLowering(
        module, target.triple, data_layout(target), blocking_for(target.features, target.cpuid)
    )
    llvm = lowering.run()
    embed_abi(llvm, list(lowering.sigs.values()))
    return str(llvm), lowering


def target_ir(module: ir.Module, target: HostTarget | None = None) -> str:
    """Optimised LLVM IR (what `--emit target-ir` shows for cpu)."""
    target = target or host_target()
    text, _ = lower_to_llvm(module, target)
    return str(optimize(text, target))


def compile_module(
    module: ir.Module,
    name: str,
    *,
    shared: bool = True,
    target: HostTarget | None = None,
    link: bool = True,
) -> dict[str, bytes]:
    """Build `module` for the host CPU; file name -> bytes, names `<name>.cpu.<ext>`.

    With `link=False` the manifest still names `<name>.cpu.so` but the library is left
    to the caller to link from the object (Bazel's C++ toolchain), so the other files
    are the same bytes either way."""
    target = target or host_target()
    text, lowering = lower_to_llvm(module, target)
    obj = emit_object(optimize(text, target), target)
    sigs = list(lowering.sigs.values())
    files = {"object": f"{name}.cpu.o", "header": f"{name}.cpu.h"}
    out = {
        files["object"]: obj,
        files["header"]: header(name, sigs, target, lowering.variants).encode(),
    }
    if shared:
        files["shared_library"] = f"{name}.cpu.so"
        if link:
            out[files["shared_library"]] = link_shared(obj, files["shared_library"])
    files["manifest"] = f"{name}.cpu.json"
    out[files["manifest"]] = manifest(name, sigs, target, files, lowering.variants).encode()
    return out
