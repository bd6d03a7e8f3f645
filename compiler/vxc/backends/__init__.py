"""Backends, one module per target; `emit_target` is the single dispatch point."""

from __future__ import annotations


def emit_target(target: str, module, stem: str, emit: str, cpu: str = "native") -> dict[str, bytes]:
    from vxc.errors import Unsupported

    if target == "cpu":
        from vxc.backends.cpu import compile_module, cpu_target, target_ir

        host = cpu_target(cpu)
        if emit == "target-ir":
            return {f"{stem}.cpu.ll": target_ir(module, host).encode()}
        return compile_module(module, stem, target=host)
    raise Unsupported(
        f"the `{target}` backend is not built yet: `vxc check --target {target}` "
        f"and `vxc build --target {target} --emit vx-mlir` work; artifacts for "
        f"{target} do not exist in this version"
    )
