"""NVIDIA backends: b200 (sm_100a, tcgen05 into TMEM) and h100 (sm_90a, wgmma into
registers). Everything but the matrix unit is shared: TMA and mbarriers (tma.py), the
launch and the lowering rules (lower.py), the typed PTX builder (ptx.py), the
encoders (encoders.py), ptxas / fatbinary (toolchain.py) and the manifest
(manifest.py). The per-arch part is mma.py; the arch facts are the target's
`NvidiaArch` record (vxc/targets.py), which the driver hands over with the target.

    BACKEND.emit(module, TARGETS["h100"], NvidiaOptions(), "stream", "artifact")
    # {"stream.h100.fatbin", "stream.h100.json"} -> bytes

The package itself imports nothing heavy: `vxc.backends.nvidia.runtime` (the launcher,
with `encoders` and `manifest`) runs on a GPU machine that has numpy, ml_dtypes and
cuda-python but no jaxlib, lark or z3 (tools/gpu_check.py); the lowering and its jaxlib
load when `BACKEND`, `build`, `emit`, `ptx_text` or `NvidiaError` is first used.
"""

from __future__ import annotations

import importlib

__all__ = ["BACKEND", "NvidiaError", "build", "emit", "ptx_text"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("vxc.backends.nvidia.backend"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
