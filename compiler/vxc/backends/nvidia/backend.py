"""The NVIDIA backend entry points (re-exported by the package, see its docstring)."""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.backends import Backend
from vxc.backends.nvidia.lower import REFUSALS, RULES, NvidiaError, lower_module
from vxc.backends.nvidia.manifest import Manifest
from vxc.ir.verify import check_module
from vxc.targets import NvidiaOptions, Target

__all__ = ["BACKEND", "NvidiaError", "build", "emit", "ptx_text"]


def ptx_text(module: ir.Module, target: Target) -> tuple[str, str, list[dict]]:
    """(target name, PTX text, kernel manifest entries) of a verified vx module."""
    check_module(module)
    ptx, kernels = lower_module(module, target)
    return target.name, ptx.text(), kernels


def build(module: ir.Module, target: Target, stem: str) -> dict[str, bytes]:
    from vxc.backends.nvidia import toolchain

    _, ptx, kernels = ptx_text(module, target)
    arch = target.arch.sm
    cubin, reports = toolchain.ptxas(ptx, arch, [k["name"] for k in kernels])
    for k in kernels:
        r = reports[k["name"]]
        k["registers"] = r.registers
    fatbin = toolchain.fatbinary(cubin, ptx, arch)
    files = {"fatbin": f"{stem}.{target.name}.fatbin", "manifest": f"{stem}.{target.name}.json"}
    manifest = Manifest(target=target.name, arch=arch, fatbin=files["fatbin"], kernels=kernels)
    return {files["fatbin"]: fatbin, files["manifest"]: manifest.to_bytes()}


def emit(
    module: ir.Module, target: Target, options: NvidiaOptions, stem: str, emit: str
) -> dict[str, bytes]:
    """The backend entry point (`BACKEND.emit`, called by `vxc.backends.emit_target`)."""
    if emit == "target-ir":
        _, ptx, _ = ptx_text(module, target)
        return {f"{stem}.{target.name}.ptx": ptx.encode()}
    return build(module, target, stem)


BACKEND = Backend(
    "nvidia",
    NvidiaOptions,
    emit,
    RULES,
    REFUSALS,
    stages=("inline", "fold-transpose"),
    matmul_transposes=frozenset({"b"}),  # the MMA reads B K-major for free, not A
)
