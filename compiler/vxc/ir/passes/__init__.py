"""The pass stage: vx -> vx rewrites between the verified module and a backend.

Modelled on Triton's `BaseBackend.add_stages`: every pass is named once, in
`vxc.stages.PASSES`, and each backend declares the ordered names it runs
(`Backend.stages`, vxc/backends/__init__.py), so a new target writes only its own list.
The module is verified after every pass, so a pass that breaks the dialect's invariants
is caught at that pass and not in a backend, and any pass's output can be printed
(`vxc build --emit vx-mlir:after=NAME`).

A pass that cannot rewrite a user's program raises a `Refusal` (a coded diagnostic at
the op's span), as a backend does; a verifier failure after a pass is a compiler bug,
raised as `PassError` naming the pass.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from vxc.stages import PASSES

if TYPE_CHECKING:
    from jaxlib.mlir import ir

    from vxc.backends import Backend


class PassError(RuntimeError):
    """A pass left a module the verifier rejects (a compiler bug, not a user's mistake)."""


def run_pass(module: ir.Module, name: str, backend: Backend) -> None:
    modname, _, fn = PASSES[name].impl.partition(":")
    getattr(importlib.import_module(modname), fn)(module, backend)


def run_stages(module: ir.Module, backend: Backend, stop_after: str | None = None) -> None:
    """Run `backend.stages` in order on `module`, verifying after each; with `stop_after`,
    stop after that pass (one of the stages: the caller checks)."""
    from vxc.ir.verify import verify_module

    for name in backend.stages:
        run_pass(module, name, backend)
        errors = verify_module(module)
        if errors:
            raise PassError(f"after pass `{name}`: " + "; ".join(str(e) for e in errors))
        if name == stop_after:
            return
