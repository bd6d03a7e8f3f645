"""`vxc.compile`: build a Vx kernel in this Python process and call it.

    import numpy as np, vxc
    gemm = vxc.compile("kernels/gemm.vx")                      # target="cpu"
    c = np.zeros((256, 384), np.float32)
    gemm.launch(a, b, c, instances=6)                          # m, n, k from the arrays

It drives the one build API (`vxc.api.analyze` / `api.build`) and the runtimes that load
its artifacts (`vxc.runtime`, `vxc.backends.*.runtime`), so a kernel compiled here is
the artifact `vxc build` writes, loaded as `vxc.runtime.load` loads it. What a call runs
on depends on the target and `interpret`, as the target family's `Runner` says
(`vxc.backends.RUNNERS`; the `Way`s are in `vxc/backends/<family>/run.py`):

| target | `interpret=False` (default) | `interpret=True` |
|---|---|---|
| cpu | the native object, numpy in, outputs written in place | (the same: the CPU is native) |
| tpu | the `jax.export` through `jax.jit` on a TPU (jax.Array in and out) | the Mosaic module in vxc's interpreter (`backends/tpu/interp.py`) on numpy arrays, stale reads reported |
| b200, h100 | the fatbin through cuda-python on a GPU of that architecture | the fatbin's PTX in vxc's simulator of one CTA per instance (`backends/nvidia/ptxsim.py`), numpy in and out; small shapes only (it runs thread by thread) |

A cpu kernel's `kernel.to_jax()` is a function of jax.Arrays for `jax.jit`, `jax.vmap` and
`jax.export`: an XLA FFI custom call into the same object (vxc/frameworks/jax_ffi.py,
docs/FRAMEWORKS.md). Where the hardware is missing, a call raises
`vxc.errors.NotRunnableHere` (one line).
On a TPU host, set `JAX_PLATFORMS=tpu,cpu` before the process starts: a tpu build sets it
to `cpu` when it is unset (backends/tpu/env.py), and jax then sees no TPU.

Compiling is cached in the process by source bytes, target, consts and options, so
calling `vxc.compile` again with the same arguments is free. Build errors are raised as
`vxc.CompileError`, which carries the coded diagnostics and renders like `vxc check`.
Heavy modules load only when needed: `import vxc` imports none of this.
"""

from __future__ import annotations

import atexit
import hashlib
import inspect
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vxc.errors import CompileError, NotRunnableHere

# A source string is a path when it is one line that ends in .vx or names a file; else it
# is Vx source.
SOURCE_SUFFIX = ".vx"
STRING_FILENAME = "input.vx"  # the display path of source given as a string

_CACHE: dict[str, Kernel] = {}
_ROOT: Path | None = None  # one temporary directory per process for the artifacts


def _artifact_dir(key: str) -> Path:
    """A fresh directory for one build's files, removed when the process exits (a loaded
    shared library stays mapped after its file is gone)."""
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="vxc-compile-"))
        atexit.register(shutil.rmtree, _ROOT, True)
    d = _ROOT / key[:16]
    d.mkdir(parents=True, exist_ok=True)
    return d


def _build_options() -> tuple[str, ...]:
    from vxc import api

    skip = {"analysis", "target", "emit"}
    return tuple(n for n in inspect.signature(api.build).parameters if n not in skip)


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except OSError:  # a one-line source longer than a file name can be
        return False


def _read_source(source_or_path: str | Path, filename: str | None) -> tuple[str, bytes]:
    """(display path, bytes) of what the caller gave: a `Path`, a one-line string ending
    in `.vx` or naming a file (a path), or Vx source text."""
    one_line = isinstance(source_or_path, str) and "\n" not in source_or_path
    if isinstance(source_or_path, Path) or (
        one_line and (source_or_path.strip().endswith(SOURCE_SUFFIX) or _is_file(source_or_path))
    ):
        p = Path(source_or_path)
        if not p.is_file():
            raise FileNotFoundError(f"no Vx source file at {p}")
        return filename or str(source_or_path), p.read_bytes()
    return filename or STRING_FILENAME, source_or_path.encode()


