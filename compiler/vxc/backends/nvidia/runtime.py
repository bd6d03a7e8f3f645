"""Run a b200 / h100 artifact with cuda-python: load the fatbin, encode the tensor maps
the manifest describes with cuTensorMapEncodeTiled, launch N instances (one CTA
each), return the results as numpy arrays (stacked: N x tile).

    art = vxc.runtime.load("out/stream_grid.h100.json")   # or the .fatbin beside it
    acc = art.stream_grid(tiles, w)                       # one instance: (128, 128)
    accs = art.stream_grid.launch(tiles, w, instances=132)  # 132 instances: (132, 128, 128)
    art.stream_grid.time(132, tiles, w, repeat=20)        # seconds per launch (CUDA events)

On a machine without an NVIDIA GPU (or driver) every entry point raises `NoGpu`,
whose message is one line saying so.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vxc.arguments import ArgumentError, check_distinct, launch_count
from vxc.backends.nvidia.encoders import TMA_DTYPES, TMA_ROW_MULTIPLE, TMA_SWIZZLE, TensorMap
from vxc.backends.nvidia.manifest import Manifest
from vxc.errors import NotRunnableHere
from vxc.targets import NVIDIA_ARCHES

NUMPY = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i1": np.bool_}


class NoGpu(NotRunnableHere):
    """No usable NVIDIA GPU here; the message is one line."""


class CudaError(RuntimeError):
    pass


# The largest tensor dimension a tensor map over a whole argument may have: TMA's
# coordinates are signed 32-bit, so an element past 2^31 - 1 cannot be addressed (and the
# kernels convert coordinates and dims to 32 bits).
TMA_COORD_MAX = 2**31 - 1


class TensorMapRefused(ArgumentError):
    """A launch whose argument no tensor map can describe (docs/NVIDIA.md, "Tensor maps
    at launch"): E7008, the TMA rule it breaks, the argument, and what to do. Refused
    before anything is uploaded, for the GPU and the PTX simulator alike (the driver's
    cuTensorMapEncodeTiled would fail with CUDA_ERROR_INVALID_VALUE and no word why).
    What remains refused: a dimension past TMA's s32 coordinates, and a tensor whose rows
    need padding (below) that the kernel also reads through a raw pointer."""

    code = "E7008"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.code}: {message}")


class Hang(CudaError):
    """A launch did not finish within the watchdog's limit; the context is unusable
    afterwards (the kernel still spins), so the caller reports it and exits."""


def _bf16():
    try:
        import ml_dtypes

        return ml_dtypes.bfloat16
    except ImportError:  # jax installs ml_dtypes; without it bf16 arrays cannot be built
        return None


# The CUDA driver binding in use: cuda-python's `cuda.bindings.driver`, or a stand-in
# with the same calls (`use_driver`: the tests' fake CUDA layer, which runs the kernels in
# the PTX simulator on a machine without a GPU).
_DRIVER = None

# How long a launch may run before the watchdog calls it a hang: every mbarrier wait of
# a kernel spins forever when its copy never lands, so a slip on hardware is otherwise a
# silent hang.
WATCHDOG_S = 10.0


def use_driver(driver) -> None:
    """Use `driver` (an object with cuda-python's driver calls) instead of cuda-python."""
    global _DRIVER
    _DRIVER = driver


def _driver():
    if _DRIVER is not None:
        return _DRIVER
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise NoGpu(f"no NVIDIA GPU runtime: cuda-python is not installed ({e})") from None
    return driver


def _check(result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise CudaError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def gpu_status() -> tuple[bool, str]:
    """(usable, one line): whether a GPU and its driver answer here."""
    try:
        driver = _driver()
        err = driver.cuInit(0)[0]
    except NoGpu as e:
        return False, str(e)
    except Exception as e:  # noqa: BLE001 - libcuda missing is raised as a loader error
        return (
            False,
            f"no NVIDIA GPU: the CUDA driver is not installed on this machine ({type(e).__name__})",
        )
    if int(err) != 0:
        return False, f"no NVIDIA GPU: cuInit failed ({err})"
    err, n = driver.cuDeviceGetCount()
    if int(err) != 0 or n == 0:
        return False, "no NVIDIA GPU: the driver reports no device"
    return True, f"{n} NVIDIA GPU(s)"


def device_capability() -> tuple[int, int]:
    """GPU 0's compute capability (major, minor)."""
    d = _driver()
    dev = _check(d.cuDeviceGet(0), "cuDeviceGet")
    attr = d.CUdevice_attribute
    return tuple(
        _check(d.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")
        for a in (
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        )
    )


@dataclass
class LaunchParam:
    """One kernel parameter as the manifest describes it, for concrete arguments: what
    to upload (`array`), the tensor map to encode over it, or a 64-bit value."""

    name: str
    kind: str  # "tensormap" | "pointer" | "u64" | "status"
    arg_index: int | None = None  # the argument it comes from (None: a result / status)
    array: np.ndarray | None = None
    tensor_map: TensorMap | None = None
    value: int | None = None
    # The device row pitch in bytes where it is not the array's own (a 2-D argument whose
    # rows are not a multiple of 16 bytes, which a tensor map's stride must be): uploaded
    # row by row at this pitch (and an output read back so); None: uploaded as it is.
    pitch: int | None = None


def _dtype_of(dtype: str):
    return _bf16() if dtype == "bf16" else NUMPY.get(dtype)


def _check_distinct(meta: dict, args) -> None:
    """A `&mut` argument (one the kernel stores into: a parameter marked `mut`) may share
    no memory with another tensor argument (LANGUAGE.md section 7): refused before
    anything is uploaded, for the GPU and the PTX simulator alike."""
    tensors: dict[int, bool] = {}
    for p in meta["params"]:
        index = p.get("arg_index")
        if p["kind"] in ("tensormap", "pointer") and index is not None:
            tensors[index] = tensors.get(index, False) or bool(p.get("mut"))
    check_distinct(
        meta["name"], [(meta["args"][i], args[i], w) for i, w in sorted(tensors.items())]
    )


def plan_launch(meta: dict, args, instances: int) -> list[LaunchParam]:
    """The parameters of one launch of manifest kernel `meta` on `args` (numpy) as
    `instances` CTAs, checked against the manifest; shared by the CUDA launch and the
    tests' PTX simulator. Results are zero arrays stacked over the instances."""
    if instances < 1:
        raise ValueError(f"instances must be >= 1, got {instances}")
    if len(args) != len(meta["args"]):
        raise ValueError(
            f"{meta['name']} takes {len(meta['args'])} arguments "
            f"({', '.join(meta['args'])}), got {len(args)}"
        )
    _check_distinct(meta, args)
    out: list[LaunchParam] = []
    for p in meta["params"]:
        kind, index = p["kind"], p.get("arg_index")
        a = np.asarray(args[index]) if index is not None else None
        if kind in ("tensormap", "pointer") and index is not None:
            want = _dtype_of(p["dtype"])
            if want is None or a.dtype != np.dtype(want):
                raise ValueError(f"{p['arg']} must be {p['dtype']}, got {a.dtype}")
            if p.get("mut") and not (a.flags.c_contiguous and a.flags.writeable):
                # written in place: a copy made here would be written instead
                raise ValueError(f"{p['arg']} is an output: pass a writable, C-contiguous array")
            a = np.ascontiguousarray(a)
        if kind == "tensormap" and index is not None and p.get("view"):
            tm = _whole_map(p, a)
            pitch = tm.strides[0] if tm.strides[0] != a.shape[1] * a.itemsize else None
            out.append(LaunchParam(p["name"], kind, index, a, tm, pitch=pitch))
        elif kind == "tensormap" and index is not None:
            rows, cols = p["tile"]
            if tuple(a.shape[-2:]) != (rows, cols) or a.ndim != (3 if p["vec"] else 2):
                shape = ("n, " if p["vec"] else "") + f"{rows}, {cols}"
                raise ValueError(f"{p['arg']} has shape {a.shape}, the kernel takes ({shape})")
            tm = TensorMap(
                p["dtype"],
                (cols, a.size // cols),
                (cols * a.itemsize,),
                tuple(p["box"]),
                p["swizzle"],
            )
            out.append(LaunchParam(p["name"], kind, index, a, tm))
        elif kind == "tensormap":
            rows, cols = p["tile"]
            res = np.zeros((instances, rows, cols), dtype=NUMPY[p["dtype"]])
            tm = TensorMap(
                p["dtype"],
                (cols, instances * rows),
                (cols * res.itemsize,),
                tuple(p["box"]),
                p["swizzle"],
            )
            out.append(LaunchParam(p["name"], kind, None, res, tm))
        elif kind == "pointer":
            if tuple(a.shape) != tuple(p["shape"]):
                raise ValueError(f"{p['arg']} has shape {a.shape}, the kernel takes {p['shape']}")
            out.append(LaunchParam(p["name"], kind, index, a))
        elif kind == "u64":
            value = (
                len(a)
                if p["value"] == "len"
                else int(np.shape(a)[0 if p["value"] == "rows" else 1])  # an edge view's dims
                if p["value"] in ("rows", "cols")
                else int(np.float32(a).view(np.uint32))  # an f32 scalar: its bits
                if p["value"] == "f32"
                else int(a)
            )
            out.append(LaunchParam(p["name"], kind, index, value=value))
        elif kind == "status":
            out.append(LaunchParam(p["name"], kind, array=np.zeros(1, np.uint32)))
        else:
            raise ValueError(f"unknown parameter kind {kind!r} in the manifest")
    for lp in out:
        if lp.tensor_map is not None:
            lp.tensor_map.check()
    _check_one_layout(out)
    return out


def _check_one_layout(plan: list[LaunchParam]) -> None:
    """An argument lies in device memory once, so every parameter over it must see one
    layout: one whose rows are padded cannot also be read through a raw pointer (the
    kernel's `ptr + i` addressing assumes the array's own pitch)."""
    padded = {p.arg_index: p for p in plan if p.pitch is not None}
    for p in plan:
        if p.kind == "pointer" and p.arg_index in padded:
            q = padded[p.arg_index]
            raise TensorMapRefused(
                f"{q.name.split('_tmap')[0]} has shape {q.array.shape}: its rows "
                f"({q.array.shape[1] * q.array.itemsize} bytes) are padded to "
                f"{q.pitch} bytes for its tensor map, and the kernel also reads it through "
                f"a pointer ({p.name}), which needs the array's own pitch; make the last "
                f"dimension a multiple of {TMA_ROW_MULTIPLE // q.array.itemsize}"
            )


def _whole_map(p: dict, a: np.ndarray) -> TensorMap:
    """The tensor map over a whole 2-D argument (the kernel reads views of it or stores
    into it at coordinates): its dims are the array's own, never rounded up to the box, so
    a box reaching past them (an `edge` view's) is zero-filled on a load and clipped on a
    store by the TMA unit. cuTensorMapEncodeTiled takes only a row pitch that is a
    multiple of 16 bytes (its globalStrides rule): where the array's is not, the stride is
    its pitch rounded up to 16 bytes, and the launcher lays the argument out at that pitch
    on the device (LaunchParam.pitch); the padding columns lie past the map's dims, so
    they are never read as data and never written. The kernels' coordinates are s32: a
    dimension past that is refused here (TensorMapRefused, E7008)."""
    if a.ndim != 2:
        raise ValueError(f"{p['arg']} has shape {a.shape}, the kernel takes a 2-D tensor")
    rows, cols = a.shape
    if max(rows, cols) > TMA_COORD_MAX:
        raise TensorMapRefused(
            f"{p['arg']} has shape {a.shape}: a dimension past {TMA_COORD_MAX} elements, "
            f"which TMA's signed 32-bit coordinates cannot reach"
        )
    pitch = -(-cols * a.itemsize // TMA_ROW_MULTIPLE) * TMA_ROW_MULTIPLE
    return TensorMap(p["dtype"], (cols, rows), (pitch,), tuple(p["box"]), p["swizzle"])


class CudaArtifact:
    """A fatbin loaded on GPU 0: `artifact.<kernel>(...)` or `artifact.kernels[name]`."""

    def __init__(self, fatbin: bytes, manifest: Manifest) -> None:
        ok, why = gpu_status()
        if not ok:
            raise NoGpu(why)
        self.d = d = _driver()
        self.manifest = manifest
        dev = _check(d.cuDeviceGet(0), "cuDeviceGet")
        major, minor = device_capability()
        want = NVIDIA_ARCHES[manifest.arch].capability  # an `a` cubin runs on exactly it
        if (major, minor) != want:
            raise NoGpu(
                f"this GPU is compute capability {major}.{minor}; a {manifest.target} artifact "
                f"({manifest.arch}) runs on {want[0]}.{want[1]}"
            )
        self.ctx = _check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.module = _check(d.cuModuleLoadData(fatbin), "cuModuleLoadData")
        self.kernels = {k["name"]: CudaKernel(self, k) for k in manifest.kernels}

    def __getattr__(self, name: str) -> CudaKernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"artifact has no kernel '{name}' (kernels: {sorted(kernels)})")


def load(path: str | Path) -> CudaArtifact:
    """Load `x.<target>.json` and the fatbin it names (or the fatbin, with the .json
    beside it). Raises `NoGpu` (one line) where no NVIDIA GPU answers."""
    p = Path(path)
    if p.suffix == ".fatbin":
        p = p.with_suffix(".json")
    manifest = Manifest.from_bytes(p.read_bytes())
    return CudaArtifact((p.parent / manifest.fatbin).read_bytes(), manifest)


class CudaKernel:
    """One kernel of a loaded fatbin, launchable with numpy arguments."""

    def __init__(self, artifact: CudaArtifact, meta: dict) -> None:
        self.d = d = artifact.d
        self.meta = meta
        self.func = _check(
            d.cuModuleGetFunction(artifact.module, meta["name"].encode()), "cuModuleGetFunction"
        )
        # Its own stream, so the watchdog can ask whether this kernel's launch finished.
        self.stream = _check(d.cuStreamCreate(0), "cuStreamCreate")
        self.last_launch = ""
        _check(
            d.cuFuncSetAttribute(
                self.func,
                d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                self.meta["dynamic_smem"],
            ),
            "cuFuncSetAttribute",
        )

    # -- memory ------------------------------------------------------------------------

    def _alloc(self, nbytes: int) -> int:
        return int(_check(self.d.cuMemAlloc(max(nbytes, 16)), "cuMemAlloc"))

    def _upload(self, a: np.ndarray, pitch: int | None = None) -> int:
        """`a` in a new device buffer: as it is, or (`pitch`) its rows at that pitch."""
        a = np.ascontiguousarray(a)
        if pitch is None:
            ptr = self._alloc(a.nbytes)
            _check(self.d.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
            return ptr
        rows, width = a.shape[0], a.shape[1] * a.itemsize
        ptr = self._alloc(rows * pitch)
        self._copy_2d(ptr, pitch, a.ctypes.data, width, width, rows, to_device=True)
        return ptr

    def _copy_2d(self, dst, dst_pitch, src, src_pitch, width, rows, to_device: bool) -> None:
        """`rows` rows of `width` bytes between host and device, each side at its pitch."""
        d = self.d
        cp = d.CUDA_MEMCPY2D()
        host, dev = d.CUmemorytype.CU_MEMORYTYPE_HOST, d.CUmemorytype.CU_MEMORYTYPE_DEVICE
        if to_device:
            cp.srcMemoryType, cp.srcHost, cp.dstMemoryType, cp.dstDevice = host, src, dev, dst
        else:
            cp.srcMemoryType, cp.srcDevice, cp.dstMemoryType, cp.dstHost = dev, src, host, dst
        cp.srcPitch, cp.dstPitch, cp.WidthInBytes, cp.Height = src_pitch, dst_pitch, width, rows
        _check(d.cuMemcpy2D(cp), "cuMemcpy2D")

    def _tensor_map(self, spec: TensorMap, ptr: int) -> bytes:
        d = self.d
        spec.check()
        tmap = _check(
            d.cuTensorMapEncodeTiled(
                d.CUtensorMapDataType(TMA_DTYPES[spec.dtype]),
                len(spec.dims),
                ptr,
                [d.cuuint64_t(x) for x in spec.dims],
                [d.cuuint64_t(x) for x in spec.strides],
                [d.cuuint32_t(x) for x in spec.box],
                [d.cuuint32_t(1)] * len(spec.box),
                d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                d.CUtensorMapSwizzle(TMA_SWIZZLE[spec.swizzle]),
                d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            ),
            "cuTensorMapEncodeTiled",
        )
        return ctypes.string_at(tmap.getPtr(), 128)

    # -- launch ------------------------------------------------------------------------

    def prepare(self, *args: np.ndarray, instances: int = 1, poison: bool = False):
        """Upload the arguments, encode the maps; (kernel params, outputs, status, frees).
        With `poison`, results start as NaN on the device (integers: all ones), so an
        element the kernel never writes cannot pass for a right answer."""
        bufs, outs, frees, status = [], [], [], None
        arg_ptrs: dict[int, int] = {}
        plan = plan_launch(self.meta, args, instances)
        self.last_launch = f"{self.meta['name']} instances={instances} " + " ".join(
            f"{p.name}={tuple(p.array.shape)}" for p in plan if p.array is not None
        )
        mut = {p["arg_index"] for p in self.meta["params"] if p.get("mut") and "arg_index" in p}
        for p in plan:
            poisoned = p.arg_index is None or p.arg_index in mut
            if poison and poisoned and p.kind in ("tensormap", "pointer"):
                p.array[...] = np.nan if p.array.dtype.kind == "f" else -1
            if p.kind in ("tensormap", "pointer"):
                if p.arg_index is not None:
                    if p.arg_index not in arg_ptrs:
                        arg_ptrs[p.arg_index] = self._upload(p.array, p.pitch)
                        if p.arg_index in mut:  # an output: written back in place
                            outs.append((p.array, arg_ptrs[p.arg_index], False, p.pitch))
                    ptr = arg_ptrs[p.arg_index]
                else:  # a result: stacked over the instances
                    ptr = self._upload(p.array)
                    frees.append(ptr)
                    outs.append((p.array, ptr, True, None))
                if p.kind == "tensormap":
                    bufs.append(self._param_bytes(self._tensor_map(p.tensor_map, ptr)))
                else:
                    bufs.append(ctypes.c_uint64(ptr))
            elif p.kind == "u64":
                bufs.append(ctypes.c_uint64(p.value))
            elif p.kind == "status":
                status = self._upload(p.array)
                frees.append(status)
                bufs.append(ctypes.c_uint64(status))
        frees += list(arg_ptrs.values())
        return bufs, outs, status, frees

    @staticmethod
    def _param_bytes(raw: bytes):
        buf = (ctypes.c_uint8 * 128).from_buffer_copy(raw)
        return buf

    def launch_raw(self, bufs, instances: int) -> None:
        ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
        self._keep = (bufs, ptrs)
        block = self.meta["block"]
        _check(
            self.d.cuLaunchKernel(
                self.func,
                instances,
                1,
                1,
                block[0],
                block[1],
                block[2],
                self.meta["dynamic_smem"],
                self.stream,
                ctypes.addressof(ptrs),
                0,
            ),
            "cuLaunchKernel",
        )

    def wait(self, timeout: float | None = None) -> None:
        """Block until this kernel's stream is idle, polling `cuStreamQuery`; past
        `timeout` seconds (default WATCHDOG_S) raise `Hang` naming the launch."""
        d = self.d
        limit = WATCHDOG_S if timeout is None else timeout
        deadline = time.monotonic() + limit
        pause = 1e-5
        while True:
            err = d.cuStreamQuery(self.stream)
            err = err[0] if isinstance(err, tuple) else err
            if int(err) == 0:
                return
            if int(err) != int(d.CUresult.CUDA_ERROR_NOT_READY):
                raise CudaError(f"{self.last_launch}: the kernel faulted ({err})")
            if time.monotonic() > deadline:
                raise Hang(f"HANG {self.last_launch} (not finished after {limit:g} s)")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def finish(self, outs, status, frees, timeout: float | None = None) -> list[np.ndarray]:
        d = self.d
        self.wait(timeout)
        if status is not None:
            word = np.zeros(1, np.uint32)
            _check(d.cuMemcpyDtoH(word.ctypes.data, status, 4), "cuMemcpyDtoH")
            if int(word[0]):
                codes = {v: k for k, v in self.meta["status"].items()}
                raise CudaError(
                    f"{self.meta['name']}: status {codes.get(int(word[0]), word[0])}: the launch "
                    f"breaks `where {' and '.join(self.meta['requires'])}`"
                )
        results = []
        for out, ptr, is_result, pitch in outs:
            if pitch is None:
                _check(d.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes), "cuMemcpyDtoH")
            else:  # rows padded on the device: only each row's own bytes come back
                width = out.shape[1] * out.itemsize
                self._copy_2d(out.ctypes.data, width, ptr, pitch, width, out.shape[0], False)
            if is_result:
                results.append(out)
        for ptr in frees:
            d.cuMemFree(ptr)
        return results

    def run(
        self, instances: int, *args: np.ndarray, poison: bool = False, timeout: float | None = None
    ) -> list[np.ndarray]:
        bufs, outs, status, frees = self.prepare(*args, instances=instances, poison=poison)
        self.launch_raw(bufs, instances)
        return self.finish(outs, status, frees, timeout)

    def launch(self, *args: np.ndarray, instances: int | None = None):
        """`instances` CTAs; each result stacked along a new leading axis.
        `launch(N, *args)` is deprecated (`launch_count`)."""
        instances, args = launch_count(self.meta["name"], args, instances)
        res = self.run(instances, *args)
        return res[0] if len(res) == 1 else tuple(res) if res else None

    def __call__(self, *args: np.ndarray):
        """One instance; results without the instance axis."""
        res = [r[0] for r in self.run(1, *args)]
        return res[0] if len(res) == 1 else tuple(res) if res else None

    def times(self, instances: int, *args: np.ndarray, repeat: int = 10) -> list[float]:
        """Seconds of each of `repeat` launches (CUDA events around each, after one warm-up;
        the inputs are uploaded once), every launch under the watchdog."""
        d = self.d
        bufs, outs, status, frees = self.prepare(*args, instances=instances)
        self.launch_raw(bufs, instances)
        self.wait()
        out = []
        start = _check(d.cuEventCreate(0), "cuEventCreate")
        stop = _check(d.cuEventCreate(0), "cuEventCreate")
        for _ in range(repeat):
            _check(d.cuEventRecord(start, self.stream), "cuEventRecord")
            self.launch_raw(bufs, instances)
            _check(d.cuEventRecord(stop, self.stream), "cuEventRecord")
            self.wait()
            out.append(_check(d.cuEventElapsedTime(start, stop), "cuEventElapsedTime") / 1e3)
        self.finish(outs, status, frees)
        return out

    def time(self, instances: int, *args: np.ndarray, repeat: int = 10) -> float:
        """The median of `times`: seconds per launch."""
        ts = sorted(self.times(instances, *args, repeat=repeat))
        return ts[len(ts) // 2]
