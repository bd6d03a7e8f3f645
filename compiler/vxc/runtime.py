"""Load a CPU artifact (shared library + manifest) and call its kernels with numpy.

    art = vxc.runtime.load("out/stream.cpu.json")
    acc = art.stream(tiles, w)          # tiles: (n, 128, 128) f32, w: (128, 128) f32
    accs = art.stream_grid.launch(tiles, w, instances=4)   # 4 instances: (4, 128, 128)

Arguments are checked against the manifest before the call: a wrong dtype,
rank or static dimension raises `ArgumentError` naming the parameter and what
was expected. A kernel that reports a non-zero status raises `KernelError`
(`LaunchError` for a bad instance or thread count).

`kernel.launch(*args, instances=n, threads=0)` runs `n` instances (LANGUAGE.md section
4.1) through the artifact's `K_launch` entry point, on a pool of at most one
thread per core (`threads` = 0: `VX_NUM_THREADS` or the core count), and
returns each result stacked along a new leading axis of length `n`: the spelling of
`vxc.Kernel.launch`. The older `kernel.launch(n, *args)` still runs, with a
DeprecationWarning, for one release.

bf16 tensors are passed as `ml_dtypes.bfloat16` arrays (jax's bf16 dtype) or
as `uint16` arrays holding the raw bits.

`kernel.variants` names the paths its `matmul_acc` sites were compiled to (the manifest's
`variants`: `amx`, `avx512bf16`, `f32`); where one is `amx`, `kernel.amx` is the object's
own answer at load (`K__vx_amx()`): 1 if they run on AMX here, 0 if the OS refused the
tile state (a RuntimeWarning says so; they run the vector path), -1 unless VX_CPU_VARIANT
is `amx`: the AMX path is opt-in until it has run on AMX hardware (docs/DESIGN.md, "bf16
`matmul_acc` on AMX").

Outputs (`c: &mut Tensor<f32, [m, n]>`, LANGUAGE.md section 4.2) are arrays the caller
allocates: writable, C-contiguous, of the declared dtype and shape, written in place
(`art.gemm.launch(m, n, k, a, b, c, instances=N)` fills `c`); a read-only, non-contiguous
or wrongly shaped output raises `ArgumentError`, and nothing is copied behind the caller's
back. Shape parameters (an integer parameter naming another parameter's dimension,
LANGUAGE.md section 3) are checked against the arrays before any instance runs
(`ArgumentError` naming the parameter); when the caller omits them (passing the
arrays by keyword, `art.gemm.launch(a=a, b=b, c=c, instances=4)`), they are inferred from the
arrays.

Arguments are distinct (LANGUAGE.md section 7): a `&mut` argument the kernel writes may
share no memory with any other argument (`np.shares_memory`, exact), else the launch is
refused with an `ArgumentError` naming both parameters before any instance runs
(`check_distinct`, which every Python launcher calls; the C entry itself returns
`VX_ERR_ALIAS`, also an `ArgumentError` here).
"""

from __future__ import annotations

import ctypes
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# ArgumentError and check_distinct live below every runner (no runner imports this module).
from vxc.arguments import DISTINCT, ArgumentError, check_distinct, launch_count  # noqa: F401 (re-exported)
from vxc.backends import FORMATS, RUNNERS
from vxc.manifest import ABI_SUFFIX, AMX_SUFFIX, DIGEST_CHARS, abi_digest
from vxc.status import MEANING

_NUMPY = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "ui8": np.uint8,
    "ui16": np.uint16,
    "ui32": np.uint32,
    "ui64": np.uint64,
    "index": np.int64,
}
_CTYPES = {
    "bf16": ctypes.c_uint16,
    "f16": ctypes.c_uint16,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "i1": ctypes.c_uint8,
    "i8": ctypes.c_int8,
    "i16": ctypes.c_int16,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "ui8": ctypes.c_uint8,
    "ui16": ctypes.c_uint16,
    "ui32": ctypes.c_uint32,
    "ui64": ctypes.c_uint64,
    "index": ctypes.c_int64,
}


class ArtifactError(ArgumentError):
    """The manifest is malformed, names a library elsewhere than beside it, or describes a
    kernel differently from the digest its library was built with (vxc/manifest.py)."""


