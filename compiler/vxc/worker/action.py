"""The VxCompile action: ``hir`` (check once, write the .vxhir cache artifact) and
``build`` (one target's outputs from a .vxhir), on top of ``vxc.api``.

Arguments (one per line in the @flagfile that Bazel writes):

    hir   --out OUT.vxhir --src A.vx [--src B.vx ...] [--machine M.vx]
    build --hir IN.vxhir --src A.vx ... [--machine M.vx] --target T
          --out-dir DIR [--emit artifact|vx-mlir|target-ir] [--cpu native|x86-64-v3|...]
          [--tpu-aot v5e,v6e] [--tpu-instances N]
          [--link cc|none]   (none: the cpu .so is linked by the caller, Bazel's C++ toolchain)

Paths are relative to the execroot (or to the request's sandbox_dir), and each one
stays inside it: an input must be one of the request's inputs, an output is never
written through a symbolic link (vxc.worker.sandbox). The display path of each source
is the path as given, so diagnostics and outputs do not depend on where the action
ran. Outputs are written as a set (vxc.outputs): all of a build's files appear
together or not at all, mode 0644, like the CLI's.

The checked HIR is cached in memory (a bounded LRU, shared by both modes). What is
cached is an analysis, which the compiler, the sources (each one's display path and
bytes) and the machine model determine: `api.sources_key` digests all of them, and
every entry is keyed by it, a build's also by the digest of the .vxhir it was given.
So a hit is an analysis of exactly the sources the request names: a .vxhir is never
trusted on its digest alone, and one that ``Analysis.from_bytes`` rejects (corrupt,
another compiler version, other sources) is recomputed from the sources. The target
and options enter nothing cached: every build checks for its target and runs the
backend afresh.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import OrderedDict
from types import ModuleType

from vxc.outputs import OutputError, write_atomic, write_set
from vxc.targets import EMITS, add_analysis_flags, add_option_flags, analysis_from, options_from
from vxc.worker.sandbox import PathRefused
from vxc.worker.server import RequestContext, RequestError, excerpt, refusal


class UsageError(RequestError):
    """Bad action arguments or files: answered with exit code 2 and a plain line (see
    RequestError), the worker keeps serving."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print and exit the worker
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="vxc-worker", add_help=False)
    sub = p.add_subparsers(dest="mode", required=True, parser_class=_Parser)
    h = sub.add_parser("hir", add_help=False)
    h.add_argument("--out", required=True)
    h.add_argument("--src", action="append", required=True)
    h.add_argument("--machine")
    add_analysis_flags(h)  # `--const`, as the CLI has it (vx_kernel's consts)
    b = sub.add_parser("build", add_help=False)
    b.add_argument("--hir", required=True)
    b.add_argument("--src", action="append", required=True)
    b.add_argument("--machine")
    b.add_argument("--target", required=True)
    b.add_argument("--out-dir", required=True)
    b.add_argument("--emit", default="artifact", choices=EMITS)
    add_analysis_flags(b)  # the HIR's key includes them
    # A tuning table (LANGUAGE.md 3), a declared input: its entry for --target gives const
    # values after --const. vx_kernel passes KERNEL.tune.json beside the source, if any.
    b.add_argument("--tune")
    add_option_flags(b)  # the build options of vxc/targets.py, as the CLI has them
    return p


PARSER = _parser()


def _read(ctx: RequestContext, path: str, what: str) -> bytes:
    try:
        with open(ctx.sandbox.input(path), "rb") as f:
            return f.read()
    except PathRefused as e:
        raise refusal(f"read {what}", path, e) from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UsageError(f"cannot read {what} `{excerpt(path)}`: {why}") from None


