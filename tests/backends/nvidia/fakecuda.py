"""A stand-in for cuda-python's driver binding that runs kernels in the PTX simulator, so
the GPU check's device-side script (tools/gpu_check.py) and the runtime's launch path run
end to end on a machine without a GPU.

What is real: the fatbin (its PTX is extracted with cuobjdump), the kernel parameter
buffer the runtime packs (read back through the pointers `cuLaunchKernel` is given, in
the order and sizes of the PTX entry's parameters), the device memory traffic, and the
kernel's execution (ptxsim). What is not: `cuTensorMapEncodeTiled`'s 128 bytes. The
driver's layout is opaque and undocumented, so this layer records the call's arguments
and packs them in its own layout (`pack_tensor_map`), which the launch unpacks: the
runtime's part (the arguments it encodes and that it passes the 128 bytes through
untouched) is what is checked. Time is the simulator's: one step = 1 ns.
"""

from __future__ import annotations

import ctypes
import enum
import re
import struct
from dataclasses import dataclass, field

import numpy as np

from vxc.backends.nvidia import ptxsim, toolchain

TMAP_MAGIC = b"VXFAKETM"
TMAP_FORMAT = "<8sQI I I I 2Q Q 2I"  # magic, address, dtype, rank, swizzle, elem, dims, stride, box
ELEM = {6: 2, 7: 4, 9: 2, 3: 4}  # CUtensorMapDataType -> bytes
SWIZZLE = {0: "none", 1: "32B", 2: "64B", 3: "128B"}


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_LAUNCH_FAILED = 719


class CUmemorytype(enum.IntEnum):  # noqa: N801
    CU_MEMORYTYPE_HOST = 1
    CU_MEMORYTYPE_DEVICE = 2


@dataclass
class CUDA_MEMCPY2D:  # noqa: N801 - cuda-python's struct: the fields the runtime sets
    srcMemoryType: int = 0  # noqa: N815
    srcHost: int = 0  # noqa: N815
    srcDevice: int = 0  # noqa: N815
    srcPitch: int = 0  # noqa: N815
    dstMemoryType: int = 0  # noqa: N815
    dstHost: int = 0  # noqa: N815
    dstDevice: int = 0  # noqa: N815
    dstPitch: int = 0  # noqa: N815
    WidthInBytes: int = 0  # noqa: N815
    Height: int = 0  # noqa: N815


class CUdevice_attribute(enum.IntEnum):  # noqa: N801 - cuda-python's names
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CUfunction_attribute(enum.IntEnum):  # noqa: N801
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class CUtensorMapInterleave(enum.IntEnum):
    CU_TENSOR_MAP_INTERLEAVE_NONE = 0


class CUtensorMapL2promotion(enum.IntEnum):
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3


class CUtensorMapFloatOOBfill(enum.IntEnum):
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0


CUtensorMapDataType = int
CUtensorMapSwizzle = int
cuuint64_t = int
cuuint32_t = int


def pack_tensor_map(address, dtype, dims, strides, box, swizzle) -> bytes:
    raw = struct.pack(
        TMAP_FORMAT, TMAP_MAGIC, address, dtype, len(dims), swizzle, ELEM[dtype],
        *dims, *strides, *box,
    )  # fmt: skip
    return raw.ljust(128, b"\0")


def unpack_tensor_map(raw: bytes) -> dict:
    f = struct.unpack_from(TMAP_FORMAT, raw)
    if f[0] != TMAP_MAGIC:
        raise ptxsim.SimError(
            "a tensor-map parameter holds bytes cuTensorMapEncodeTiled never made"
        )
    address, dtype, rank, swizzle, elem = f[1:6]
    return {"address": address, "dtype": dtype, "rank": rank, "swizzle": SWIZZLE[swizzle],
            "elem": elem, "dims": f[6:8], "stride": f[8], "box": f[9:11]}  # fmt: skip


@dataclass
class TensorMapHandle:
    buf: ctypes.Array

    def getPtr(self) -> int:  # noqa: N802 - cuda-python's name
        return ctypes.addressof(self.buf)


@dataclass
class Stream:
    busy_until_query: bool = False  # a hang: never finishes
    fault: str | None = None
    clock_ns: int = 0


