"""TPU backend: vx module -> Mosaic TPU kernel, wrapped as a `tpu_custom_call` and
exported with `jax.export` for platform `tpu`.

    outputs = compile_module(module, "stream")
    # {"stream.tpu.mosaic.mlir", "stream.tpu.jax_export", "stream.tpu.json"} -> bytes

Nothing is written to disk here; the driver writes the outputs. `vxc.backends.tpu.aot`
compiles an artifact with libtpu against TPU topology descriptions, and
`vxc.backends.tpu.interp` runs its Mosaic module on the CPU with numpy. `BACKEND` is its
`vxc.backends.Backend` (options: `vxc.targets.TpuOptions`).
"""

from __future__ import annotations

import posixpath
import re

from jaxlib.mlir import ir
from jaxlib.mlir.passmanager import PassManager

from vxc.backends import Backend
from vxc.backends.tpu.context import mosaic_context, parse_mosaic
from vxc.backends.tpu.errors import LibtpuRejected, TpuError
from vxc.backends.tpu.lower import REFUSALS, RULES, Kernel, lower_module
from vxc.ir.verify import check_module
from vxc.targets import Target, TpuOptions

__all__ = [
    "BACKEND",
    "RULES",
    "Kernel",
    "LibtpuRejected",
    "TpuError",
    "compile_module",
    "emit",
    "mosaic_kernels",
    "mosaic_text",
]


def emit(
    module: ir.Module, target: Target, options: TpuOptions, stem: str, emit: str
) -> dict[str, bytes]:
    """The backend entry point (`BACKEND.emit`, called by `vxc.backends.emit_target`)."""
    instances, precision = options.tpu_instances, options.tpu_matmul_precision
    if emit == "target-ir":
        kernels = mosaic_kernels(module, instances, precision)
        return {
            f"{_base(stem, k, kernels)}.tpu.mosaic.mlir": mosaic_text(k).encode() for k in kernels
        }
    return compile_module(
        module, stem, aot=options.aot_topologies, instances=instances, precision=precision
    )


BACKEND = Backend("tpu", TpuOptions, emit, RULES, REFUSALS, stages=("inline", "fold-transpose"))


def mosaic_kernels(module: ir.Module, instances: int = 0, precision: str = "f32") -> list[Kernel]:
    """Verified vx module -> one Mosaic module per kernel (verified with the tpu dialect),
    for a launch of `instances` (0: a plain call); f32 matmuls at `precision`
    (`TpuOptions.tpu_matmul_precision`)."""
    check_module(module)
    ctx = mosaic_context()
    kernels = lower_module(module, ctx, instances, precision)
    if not kernels:
        raise TpuError("E7003", "tpu backend: the module defines no kernel function")
    for k in kernels:
        # The real Mosaic verifier, in a context where nothing unregistered is allowed;
        # then CSE folds the rules' repeated constants and slices (readable text).
        # Ops keep their .vx locations when the vx module has them (libtpu's errors then
        # name the source line); otherwise the re-parse gives each op its line in the
        # Mosaic text, which is the artifact's .tpu.mosaic.mlir.
        debug = portable_locations(k.module.operation.get_asm(enable_debug_info=True))
        k.module = parse_mosaic(debug if 'loc("' in debug else mosaic_text(k), ctx)
        with ctx:
            PassManager.parse("builtin.module(cse)").run(k.module.operation)
    return kernels


_FILE_LOC = re.compile(r'loc\("([^"]*)":')


def portable_locations(asm: str) -> str:
    """File locations reduced to the file's name: the export embeds them, and the same
    source must give the same bytes however its path was spelled (relative, absolute,
    another working directory). libtpu's errors still name file:line:col."""
    return _FILE_LOC.sub(lambda m: f'loc("{posixpath.basename(m.group(1))}":', asm)


def mosaic_text(kernel: Kernel) -> str:
    return str(kernel.module)


def _base(stem: str, k: Kernel, kernels: list[Kernel]) -> str:
    return stem if len(kernels) == 1 else f"{stem}.{k.name}"


def compile_module(
    module: ir.Module,
    stem: str,
    *,
    aot: tuple[str, ...] = (),
    instances: int = 0,
    precision: str = "f32",
) -> dict[str, bytes]:
    """Build the artifact files: per kernel the Mosaic text and the serialized export,
    plus one manifest. `aot` names topologies libtpu must compile the export for."""
    from vxc.backends.tpu.artifact import manifest
    from vxc.backends.tpu.export import export_kernel

    kernels = mosaic_kernels(module, instances, precision)
    out: dict[str, bytes] = {}
    files: dict[str, dict[str, str]] = {}
    for k in kernels:
        base = _base(stem, k, kernels)
        text = mosaic_text(k)
        blob = export_kernel(k)
        if aot:
            from vxc.backends.tpu.aot import compile_export

            for topo in aot:
                compile_export(blob, k, topo)
        files[k.name] = {"mosaic": f"{base}.tpu.mosaic.mlir", "export": f"{base}.tpu.jax_export"}
        out[files[k.name]["mosaic"]] = text.encode()
        out[files[k.name]["export"]] = blob
    out[f"{stem}.tpu.json"] = manifest(stem, kernels, files).encode()
    return out
