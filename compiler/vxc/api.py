"""The one compile API that the CLI, the worker and the tests drive.

Pipeline: frontend (parse) -> hir (resolve, types, one HIR per function instance,
ownership, token linearity) -> Analysis (target-independent, cacheable as .vxhir)
-> the target plan (plan/__init__.py: routes, allocations and every op's attributes,
computed once per target) -> seams and bounds with z3 (reading the plan's routes)
-> ir (vx dialect, attributes copied from the plan, locations from spans)
-> backends/<target> (vxc.backends: a `Backend` per family, handed the `Target` record
and its options dataclass). A backend that cannot lower a valid program raises a
`Refusal`, which `build` turns into a coded diagnostic at the op's span (exit 1); any
other exception is a compiler bug. Each per-target fact is computed in one place.
Heavy modules are imported only when needed: jaxlib and llvmlite when a build needs
them, z3 when a function raises a solver obligation, protobuf for the .vxhir cache,
so `vxc check` stays fast. `render` and `vxc.outputs` are what the CLI and the worker
share for diagnostics and output files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import vxc
from vxc.checks.obligations import needs_proof
from vxc.checks.solver import Solver
from vxc.diagnostics import Diagnostic, DiagnosticSink
from vxc.diagnostics.render import render_all_human, render_json
from vxc.errors import Refusal, Unsupported
from vxc.frontend import ast as A
from vxc.frontend.parser import parse_source
from vxc.hir.ownership import check_ownership
from vxc.hir.program import CheckedHir, Program
from vxc.hir.typecheck import typecheck
from vxc.machines.model import Machine, build_machine
from vxc.plan import TargetPlan, plan_target
from vxc.stages import emit_after, emit_error
from vxc.targets import EMITS, TARGETS, model_source
from vxc.tuning import Tuned

# Front-half errors after which the per-target checks still run (see Analysis.checkable).
TARGET_CHECKS_AFTER = frozenset({"E6011"})


class StaleCache(Exception):
    """A .vxhir that is corrupt, from another compiler, or of other sources."""


@dataclass(frozen=True)
class Source:
    """One input file: its display path (as the user named it) and its bytes."""

    path: str
    data: bytes


@dataclass
class BuildResult:
    diagnostics: list[Diagnostic]
    outputs: dict[str, bytes] = field(default_factory=dict)  # file name -> bytes
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


@cache
def compiler_version() -> str:
    """Package version plus a digest of the compiler's own files: an edit invalidates caches.

    Paths enter the digest relative to the package, so where the checkout lives does not
    change the version (remote caches stay shared between machines).
    """
    root = Path(vxc.__file__).parent
    files = sorted(
        f
        for f in root.rglob("*")
        if f.suffix in (".py", ".lark", ".json", ".vx") and "__pycache__" not in f.parts
    )
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return f"{vxc.__version__}+{h.hexdigest()[:12]}"


def source_commit() -> str:
    """The git commit the compiler runs from (`vxc --version`), with `-dirty` when its own
    files differ from it, or a sentence saying why there is none (an installed or
    Bazel-provisioned copy carries no checkout). Not part of `compiler_version`: the cache
    key is the files' digest, so a commit that does not touch the compiler keeps caches."""
    import subprocess

    root = Path(vxc.__file__).parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "."],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown (not run from a git checkout)"
    return head + ("-dirty" if changed else "")


def sources_key(
    sources: list[Source], machine: Source | None, consts: dict[str, int] | None = None
) -> str:
    """The digest of everything an Analysis depends on: the compiler, each source's
    display path and bytes, the machine model, tagged as such (`--src m.vx` and
    `--machine m.vx` are different programs), and the `--const` values that instantiate
    generic entries. A .vxhir records it; the worker keys its memory cache by it."""
    h = hashlib.sha256(compiler_version().encode())
    for role, s in [*((b"src", s) for s in sources), *([(b"machine", machine)] if machine else [])]:
        h.update(b"\0" + role + b"\0" + s.path.encode() + b"\0" + hashlib.sha256(s.data).digest())
    if consts:
        h.update(b"\0consts" + repr(sorted(consts.items())).encode())
    return h.hexdigest()


