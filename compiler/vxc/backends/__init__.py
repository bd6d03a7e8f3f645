"""Backends, one package per target family; `emit_target` is the single dispatch point.

The table in `vxc.targets` names each target's backend module; that module's
`emit(module, stem, emit, options)` builds the files (see vxc/targets.py).
"""

from __future__ import annotations

import importlib

from vxc.targets import TARGETS, BackendOptions


def emit_target(
    target: str, module, stem: str, emit: str, options: BackendOptions | None = None
) -> dict[str, bytes]:
    from vxc.errors import Unsupported

    name = TARGETS[target].backend
    try:
        backend = importlib.import_module(f"vxc.backends.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"vxc.backends.{name}":
            raise
        raise Unsupported(
            f"the `{target}` backend is not built yet: `vxc check --target {target}` "
            f"and `vxc build --target {target} --emit vx-mlir` work; artifacts for "
            f"{target} do not exist in this version"
        ) from None
    return backend.emit(module, stem, emit, options or BackendOptions())
