"""Backends, one package per target family, and the contract between them and the driver.

Each family package (`vxc.backends.cpu`, `.tpu`, `.nvidia`) exposes `BACKEND`, a
`Backend`: its options dataclass (vxc/targets.py), its rule table (op name -> the rule
that lowers it, on one walk base: vxc/backends/walk.py), its refusal table (op name ->
the coded refusal of an op it does not lower by design) and `emit`, which turns a
verified vx module into files for a `Target` record. `emit_target` is the one dispatch
point: it hands the backend the target record and that family's options, so no backend
reads the target back out of the IR (`vx.target` is only checked against it: the plan that sized
the module was for the same target). Backends import lazily (jaxlib, llvmlite, libtpu).

Beside each `Backend` is its family's `Runner` (`RUNNERS`): how the artifact it built is
run from Python. `vxc.runtime.load` picks one by the manifest's `format`; `vxc.compile`'s
`Kernel` asks it how arguments are bound, where a call runs (`Way`: on the hardware, or
in vxc's interpreter with `interpret=True`) and how the instance count is bound. This
module imports nothing of vxc at its top: the slim Bazel runtime (`@vx//:runtime`) ships
it with `vxc.runtime` to load cpu artifacts without the compiler.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vxc.targets import Target


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
    from vxc.targets import TARGETS, family_options

    t = TARGETS[target]
    b = backend(t.family)
    run_target_stages(module, target)
    return b.emit(module, t, family_options(t.family, options), stem, emit)


def lower_target(target: str, module, stem: str, options: Mapping) -> None:
    """Lower `module` for `target` as `emit_target` does, up to the backend's refusals
    (raised) and no further: what `vxc check` and the editor ask of a backend."""
    from vxc.targets import TARGETS, family_options

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
    from vxc.errors import Unsupported
    from vxc.ir.passes import run_stages
    from vxc.targets import TARGETS

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


# -- the run side ------------------------------------------------------------------------


class RunnableKernel(Protocol):
    """What a `Way` may ask of the kernel it runs (`vxc.pyapi.Kernel`)."""

    name: str
    spec: dict  # the kernel's entry of the manifest
    manifest: dict
    manifest_path: Path

    def artifact(self) -> Any:
        """The kernel of the loaded artifact (`Runner.loader`), loaded on first use."""

    def ordered(self, named: dict[str, Any]) -> list[Any]:
        """The arguments in parameter order (the shape parameters inferred)."""

    def rebuilt(self, instances: int) -> RunnableKernel:
        """The same kernel built for a launch of `instances` (`Runner.grid_option`)."""


class Way(Protocol):
    """One way a compiled kernel runs: `named` are its arguments by parameter (shape
    parameters inferred unless `Runner.binds_shapes`). `call` runs one instance, results
    without the instance axis; `launch` runs `instances`, results stacked along a new
    leading axis; `threads` bounds a host thread pool where the way has one."""

    def call(self, kernel: RunnableKernel, named: dict[str, Any]) -> Any: ...

    def launch(
        self, kernel: RunnableKernel, named: dict[str, Any], instances: int, threads: int
    ) -> Any: ...


@dataclass(frozen=True)
class Runner:
    """How one family's artifacts run from Python. Its code is named "module:attribute"
    and imported on first use: the cpu's loader is `vxc.runtime` itself, which the slim
    runtime ships without the backend packages (whose `__init__` imports jaxlib)."""

    family: str
    format: str  # the manifest's "format", by which vxc.runtime.load knows the artifact
    loader: str  # called (manifest_path), or (manifest_path, externs) where `externs`
    device: str  # the `Way` a kernel runs on its hardware
    # The `Way` that runs it anywhere with `interpret=True` (on numpy arrays); None: the
    # family runs natively here, and `interpret=True` is the same run.
    interpreter: str | None = None
    externs: bool = False  # loads shared libraries of the kernels' `extern fn`s
    # Its loaded kernels bind arguments by name and infer and check the shape parameters
    # themselves (vxc.runtime); else `vxc.compile` infers them and passes positionally.
    binds_shapes: bool = False
    # The build option that fixes the instance count (a Mosaic grid is static): a launch
    # of another count is the kernel rebuilt with it (`RunnableKernel.rebuilt`).
    grid_option: str | None = None
    exports: bool = False  # each kernel carries its `jax.export` (`vxc.Kernel.exported`)

    def load(self, manifest_path: Path, externs: Sequence[str | Path] = ()) -> Any:
        """The loaded artifact (may raise `vxc.errors.NotRunnableHere`)."""
        loader = _resolve(self.loader)
        return loader(manifest_path, externs) if self.externs else loader(manifest_path)

    def way(self, interpret: bool) -> Way:
        """Where a kernel built with `interpret` runs."""
        return _resolve(self.interpreter if interpret and self.interpreter else self.device)


@dataclass(frozen=True)
class Loaded:
    """The `Way` of a family whose loaded kernels take the arguments in parameter order
    and bind the instance count at launch (the nvidia GPU's, and the tpu's base)."""

    def call(self, kernel: RunnableKernel, named: dict[str, Any]) -> Any:
        return kernel.artifact()(*kernel.ordered(named))

    def launch(
        self, kernel: RunnableKernel, named: dict[str, Any], instances: int, threads: int
    ) -> Any:
        check_instances(kernel.name, instances)
        return kernel.artifact().launch(*kernel.ordered(named), instances=instances)


LOADED = Loaded()


def _resolve(name: str) -> Any:
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


# One runner per family (the families of vxc/targets.py's TARGETS; a test checks both).
RUNNERS: dict[str, Runner] = {
    r.family: r
    for r in (
        Runner(
            "cpu",
            "vx-cpu-artifact",
            "vxc.runtime:Artifact",
            "vxc.backends.cpu.run:NATIVE",
            externs=True,
            binds_shapes=True,
        ),
        Runner(
            "tpu",
            "vx-tpu-artifact",
            "vxc.backends.tpu.runtime:TpuArtifact",
            "vxc.backends.tpu.run:EXPORT",
            "vxc.backends.tpu.run:INTERPRETER",
            grid_option="tpu_instances",
            exports=True,
        ),
        Runner(
            "nvidia",
            "vx-nvidia-1",
            "vxc.backends.nvidia.runtime:load",
            "vxc.backends:LOADED",  # cuda-python on a GPU of the target's architecture
            "vxc.backends.nvidia.run:SIMULATOR",
        ),
    )
}
FORMATS: dict[str, Runner] = {r.format: r for r in RUNNERS.values()}


def check_instances(kernel: str, instances: Any) -> None:
    """An instance count a launcher without its own check takes: an integer >= 1."""
    if not isinstance(instances, int) or instances < 1:
        raise ValueError(f"{kernel}: instances must be an integer >= 1, got {instances!r}")


def one_result(values: list) -> Any:
    """A call's results as Python returns them: none, one bare, or a tuple."""
    return None if not values else values[0] if len(values) == 1 else tuple(values)