@dataclass
class Analysis:
    """The target-independent front half of one source set."""

    sources: list[Source]
    machine: Source | None
    hir: CheckedHir
    # The values that instantiated it besides the sources (`--const`s, a tuning table's
    # entries), as `sources_key` reads them.
    inputs: dict[str, int] = field(default_factory=dict)

    @cached_property
    def key(self) -> str:
        """Its `sources_key`, made when a cache asks for it: the digest reads every file
        of the compiler (~10 ms), which a one-shot `vxc check` never needs."""
        return sources_key(self.sources, self.machine, self.inputs)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.hir.diagnostics

    @property
    def ok(self) -> bool:
        return self.hir.program is not None and not any(
            d.severity == "error" for d in self.hir.diagnostics
        )

    @property
    def checkable(self) -> bool:
        """Whether the per-target checks can run: the program type-checked and its only
        errors, if any, are dropped tokens (E6011), which leave types and value flow intact.
        A forgotten `wait` is E6004 at the read and E6011 at the binding (LANGUAGE.md 5)."""
        return self.hir.program is not None and all(
            d.severity != "error" or d.code in TARGET_CHECKS_AFTER for d in self.hir.diagnostics
        )

    @property
    def program(self) -> Program | None:
        return self.hir.program

    def to_bytes(self) -> bytes:
        from vxc.hir import serial  # protobuf: only the worker's cache needs it

        return serial.dump(self.hir, self.key, compiler_version())

    @staticmethod
    def from_bytes(
        data: bytes,
        sources: list[Source],
        machine: Source | None = None,
        consts: dict[str, int] | None = None,
    ) -> Analysis:
        from vxc.hir import serial

        key = sources_key(sources, machine, consts)
        try:
            hir = serial.load(data, key, compiler_version())
        except serial.CacheError as e:
            raise StaleCache(str(e)) from e
        if not isinstance(hir, CheckedHir):
            raise StaleCache("HIR cache holds no analysis")
        return Analysis(list(sources), machine, hir, dict(consts or {}))


def analyze(
    sources: list[Source],
    machine: Source | None = None,
    consts: dict[str, int] | None = None,
    tuned: Tuned | None = None,
) -> Analysis:
    """The front half. `consts` instantiates generic kernel entries (`--const N=1024`);
    `tuned`, a tuning table's values for the build's target, come after them
    (vxc/tuning.py)."""
    sink = DiagnosticSink()
    modules = [parse_source(s.data, s.path, sink) for s in sources]
    machine_mod = parse_source(machine.data, machine.path, sink) if machine else None
    machine_decls = list(machine_mod.items) if machine_mod else []
    program = None
    if all(m is not None for m in modules) and (machine is None or machine_mod is not None):
        items = [i for m in modules for i in m.items]
        program = typecheck(items, machine_decls, sink, consts, tuned)
        check_ownership(program.functions, sink)
    diags = sorted(sink.items, key=Diagnostic.sort_key)
    keyed = dict(consts or {})
    if tuned is not None:  # the table's values are inputs too (and whether it warns)
        keyed.update({f"tuned:{k}": v for k, v in tuned.values.items()})
        keyed["tuned:stale"] = int(tuned.stale)
    return Analysis(list(sources), machine, CheckedHir(program, diags, machine_decls), keyed)


@cache
def _model_decls(target: str) -> tuple[A.Node, ...]:
    path, data = model_source(target)
    sink = DiagnosticSink()
    mod = parse_source(data, path, sink)
    if mod is None or sink.has_errors:
        raise RuntimeError(f"the shipped {target} machine model does not parse: {sink.items}")
    return tuple(mod.items)


def target_machine(analysis: Analysis, target: str, sink: DiagnosticSink) -> Machine:
    """The target's model, then --machine, then the program's own declarations."""
    program_decls = analysis.program.decls if analysis.program else []
    return build_machine([*_model_decls(target), *analysis.hir.machine_decls, *program_decls], sink)


@dataclass
class Checked:
    """A program checked for one target: its target plan, which lowering reads."""

    analysis: Analysis
    target: str
    machine: Machine
    plan: TargetPlan
    diagnostics: list[Diagnostic]
    solver: Solver

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    @property
    def placements(self) -> dict:
        """Function instance name -> plan.placement.FnPlacement (the plan's parts)."""
        return self.plan.functions


