"""The VxCompile action: ``hir`` (check once, write the .vxhir cache artifact) and
``build`` (one target's outputs from a .vxhir), on top of ``vxc.api``.

Arguments (one per line in the @flagfile that Bazel writes):

    hir   --out OUT.vxhir --src A.vx [--src B.vx ...] [--machine M.vx]
    build --hir IN.vxhir --src A.vx ... [--machine M.vx] --target T
          --out-dir DIR [--emit artifact|vx-mlir|target-ir] [--cpu native|x86-64-v3|...]
          [--tpu-aot v5e,v6e]
          [--link cc|none]   (none: the cpu .so is linked by the caller, Bazel's C++ toolchain)

Paths are relative to the execroot (or to the request's sandbox_dir); the display
path of each source is the path as given, so diagnostics and outputs do not depend on
where the action ran. Outputs are written atomically: a temporary file in the same
directory, then a rename.

The checked HIR is cached in memory (a bounded LRU, shared by both modes), keyed by
the digest of the .vxhir bytes and by the digest of the compiler version, sources and
machine model. A .vxhir that ``Analysis.from_bytes`` rejects (corrupt, another
compiler version, other sources) is recomputed from the sources, never trusted.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from collections import OrderedDict
from types import ModuleType

from vxc.worker.server import RequestContext


class UsageError(Exception):
    """Bad action arguments: answered with exit code 2, the worker keeps serving."""


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
    b = sub.add_parser("build", add_help=False)
    b.add_argument("--hir", required=True)
    b.add_argument("--src", action="append", required=True)
    b.add_argument("--machine")
    b.add_argument("--target", required=True)
    b.add_argument("--out-dir", required=True)
    b.add_argument("--emit", default="artifact")
    b.add_argument("--cpu", default="native")
    b.add_argument("--tpu-aot", default="none")
    b.add_argument("--link", default="cc", choices=("cc", "none"))
    return p


PARSER = _parser()


def write_atomic(path: str, data: bytes) -> None:
    """Writes data to path so that path is either absent/old or complete, never partial."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".vx-tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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


def _ms(t0: float) -> str:
    return f"{(time.perf_counter() - t0) * 1000:.1f}"


class VxCompile:
    """One instance per worker process; ``__call__`` is the server's handler."""

    def __init__(
        self,
        api: ModuleType,
        version: str,
        cache_entries: int = 64,
        unsupported: type[Exception] | None = None,
    ):
        self.api = api
        self.unsupported = unsupported
        self.version = version
        self.cache = HirCache(cache_entries)

    def _load(self, ctx: RequestContext, paths: list[str], machine: str | None):
        srcs = []
        for p in paths:
            with open(ctx.path(p), "rb") as f:
                srcs.append(self.api.Source(p, f.read()))
        m = None
        if machine:
            with open(ctx.path(machine), "rb") as f:
                m = self.api.Source(machine, f.read())
        return srcs, m

    def _source_key(self, srcs, machine) -> str:
        h = hashlib.sha256(b"vxc-worker-hir\0" + self.version.encode() + b"\0")
        for s in [*srcs, *([machine] if machine else [])]:
            h.update(s.path.encode() + b"\0" + hashlib.sha256(s.data).digest())
        h.update(b"machine" if machine else b"default-machine")
        return "src:" + h.hexdigest()

    def _analyze(self, ctx, srcs, machine):
        t0 = time.perf_counter()
        analysis = self.api.analyze(srcs, machine=machine)
        ctx.stats["check_ms"] = _ms(t0)
        ctx.stats["checked_sources"] = len(srcs)
        return analysis

    def _fail(self, diagnostics, srcs) -> tuple[int, str]:
        return 1, self.api.render_human(diagnostics, srcs)

    def _warnings(self, diagnostics, srcs) -> str:
        return self.api.render_human(diagnostics, srcs) if diagnostics else ""

    def __call__(self, args: list[str], ctx: RequestContext) -> tuple[int, str]:
        try:
            opts = PARSER.parse_args(args)
        except UsageError as e:
            return 2, f"vxc-worker: bad arguments: {e}\nargs: {args!r}\n"
        ctx.stats["mode"] = opts.mode
        ctx.stats["checked_sources"] = 0
        srcs, machine = self._load(ctx, opts.src, opts.machine)
        try:
            if opts.mode == "hir":
                return self._hir(opts, ctx, srcs, machine)
            return self._build(opts, ctx, srcs, machine)
        except Exception as e:
            # A request this compiler version cannot serve yet is the user's to read,
            # not a crash (the CLI answers it the same way, exit 2).
            if self.unsupported is not None and isinstance(e, self.unsupported):
                return 2, f"vxc: error: {e}\n"
            raise

    def _hir(self, opts, ctx, srcs, machine) -> tuple[int, str]:
        skey = self._source_key(srcs, machine)
        hit = self.cache.get(skey)
        if hit is not None:
            analysis, data = hit
            ctx.stats["hir"] = "memory"
        else:
            analysis = self._analyze(ctx, srcs, machine)
            ctx.stats["hir"] = "checked"
            if not analysis.ok:
                return self._fail(analysis.diagnostics, srcs)
            data = analysis.to_bytes()
            self.cache.put(skey, (analysis, data))
            self.cache.put("hir:" + hashlib.sha256(data).hexdigest(), analysis)
        ctx.check_cancelled()
        write_atomic(ctx.path(opts.out), data)
        return 0, self._warnings(analysis.diagnostics, srcs)

    def _build(self, opts, ctx, srcs, machine) -> tuple[int, str]:
        with open(ctx.path(opts.hir), "rb") as f:
            data = f.read()
        hkey = "hir:" + hashlib.sha256(data).hexdigest()
        analysis = self.cache.get(hkey)
        if analysis is not None:
            ctx.stats["hir"] = "memory"
        else:
            try:
                analysis = self.api.Analysis.from_bytes(data, srcs, machine)
                ctx.stats["hir"] = "artifact"
                self.cache.put(hkey, analysis)
            except self.api.StaleCache as e:
                ctx.stats["hir"] = "recomputed"
                ctx.stats["stale"] = "_".join(str(e).split())[:120]
                analysis = self._analyze(ctx, srcs, machine)
        if not analysis.ok:
            return self._fail(analysis.diagnostics, srcs)
        ctx.check_cancelled()
        t0 = time.perf_counter()
        result = self.api.build(
            analysis,
            opts.target,
            emit=opts.emit,
            cpu=opts.cpu,
            tpu_aot=opts.tpu_aot,
            link=opts.link,
        )
        ctx.stats["target"] = opts.target
        ctx.stats["emit_ms"] = _ms(t0)
        if not result.ok:
            return self._fail(result.diagnostics, srcs)
        ctx.check_cancelled()
        out_dir = ctx.path(opts.out_dir)
        for name in sorted(result.outputs):
            if os.path.basename(name) != name or name.startswith("."):
                raise ValueError(
                    f"compiler returned an output name that is not a file name: {name!r}"
                )
            write_atomic(os.path.join(out_dir, name), result.outputs[name])
        ctx.stats["outputs"] = len(result.outputs)
        return 0, self._warnings(result.diagnostics, srcs)
