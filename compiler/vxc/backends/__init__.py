"""Backends, one package per target family, and the contract between them and the driver.

Each family package (`vxc.backends.cpu`, `.tpu`, `.nvidia`) exposes `BACKEND`, a
`Backend`: its options dataclass (vxc/targets.py), its rule table (op name -> the rule
that lowers it, on one walk base: vxc/backends/walk.py), its refusal table (op name ->
the coded refusal of an op it does not lower by design) and `emit`, which turns a
verified vx module into files for a `Target` record. `emit_target` is the one dispatch
point: it hands the backend the target record and that family's options, so no backend
reads the target back out of the IR (`vx.target` is only checked against it: the plan that sized
the module was for the same target). Backends import lazily (jaxlib, llvmlite, libtpu).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vxc.errors import Unsupported
from vxc.targets import TARGETS, Target, family_options


@dataclass(frozen=True)
class RefusalEntry:
    """An op a backend does not lower by design: the code and message of its refusal
    (the message may be a function of the op, to name what it refers to)."""

    code: str
    message: str | Callable[..., str]

    def text(self, op) -> str:
        return self.message(op) if callable(self.message) else self.message


@dataclass(frozen=True)
class Backend:
    """One backend family (Triton's `BaseBackend(target)`, Pallas's per-backend params).

    `build(module, target, options, stem, emit)` returns file name -> bytes, where
    `emit` is "artifact" or "target-ir" (vx-mlir never reaches a backend). `rules` and
    `refusals` together cover every op of `vxc.ir.ops.OPS` (a test enumerates them)."""

    family: str
    options: type
    build: Callable[..., dict[str, bytes]]
    rules: Mapping[str, Callable] = field(repr=False)
    refusals: Mapping[str, RefusalEntry] = field(default_factory=dict)
    # The vx -> vx passes run before `build`, in order (names of vxc/stages.py's PASSES).
    stages: tuple[str, ...] = ()
    # The `matmul_acc` operands its rule reads transposed ("a", "b"): `fold-transpose`
    # folds a `vx.transpose` into those only.
    matmul_transposes: frozenset[str] = frozenset({"a", "b"})
    # `lower(module, target, options)`: the lowering alone, which raises every refusal the
    # build would, without the tool runs after it (the cpu's LLVM O3); `vxc check` runs
    # it. None: the target-ir build is that lowering.
    lower: Callable[..., None] | None = None

    def emit(self, module, target: Target, options, stem: str, emit: str) -> dict[str, bytes]:
        if not isinstance(options, self.options):
            raise TypeError(f"the {self.family} backend takes {self.options.__name__}")
        return self.build(module, target, options, stem, emit)

    def covers(self, op_name: str) -> bool:
        """Whether this backend lowers `op_name` or refuses it with a coded diagnostic."""
        return op_name in self.rules or op_name in self.refusals


def backend(family: str) -> Backend:
    """The `Backend` of a family (imports its package)."""
    return importlib.import_module(f"vxc.backends.{family}").BACKEND


def emit_target(target: str, module, stem: str, emit: str, options: Mapping) -> dict[str, bytes]:
    """Build `module` for `target`: `options` are the flat build options (`api.build`'s
    keywords); the target's family takes its own dataclass of them."""
    t = TARGETS[target]
    b = backend(t.family)
    run_target_stages(module, target)
    return b.emit(module, t, family_options(t.family, options), stem, emit)


def lower_target(target: str, module, stem: str, options: Mapping) -> None:
    """Lower `module` for `target` as `emit_target` does, up to the backend's refusals
    (raised) and no further: what `vxc check` and the editor ask of a backend."""
    t = TARGETS[target]
    b = backend(t.family)
    run_target_stages(module, target)
    opts = family_options(t.family, options)
    if b.lower is None:
        b.emit(module, t, opts, stem, "target-ir")
    else:
        b.lower(module, t, opts)


def run_target_stages(module, target: str, stop_after: str | None = None) -> None:
    """Run the passes of `target`'s backend on `module` (all, or up to `stop_after`)."""
    from vxc.ir.passes import run_stages

    _check_planned_for(module, target)
    b = backend(TARGETS[target].family)
    if stop_after is not None and stop_after not in b.stages:
        raise Unsupported(
            f"the {target} build runs no pass `{stop_after}`; its passes: {', '.join(b.stages)}"
        )
    run_stages(module, b, stop_after)


def _check_planned_for(module, target: str) -> None:
    """The module's `vx.target` (ir/from_hir.py) names the target whose plan sized its
    rings and working sets; built for another target those sizes are wrong, silently.
    A driver bug, not a user's mistake, so it is an exception, not a diagnostic."""
    attrs = module.operation.attributes
    if "vx.target" in attrs:
        planned = str(attrs["vx.target"]).strip('"')
        if planned != target:
            raise ValueError(f"a vx module planned for `{planned}` handed to the `{target}` build")