def check_target(analysis: Analysis, target: str) -> Checked:
    if target not in TARGETS:
        raise Unsupported(f"unknown target `{target}` (targets: {', '.join(TARGETS)})")
    sink = DiagnosticSink()
    for d in analysis.diagnostics:
        sink.emit(d.code, d.message, d.span, d.notes, d.help)
    machine = target_machine(analysis, target, sink)
    solver = Solver()
    plan = TargetPlan(target, machine)
    if analysis.checkable:
        fns = analysis.program.functions
        plan = plan_target(target, fns, machine, sink)
        for name, placed in plan.functions.items():
            if needs_proof(fns[name], placed, fns):  # else nothing to prove: no z3 import
                from vxc.checks.seams import check_seams

                check_seams(fns[name], machine, fns, placed, solver, sink)
        if TARGETS[target].index_bits < 64:
            from vxc.checks.dims import check_dims

            check_dims(fns.values(), target, TARGETS[target].index_bits, sink)
        if TARGETS[target].dma is not None:
            from vxc.checks.dma import check_dma

            for name, placed in plan.functions.items():
                check_dma(fns[name], placed, TARGETS[target].dma, sink)
    diags = sorted(sink.items, key=Diagnostic.sort_key)
    return Checked(analysis, target, machine, plan, diags, solver)


def lowering_refusals(checked: Checked, whole_program: bool = True) -> list[Diagnostic]:
    """What the target's backend refuses of a program that checked clean, as diagnostics:
    the program lowered to the target's own IR with the default build options (no tool
    runs, nothing is written). `vxc check` and the editor report them, so a program they
    accept builds for that target; what only the artifact's own options can make false
    (E7009, a `where` clause against `--tpu-instances`) shows at build time alone. A
    refusal of the whole program (no span) is reported at the start of the first source,
    or not at all with `whole_program=False` (the editor lowers a document's parts one by
    one, and a part may lack what the whole has, such as a kernel)."""
    if not checked.ok:
        return []
    from vxc.backends import lower_target

    try:
        lower_target(checked.target, vx_module(checked), _stem(checked.analysis.sources), {})
    except Refusal as e:
        if e.span is None and not whole_program:
            return []
        return [refusal_diagnostic(e, checked.analysis.sources)]
    return []


def check(
    sources: list[Source],
    target: str = "cpu",
    machine: Source | None = None,
    consts: dict[str, int] | None = None,
    lower: bool = False,
    tuned: Tuned | None = None,
) -> Checked:
    """The checks for `target`; with `lower`, also what the target's backend refuses
    (`lowering_refusals`), so a clean result builds (`vxc check` does this unless
    `--no-lower`: TOOLCHAIN.md's CLI contract). The library default stays the
    target-independent check, which imports no backend."""
    checked = check_target(analyze(sources, machine, consts, tuned), target)
    if lower:
        checked.diagnostics = sorted(
            [*checked.diagnostics, *lowering_refusals(checked)], key=Diagnostic.sort_key
        )
    return checked


def build(
    analysis: Analysis,
    target: str,
    emit: str = "artifact",
    cpu: str = "native",
    tpu_aot: str = "none",
    tpu_instances: int = 0,
    tpu_matmul_precision: str = "f32",
    link: str = "cc",
) -> BuildResult:
    """Check for `target` and produce `emit` (vx-mlir text, target IR, or the artifact files).

    The keywords after `emit` are the build options of vxc/targets.py (`CpuOptions`,
    `TpuOptions`, ...; a test checks that they agree); the target's backend gets its
    family's dataclass of them. A backend's refusal is a diagnostic of the result.
    """
    import time

    why = emit_error(emit, EMITS)
    if why:
        raise Unsupported(why)
    t0 = time.perf_counter()
    if emit == "report":  # the cost report's files, as `vxc report -o` writes them
        reported = report(analysis, target)
        return BuildResult(
            reported.diagnostics, reported.outputs, {"check_s": time.perf_counter() - t0}
        )
    checked = check_target(analysis, target)
    t1 = time.perf_counter()
    result = BuildResult(checked.diagnostics, stats={"check_s": t1 - t0})
    if not checked.ok:
        return result
    options = {
        "cpu": cpu,
        "tpu_aot": tpu_aot,
        "tpu_instances": tpu_instances,
        "tpu_matmul_precision": tpu_matmul_precision,
        "link": link,
    }
    try:
        result.outputs.update(_emit(checked, emit, options))
    except Refusal as e:
        result.diagnostics = sorted(
            [*result.diagnostics, refusal_diagnostic(e, analysis.sources)], key=Diagnostic.sort_key
        )
    result.stats["emit_s"] = time.perf_counter() - t1
    return result