class KernelError(RuntimeError):
    """The kernel ran and returned a non-zero status."""

    def __init__(self, kernel: str, status: int, code: str, detail: str = ""):
        self.status, self.code = status, code
        why = MEANING.get(code, "unknown status") + detail
        super().__init__(f"kernel '{kernel}' failed with {code} ({status}): {why}")


class LaunchError(KernelError, ValueError):
    """A launch the kernel refused before running: bad instance or thread count, or a
    launch its `where` clause rules out (more instances than tiles, say)."""


def _kernel_error(kernel: str, status: int, code: str, detail: str = "") -> Exception:
    if code == "VX_ERR_ALIAS":  # refused by the C entry: the arguments' fault
        return ArgumentError(
            f"kernel '{kernel}' refused the launch with {code} ({status}): {MEANING[code]}"
        )
    cls = LaunchError if code in ("VX_ERR_LAUNCH", "VX_ERR_WHERE") else KernelError
    return cls(kernel, status, code, detail)


def _shape_str(shape: list[int | None]) -> str:
    return "(" + ", ".join("n" if d is None else str(d) for d in shape) + ")"


def _bf16() -> Any:
    try:
        import ml_dtypes  # jax's numpy extension types; optional

        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return np.dtype(np.uint16)  # the raw bits


def _dtype(dtype: str, who: str) -> Any:
    if dtype == "bf16":
        return _bf16()
    if dtype not in _NUMPY:
        raise ArgumentError(f"{who}: element type {dtype} has no numpy equivalent")
    return np.dtype(_NUMPY[dtype])


numpy_dtype = _dtype  # the numpy type of a manifest's element type (`vxc tune`'s inputs)


