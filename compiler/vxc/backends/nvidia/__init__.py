"""NVIDIA backends: b200 (sm_100a, tcgen05 into TMEM) and h100 (sm_90a, wgmma into
registers). Everything but the matrix unit is shared: TMA and mbarriers (tma.py), the
launch and the lowering rules (lower.py), the typed PTX builder (ptx.py), the
encoders (encoders.py), ptxas / fatbinary (toolchain.py) and the manifest
(manifest.py). The per-arch part is mma.py.

    emit(module, "stream", "artifact", options)
    # {"stream.h100.fatbin", "stream.h100.json"} -> bytes

The target comes from the module's `vx.target` attribute.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.backends.nvidia.lower import ARCH, NvidiaError, lower_module
from vxc.backends.nvidia.manifest import Manifest
from vxc.ir.verify import check_module

__all__ = ["ARCH", "NvidiaError", "build", "emit", "module_target", "ptx_text"]


def module_target(module: ir.Module) -> str:
    attrs = module.operation.attributes
    if "vx.target" not in attrs:
        raise NvidiaError("the module has no `vx.target` attribute")
    target = ir.StringAttr(attrs["vx.target"]).value
    if target not in ARCH:
        raise NvidiaError(f"the NVIDIA backends build b200 and h100, not `{target}`")
    return target


def ptx_text(module: ir.Module) -> tuple[str, str, list[dict]]:
    """(target, PTX text, kernel manifest entries) of a verified vx module."""
    check_module(module)
    target = module_target(module)
    ptx, kernels = lower_module(module, target)
    return target, ptx.text(), kernels


def build(module: ir.Module, stem: str) -> dict[str, bytes]:
    from vxc.backends.nvidia import toolchain

    target, ptx, kernels = ptx_text(module)
    arch = ARCH[target]
    cubin, reports = toolchain.ptxas(ptx, arch, [k["name"] for k in kernels])
    for k in kernels:
        r = reports[k["name"]]
        k["registers"] = r.registers
    fatbin = toolchain.fatbinary(cubin, ptx, arch)
    files = {"fatbin": f"{stem}.{target}.fatbin", "manifest": f"{stem}.{target}.json"}
    manifest = Manifest(target=target, arch=arch, fatbin=files["fatbin"], kernels=kernels)
    return {files["fatbin"]: fatbin, files["manifest"]: manifest.to_bytes()}


def emit(module: ir.Module, stem: str, emit: str, options) -> dict[str, bytes]:
    """The backend entry point that `vxc.backends.emit_target` calls."""
    if emit == "target-ir":
        target, ptx, _ = ptx_text(module)
        return {f"{stem}.{target}.ptx": ptx.encode()}
    return build(module, stem)