def backend_module(checked: Checked, stop_after: str | None = None):
    """The vx module `checked.target`'s backend receives: lowered from the plan, then the
    target's passes (vxc/ir/passes/), all of them or up to `stop_after`."""
    from vxc.backends import run_target_stages

    module = vx_module(checked)
    run_target_stages(module, checked.target, stop_after)
    return module


def vx_module(checked: Checked):
    """The checked program as a vx module, before any pass (`--emit vx-mlir`)."""
    from vxc.ir.from_hir import lower_program

    return lower_program(checked.analysis.program, checked.plan)


def _emit(checked: Checked, emit: str, options: dict) -> dict[str, bytes]:
    stem = _stem(checked.analysis.sources)
    after = emit_after(emit)
    if emit == "vx-mlir" or after:
        from vxc.ir import print_module

        module = backend_module(checked, after) if after else vx_module(checked)
        name = f"{stem}.{checked.target}" + (f".after-{after}" if after else "")
        return {f"{name}.mlir": print_module(module).encode()}
    from vxc.backends import emit_target

    return emit_target(checked.target, vx_module(checked), stem, emit, options)


def refusal_diagnostic(e: Refusal, sources: list[Source]) -> Diagnostic:
    """The diagnostic of a refusal: at its op's span, else (a refusal of the whole
    program, such as one without a kernel) at the start of the first source."""
    from vxc.diagnostics import Span

    span = e.span or Span(sources[0].path if sources else "<input>", 1, 1)
    return Diagnostic(e.code, e.message, span, notes=list(e.notes), help=e.help)


@dataclass
class ReportResult:
    """`vxc report`: the diagnostics, each kernel's report, and the files it writes
    (`<stem>.<target>.report.txt`, the table; `<stem>.<target>.roofline.svg`)."""

    diagnostics: list[Diagnostic]
    reports: list = field(default_factory=list)  # vxc.report.KernelReport
    outputs: dict[str, bytes] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


def report(
    analysis: Analysis,
    target: str,
    sizes: dict[str, int] | None = None,
    instances: int | None = None,
) -> ReportResult:
    """Check for `target` and report each kernel's cost from the target plan (vxc.report):
    bytes per edge, FLOPs, intensity, rings, and the roofline bound of the model."""
    from vxc.report import ReportError, kernel_reports, render
    from vxc.roofline import roofline_svg

    checked = check_target(analysis, target)
    result = ReportResult(checked.diagnostics)
    if not checked.ok:
        return result
    try:
        result.reports = kernel_reports(
            checked.plan, analysis.program.functions, dict(sizes or {}), instances
        )
    except ReportError as e:
        raise Unsupported(f"vxc report: {e}") from None
    stem = _stem(analysis.sources)
    source = _file_name(analysis.sources)
    result.outputs[f"{stem}.{target}.report.txt"] = render(result.reports, source).encode()
    if result.reports and result.reports[0].peak_flops and result.reports[0].bandwidth:
        result.outputs[f"{stem}.{target}.roofline.svg"] = roofline_svg(result.reports, source)
    return result


def _file_name(sources: list[Source]) -> str:
    """The first source's file name: what outputs are named after."""
    return sources[0].path.replace("\\", "/").rsplit("/", 1)[-1] if sources else "module"


def _stem(sources: list[Source]) -> str:
    name = _file_name(sources)
    return name[:-3] if name.endswith(".vx") else name


def source_lines(
    sources: list[Source], machine: Source | None = None, target: str | None = None
) -> dict[str, list[str]]:
    files = list(sources) + ([machine] if machine else [])
    out = {s.path: s.data.decode("utf-8", "replace").splitlines() for s in files}
    for t in [target] if target else TARGETS:
        path, data = model_source(t)
        out[path] = data.decode().splitlines()
    return out


def render(
    diagnostics: list[Diagnostic],
    sources: list[Source],
    machine: Source | None = None,
    fmt: str = "human",
) -> str:
    """The one rendering of diagnostics, for the CLI and the worker: rustc-style text with
    the source line (from the program, the --machine file or a shipped model), or one
    JSON object per line. Empty when there is nothing to say."""
    if fmt == "json":
        return "".join(render_json(d) + "\n" for d in diagnostics)
    return render_all_human(diagnostics, source_lines(sources, machine))