class Kernel:
    """One kernel of a loaded artifact; call it with numpy arrays and scalars."""

    def __init__(self, lib: ctypes.CDLL, spec: Mapping[str, Any], status: Mapping[str, int]):
        self.name: str = spec["name"]
        self.params: list[dict] = spec["params"]
        self.results: list[dict] = spec["results"]
        self._status = {v: k for k, v in status.items()}
        self._fn = getattr(lib, spec["symbol"])
        self._fn.restype = ctypes.c_int32
        argtypes: list[Any] = []
        for p in self.params:
            if p["kind"] == "tensor":
                argtypes += [ctypes.c_void_p] + [ctypes.c_int64] * p["shape"].count(None)
            else:
                argtypes.append(_CTYPES[p["dtype"]])
        argtypes += [ctypes.c_void_p] * len(self.results)
        self._fn.argtypes = argtypes
        self.requires: list[str] = spec.get("requires", [])
        self.variants: tuple[str, ...] = ()  # the manifest's matmul paths (Artifact._variants)
        self.amx: int | None = None  # where one is `amx`: whether it runs (1), else 0 or -1
        launch = spec.get("launch_symbol")
        self._launch = getattr(lib, launch) if launch else None
        if self._launch is not None:
            self._launch.restype = ctypes.c_int32
            self._launch.argtypes = [ctypes.c_int64, ctypes.c_int32, *argtypes]

    def signature(self) -> str:
        def one(p: dict) -> str:
            if p["kind"] == "scalar":
                return f"{p['name']}: {p['dtype']}"
            return f"{p['name']}: {p['dtype']}{_shape_str(p['shape'])}"

        return f"{self.name}({', '.join(one(p) for p in self.params)})"

    def _bind(self, args: tuple, kwargs: dict) -> list[Any]:
        names = [p["name"] for p in self.params]
        if len(args) > len(names):
            raise ArgumentError(
                f"{self.name}: takes {len(names)} argument(s), got {len(args)}; "
                f"expected {self.signature()}"
            )
        bound = dict(zip(names, args, strict=False))
        for k, v in kwargs.items():
            if k not in names:
                raise ArgumentError(
                    f"{self.name}: no parameter named '{k}'; expected {self.signature()}"
                )
            if k in bound:
                raise ArgumentError(f"{self.name}: parameter '{k}' given twice")
            bound[k] = v
        self._infer_shapes(bound)
        missing = [n for n in names if n not in bound]
        if missing:
            raise ArgumentError(
                f"{self.name}: missing argument(s) {missing}; expected {self.signature()}"
            )
        return [bound[n] for n in names]

    def _infer_shapes(self, bound: dict[str, Any]) -> None:
        """Fill omitted shape parameters from the arrays, and check every given one against
        them: `m` of `a: &Tensor<bf16, [m, k]>` is `a.shape[0]`."""
        for p in self.params:
            value = bound.get(p["name"])
            if p.get("dims") and isinstance(value, np.ndarray) and value.ndim != len(p["shape"]):
                # Before any size is read from it: a shape parameter taken from the wrong
                # rank blamed the next array that names it (`b` for a 3-d `a` of a gemm).
                pairs = zip(p["dims"], p["shape"], strict=False)
                shown = [n or ("n" if d is None else str(d)) for n, d in pairs]
                raise ArgumentError(
                    f"{self.name}: argument '{p['name']}' must have {len(p['shape'])} "
                    f"dimension(s), shape ({', '.join(shown)}), got {value.ndim}: "
                    f"{tuple(value.shape)}"
                )
            for i, name in enumerate(p.get("dims", [])):
                if not name or not isinstance(value, np.ndarray) or value.ndim <= i:
                    continue
                size = int(value.shape[i])
                if name not in bound:
                    bound[name] = size
                elif isinstance(bound[name], int | np.integer) and int(bound[name]) != size:
                    raise ArgumentError(
                        f"{self.name}: shape parameter '{name}' is {int(bound[name])} but "
                        f"argument '{p['name']}' has {size} in dimension {i} "
                        f"(shape {tuple(value.shape)})"
                    )

    def _tensor(self, p: dict, value: Any) -> tuple[np.ndarray, list[Any]]:
        who = f"{self.name}: argument '{p['name']}'"
        want = _dtype(p["dtype"], who)
        shape = p["shape"]
        if not isinstance(value, np.ndarray):
            raise ArgumentError(
                f"{who} must be a numpy array of dtype {want} and shape {_shape_str(shape)}, "
                f"got {type(value).__name__}"
            )
        if p["dtype"] == "bf16" and value.dtype == np.uint16:
            want = value.dtype  # bf16 given as its raw bits
        if value.dtype != want:
            raise ArgumentError(f"{who} must have dtype {want}, got {value.dtype}")
        if value.ndim != len(shape) or any(
            d is not None and d != s for d, s in zip(shape, value.shape, strict=True)
        ):
            raise ArgumentError(
                f"{who} must have shape {_shape_str(shape)}, got {tuple(value.shape)}"
            )
        if not p["const"] and not value.flags.writeable:
            raise ArgumentError(f"{who} is written by the kernel and must be writable")
        if not value.flags.c_contiguous:
            if not p["const"]:
                raise ArgumentError(f"{who} is written by the kernel and must be C-contiguous")
            value = np.ascontiguousarray(value)
        dims = [ctypes.c_int64(value.shape[i]) for i, d in enumerate(shape) if d is None]
        return value, [ctypes.c_void_p(value.ctypes.data), *dims]

    def _scalar(self, p: dict, value: Any) -> Any:
        who = f"{self.name}: argument '{p['name']}'"
        want = _dtype(p["dtype"], who)
        kind = want.kind
        ok = (
            isinstance(value, bool | np.bool_)
            if kind == "b"
            else isinstance(value, int | np.integer) and not isinstance(value, bool)
            if kind in "iu"
            else isinstance(value, int | float | np.integer | np.floating)
        )
        if not ok:
            raise ArgumentError(f"{who} must be a {p['dtype']} scalar, got {value!r}")
        if kind in "iu":
            info = np.iinfo(want)
            if not info.min <= int(value) <= info.max:
                raise ArgumentError(f"{who} = {value} does not fit {p['dtype']}")
        if p["dtype"] in ("bf16", "f16"):  # passed as its bits (the C header's uint16_t)
            return _CTYPES[p["dtype"]](int(np.array(value, want).view(np.uint16)))
        return _CTYPES[p["dtype"]](int(value) if kind in "biu" else float(value))

    def _args(self, args: tuple, kwargs: dict) -> tuple[list[Any], list[np.ndarray]]:
        keep: list[np.ndarray] = []  # contiguous copies must outlive the call
        cargs: list[Any] = []
        tensors: list[tuple[str, Any, bool]] = []  # the caller's arrays, for check_distinct
        for p, value in zip(self.params, self._bind(args, kwargs), strict=True):
            if p["kind"] == "tensor":
                arr, parts = self._tensor(p, value)
                keep.append(arr)
                cargs += parts
                tensors.append((p["name"], value, not p["const"]))
            else:
                cargs.append(self._scalar(p, value))
        check_distinct(self.name, tensors)
        return cargs, keep

    def _outputs(self, lead: tuple[int, ...]) -> list[np.ndarray]:
        outs = []
        for r in self.results:
            shape = list(lead) + (r["shape"] if r["kind"] == "tensor" else [])
            outs.append(np.empty(shape, dtype=_dtype(r["dtype"], f"{self.name}: result")))
        return outs

    def _finish(self, status: int, outs: list[np.ndarray], stacked: bool) -> Any:
        if status != 0:
            code = self._status.get(status, f"status {status}")
            detail = f" ({' and '.join(self.requires)})" if code == "VX_ERR_WHERE" else ""
            raise _kernel_error(self.name, status, code, detail)
        values = [
            o if r["kind"] == "tensor" or stacked else o[()]
            for r, o in zip(self.results, outs, strict=True)
        ]
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """One instance (`instance() = 0`, `instances() = 1`)."""
        cargs, _keep = self._args(args, kwargs)
        outs = self._outputs(())
        status = self._fn(*cargs, *[ctypes.c_void_p(o.ctypes.data) for o in outs])
        return self._finish(status, outs, stacked=False)

    def launch(
        self, *args: Any, instances: int | None = None, threads: int = 0, **kwargs: Any
    ) -> Any:
        """`instances` instances on a pool of at most one thread per core; each result
        comes back stacked along a new leading axis of length `instances`. The older
        `launch(N, *args)` still works, with a DeprecationWarning (`launch_count`)."""
        instances, args = launch_count(self.name, args, instances)
        if self._launch is None:
            raise ArgumentError(f"{self.name}: this artifact has no launch entry point")
        for what, v in (("instances", instances), ("threads", threads)):
            if not isinstance(v, int | np.integer) or isinstance(v, bool):
                raise ArgumentError(f"{self.name}: {what} must be an integer, got {v!r}")
        if not (-(2**63) <= instances < 2**63 and -(2**31) <= threads < 2**31):
            raise ArgumentError(f"{self.name}: instances={instances}, threads={threads} overflow")
        cargs, _keep = self._args(args, kwargs)
        # N < 1 and threads < 0 are refused by the kernel itself (VX_ERR_LAUNCH -> LaunchError).
        outs = self._outputs((max(int(instances), 0),))
        status = self._launch(
            ctypes.c_int64(int(instances)),
            ctypes.c_int32(int(threads)),
            *cargs,
            *[ctypes.c_void_p(o.ctypes.data) for o in outs],
        )
        return self._finish(status, outs, stacked=True)


