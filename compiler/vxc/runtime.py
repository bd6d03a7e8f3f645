"""Load a CPU artifact (shared library + manifest) and call its kernels with numpy.

    art = vxc.runtime.load("out/stream.cpu.json")
    acc = art.stream(tiles, w)          # tiles: (n, 128, 128) f32, w: (128, 128) f32

Arguments are checked against the manifest before the call: a wrong dtype,
rank or static dimension raises `ArgumentError` naming the parameter and what
was expected. A kernel that reports a non-zero status raises `KernelError`.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

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
_MEANING = {
    "VX_ERR_INDEX": "a Vec index was out of range (is the Vec empty?)",
    "VX_ERR_ALLOC": "the scratch arena could not be allocated",
    "VX_ERR_CAPACITY": "a dynamically shaped tensor does not fit its scratchpad slot",
    "VX_ERR_SHAPE": "matmul_acc operand shapes disagree at run time",
}


class ArgumentError(ValueError):
    """Arguments do not match the kernel's parameters in the manifest."""


class KernelError(RuntimeError):
    """The kernel ran and returned a non-zero status."""

    def __init__(self, kernel: str, status: int, code: str):
        self.status, self.code = status, code
        why = _MEANING.get(code, "unknown status")
        super().__init__(f"kernel '{kernel}' failed with {code} ({status}): {why}")


def _shape_str(shape: list[int | None]) -> str:
    return "(" + ", ".join("n" if d is None else str(d) for d in shape) + ")"


def _dtype(dtype: str, who: str) -> Any:
    if dtype not in _NUMPY:
        raise ArgumentError(f"{who}: element type {dtype} has no numpy equivalent")
    return np.dtype(_NUMPY[dtype])


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
        missing = [n for n in names if n not in bound]
        if missing:
            raise ArgumentError(
                f"{self.name}: missing argument(s) {missing}; expected {self.signature()}"
            )
        return [bound[n] for n in names]

    def _tensor(self, p: dict, value: Any) -> tuple[np.ndarray, list[Any]]:
        who = f"{self.name}: argument '{p['name']}'"
        want = _dtype(p["dtype"], who)
        shape = p["shape"]
        if not isinstance(value, np.ndarray):
            raise ArgumentError(
                f"{who} must be a numpy array of dtype {want} and shape {_shape_str(shape)}, "
                f"got {type(value).__name__}"
            )
        if value.dtype != want:
            raise ArgumentError(f"{who} must have dtype {want}, got {value.dtype}")
        if value.ndim != len(shape) or any(
            d is not None and d != s for d, s in zip(shape, value.shape, strict=True)
        ):
            raise ArgumentError(
                f"{who} must have shape {_shape_str(shape)}, got {tuple(value.shape)}"
            )
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
        return _CTYPES[p["dtype"]](int(value) if kind in "biu" else float(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        keep: list[np.ndarray] = []  # contiguous copies must outlive the call
        cargs: list[Any] = []
        for p, value in zip(self.params, self._bind(args, kwargs), strict=True):
            if p["kind"] == "tensor":
                arr, parts = self._tensor(p, value)
                keep.append(arr)
                cargs += parts
            else:
                cargs.append(self._scalar(p, value))
        outs: list[np.ndarray] = []
        for r in self.results:
            shape = r["shape"] if r["kind"] == "tensor" else []
            outs.append(np.empty(shape, dtype=_dtype(r["dtype"], f"{self.name}: result")))
        status = self._fn(*cargs, *[ctypes.c_void_p(o.ctypes.data) for o in outs])
        if status != 0:
            raise KernelError(self.name, status, self._status.get(status, f"status {status}"))
        values = [
            o if r["kind"] == "tensor" else o[()] for r, o in zip(self.results, outs, strict=True)
        ]
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)


class Artifact:
    """A loaded CPU artifact: `artifact.kernels[name]` or `artifact.<name>(...)`."""

    def __init__(self, manifest_path: Path):
        self.manifest: dict = json.loads(manifest_path.read_text())
        if self.manifest.get("format") != "vx-cpu-artifact" or self.manifest.get("target") != "cpu":
            raise ArgumentError(f"{manifest_path} is not a vx cpu artifact manifest")
        lib_name = self.manifest["files"].get("shared_library")
        if lib_name is None:
            raise ArgumentError(f"{manifest_path}: artifact was built without a shared library")
        self.library_path = manifest_path.parent / lib_name
        self._lib = ctypes.CDLL(str(self.library_path.resolve()))
        status = self.manifest["status"]
        self.kernels = {k["name"]: Kernel(self._lib, k, status) for k in self.manifest["kernels"]}

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"artifact has no kernel '{name}' (kernels: {sorted(kernels)})")


def load(path: str | Path) -> Artifact:
    """Load from the manifest (`x.cpu.json`) or the library (`x.cpu.so`) beside it."""
    p = Path(path)
    if p.suffix == ".so":
        p = p.with_suffix(".json")
    if not p.is_file():
        raise FileNotFoundError(f"no artifact manifest at {p}")
    return Artifact(p)


def load_outputs(outputs: Mapping[str, bytes], directory: str | Path) -> Artifact:
    """Write the outputs of `compile_module` into `directory` and load them."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    manifests = [n for n in outputs if n.endswith(".cpu.json")]
    if len(manifests) != 1:
        raise ArgumentError(f"expected one .cpu.json manifest among {sorted(outputs)}")
    for name, data in outputs.items():
        (d / name).write_bytes(data)
    return load(d / manifests[0])