@dataclass
class Event:
    ns: int = 0


@dataclass
class Function:
    ptx: str
    name: str
    params: list[tuple[str, int]]  # (name, bytes) in the entry's order
    attrs: dict = field(default_factory=dict)


class FakeDriver:
    CUresult = CUresult
    CUmemorytype = CUmemorytype
    CUDA_MEMCPY2D = CUDA_MEMCPY2D
    CUdevice_attribute = CUdevice_attribute
    CUfunction_attribute = CUfunction_attribute
    CUtensorMapInterleave = CUtensorMapInterleave
    CUtensorMapL2promotion = CUtensorMapL2promotion
    CUtensorMapFloatOOBfill = CUtensorMapFloatOOBfill
    CUtensorMapDataType = staticmethod(CUtensorMapDataType)
    CUtensorMapSwizzle = staticmethod(CUtensorMapSwizzle)
    cuuint64_t = staticmethod(cuuint64_t)
    cuuint32_t = staticmethod(cuuint32_t)

    def __init__(self, capability=(9, 0), ptx_filter=None, hang: bool = False) -> None:
        self.capability = capability
        self.ptx_filter = ptx_filter  # mutate the PTX before it runs (a broken kernel)
        self.hang = hang  # every launch spins forever (the watchdog's fake stream)
        self.memory = ptxsim.Global()
        self.tensor_map_calls: list[dict] = []
        self.launches: list[dict] = []
        self.copies_2d: list[CUDA_MEMCPY2D] = []

    # -- device, context, module -----------------------------------------------------
    def cuInit(self, flags):  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuDeviceGetCount(self):  # noqa: N802
        return CUresult.CUDA_SUCCESS, 1

    def cuDeviceGet(self, i):  # noqa: N802
        return CUresult.CUDA_SUCCESS, i

    def cuDeviceGetAttribute(self, attr, dev):  # noqa: N802
        major = attr == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return CUresult.CUDA_SUCCESS, self.capability[0 if major else 1]

    def cuDevicePrimaryCtxRetain(self, dev):  # noqa: N802
        return CUresult.CUDA_SUCCESS, object()

    def cuCtxSetCurrent(self, ctx):  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuModuleLoadData(self, fatbin: bytes):  # noqa: N802
        ptx = toolchain.extract_ptx(bytes(fatbin))
        return CUresult.CUDA_SUCCESS, self.ptx_filter(ptx) if self.ptx_filter else ptx

    def cuModuleGetFunction(self, ptx: str, name: bytes):  # noqa: N802
        k = name.decode()
        head = ptx[ptx.index(f".entry {k}(") :].split(")", 1)[0]
        params = []
        for m in re.finditer(r"\.param (?:\.align \d+ )?\.(\w+) (\w+)(?:\[(\d+)\])?", head):
            ty, pname, n = m.groups()
            params.append((pname, int(n) if n else {"u64": 8, "u32": 4, "b64": 8}[ty]))
        return CUresult.CUDA_SUCCESS, Function(ptx, k, params)

    def cuFuncSetAttribute(self, func, attr, value):  # noqa: N802
        func.attrs[int(attr)] = value
        return (CUresult.CUDA_SUCCESS,)

    # -- memory ------------------------------------------------------------------------
    def cuMemAlloc(self, n):  # noqa: N802
        return CUresult.CUDA_SUCCESS, self.memory.add(np.zeros(int(n), np.uint8))

    def cuMemFree(self, ptr):  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyHtoD(self, dst, src, n):  # noqa: N802
        buf, off = self.memory.find(int(dst))
        ctypes.memmove(buf.ctypes.data + off, int(src), int(n))
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, dst, src, n):  # noqa: N802
        buf, off = self.memory.find(int(src))
        ctypes.memmove(int(dst), buf.ctypes.data + off, int(n))
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpy2D(self, cp):  # noqa: N802
        """Row by row, as the driver does: a pitch below the width, or a row that leaves
        its device buffer, is refused (CUDA_ERROR_INVALID_VALUE)."""
        self.copies_2d.append(cp)
        if min(cp.srcPitch, cp.dstPitch) < cp.WidthInBytes:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        for row in range(int(cp.Height)):
            ends = []
            for kind, host, device, pitch in (
                (cp.srcMemoryType, cp.srcHost, cp.srcDevice, cp.srcPitch),
                (cp.dstMemoryType, cp.dstHost, cp.dstDevice, cp.dstPitch),
            ):
                if kind == CUmemorytype.CU_MEMORYTYPE_HOST:
                    ends.append(int(host) + row * pitch)
                    continue
                buf, off = self.memory.find(int(device) + row * pitch)
                if off + cp.WidthInBytes > buf.size:
                    return (CUresult.CUDA_ERROR_INVALID_VALUE,)
                ends.append(buf.ctypes.data + off)
            ctypes.memmove(ends[1], ends[0], int(cp.WidthInBytes))
        return (CUresult.CUDA_SUCCESS,)

    # -- tensor maps -------------------------------------------------------------------
    def cuTensorMapEncodeTiled(  # noqa: N802
        self, dtype, rank, address, dims, strides, box, elem_strides, inter, swizzle, l2, oob
    ):
        call = {"dtype": int(dtype), "rank": int(rank), "address": int(address),
                "dims": [int(x) for x in dims], "strides": [int(x) for x in strides],
                "box": [int(x) for x in box], "elem_strides": [int(x) for x in elem_strides],
                "swizzle": int(swizzle)}  # fmt: skip
        self.tensor_map_calls.append(call)
        raw = pack_tensor_map(
            call["address"], call["dtype"], call["dims"], call["strides"], call["box"],
            call["swizzle"],
        )  # fmt: skip
        return CUresult.CUDA_SUCCESS, TensorMapHandle((ctypes.c_uint8 * 128).from_buffer_copy(raw))

    # -- launch ------------------------------------------------------------------------
    def cuStreamCreate(self, flags):  # noqa: N802
        return CUresult.CUDA_SUCCESS, Stream()

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):  # noqa: N802
        ptrs = (ctypes.c_void_p * len(f.params)).from_address(int(params))
        values: dict = {}
        for (name, size), ptr in zip(f.params, ptrs, strict=True):
            raw = ctypes.string_at(ptr, size)
            if size == 128:
                tm = unpack_tensor_map(raw)
                buf, off = self.memory.find(tm["address"])
                values[name] = ptxsim.TensorMap(
                    buf[off:], tm["dims"], tm["stride"], tm["box"], tm["swizzle"], tm["elem"]
                )
            else:
                values[name] = int.from_bytes(raw, "little")
        self.launches.append({"kernel": f.name, "grid": (gx, gy, gz), "block": (bx, by, bz),
                              "smem": smem, "params": {k: v for k, v in values.items()
                                                       if isinstance(v, int)}})  # fmt: skip
        if self.hang:
            stream.busy_until_query = True
            return (CUresult.CUDA_SUCCESS,)
        steps = 0
        try:
            for cta in range(int(gx)):
                sim = ptxsim.Cta(f.ptx, f.name, values, int(smem), cta, int(gx), self.memory)
                sim.run()
                steps += sim.steps
        except ptxsim.SimError as e:
            if "deadlock" in str(e) or "too many steps" in str(e):
                stream.busy_until_query = True  # on hardware: a spin that never ends
            else:
                stream.fault = str(e)
        stream.clock_ns += steps
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamQuery(self, stream):  # noqa: N802
        if stream.busy_until_query:
            return (CUresult.CUDA_ERROR_NOT_READY,)
        if stream.fault:
            return (CUresult.CUDA_ERROR_LAUNCH_FAILED,)
        return (CUresult.CUDA_SUCCESS,)

    def cuEventCreate(self, flags):  # noqa: N802
        return CUresult.CUDA_SUCCESS, Event()

    def cuEventRecord(self, ev, stream):  # noqa: N802
        ev.ns = stream.clock_ns
        return (CUresult.CUDA_SUCCESS,)

    def cuEventElapsedTime(self, a, b):  # noqa: N802
        return CUresult.CUDA_SUCCESS, max(b.ns - a.ns, 1) / 1e6