def _check_abi(lib: ctypes.CDLL, spec: dict, status: dict, manifest: Path, library: Path) -> None:
    """The library's record of the kernel (`K__vx_abi`, written at build time) must be the
    digest of what the manifest says about it: else the runtime would size buffers and
    check arguments by an edited description (vxc/manifest.py)."""
    name = spec["name"]
    try:
        record = (ctypes.c_char * (DIGEST_CHARS + 1)).in_dll(lib, spec["symbol"] + ABI_SUFFIX)
    except ValueError:
        raise ArtifactError(
            f"{manifest} does not match {library}: the library has no record of kernel "
            f"'{name}' (symbol `{spec['symbol']}{ABI_SUFFIX}`): a manifest of another build, "
            "or a library built by an older vxc"
        ) from None
    if record.value.decode("ascii", "replace") != abi_digest(spec, status):
        raise ArtifactError(
            f"{manifest} does not match {library}: kernel '{name}' is described differently "
            "from what the library was built with (an edited manifest, or a library of "
            "another build); rebuild the artifact"
        )


class Artifact:
    """A loaded CPU artifact: `artifact.kernels[name]` or `artifact.<name>(...)`.
    `externs` are shared libraries defining the `extern fn`s the artifact calls."""

    def __init__(self, manifest_path: Path, externs: Sequence[str | Path] = ()):
        try:
            self.manifest: dict = json.loads(manifest_path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ArtifactError(f"{manifest_path} is not a manifest: {e}") from e
        # The format names the kind of artifact (the cpu runner's, RUNNERS); its target
        # is the one cpu target.
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != _CPU.format:
            raise ArgumentError(f"{manifest_path} is not a vx cpu artifact manifest")
        files = self.manifest.get("files")
        lib_name = files.get("shared_library") if isinstance(files, dict) else None
        if lib_name is None:
            raise ArgumentError(f"{manifest_path}: artifact was built without a shared library")
        if (
            not isinstance(lib_name, str)
            or Path(lib_name).name != lib_name
            or lib_name in ("", ".", "..")
        ):
            raise ArtifactError(
                f"{manifest_path}: the shared library must be a file beside the manifest, "
                f"not {lib_name!r}"
            )
        self.library_path = manifest_path.parent / lib_name
        needed = self.manifest.get("externs", [])
        if not isinstance(needed, list) or not all(isinstance(n, str) for n in needed):
            raise ArtifactError(f"{manifest_path}: `externs` must be a list of symbol names")
        self.externs = _load_externs(manifest_path, needed, externs)
        self._lib = ctypes.CDLL(str(self.library_path.resolve()))
        status = self.manifest.get("status")
        specs = self.manifest.get("kernels")
        try:
            for spec in specs:
                _check_abi(self._lib, spec, status, manifest_path, self.library_path)
            self.kernels = {k["name"]: Kernel(self._lib, k, status) for k in specs}
            self._variants(self.manifest.get("variants") or {})
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            if isinstance(e, ArtifactError):
                raise
            raise ArtifactError(
                f"{manifest_path}: malformed manifest ({type(e).__name__}: {e})"
            ) from e

    def _variants(self, variants: Mapping[str, list[str]]) -> None:
        """Each kernel's matmul paths (`kernel.variants`, from the manifest) and, where one is
        AMX, whether it runs here (`kernel.amx`: 1 on AMX, 0 refused by the OS, -1 unless
        VX_CPU_VARIANT=amx opts in; the query asks the OS once per process, amx.py). A refusal
        is said: the kernel runs, on its vector path, at a fraction of the speed."""
        for name, kernel in self.kernels.items():
            kernel.variants = tuple(variants.get(name, ()))
            if "amx" not in kernel.variants:
                continue
            query = getattr(self._lib, name + AMX_SUFFIX)
            query.restype, query.argtypes = ctypes.c_int32, []
            kernel.amx = int(query())
            if kernel.amx == 0:
                warnings.warn(
                    f"kernel '{name}' was built for AMX, but the OS refused this process the "
                    "tile state (arch_prctl ARCH_REQ_XCOMP_PERM): its matmuls run the "
                    f"vector path ({', '.join(v for v in kernel.variants if v != 'amx')})",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"artifact has no kernel '{name}' (kernels: {sorted(kernels)})")


def _address(lib: ctypes.CDLL, name: str) -> int | None:
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        return None


def _load_externs(
    manifest_path: Path, needed: list[str], paths: Sequence[str | Path]
) -> list[ctypes.CDLL]:
    """Load the libraries that define the artifact's `extern fn`s so that its shared
    library resolves them when it is opened. The dynamic loader binds an undefined symbol
    to the first global definition, so the libraries are opened RTLD_GLOBAL, and a name
    some earlier load already defines differently is refused instead of silently bound
    to that other definition."""
    process = ctypes.CDLL(None)
    before = {n: _address(process, n) for n in needed}
    libs = []
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"extern library {path} does not exist")
        libs.append(ctypes.CDLL(str(path.resolve()), mode=ctypes.RTLD_GLOBAL))
    given = ", ".join(str(p) for p in paths)
    missing = []
    for name in needed:
        found = next((a for lib in libs if (a := _address(lib, name)) is not None), None)
        if found is None and before[name] is None:
            missing.append(name)
        elif found is not None and before[name] not in (None, found):
            raise ArgumentError(
                f"{manifest_path.name}: extern `{name}` is already defined in this process "
                f"by another library, which the artifact would call instead of the one in "
                f"{given}; load the artifact in a fresh process"
            )
    if missing:
        where = f"none of {given} defines them" if libs else "no externs= library was given"
        raise ArgumentError(
            f"{manifest_path.name} calls extern fn(s) {', '.join(missing)} and {where}: "
            "pass externs=[path.so, ...] with their C definitions (prototypes in its .h)"
        )
    return libs