class HirCache:
    """A bounded LRU of checked analyses (objects, so a hit costs no deserialising)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._d: OrderedDict[str, object] = OrderedDict()

    def get(self, key: str):
        if key in self._d:
            self._d.move_to_end(key)
            return self._d[key]
        return None

    def put(self, key: str, value) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.capacity:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


def _output(ctx: RequestContext, path: str, folder: bool) -> str:
    try:
        return ctx.sandbox.output(path, folder)
    except PathRefused as e:
        raise refusal("write", path, e) from None


def _ms(t0: float) -> str:
    return f"{(time.perf_counter() - t0) * 1000:.1f}"


class VxCompile:
    """One instance per worker process; ``__call__`` is the server's handler."""

    def __init__(
        self,
        api: ModuleType,
        cache_entries: int = 64,
        unsupported: type[Exception] | None = None,
    ):
        self.api = api
        self.unsupported = unsupported
        self.cache = HirCache(cache_entries)

    def _load(self, ctx: RequestContext, paths: list[str], machine: str | None):
        srcs = [self.api.Source(p, _read(ctx, p, "source")) for p in paths]
        m = self.api.Source(machine, _read(ctx, machine, "machine model")) if machine else None
        return srcs, m

    def _keys(self, srcs, machine, consts, hir: bytes | None = None) -> str:
        """The cache key of a `hir` request (no .vxhir) or of a `build` from `hir`."""
        skey = self.api.sources_key(srcs, machine, consts)
        if hir is None:
            return "src:" + skey
        return f"hir:{hashlib.sha256(hir).hexdigest()}:{skey}"

    def _analyze(self, ctx, srcs, machine, consts, tuned=None):
        t0 = time.perf_counter()
        analysis = self.api.analyze(srcs, machine=machine, consts=consts, tuned=tuned)
        ctx.stats["check_ms"] = _ms(t0)
        ctx.stats["checked_sources"] = len(srcs)
        return analysis

    def _fail(self, diagnostics, srcs, machine) -> tuple[int, str]:
        return 1, self.api.render(diagnostics, srcs, machine)

    def _warnings(self, diagnostics, srcs, machine) -> str:
        return self.api.render(diagnostics, srcs, machine)

    def __call__(self, args: list[str], ctx: RequestContext) -> tuple[int, str]:
        try:
            opts = PARSER.parse_args(args)
        except UsageError as e:
            shown = [excerpt(a, 80) for a in args[:20]] + (["..."] if len(args) > 20 else [])
            return 2, f"vxc-worker: bad arguments: {excerpt(e)}\nargs: {shown!r}\n"
        try:
            consts = analysis_from(vars(opts))["consts"]
        except ValueError as e:
            return 2, f"vxc-worker: bad arguments: {excerpt(e)}\n"
        ctx.stats["mode"] = opts.mode
        ctx.stats["checked_sources"] = 0
        srcs, machine = self._load(ctx, opts.src, opts.machine)
        try:
            if opts.mode == "hir":
                return self._hir(opts, ctx, srcs, machine, consts)
            return self._build(opts, ctx, srcs, machine, consts)
        except Exception as e:
            # A request this compiler version cannot serve yet is the user's to read,
            # not a crash (the CLI answers it the same way, exit 2).
            if self.unsupported is not None and isinstance(e, self.unsupported):
                return 2, f"vxc: error: {excerpt(e, 2000)}\n"
            raise

    def _hir(self, opts, ctx, srcs, machine, consts) -> tuple[int, str]:
        out = _output(ctx, opts.out, folder=False)  # refused before any work
        skey = self._keys(srcs, machine, consts)
        hit = self.cache.get(skey)
        if hit is not None:
            analysis, data = hit
            ctx.stats["hir"] = "memory"
        else:
            analysis = self._analyze(ctx, srcs, machine, consts)
            ctx.stats["hir"] = "checked"
            if not analysis.ok:
                return self._fail(analysis.diagnostics, srcs, machine)
            data = analysis.to_bytes()
            self.cache.put(skey, (analysis, data))
            self.cache.put(self._keys(srcs, machine, consts, data), analysis)
        ctx.check_cancelled()
        try:
            write_atomic(out, data)
        except OutputError as e:
            raise UsageError(excerpt(e, 400)) from None
        return 0, self._warnings(analysis.diagnostics, srcs, machine)

    def _tuned(self, ctx, opts, srcs):
        """The tuning table's entry for the build's target (`--tune`), or None."""
        if not opts.tune:
            return None
        from vxc import tuning

        raw = _read(ctx, opts.tune, "tuning table")
        try:
            return tuning.parse(raw, opts.tune, opts.target, srcs[0].data)
        except tuning.TuneError as e:
            raise UsageError(excerpt(e, 400)) from None

    def _analysis(self, ctx, opts, srcs, machine, consts):
        """The checked analysis a build lowers: the shared HIR's (`--hir`, target-free),
        or, where a tuning table gives this target values or warns, the sources checked
        again with them (the HIR was checked without the table)."""
        tuned = self._tuned(ctx, opts, srcs)
        if tuned is not None and (tuned.values or tuned.stale):
            key = "tuned:" + json.dumps([opts.target, tuned.values, tuned.stale], sort_keys=True)
            key += ":" + self._keys(srcs, machine, consts)
            analysis = self.cache.get(key)
            ctx.stats["hir"] = "memory" if analysis is not None else "tuned"
            if analysis is None:
                analysis = self._analyze(ctx, srcs, machine, consts, tuned)
                self.cache.put(key, analysis)
            return analysis
        data = _read(ctx, opts.hir, "HIR cache")
        hkey = self._keys(srcs, machine, consts, data)
        analysis = self.cache.get(hkey)
        if analysis is not None:
            ctx.stats["hir"] = "memory"
        else:
            try:
                analysis = self.api.Analysis.from_bytes(data, srcs, machine, consts)
                ctx.stats["hir"] = "artifact"
            except self.api.StaleCache as e:
                ctx.stats["hir"] = "recomputed"
                ctx.stats["stale"] = "_".join(str(e).split())[:120]
                analysis = self._analyze(ctx, srcs, machine, consts)
            # Either way an analysis of these very sources: the key says which.
            self.cache.put(hkey, analysis)
        return analysis

    def _build(self, opts, ctx, srcs, machine, consts) -> tuple[int, str]:
        out_dir = _output(ctx, opts.out_dir, folder=True)  # refused before any work
        analysis = self._analysis(ctx, opts, srcs, machine, consts)
        if not analysis.ok:
            return self._fail(analysis.diagnostics, srcs, machine)
        ctx.check_cancelled()
        t0 = time.perf_counter()
        result = self.api.build(
            analysis,
            opts.target,
            emit=opts.emit,
            **options_from(vars(opts)),
        )
        ctx.stats["target"] = opts.target
        ctx.stats["emit_ms"] = _ms(t0)
        if not result.ok:
            return self._fail(result.diagnostics, srcs, machine)
        ctx.check_cancelled()
        try:  # all the outputs or none (vxc.outputs)
            write_set(out_dir, dict(sorted(result.outputs.items())))
        except OutputError as e:
            raise UsageError(excerpt(e, 400)) from None
        ctx.stats["outputs"] = len(result.outputs)
        return 0, self._warnings(result.diagnostics, srcs, machine)