def compile(  # noqa: A001 - the API's name, as `re.compile`
    source_or_path: str | Path,
    target: str = "cpu",
    consts: dict[str, int] | None = None,
    *,
    kernel: str | None = None,
    interpret: bool = False,
    filename: str | None = None,
    externs: tuple[str | Path, ...] = (),
    tune: str | Path | bool = True,
    **options: Any,
) -> Kernel:
    """Compile a Vx kernel for `target` and return it, ready to call.

    `source_or_path` is a `pathlib.Path`, a path string (one line that ends in `.vx` or
    names a file), or the Vx source itself (`filename` names it in diagnostics; default `input.vx`).
    `consts` instantiates a generic kernel entry (`{"N": 1024}`, as `--const N=1024`).
    `kernel` picks one entry when the file has several. `interpret=True` runs a tpu or
    nvidia kernel in vxc's interpreter on numpy arrays (see the module's table).
    `externs` are shared libraries defining a cpu kernel's `extern fn`s. `tune`: the
    tuning table of a source given by path is read from beside it (`KERNEL.tune.json`,
    its `target` entry's values after `consts`, LANGUAGE.md 3); a path names another
    table, `False` reads none (source text has none). `**options` are
    `vxc build`'s options (`cpu="x86-64-v3"`, `tpu_matmul_precision="bf16"`, ...).

    Raises `vxc.CompileError` (its `diagnostics` are the coded diagnostics, `str()` the
    rendered text) when the program does not build for `target`, `vxc.errors.Unsupported`
    for an unknown target or option, `TypeError` for an option `vxc build` lacks.
    """
    allowed = _build_options()
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"vxc.compile: unknown option(s) {unknown}; options: {list(allowed)}")
    consts = dict(consts or {})
    path, data = _read_source(source_or_path, filename)
    tuned = _tuned(source_or_path, tune, target, data)
    build = Build(path, data, target, consts, options, interpret, tuple(externs), tuned)
    return _cached(build, kernel)


def _tuned(source_or_path: str | Path, tune: str | Path | bool, target: str, data: bytes):
    """The tuning table's values for `target` (vxc/tuning.py), or None."""
    from vxc import tuning

    if tune is False:
        return None
    if tune is not True:
        return tuning.read(tune, target, data)
    given_path = isinstance(source_or_path, Path) or data != str(source_or_path).encode()
    return tuning.beside(source_or_path, target, data) if given_path else None


def _cached(build: Build, kernel: str | None) -> Kernel:
    key = build.key(kernel)
    if key not in _CACHE:
        _CACHE[key] = _compile(build, kernel, key)
    return _CACHE[key]


def _compile(build: Build, kernel: str | None, key: str) -> Kernel:
    from vxc import api

    sources = [api.Source(build.path, build.data)]
    analysis = api.analyze(sources, None, build.consts, build.tuned)
    result = api.build(analysis, build.target, "artifact", **build.options)
    if not result.ok:
        raise CompileError(result.diagnostics, api.render(result.diagnostics, sources))
    directory = _artifact_dir(key)
    (manifest_name,) = (n for n in result.outputs if n.endswith(f".{build.target}.json"))
    for name, blob in result.outputs.items():
        (directory / name).write_bytes(blob)
    return Kernel(
        build, directory / manifest_name, kernel, _param_dims(analysis), _signatures(analysis)
    )


def _param_dims(analysis) -> dict[str, dict[str, tuple]]:
    """Per function, each tensor parameter's dimensions as the source names them (`a:
    &Tensor<bf16, [m, k]>`: ("m", "k")): which arrays give the shape parameters, whatever
    the target's manifest records."""
    from vxc.hir import types as T

    out = {}
    for name, fn in analysis.program.functions.items():
        out[name] = {
            p.name: tuple(T.deref(p.ty).dims)
            for p in fn.params
            if isinstance(T.deref(p.ty), T.TensorT)
        }
    return out


def _signatures(analysis) -> dict[str, dict]:
    """Per function, its parameters and results in the cpu manifest's form (name, kind,
    dtype, shape with None for a named dimension, dims, const), from the source's types:
    the layout the frameworks bind an interpreted kernel's arguments by, whatever the
    target's manifest records. A parameter of another kind (a Vec) is kind "other"."""
    from vxc.hir import nodes as H
    from vxc.hir import types as T

    def entry(name: str, ty, const: bool) -> dict:
        t = T.deref(ty)
        if isinstance(t, T.TensorT):
            shape = [None if isinstance(d, str) else d for d in t.dims]
            dims = [d if isinstance(d, str) else "" for d in t.dims]
            return {"name": name, "kind": "tensor", "dtype": t.elem, "shape": shape,
                    "dims": dims, "const": const}  # fmt: skip
        if isinstance(t, T.Scalar):
            dtype = "i1" if t == T.BOOL else t.name
            return {"name": name, "kind": "scalar", "dtype": dtype, "shape": [], "const": True}
        return {"name": name, "kind": "other", "dtype": "", "shape": [], "const": const}

    out = {}
    for name, fn in analysis.program.functions.items():
        params = [
            entry(p.name, p.ty, not (isinstance(p.ty, T.RefT) and p.ty.mutable)) for p in fn.params
        ]
        ret = T.deref(fn.ret)
        results = [] if isinstance(ret, T.Void) else [entry("result", ret, True)]
        requires = [H.show_expr(w) for w in fn.decl.where]  # as every manifest prints them
        out[name] = {"params": params, "results": results, "requires": requires}
    return out