# A manifest is known by its "format" (each family's runner's, vxc.backends.RUNNERS), not
# its name, so this module needs nothing else of vxc (the slim Bazel runtime ships it with
# numpy and the few light modules it imports).
_CPU = RUNNERS["cpu"]  # this module is the cpu's loader


def _format(data: bytes) -> str | None:
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc.get("format") if isinstance(doc, dict) else None


def _find_manifest(d: Path) -> Path:
    manifests = sorted(p for p in d.glob("*.json") if _format(p.read_bytes()) in FORMATS)
    if len(manifests) != 1:
        found = ", ".join(p.name for p in manifests) or "none"
        raise FileNotFoundError(
            f"expected one vx artifact manifest (x.cpu.json, x.tpu.json, x.b200.json, "
            f"x.h100.json) in {d}, found {found}"
            + ("; load one of them by name" if manifests else "")
        )
    return manifests[0]


def load(path: str | Path, externs: Sequence[str | Path] = ()) -> Any:
    """Load an artifact from its manifest (`x.<target>.json`), the artifact directory that
    holds it (what a Bazel vx_kernel's `$(rootpath)` names), the cpu library (`x.cpu.so`)
    or the nvidia fatbin beside it. Its `format` picks the family's runner (vxc.backends.RUNNERS),
    whose loader it loads as:

    - cpu: an `Artifact` whose kernels run here on numpy arrays; `externs` are shared
      libraries that define the `extern fn`s the kernels call (the artifact's manifest
      lists them; its header declares their C prototypes).
    - tpu: a `vxc.backends.tpu.runtime.TpuArtifact`, which loads on any machine; calling
      a kernel runs its jax.export through `jax.jit` on a TPU and raises `NoTpu` (one
      line) where there is none.
    - b200 / h100: a `vxc.backends.nvidia.runtime.CudaArtifact` (cuda-python, GPU 0);
      loading raises `NoGpu` (one line) where no GPU of that architecture answers.

    `NoTpu` and `NoGpu` are both `vxc.errors.NotRunnableHere`. A file that is no vx
    manifest is an `ArgumentError` saying so."""
    p = Path(path)
    if p.is_dir():
        p = _find_manifest(p)
    if p.suffix in (".so", ".fatbin"):
        p = p.with_suffix(".json")
    if not p.is_file():
        raise FileNotFoundError(f"no artifact manifest at {p}")
    fmt = _format(p.read_bytes())
    runner = FORMATS.get(fmt)
    if externs and not (runner and runner.externs):
        takes = " and ".join(r.family for r in RUNNERS.values() if r.externs)
        raise ArgumentError(f"{p.name}: externs= applies to {takes} artifacts only")
    if runner is None:
        raise ArgumentError(
            f"{p} is not a vx artifact manifest (format {fmt!r}; vxc writes {', '.join(FORMATS)})"
        )
    return runner.load(p, externs)  # its module imports on first use (jax, cuda-python)


def load_outputs(
    outputs: Mapping[str, bytes], directory: str | Path, externs: Sequence[str | Path] = ()
) -> Any:
    """Write the outputs of `api.build` into `directory` and load them (see `load`)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    manifests = [
        n for n, data in outputs.items() if n.endswith(".json") and _format(data) in FORMATS
    ]
    if len(manifests) != 1:
        raise ArgumentError(f"expected one vx artifact manifest among {sorted(outputs)}")
    for name, data in outputs.items():
        (d / name).write_bytes(data)
    return load(d / manifests[0], externs)