@dataclass(frozen=True)
class Build:
    """What a Kernel was compiled from: enough to compile it again with other options
    (a tpu launch grid is a build option)."""

    path: str
    data: bytes
    target: str
    consts: dict
    options: dict
    interpret: bool
    externs: tuple
    tuned: Any = None  # vxc.tuning.Tuned: the tuning table's values for the target

    def key(self, kernel: str | None) -> str:
        """The cache key: everything the build and the loaded kernel depend on."""
        h = hashlib.sha256(self.data)
        for part in (
            self.path,
            self.target,
            sorted(self.consts.items()),
            sorted(self.options.items()),
            self.interpret,
            [str(e) for e in self.externs],
            kernel,
            None if self.tuned is None else (sorted(self.tuned.values.items()), self.tuned.stale),
        ):
            h.update(b"\0" + repr(part).encode())
        return h.hexdigest()

    def again(self, kernel: str, **changes: Any) -> Kernel:
        """The same source compiled with some options changed (cached like any compile)."""
        return _cached(replace(self, options={**self.options, **changes}), kernel)


class Kernel:
    """One compiled kernel entry. `kernel(*args)` runs one instance (`instance() = 0`,
    `instances() = 1`); `kernel.launch(*args, instances=N)` runs N and returns each
    result stacked along a new leading axis (LANGUAGE.md 4.1). Arguments are passed in
    the order of the kernel's parameters, or by name.

    Shape parameters (an integer parameter that names another parameter's dimension,
    `m` of `a: &Tensor<bf16, [m, k]>`) may be omitted: pass only the other arguments,
    positionally or by name, and each is inferred from the arrays (a given one is
    checked against them). Outputs (`&mut Tensor` parameters) are arrays you allocate;
    on the cpu they are written in place. One that shares memory with another argument
    is refused on every target, interpreted or not (`vxc.runtime.ArgumentError` naming
    both, LANGUAGE.md section 7). A kernel's status error raises
    `vxc.runtime.KernelError` (`LaunchError` for a launch its `where` clauses rule out).
    """

    def __init__(
        self,
        build: Build,
        manifest: Path,
        name: str | None,
        dims: dict | None = None,
        signatures: dict | None = None,
    ) -> None:
        import json

        from vxc.backends import RUNNERS
        from vxc.targets import TARGETS

        self.build = build
        self.target = build.target
        self.interpret = build.interpret
        self.runner = RUNNERS[TARGETS[build.target].family]  # how its artifact runs
        self.manifest_path = manifest
        self.manifest: dict = json.loads(manifest.read_text())
        names = [k["name"] for k in self.manifest["kernels"]]
        if name is None and len(names) != 1:
            raise ValueError(f"{build.path} has kernels {names}: pass kernel=<name>")
        if name is not None and name not in names:
            raise ValueError(f"{build.path} has no kernel '{name}' (kernels: {names})")
        self.name: str = name or names[0]
        self.dims: dict[str, tuple] = (dims or {}).get(self.name, {})
        # the source's parameters and results (`_signatures`): what to_jax/to_torch bind
        # an interpreted kernel's arguments by
        self.signature_layout: dict | None = (signatures or {}).get(self.name)
        self.spec: dict = next(k for k in self.manifest["kernels"] if k["name"] == self.name)
        self._loaded: Any = None

    @property
    def interpreted(self) -> bool:
        """Whether calls run in vxc's interpreter (`interpret=True` for a family that has
        one; the cpu runs natively either way)."""
        return self.interpret and self.runner.interpreter is not None

    def __repr__(self) -> str:
        how = " interpreted" if self.interpreted else ""
        return f"<vxc.Kernel {self.signature()} for {self.target}{how}>"

    # -- parameters ----------------------------------------------------------------------
    def param_names(self) -> list[str]:
        """The kernel's parameters in order (the nvidia manifest calls them args)."""
        if "args" in self.spec:
            return list(self.spec["args"])
        return [p["name"] for p in self.spec["params"]]

    def shape_params(self) -> list[str]:
        """The parameters that name another parameter's dimension (inferred when omitted)."""
        dims = {d for ds in self.dims.values() for d in ds if isinstance(d, str)}
        return [n for n in self.param_names() if n in dims]

    def signature(self) -> str:
        return f"{self.name}({', '.join(self.param_names())})"

    def _named(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """Bind positional arguments to the parameters; when exactly the shape parameters
        are left out, bind them to the other parameters instead."""
        names = self.param_names()
        shapes = self.shape_params()
        rest = [n for n in names if n not in shapes]
        given = set(kwargs)
        order = names
        if shapes and not given & set(shapes) and len(args) == len(rest) - len(given & set(rest)):
            order = [n for n in rest if n not in given]
        elif len(args) > len(names):
            raise TypeError(f"{self.signature()} takes {len(names)} arguments, got {len(args)}")
        bound = dict(zip(order, args, strict=False))
        twice = sorted(given & set(bound))
        if twice:
            raise TypeError(f"{self.signature()}: {twice} given twice")
        named = {**bound, **kwargs}
        if not self.runner.binds_shapes:  # else its runtime infers and checks them itself
            self._infer_shapes(named)
        return named

    def _infer_shapes(self, named: dict[str, Any]) -> None:
        """An omitted shape parameter is the size of the first array that names it."""
        for s in self.shape_params():
            if s in named:
                continue
            for param, dims in self.dims.items():
                if s in dims and param in named:
                    named[s] = int(named[param].shape[dims.index(s)])
                    break

    def ordered(self, named: dict[str, Any]) -> list[Any]:
        """Arguments in parameter order, for the runtimes that take them positionally
        (those that do not bind shapes themselves: `Runner.binds_shapes`)."""
        names = self.param_names()
        unknown = sorted(set(named) - set(names))
        missing = [n for n in names if n not in named]
        if unknown or missing:
            raise TypeError(
                f"{self.signature()}: "
                + "; ".join(
                    s
                    for s in (
                        f"no parameter(s) {unknown}" if unknown else "",
                        f"missing {missing}" if missing else "",
                    )
                    if s
                )
            )
        return [named[n] for n in names]

    # -- running: the family's Runner (vxc.backends) says how ----------------------------
    def artifact(self) -> Any:
        """The loaded artifact's kernel (`Runner.loader`), loaded on first use so that
        compiling for a target works on any machine."""
        if self._loaded is None:
            from vxc import runtime

            try:
                self._loaded = runtime.load(self.manifest_path, self.build.externs)
            except NotRunnableHere as e:
                raise type(e)(f"{e}; vxc.compile(..., interpret=True) runs it here") from None
        return self._loaded.kernels[self.name]

    def rebuilt(self, instances: int) -> Kernel:
        """This kernel built for a launch of `instances` (`Runner.grid_option`)."""
        if self.runner.grid_option is None:
            raise TypeError(f"a {self.target} kernel binds its instance count at launch")
        return self.build.again(self.name, **{self.runner.grid_option: instances})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """One instance; results without the instance axis."""
        return self.runner.way(self.interpret).call(self, self._named(args, kwargs))

    def launch(self, *args: Any, instances: int = 1, threads: int = 0, **kwargs: Any) -> Any:
        """`instances` instances; each result stacked along a new leading axis. `threads`
        bounds the cpu's thread pool (0: one per core); other targets ignore it."""
        named = self._named(args, kwargs)
        return self.runner.way(self.interpret).launch(self, named, instances, threads)

    def to_jax(self, *, instances: int | None = None, threads: int = 0) -> Any:
        """This kernel as a function of jax.Arrays, usable under `jax.jit`: on the cpu an
        XLA FFI custom call into its object (also under `jax.vmap` and `jax.export`,
        `vxc.frameworks.jax_ffi`), on the tpu its export's Mosaic call
        (`vxc.frameworks.jax_tpu`); docs/FRAMEWORKS.md. `instances` is needed only when
        the `where` clause does not give the count from the shapes; `threads` bounds the
        cpu kernel's pool."""
        from vxc import frameworks

        if self.interpreted:
            from vxc.frameworks import interpreted

            return interpreted.to_jax(self, instances=instances)
        return frameworks.jax_binding(self.runner.family).to_jax(
            self, instances=instances, threads=threads
        )

    def to_torch(self, *, instances: int | None = None, threads: int = 0) -> Any:
        """This cpu kernel as a function of torch tensors: a `torch.library.custom_op`
        on the tensors' own memory, traced by `torch.compile` (docs/FRAMEWORKS.md,
        `vxc.frameworks.torch_op`); `instances` and `threads` as in `to_jax`."""
        from vxc.frameworks import torch_op

        return torch_op.to_torch(self, instances=instances, threads=threads)

    @property
    def exported(self) -> Any:
        """A tpu kernel's `jax.export.Exported`, to call inside your own `jax.jit`."""
        if not self.runner.exports:
            raise AttributeError(f"a {self.target} kernel has no jax.export")
        from vxc import runtime

        return runtime.load(self.manifest_path).kernels[self.name].exported
