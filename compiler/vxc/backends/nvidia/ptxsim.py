"""A functional simulator of one CTA running the PTX subset the NVIDIA backends emit.

It is the closest this machine can get to running the kernels: the generated PTX text
is parsed and executed thread by thread (128 threads, round-robin, `bar.sync` and
mbarrier waits block), with the hardware rules written down independently of the
backend's encoders:

- shared-memory matrix descriptors and the tcgen05 instruction descriptor are decoded
  field by field (start, LBO, SBO, base offset, swizzle, version; D/A/B formats, M, N,
  transpose/negate/sparsity bits); operands are read through the 128-byte swizzle as
  the hardware applies it (address bits 4-6 XOR bits 7-9);
- asynchrony as the PTX memory model allows it, completing as late as allowed:
  TMA loads land only when every thread is blocked; `tcgen05.mma` runs on the tensor
  core's queue when its `tcgen05.commit` barrier is needed; wgmma results reach the
  accumulator registers at `wgmma.wait_group` (touching them before is an error);
  bulk stores read shared memory by `cp.async.bulk.wait_group.read` and write global
  memory by `wait_group`; `tcgen05.st`/`ld` complete at `tcgen05.wait::st`/`::ld`.
  MMA and store operands are read at issue and must not change until completion
  (a write-after-read race is an error);
- two views of shared memory: the async proxy (TMA, MMA) sees a thread's generic
  stores only after that thread's `fence.proxy.async`; memory starts as NaN bits;
- tcgen05 ordering: a TMEM access by another thread (or by an MMA) is ordered before
  this thread's only through `tcgen05.fence::before_thread_sync` -> a thread sync ->
  `tcgen05.fence::after_thread_sync`, and an MMA after a TMA wait needs the latter;
- TMEM allocation (power-of-two column blocks, the highest free block so that a
  kernel assuming column 0 fails, relinquish, dealloc before exit) and lane quadrants
  (warp w reaches lanes 32 (w % 4) .. + 31);
- TMA in tiled mode: the coordinates are signed 32-bit; a box may reach past the
  tensor's dims (the tensor map's, as cuTensorMapEncodeTiled was given them) on any
  side: a load writes zeros for its elements outside (and still counts the whole box's
  bytes on the mbarrier), a store writes only its elements inside (the launcher pads a
  row pitch that is not a multiple of 16 bytes; the padding lies past the dims, so it is
  neither read nor written). A tensor map the driver would not encode (a row pitch not
  a multiple of 16 bytes, a dim outside 1 .. 2^32, a base address not 16-byte aligned) is an error at launch, and so is a
  negative coordinate: real hardware would zero-fill it silently, but the backends'
  coordinates are proved >= 0 (E6041), so one is a coordinate wrapped to 32 bits;
- mbarrier phases, `expect_tx` byte counts and `try_wait.parity` follow the PTX ISA;
  wgmma's D fragment layout (warp w, lane l: rows 16w + l/4 (+8), columns 8j + 2(l%4))
  as the ISA describes it.

It checks the backends' bookkeeping (slots, phases, descriptors, fragment layouts,
epilogues, ordering) against numpy; it cannot check what only hardware can (timing,
the real instruction semantics, the driver's opaque tensor-map bytes: tensor maps here
are the fields `cuTensorMapEncodeTiled` is given), which tools/gpu_check.sh does on a GPU.
"""

from __future__ import annotations

import math
import re
import struct
from collections import deque
from dataclasses import dataclass, field

import numpy as np

THREADS = 128
GUARD, GUARD_BYTE = 1 << 16, 0xA5  # device memory after each tensor (run_kernel)
SMEM_BASE = 16  # deliberately not 1024-aligned: the kernel aligns its own base


class SimError(AssertionError):
    pass


class StatusError(SimError):
    """The kernel ran and set its status word: a launch its `where` clauses rule out."""

    def __init__(self, status: int):
        self.status = status
        super().__init__(f"status word {status}: the launch breaks a `where` clause")


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _bits_f32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def to_half(x: float, dtype: str) -> int:
    """`cvt.rn.{bf16,f16}.f32`: round to nearest even, NaN stays NaN."""
    if dtype == "f16":
        with np.errstate(all="ignore"):
            return int(np.array(x, np.float32).astype(np.float16).view(np.uint16))
    b = _f32_bits(x)
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def from_half(h: int, dtype: str) -> float:
    """`cvt.f32.{bf16,f16}`: exact."""
    if dtype == "f16":
        return float(np.array(h & 0xFFFF, np.uint16).view(np.float16).astype(np.float32))
    return _bits_f32((h & 0xFFFF) << 16)


EX2_ULP = 2  # ex2.approx.f32's error bound (CUDA's exp2f / __expf: 2 ulp)


def ex2_approx(x: float) -> float:
    """`ex2.approx.f32`: 2^x rounded to f32, then moved by up to EX2_ULP ulp, a fixed
    function of x's bits: the hardware's approximation is not correctly rounded, so a
    result that depends on an exact exp does not pass here either."""
    with np.errstate(all="ignore"):
        r = float(np.float32(np.exp2(np.float64(x))))
    if not math.isfinite(r) or r == 0.0:
        return r
    b = _f32_bits(x)
    delta = ((b * 2654435761) >> 13) % (2 * EX2_ULP + 1) - EX2_ULP
    # 2^x is positive and finite here: the move stays between the smallest subnormal's
    # bits and the largest finite's (past either end the bits would be NaN or inf).
    return _bits_f32(min(max(_f32_bits(r) + delta, 0), 0x7F7FFFFF))


def _nudge(bits: int) -> float:
    """A fixed function of an input's bits in [-1, 1]: where in its documented error
    bound an `.approx` instruction's result lands for that input."""
    return ((bits * 2654435761) >> 11) % 4097 / 2048.0 - 1.0


def _approx(exact: float, x: float, rel: float, absolute: float = 0.0) -> float:
    """`exact` (an f64 value) moved within a relative (or, given, absolute) error bound
    by the input's bits, then rounded to f32: the hardware's result is not correctly
    rounded, so a kernel whose answer depends on the exact value fails here too."""
    if not math.isfinite(exact) or exact == 0.0:
        return float(np.float32(exact))
    bound = absolute or abs(exact) * rel
    r = np.float32(exact + _nudge(_f32_bits(x)) * bound)
    if abs(float(r) - exact) > bound:  # the f32 rounding stepped past the bound: back one
        r = np.nextafter(r, np.float32(exact))
    return float(r)


TANH_REL = 2.0**-11  # tanh.approx.f32: maximum relative error over the whole range
LG2_ABS, LG2_REL = 2.0**-22, 2.0**-22  # lg2.approx.f32: absolute on (0.5, 2), else relative
RSQRT_REL = 2.0**-22.9  # rsqrt.approx.f32: maximum relative error, positive finite inputs


def tanh_approx(x: float) -> float:
    """`tanh.approx.f32`: within TANH_REL of tanh(x); ±inf give ±1, NaN and a subnormal
    input pass through (the PTX ISA's table)."""
    if math.isnan(x) or (x != 0.0 and abs(x) < 2.0**-126):
        return x
    return _approx(math.tanh(x), x, TANH_REL) if math.isfinite(x) else math.copysign(1.0, x)


def lg2_approx(x: float) -> float:
    """`lg2.approx.f32`: ±0 give -inf, a negative input NaN, +inf itself; otherwise
    within LG2_ABS of log2(x) on (0.5, 2) and LG2_REL of it elsewhere."""
    if math.isnan(x) or x < 0.0:
        return math.nan
    if x == 0.0:
        return -math.inf
    if math.isinf(x):
        return x
    exact = math.log2(x)
    if 0.5 < x < 2.0:
        return _approx(exact, x, 0.0, LG2_ABS) if exact != 0.0 else 0.0
    return _approx(exact, x, LG2_REL)


def rsqrt_approx(x: float) -> float:
    """`rsqrt.approx.f32`: -0 gives -inf, +0 +inf, +inf 0, a negative input NaN;
    otherwise within RSQRT_REL of 1 / sqrt(x)."""
    if x == 0.0:
        return math.copysign(math.inf, x)
    if math.isnan(x) or x < 0.0:
        return math.nan
    return _approx(1.0 / math.sqrt(x), x, RSQRT_REL) if math.isfinite(x) else 0.0


# The f32 instructions of one operand: the exact ones and the `.approx` models above.
UNARY_F32 = {
    "neg": lambda x: -x,
    "abs": abs,
    "sqrt": lambda x: float(np.sqrt(np.float32(x))) if x >= 0 or math.isnan(x) else math.nan,
    "ex2": ex2_approx,
    "tanh": tanh_approx,
    "lg2": lg2_approx,
    "rsqrt": rsqrt_approx,
}


def int_to_f32(v: int) -> float:
    """An integer rounded to the nearest f32, ties to even (`cvt.rn.f32.s64`): rounding
    through a double first would round twice above 2^53."""
    if abs(v) < 1 << 53:
        return float(np.float32(float(v)))
    sign, v = (-1 if v < 0 else 1), abs(v)
    e = v.bit_length() - 24
    m, rem, half = v >> e, v & ((1 << e) - 1), 1 << (e - 1)
    if rem > half or (rem == half and m & 1):
        m += 1
    return sign * float(np.float32(m * 2.0**e))


def int_f32_convert(op: str, bits: int | float) -> int | float:
    """`cvt.rn.f32.{s,u}{32,64}` of a register's bits, or `cvt.rzi.{s,u}{32,64}.f32` of an
    f32 register: toward zero, clamped to the destination's range, NaN 0."""
    parts = op.split(".")
    if parts[1] == "rn":
        w, signed = int(parts[3][1:]), parts[3][0] == "s"
        v = int(bits) & ((1 << w) - 1)
        if signed and v >> (w - 1):
            v -= 1 << w
        return int_to_f32(v)
    w, signed = int(parts[2][1:]), parts[2][0] == "s"
    x = float(np.float32(bits))
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    v = 0 if math.isnan(x) else hi if x >= hi else lo if x <= lo else int(x)
    return v & ((1 << w) - 1)


def _signed(v: int, bits: int) -> int:
    """A register's bits read as a `bits`-wide two's complement integer."""
    v = int(v) & ((1 << bits) - 1)
    return v - (1 << bits) if v >> (bits - 1) else v


def _tdiv(x: int, y: int) -> int:
    """Integer division truncating toward zero (PTX's div.s / rem.s)."""
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def fminmax(x: float, y: float, base: str) -> float:
    """`max.NaN.f32` / `min.NaN.f32`: NaN if either operand is NaN (numpy's maximum)."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    return max(x, y) if base == "max" else min(x, y)


@dataclass
class TensorMap:
    buf: np.ndarray  # uint8 view of the global tensor
    dims: tuple[int, int]  # (inner elements, rows)
    stride: int  # bytes per row
    box: tuple[int, int]
    swizzle: str
    elem: int
    address: int = 0  # the global address it was encoded with (0: not known here)

    def __post_init__(self) -> None:
        # cuTensorMapEncodeTiled's own rules, written down apart from the encoder's.
        if self.stride % 16:
            raise SimError(f"a tensor map with a row pitch of {self.stride} bytes (not 16 x n)")
        if not all(1 <= d <= 2**32 for d in self.dims):
            raise SimError(f"a tensor map with dims {self.dims} (each must be 1 .. 2^32)")
        if self.address % 16:
            raise SimError(f"a tensor map over address {self.address:#x} (not 16-byte aligned)")
        if self.dims[1] > 1 and self.dims[0] * self.elem > self.stride:
            raise SimError(f"a tensor map whose rows ({self.dims[0]} elements) overlap")

    def inside(self, x: int, y: int) -> bool:
        return 0 <= x < self.dims[0] and 0 <= y < self.dims[1]


def tma_coords(cs: list) -> list[int]:
    """TMA coordinates as the unit reads them: signed 32-bit. A negative one is refused
    (see the module docstring): the backends never mean one."""
    out = []
    for c in cs:
        v = int(c) & 0xFFFFFFFF
        v = v - (1 << 32) if v >> 31 else v
        if v < 0:
            raise SimError(
                f"a TMA coordinate of {v} (as s32): the backends' coordinates are proved >= 0, "
                f"so this one wrapped; hardware would fill or clip it without a word"
            )
        out.append(v)
    return out


class Global:
    """Device memory: buffers at made-up, far-apart addresses."""

    def __init__(self) -> None:
        self.bufs: list[tuple[int, np.ndarray]] = []

    def add(self, buf: np.ndarray) -> int:
        base = (len(self.bufs) + 1) << 40
        self.bufs.append((base, buf))
        return base

    def find(self, addr: int) -> tuple[np.ndarray, int]:
        for base, buf in self.bufs:
            if base <= addr < base + buf.size:
                return buf, addr - base
        raise SimError(f"global access at {addr:#x} outside every buffer")


@dataclass
class Ins:
    pred: str | None
    neg: bool
    op: str
    args: list[str]


POISON = 0xFF  # what shared memory and TMEM hold before anything writes them (NaN bits)
TMEM_LANES, TMEM_COLUMNS = 128, 512


class Regs(dict):
    """A thread's registers. A register an asynchronous instruction will still write
    (a wgmma accumulator before its `wgmma.wait_group`, a `tcgen05.ld` destination
    before `tcgen05.wait::ld`) is in flight: touching it is an error. `written` holds
    the registers written since the thread's last `wgmma.fence`."""

    def __init__(self) -> None:
        super().__init__()
        self.inflight: dict[str, tuple[int, str]] = {}  # reg -> (count, which instruction)
        self.written: set[str] = set()

    def __getitem__(self, k: str):
        if k in self.inflight:
            raise SimError(f"reads {k} while {self.inflight[k][1]} may still write it")
        return dict.__getitem__(self, k)

    def __setitem__(self, k: str, v) -> None:
        if k in self.inflight:
            raise SimError(f"writes {k} while {self.inflight[k][1]} may still write it")
        self.written.add(k)
        dict.__setitem__(self, k, v)

    def fly(self, k: str, what: str) -> None:
        n, _ = self.inflight.get(k, (0, what))
        self.inflight[k] = (n + 1, what)

    def land(self, k: str, v) -> None:
        n, what = self.inflight[k]
        if n == 1:
            del self.inflight[k]
        else:
            self.inflight[k] = (n - 1, what)
        dict.__setitem__(self, k, v)


@dataclass
class TcEvent:
    """One tcgen05 access of TMEM (an allocation, st, ld, mma or dealloc), for the
    ordering rules of the PTX memory model: an access by another thread (or by the
    tensor core, for an MMA) is ordered before this thread's access only through
    `tcgen05.fence::before_thread_sync` -> a thread synchronisation ->
    `tcgen05.fence::after_thread_sync`."""

    id: int
    kind: str
    issuer: int  # thread id (-1: a warp-collective allocation)
    lanes: tuple[int, int]
    cols: tuple[int, int]
    write: bool
    pc: int


@dataclass
class Thread:
    tid: int
    regs: Regs = field(default_factory=Regs)
    pc: int = 0
    done: bool = False
    waiting: str | None = None  # "bar" | "wgmma" | "spin" | None
    unfenced: list = field(default_factory=list)  # generic smem writes the async proxy lacks
    tc_issued: set = field(default_factory=set)  # tcgen05 events this thread took part in
    tc_since_fence: set = field(default_factory=set)
    tc_releasable: set = field(default_factory=set)  # covered by a before_thread_sync
    tc_acquired: set = field(default_factory=set)  # from a sync, before after_thread_sync
    tc_visible: set = field(default_factory=set)
    tma_unfenced: bool = False  # passed a TMA wait, no after_thread_sync since
    tc_st: list = field(default_factory=list)  # tcgen05.st not yet waited
    tc_ld: list = field(default_factory=list)  # tcgen05.ld not yet waited
    wg_open: list = field(default_factory=list)  # wgmma ops not yet committed
    wg_groups: list = field(default_factory=list)  # committed, not yet waited
    bulk_open: list = field(default_factory=list)  # bulk stores not yet committed
    bulk_groups: list = field(default_factory=list)
    allocs: int = 0  # tcgen05.alloc / dealloc executed (a warp's collective sequence)
    deallocs: int = 0


def _split(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse(ptx: str, kernel: str) -> tuple[list[str], list[Ins], dict[str, int]]:
    body = ptx[ptx.index(f".entry {kernel}(") :]
    nxt = body.find(".entry ", 1)  # a module of several kernels: this entry's text only
    if nxt > 0:
        body = body[: body.rfind("\n", 0, nxt)]
    head, rest = body.split(")", 1)
    params = re.findall(r"\.param [^\n]*?(\w+)(?:\[128\])?\s*$", head, re.M)
    code = rest[rest.index("{") + 1 : rest.rindex("}")]
    prog, labels = [], {}
    for line in code.splitlines():
        line = line.strip()
        if not line or line.startswith((".reg", "//")):
            continue
        if line.endswith(":"):
            labels[line[:-1]] = len(prog)
            continue
        line = line.rstrip(";")
        pred, neg = None, False
        if line.startswith("@"):
            g, line = line.split(" ", 1)
            neg = g.startswith("@!")
            pred = g.lstrip("@!")
        op, _, args = line.partition(" ")
        prog.append(Ins(pred, neg, op, _split(args)))
    return params, prog, labels


# -- descriptors, decoded in full ---------------------------------------------------------


@dataclass(frozen=True)
class SmemDesc:
    """A shared-memory matrix descriptor (wgmma or tcgen05), every field decoded."""

    start: int
    lbo: int
    sbo: int
    base_offset: int
    swizzle: str
    version: int
    lbo_mode: int

    def check_kmajor_sw128(self, what: str) -> None:
        """The one layout the backends use: K-major, 128-byte swizzle, 8-row atoms 1024
        bytes apart. The ISA leaves LBO unused for swizzled K-major operands (one MMA step
        stays inside its 128-byte row) and CUTLASS sets it to 16 bytes; the base offset
        is the swizzle phase of a start address that is not on a 1024-byte pattern."""
        if self.swizzle != "128B":
            raise SimError(f"{what}: descriptor swizzle {self.swizzle} is not modelled")
        if self.lbo != 16:
            raise SimError(f"{what}: leading byte offset {self.lbo} for a K-major 128B layout")
        if self.sbo != 1024:
            raise SimError(f"{what}: stride byte offset {self.sbo}, the 8-row atom is 1024 B")
        phase = (self.start >> 7) & 7
        if self.base_offset != phase:
            raise SimError(
                f"{what}: base offset {self.base_offset}, the start {self.start:#x} needs {phase}"
            )

    def check_mnmajor_sw128(self, what: str) -> None:
        """An MN-major 128B-swizzled operand (PTX ISA canonical layout
        ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))): 8 K-rows of 128 bytes of MN per 1024-byte
        atom; SBO steps between 8-row K groups, LBO between 128-byte MN blocks. Only
        atom-aligned starts are modelled (the backends' K steps are whole atoms)."""
        if self.swizzle != "128B":
            raise SimError(f"{what}: descriptor swizzle {self.swizzle} is not modelled")
        if self.sbo != 1024:
            raise SimError(f"{what}: stride byte offset {self.sbo}, 8 K-rows of 128 B are 1024")
        if self.lbo == 0 or self.lbo % 1024:
            raise SimError(f"{what}: leading byte offset {self.lbo} between MN blocks")
        if self.start % 1024 or self.base_offset:
            raise SimError(f"{what}: MN-major start {self.start:#x} off a 1024-byte atom")


def decode_wgmma_desc(d: int) -> SmemDesc:
    swz = {0: "none", 1: "128B", 2: "64B", 3: "32B"}[(d >> 62) & 3]
    return SmemDesc(
        (d & 0x3FFF) << 4,
        ((d >> 16) & 0x3FFF) << 4,
        ((d >> 32) & 0x3FFF) << 4,
        (d >> 49) & 7,
        swz,
        0,
        0,
    )


def decode_tcgen05_desc(d: int) -> SmemDesc:
    code = (d >> 61) & 7
    swz = {0: "none", 1: "128B_base32B", 2: "128B", 4: "64B", 6: "32B"}.get(code, f"code {code}")
    desc = SmemDesc(
        (d & 0x3FFF) << 4,
        ((d >> 16) & 0x3FFF) << 4,
        ((d >> 32) & 0x3FFF) << 4,
        (d >> 49) & 7,
        swz,
        (d >> 46) & 3,
        (d >> 52) & 1,
    )
    if desc.version != 1:
        raise SimError(f"tcgen05 descriptor version {desc.version}; sm_100 needs 1")
    if desc.lbo_mode != 0:
        raise SimError("tcgen05 descriptor with the absolute LBO mode is not modelled")
    return desc


@dataclass(frozen=True)
class Idesc:
    """The tcgen05.mma instruction descriptor (kind::tf32 / kind::f16), decoded."""

    sparse: int
    saturate: int
    d_fmt: str
    a_fmt: str
    b_fmt: str
    negate: tuple[int, int]
    transpose: tuple[int, int]
    n: int
    m: int
    shift: int


def decode_idesc(x: int, kind: str) -> Idesc:
    fmts = {"tf32": {2: "f32"}, "f16": {0: "f16", 1: "bf16"}}[kind]

    def fmt(code: int, which: str) -> str:
        if code not in fmts:
            raise SimError(
                f"instruction descriptor {which} format {code} is not a kind::{kind} type"
            )
        return fmts[code]

    d = {0: "f16", 1: "f32"}.get((x >> 4) & 3)
    if d is None:
        raise SimError(f"instruction descriptor D format {(x >> 4) & 3}")
    idesc = Idesc(
        x & 7,
        (x >> 3) & 1,
        d,
        fmt((x >> 7) & 7, "A"),
        fmt((x >> 10) & 7, "B"),
        ((x >> 13) & 1, (x >> 14) & 1),
        ((x >> 15) & 1, (x >> 16) & 1),
        ((x >> 17) & 63) << 3,
        ((x >> 24) & 31) << 4,
        (x >> 30) & 3,
    )
    if idesc.sparse or idesc.saturate or idesc.shift or any(idesc.negate):
        raise SimError(f"instruction descriptor {x:#x}: sparsity/saturate/negate not modelled")
    if idesc.transpose[0]:
        raise SimError(f"instruction descriptor {x:#x}: an MN-major A is not modelled")
    return idesc


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


class Cta:
    """One CTA. Shared memory has two views: what generic loads/stores see and what the
    async proxy (TMA, wgmma, tcgen05.mma) sees; a thread's generic stores reach the
    async view at its `fence.proxy.async`. Asynchronous work completes as late as the
    PTX ISA allows: TMA loads when every thread is blocked, tcgen05.mma at its commit's
    barrier (when nothing else can run), wgmma at `wgmma.wait_group`, bulk stores at
    `cp.async.bulk.wait_group`. Operands are read at issue (they must be ready) and
    must not change before completion (write-after-read races are errors)."""

    def __init__(
        self,
        ptx: str,
        kernel: str,
        params: dict,
        smem_bytes: int,
        ctaid: int,
        nctaid: int,
        memory: Global,
    ):
        self.memory = memory
        self.names, self.prog, self.labels = parse(ptx, kernel)
        self.params = params
        self.smem = bytearray([POISON]) * (SMEM_BASE + smem_bytes)
        self.asmem = bytearray(self.smem)
        # Generic shared-memory races between threads: who last wrote / read each byte
        # in which barrier epoch (bar.sync starts the next); -1 none, -2 several readers.
        self.epoch = 0
        size = len(self.smem)
        self.w_tid, self.w_epoch = np.full(size, -1, np.int32), np.full(size, -1, np.int32)
        self.r_tid, self.r_epoch = np.full(size, -1, np.int32), np.full(size, -1, np.int32)
        # TMA loads in flight: the issuing thread and its epoch, until the copy lands.
        self.tma_tid, self.tma_epoch = np.full(size, -1, np.int32), np.full(size, -1, np.int32)
        self.tmem = np.full((TMEM_LANES, TMEM_COLUMNS), 0xFFFFFFFF, dtype=np.uint32)
        self.tmem_free = [True] * TMEM_COLUMNS
        self.tmem_blocks: dict[int, int] = {}  # first column -> columns
        self.alloc_results: dict[tuple[int, int], int] = {}  # (warp, n-th alloc) -> column
        self.dealloc_done: set[tuple[int, int]] = set()
        self.relinquished: set[int] = set()
        self.bars: dict[int, dict] = {}
        self.pending: deque = deque()  # TMA loads not yet landed
        self.tma_loads: list[tuple[str, tuple]] = []  # each issued: (tensor map, coords)
        self.tc_pipe: deque = deque()  # tcgen05.mma / commit, in issue order
        self.tc_events: list[TcEvent] = []
        self.wg_pending: list[dict] = []  # wgmma ops some thread has not retired
        self.threads = [Thread(t) for t in range(THREADS)]
        self.ctaid, self.nctaid = ctaid, nctaid
        self.steps = 0

    # -- values ---------------------------------------------------------------------
    def val(self, t: Thread, a: str):
        if a.startswith("%"):
            if a == "%tid.x":
                return t.tid
            if a == "%ctaid.x":
                return self.ctaid
            if a == "%nctaid.x":
                return self.nctaid
            if a not in t.regs and a not in t.regs.inflight:
                raise SimError(f"thread {t.tid} reads {a} before writing it")
            return t.regs[a]
        if a.startswith("0f"):
            return struct.unpack("<f", struct.pack("<I", int(a[2:], 16)))[0]
        if a == "vx_smem":
            return SMEM_BASE
        if a in self.params:
            return ("param", a)
        return int(a)

    def float_scalar(self, t: Thread, op: str, base: str, a: list[str]) -> None:
        """Scalar f32 arithmetic and comparisons, rounded to f32 as PTX's `.rn` does."""
        x = np.float32(self.val(t, a[1]))
        if base in UNARY_F32:
            t.regs[a[0]] = float(np.float32(UNARY_F32[base](float(x))))
            return
        if base == "copysign":  # d = b with a's sign
            t.regs[a[0]] = math.copysign(float(np.float32(self.val(t, a[2]))), float(x))
            return
        if base in ("max", "min"):
            if ".NaN." not in op:
                raise SimError(f"no model for {op} (the lowering emits max.NaN / min.NaN)")
            t.regs[a[0]] = fminmax(float(x), float(np.float32(self.val(t, a[2]))), base)
            return
        y = np.float32(self.val(t, a[2]))
        if base == "setp":
            cmp = op.split(".")[1]
            t.regs[a[0]] = {
                "eq": x == y,
                "ne": x != y and not (np.isnan(x) or np.isnan(y)),
                "neu": not x == y,
                "nan": bool(np.isnan(x) or np.isnan(y)),
                "lt": x < y,
                "le": x <= y,
                "gt": x > y,
                "ge": x >= y,
            }[cmp]
            return
        with np.errstate(all="ignore"):
            r = {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[base]
        t.regs[a[0]] = float(np.float32(r))

    def addr(self, t: Thread, a: str) -> tuple[object, int]:
        inner = a[1:-1]
        m = re.fullmatch(r"([%\w.]+)(?:\+(\d+))?", inner)
        return self.val(t, m.group(1)), int(m.group(2) or 0)

    def coords(self, t: Thread, a: str):
        base, c = a[1:-1].split(",", 1)
        cs = [self.val(t, x.strip()) for x in c.strip()[1:-1].split(",")]
        return self.val(t, base.strip()), cs

    def vec(self, t: Thread, a: str) -> list:
        return [self.val(t, x.strip()) for x in a[1:-1].split(",")]

    # -- shared memory ----------------------------------------------------------------
    def _bounds(self, off: int, n: int, what: str) -> None:
        if off < 0 or off + n > len(self.smem):
            raise SimError(f"shared {what} out of bounds at {off}")

    def _race(self, t: Thread, off: int, tids: np.ndarray, epochs: np.ndarray, what: str):
        other = (epochs == self.epoch) & (tids != t.tid) & (tids != -1)
        if other.any():
            i = int(np.argmax(other))
            who = "several threads" if tids[i] == -2 else f"thread {tids[i]}"
            raise SimError(
                f"thread {t.tid} {what} shared byte {off + i - SMEM_BASE} that {who} "
                f"accessed since the last bar.sync (a race between threads)"
            )

    def st(self, t: Thread, off: int, data: bytes) -> None:
        """A generic store: the async proxy sees it after the thread's fence.proxy.async.
        Another thread's read or write of the bytes since the last bar.sync is a race."""
        n = len(data)
        self._bounds(off, n, "store")
        sl = slice(off, off + n)
        self._race(t, off, self.r_tid[sl], self.r_epoch[sl], "writes")
        self._race(t, off, self.w_tid[sl], self.w_epoch[sl], "writes")
        self.w_tid[sl], self.w_epoch[sl] = t.tid, self.epoch
        self.smem[off : off + n] = data
        t.unfenced.append((off, n))

    def st_async(self, off: int, data: bytes) -> None:
        """An async-proxy write (a TMA load, tcgen05.alloc's address): both views; its
        readers are ordered by its mbarrier, not by bar.sync."""
        self._bounds(off, len(data), "store")
        self.w_tid[off : off + len(data)] = -1
        self.smem[off : off + len(data)] = data
        self.asmem[off : off + len(data)] = data

    def ld(self, t: Thread, off: int, n: int) -> bytes:
        """A generic load: another thread's write since the last bar.sync is a race."""
        self._bounds(off, n, "load")
        sl = slice(off, off + n)
        self._race(t, off, self.w_tid[sl], self.w_epoch[sl], "reads")
        self._race(t, off, self.tma_tid[sl], self.tma_epoch[sl], "reads (a TMA load in flight)")
        fresh = self.r_epoch[sl] != self.epoch
        mine = self.r_tid[sl] == t.tid
        self.r_tid[sl] = np.where(fresh, t.tid, np.where(mine, t.tid, -2))
        self.r_epoch[sl] = self.epoch
        return bytes(self.smem[off : off + n])

    def ld_async(self, off: int, n: int) -> bytes:
        self._bounds(off, n, "load")
        return bytes(self.asmem[off : off + n])

    def fence_proxy_async(self, t: Thread) -> None:
        for off, n in t.unfenced:
            self.asmem[off : off + n] = self.smem[off : off + n]
        t.unfenced.clear()

    @staticmethod
    def swz(off: int) -> int:
        return off ^ (((off >> 7) & 7) << 4)

    def check_no_reader(self, lo: int, hi: int, what: str) -> None:
        """An async write of [lo, hi) must not overwrite what an MMA still reads."""
        for kind, op in self.tc_pipe:
            if kind == "mma" and any(_overlap((lo, hi), r) for r in op["reads"]):
                raise SimError(
                    f"{what} overwrites shared memory the tcgen05.mma at instruction {op['pc']} "
                    "may still read (its commit barrier was not waited)"
                )
        for op in self.wg_pending:
            if any(_overlap((lo, hi), r) for r in op["reads"]):
                missing = THREADS - len(op["retired"])
                raise SimError(
                    f"{what} overwrites shared memory the wgmma at instruction {op['pc']} may "
                    f"still read ({missing} threads have not passed its wgmma.wait_group)"
                )

    # -- mbarriers --------------------------------------------------------------------
    def bar_arrive(self, a: int, tx: int = 0, carried: set | None = None) -> None:
        b = self.bars[a]
        b["tx"] += tx
        b["had_tx"] |= tx > 0
        b["pending"] -= 1
        if carried:
            b["carried"] |= carried
        self._bar_check(a)

    def _bar_check(self, a: int) -> None:
        b = self.bars[a]
        if b["pending"] == 0 and b["tx"] == 0:
            b["phase"] += 1
            b["pending"] = b["count"]
            b["tx_phase"], b["had_tx"] = b["had_tx"], False

    def complete_one_copy(self) -> bool:
        if not self.pending:
            return False
        dst, tmap, c0, c1, bar = self.pending.popleft()
        e = tmap.elem
        for r in range(tmap.box[1]):
            y = c1 + r
            for x in range(c0, c0 + tmap.box[0]):
                if tmap.inside(x, y):
                    src = tmap.buf[y * tmap.stride + x * e : y * tmap.stride + x * e + e].tobytes()
                else:
                    src = bytes(e)
                off = dst + r * tmap.box[0] * e + (x - c0) * e
                self.st_async(self.swz(off) if tmap.swizzle == "128B" else off, src)
        nbytes = tmap.box[0] * tmap.box[1] * e
        self.tma_tid[dst : dst + nbytes] = -1  # landed: readers are ordered by its mbarrier
        b = self.bars[bar]
        b["tx"] -= nbytes
        self._bar_check(bar)
        return True

    # -- matrix operands ----------------------------------------------------------------
    def read_kmajor(self, desc: SmemDesc, rows: int, kbytes: int, elem: int, dtype: str):
        """Rows x kbytes of a K-major 128B-swizzled operand, as the async proxy sees them,
        and the byte ranges read (for the write-after-read check)."""
        out = np.zeros((rows, kbytes // elem), dtype=np.float32)
        reads = []
        for m in range(rows):
            a = desc.start + (m // 8) * desc.sbo + (m % 8) * 128
            row = b"".join(self.ld_async(self.swz(a + i), 16) for i in range(0, kbytes, 16))
            reads += [(self.swz(a + i), self.swz(a + i) + 16) for i in range(0, kbytes, 16)]
            if dtype == "f32":
                vals = np.frombuffer(row, np.uint32) & np.uint32(0xFFFFE000)  # tf32
                out[m] = vals.view(np.float32)
            else:
                bits = np.frombuffer(row, np.uint16)
                out[m] = _bf16_to_f32(bits) if dtype == "bf16" else bits.view(np.float16)
        return out, reads

    def read_mnmajor(self, desc: SmemDesc, n: int, krows: int, elem: int, dtype: str):
        """K-rows x n of an MN-major 128B-swizzled operand, returned transposed ([n, k], as
        read_kmajor returns B^T), and the byte ranges read."""
        per = 128 // elem  # elements of one 128-byte MN block
        out = np.zeros((n, krows), dtype=np.float32)
        reads = []
        for k in range(krows):
            for blk in range(n // per):
                a = desc.start + blk * desc.lbo + (k // 8) * desc.sbo + (k % 8) * 128
                row = b"".join(self.ld_async(self.swz(a + i), 16) for i in range(0, 128, 16))
                reads += [(self.swz(a + i), self.swz(a + i) + 16) for i in range(0, 128, 16)]
                bits = np.frombuffer(row, np.uint16)
                vals = _bf16_to_f32(bits) if dtype == "bf16" else bits.view(np.float16)
                out[blk * per : (blk + 1) * per, k] = vals
        return out, reads

    def check_unchanged(self, op: dict, what: str) -> None:
        for (lo, hi), data in zip(op["reads"], op["snapshot"], strict=True):
            if bytes(self.asmem[lo:hi]) != data:
                raise SimError(
                    f"shared memory read by the {what} at instruction {op['pc']} changed before "
                    "it completed (a write-after-read race)"
                )

    def _snapshot(self, reads) -> list[bytes]:
        return [bytes(self.asmem[lo:hi]) for lo, hi in reads]

    # -- tcgen05 ordering -----------------------------------------------------------------
    def tc_event(self, t: Thread, kind: str, lanes, cols, write: bool, issuer=None) -> TcEvent:
        e = TcEvent(
            len(self.tc_events), kind, t.tid if issuer is None else issuer, lanes, cols, write, t.pc
        )
        for x in self.tc_events:
            if x.id in t.tc_visible or (x.id in t.tc_issued and x.kind != "mma"):
                continue
            if x.kind == "mma" and kind == "mma":
                continue  # one issuing thread: the tensor core runs its MMAs in order
            if (x.write or write) and _overlap(x.lanes, lanes) and _overlap(x.cols, cols):
                raise SimError(
                    f"tcgen05 {kind} (instruction {t.pc}, thread {t.tid}) is not ordered after "
                    f"the {x.kind} at instruction {x.pc} (thread {x.issuer}): it needs "
                    "tcgen05.fence::before_thread_sync, a thread sync, then "
                    "tcgen05.fence::after_thread_sync"
                )
        self.tc_events.append(e)
        if kind != "mma":
            t.tc_issued.add(e.id)
            t.tc_since_fence.add(e.id)
        return e

    def tmem_range(self, t: Thread, addr: int, ncols: int, what: str):
        """Lanes and columns a 32x32b access by `t`'s warp touches, checked against the
        warp's lane quadrant and the allocated columns."""
        lane, col = addr >> 16, addr & 0xFFFF
        warp = t.tid // 32
        if lane != 32 * (warp % 4):
            raise SimError(
                f"{what}: warp {warp} addresses TMEM lane {lane}; it may only access lanes "
                f"{32 * (warp % 4)}..{32 * (warp % 4) + 31}"
            )
        self.check_allocated(col, ncols, what)
        mine = lane + t.tid % 32  # a 32x32b access: each thread its own lane
        return (mine, mine + 1), (col, col + ncols)

    def check_allocated(self, col: int, ncols: int, what: str) -> None:
        if col + ncols > TMEM_COLUMNS or any(self.tmem_free[col : col + ncols]):
            raise SimError(f"{what}: TMEM columns {col}..{col + ncols - 1} are not allocated")

    def drain_tc_pipe(self) -> bool:
        """Run the tensor core's queue up to and including its first commit."""
        if not self.tc_pipe:
            return False
        done: set[int] = set()
        while self.tc_pipe:
            kind, op = self.tc_pipe.popleft()
            if kind == "commit":
                self.bar_arrive(op["bar"], carried=done | op["events"])
                return True
            self.check_unchanged(op, "tcgen05.mma")
            self.apply_tcgen05(op)
            done.add(op["event"])
        return True

    # -- execution --------------------------------------------------------------------
    def run(self, max_steps: int = 20_000_000) -> None:
        while True:
            progressed = False
            for t in self.threads:
                if t.done or t.waiting:
                    continue
                progressed |= self.step_until_block(t)
            if all(t.done for t in self.threads):
                self.check_exit()
                return
            if self._release_collectives():
                continue
            if not progressed and not self.complete_one_copy() and not self.drain_tc_pipe():
                if not any(t.waiting == "spin" for t in self.threads):
                    raise SimError("deadlock: every thread is blocked")
                raise SimError("deadlock: threads spin on an mbarrier nothing will complete")
            for t in self.threads:
                if t.waiting == "spin":
                    t.waiting = None
            if self.steps > max_steps:
                raise SimError("too many steps")

    def check_exit(self) -> None:
        if self.pending:
            raise SimError("the kernel exited with TMA loads in flight")
        if self.tc_pipe:
            raise SimError("the kernel exited with tcgen05.mma in flight")
        used = sum(not f for f in self.tmem_free)
        if used:
            raise SimError(f"the kernel exited with {used} TMEM columns allocated (no dealloc)")

    def thread_exit(self, t: Thread) -> None:
        if t.wg_open or t.wg_groups:
            raise SimError(f"thread {t.tid} exits with a wgmma group not waited")
        if t.bulk_open or any(not g["read"] for g in t.bulk_groups):
            raise SimError(
                f"thread {t.tid} exits while a bulk store may still read shared memory "
                "(no cp.async.bulk.wait_group)"
            )
        self.retire_bulk(t, 0, writes=True)
        for lane, col, vals in t.tc_st:  # never waited: lands whenever; here, last
            self.tmem[lane, col : col + len(vals)] = vals
        t.tc_st.clear()

    def _release_shfl(self) -> bool:
        """`shfl.sync` is a warp collective: it executes when every lane of the warp has
        reached it, at the same instruction, all named in the member mask."""
        for w in range(0, THREADS, 32):
            warp = self.threads[w : w + 32]
            waiting = [t for t in warp if t.waiting == "shfl"]
            if not waiting or len(waiting) != len([t for t in warp if not t.done]):
                continue
            if len(waiting) != 32:
                raise SimError(f"shfl.sync in warp {w // 32} with exited lanes")
            if len({t.pc for t in waiting}) != 1:
                raise SimError(f"warp {w // 32}'s lanes reach different shfl.sync points")
            ins = self.prog[waiting[0].pc]
            mode = ins.op.split(".")[2]
            if mode not in ("bfly", "idx"):
                raise SimError(f"no model for {ins.op}")
            dst, src, b, c, mask = ins.args
            if self.val(waiting[0], mask) & 0xFFFFFFFF != 0xFFFFFFFF:
                raise SimError("shfl.sync with a member mask other than the full warp")
            vals = [self.val(t, src) for t in waiting]
            for t in waiting:
                lane, bv = t.tid % 32, self.val(t, b)
                j = lane ^ bv if mode == "bfly" else bv
                ok = 0 <= j <= (self.val(t, c) & 31)  # c = 31: no segments, max lane 31
                t.regs[dst] = vals[j] if ok else vals[lane]
                t.waiting = None
                t.pc += 1
            return True
        return False

    def _release_collectives(self) -> bool:
        if self._release_shfl():
            return True
        live = [t for t in self.threads if not t.done]
        for kind in ("bar", "wgmma"):
            if live and all(t.waiting == kind for t in live):
                pcs = {t.pc for t in live}
                if len(pcs) != 1:
                    raise SimError(f"threads reach different {kind} points: {sorted(pcs)}")
                if kind == "wgmma":
                    self.wgmma(live, self.prog[live[0].pc])
                else:
                    carried = set().union(*(t.tc_releasable for t in live))
                    for t in live:
                        t.tc_acquired |= carried
                    self.epoch += 1
                for t in live:
                    t.waiting = None
                    t.pc += 1
                return True
        return False

    def step_until_block(self, t: Thread) -> bool:
        moved = False
        while not t.done and not t.waiting:
            ins = self.prog[t.pc]
            self.steps += 1
            if ins.pred is not None:
                p = bool(t.regs[ins.pred])
                if p == ins.neg:
                    t.pc += 1
                    moved = True
                    continue
            if ins.op.startswith("bar.sync"):
                t.waiting = "bar"
                return True
            if ins.op.startswith("wgmma.mma_async"):
                t.waiting = "wgmma"
                return True
            if ins.op.startswith("shfl.sync"):
                t.waiting = "shfl"
                return True
            nxt = self.exec(t, ins)
            if nxt == "spin":
                t.waiting = "spin"
                return moved
            t.pc = nxt if nxt is not None else t.pc + 1
            moved = True
        return moved

    def exec(self, t: Thread, ins: Ins):
        op, a = ins.op, ins.args
        V = lambda x: self.val(t, x)  # noqa: E731
        R = t.regs
        base = op.split(".")[0]
        if op == "ret":
            self.thread_exit(t)
            t.done = True
            return None
        if base == "bra":
            return self.labels[a[0]]
        if op.startswith("fence.proxy.async"):
            self.fence_proxy_async(t)
            return None
        if op.startswith("fence.mbarrier_init"):
            return None
        if op == "tcgen05.fence::before_thread_sync":
            t.tc_releasable |= t.tc_since_fence
            t.tc_since_fence = set()
            return None
        if op == "tcgen05.fence::after_thread_sync":
            t.tc_visible |= t.tc_acquired
            t.tc_acquired = set()
            t.tma_unfenced = False
            return None
        if op.startswith("wgmma.fence"):
            R.written.clear()
            return None
        if op.startswith("wgmma.commit_group"):
            t.wg_groups.append(t.wg_open)
            t.wg_open = []
            return None
        if op.startswith("wgmma.wait_group"):
            self.wgmma_wait(t, V(a[0]))
            return None
        if op.startswith("tcgen05.wait::st"):
            for lane, col, vals in t.tc_st:
                self.tmem[lane, col : col + len(vals)] = vals
            t.tc_st.clear()
            return None
        if op.startswith("tcgen05.wait::ld"):
            for regs, lane, col in t.tc_ld:
                for r, v in zip(regs, self.tmem[lane, col : col + len(regs)], strict=True):
                    R.land(r, int(v))
            t.tc_ld.clear()
            return None
        if op.startswith("tcgen05.relinquish"):
            self.relinquished.add(t.tid // 32)
            return None
        if op == "cp.async.bulk.commit_group":
            t.bulk_groups.append({"stores": t.bulk_open, "read": False})
            t.bulk_open = []
            return None
        if op.startswith("cp.async.bulk.wait_group"):
            self.retire_bulk(t, V(a[0]), writes=not op.endswith(".read"))
            return None
        if op.endswith(".f32") and base in (
            "add", "sub", "mul", "div", "setp", "max", "min", "copysign", *UNARY_F32
        ):  # fmt: skip
            return self.float_scalar(t, op, base, a)
        if op == "mov.b32" and a[0].startswith("%f"):  # bits into an f32 register
            R[a[0]] = struct.unpack("<f", struct.pack("<I", V(a[1]) & 0xFFFFFFFF))[0]
            return None
        if op == "mov.b32" and a[1].startswith("%f"):  # an f32 register's bits
            R[a[0]] = struct.unpack("<I", struct.pack("<f", V(a[1])))[0]
            return None
        if base == "mov":
            v = V(a[1])
            R[a[0]] = v
            return None
        if base == "cvta":
            R[a[0]] = V(a[1])
            return None
        if op == "ld.param.u64":
            v, _ = self.addr(t, a[1])
            R[a[0]] = self.params[v[1]]
            return None
        if op in ("and.pred", "or.pred", "xor.pred"):
            x, y = bool(V(a[1])), bool(V(a[2]))
            R[a[0]] = {"and": x and y, "or": x or y, "xor": x != y}[base]
            return None
        if op == "not.pred":
            R[a[0]] = not bool(V(a[1]))
            return None
        if op in ("neg.s32", "abs.s32"):  # wrapping: -(-2^31) and |-2^31| are -2^31
            x = _signed(V(a[1]), 32)
            R[a[0]] = (-x if base == "neg" or x < 0 else x) & 0xFFFFFFFF
            return None
        if base in (
            "add",
            "sub",
            "mul",
            "mad",
            "div",
            "rem",
            "and",
            "or",
            "xor",
            "shl",
            "shr",
            "min",
            "max",
        ):
            bits = 64 if op.endswith("64") and "wide" not in op else 32
            if "wide" in op:
                bits = 64
            mask = (1 << bits) - 1
            x, y = V(a[1]), V(a[2])
            signed = ".s" in op
            if signed:  # two's complement operands (min/max/div/rem/shr read the sign)
                w = 32 if "wide" in op else bits
                x, y = _signed(x, w), _signed(y, w)
            r = {
                "add": lambda: x + y,
                "sub": lambda: x - y,
                "mul": lambda: x * y,
                "mad": lambda: x * y + V(a[3]),
                "div": lambda: _tdiv(x, y) if signed else x // y,
                "rem": lambda: x - y * _tdiv(x, y) if signed else x % y,
                "and": lambda: x & (y & mask),
                "or": lambda: x | (y & mask),
                "xor": lambda: x ^ y,
                "shl": lambda: x << y,
                "shr": lambda: x >> y,
                "min": lambda: min(x, y),
                "max": lambda: max(x, y),
            }[base]()
            R[a[0]] = r & mask
            return None
        if base == "bfe":
            R[a[0]] = (V(a[1]) >> V(a[2])) & ((1 << V(a[3])) - 1)
            return None
        if op in ("cvt.f32.bf16", "cvt.f32.f16"):
            R[a[0]] = from_half(V(a[1]), op.split(".")[2])
            return None
        if op in ("cvt.rn.bf16.f32", "cvt.rn.f16.f32"):
            R[a[0]] = to_half(V(a[1]), op.split(".")[2])
            return None
        if op in ("cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32"):  # d = {a: upper, b: lower}
            ty = op.split(".")[2][:-2]
            R[a[0]] = (to_half(V(a[1]), ty) << 16) | to_half(V(a[2]), ty)
            return None
        if op == "cvt.rni.s32.f32":  # to the nearest integer, ties to even (NaN: 0)
            v = float(np.float32(V(a[1])))
            R[a[0]] = (int(np.rint(v)) if math.isfinite(v) else 0) & 0xFFFFFFFF
            return None
        if op == "cvt.rn.f32.s32":
            v = V(a[1]) & 0xFFFFFFFF
            R[a[0]] = float(np.float32(v - (1 << 32) if v >> 31 else v))
            return None
        conv = re.fullmatch(r"cvt\.(rn\.f32\.[su](32|64)|rzi\.[su](32|64)\.f32)", op)
        if conv:  # int <-> f32 (PTX ISA: the float-to-int result saturates, NaN is 0)
            R[a[0]] = int_f32_convert(op, V(a[1]))
            return None
        if base == "cvt":
            v = V(a[1])
            if op == "cvt.s64.s32":
                v = (v - (1 << 32) if v >> 31 else v) & ((1 << 64) - 1)
            R[a[0]] = v & 0xFFFFFFFF if ".u32." in op or ".s32." in op else v
            return None
        if base == "setp":
            cmp, ty = op.split(".")[1], op.split(".")[2]
            x, y = V(a[1]), V(a[2])
            if ty.startswith("s"):
                x, y = _signed(x, int(ty[1:])), _signed(y, int(ty[1:]))
            R[a[0]] = {
                "eq": x == y,
                "ne": x != y,
                "ge": x >= y,
                "lt": x < y,
                "le": x <= y,
                "gt": x > y,
            }[cmp]
            return None
        if op in ("selp.b64", "selp.b32", "selp.f32", "selp.s32", "selp.u32"):
            R[a[0]] = V(a[1]) if R[a[3]] else V(a[2])
            return None
        if base == "st" and ".shared" in op:
            p, off = self.addr(t, a[0])
            if op.endswith(("v2.f32",)):
                data = struct.pack("<2f", *self.vec(t, a[1]))
            elif op == "st.shared.f32":
                data = struct.pack("<f", V(a[1]))
            elif op.endswith("v4.b32"):
                data = struct.pack("<4I", *[x & 0xFFFFFFFF for x in self.vec(t, a[1])])
            elif op.endswith("b32"):
                data = struct.pack("<I", V(a[1]) & 0xFFFFFFFF)
            elif op.endswith("b16"):
                data = struct.pack("<H", V(a[1]) & 0xFFFF)
            elif op == "st.shared.u8":  # the register's low byte
                data = struct.pack("<B", V(a[1]) & 0xFF)
            else:
                raise SimError(f"no model for {op}")
            self.st(t, p + off, data)
            return None
        if op == "ld.shared.b32":
            p, off = self.addr(t, a[1])
            R[a[0]] = struct.unpack("<I", self.ld(t, p + off, 4))[0]
            return None
        if op == "ld.shared.f32":
            p, off = self.addr(t, a[1])
            R[a[0]] = struct.unpack("<f", self.ld(t, p + off, 4))[0]
            return None
        if op == "ld.shared.u8":  # zero-extended into the register
            p, off = self.addr(t, a[1])
            R[a[0]] = self.ld(t, p + off, 1)[0]
            return None
        if op == "ld.shared.b16":
            p, off = self.addr(t, a[1])
            R[a[0]] = struct.unpack("<H", self.ld(t, p + off, 2))[0]
            return None
        if op.startswith("ld.global"):
            p, off = self.addr(t, a[1])
            buf, o = self.memory.find(p + off)
            n = 2 if op.endswith("16") else 4
            R[a[0]] = int.from_bytes(buf[o : o + n].tobytes(), "little")
            return None
        if op == "st.global.u32":
            p, off = self.addr(t, a[0])
            buf, o = self.memory.find(p + off)
            buf[o : o + 4] = np.frombuffer(struct.pack("<I", V(a[1])), np.uint8)
            return None
        if op.startswith("mbarrier.init"):
            p, off = self.addr(t, a[0])
            self.bars[p + off] = {
                "count": V(a[1]),
                "pending": V(a[1]),
                "tx": 0,
                "phase": 0,
                "had_tx": False,
                "tx_phase": False,
                "carried": set(),
            }
            return None
        if op.startswith("mbarrier.arrive.expect_tx"):
            p, off = self.addr(t, a[1])
            self.bar_arrive(p + off, V(a[2]), carried=t.tc_releasable)
            return None
        if op.startswith("mbarrier.try_wait.parity"):
            p, off = self.addr(t, a[1])
            b = self.bars[p + off]
            done = (b["phase"] & 1) != (V(a[2]) & 1)
            if not done:
                return "spin"
            t.tc_acquired |= b["carried"]
            t.tma_unfenced |= b["tx_phase"]
            R[a[0]] = True
            return None
        if op.startswith("cp.async.bulk.tensor.2d.shared::cluster"):
            dst, doff = self.addr(t, a[0])
            (_, name), cs = self.coords(t, a[1])
            bar, boff = self.addr(t, a[2])
            tm = self.params[name]
            lo = dst + doff
            hi = lo + tm.box[0] * tm.box[1] * tm.elem
            self.check_no_reader(lo, hi, "a TMA load")
            # Generic reads of the slot by other threads since the last bar.sync may not
            # have happened yet on hardware (write-after-read), and later ones in this
            # epoch read before the copy lands.
            self._race(t, lo, self.r_tid[lo:hi], self.r_epoch[lo:hi], "TMA-loads over")
            self.tma_tid[lo:hi], self.tma_epoch[lo:hi] = t.tid, self.epoch
            c0, c1 = tma_coords(cs)
            self.pending.append((lo, tm, c0, c1, bar + boff))
            self.tma_loads.append((name, tuple(cs)))
            return None
        if op.startswith("cp.async.bulk.tensor.2d.global.shared"):
            (_, name), cs = self.coords(t, a[0])
            src, soff = self.addr(t, a[1])
            tm = self.params[name]
            n = tm.box[0] * tm.elem
            reads = [(src + soff + r * n, src + soff + (r + 1) * n) for r in range(tm.box[1])]
            at = tma_coords(cs)
            snap = self._snapshot(reads)
            t.bulk_open.append({"tm": tm, "cs": at, "reads": reads, "snapshot": snap, "pc": t.pc})
            return None
        if op.startswith("tcgen05.alloc"):
            self.tmem_alloc(t, a)
            return None
        if op.startswith("tcgen05.dealloc"):
            self.tmem_dealloc(t, V(a[0]), V(a[1]))
            return None
        if op.startswith("tcgen05.st.sync.aligned.32x32b.x32"):
            p, off = self.addr(t, a[0])
            lanes, cols = self.tmem_range(t, p + off, 32, "tcgen05.st")
            self.check_tmem_mma_free(lanes, cols, "tcgen05.st")
            self.tc_event(t, "st", lanes, cols, True)
            vals = [x & 0xFFFFFFFF for x in self.vec(t, a[1])]
            t.tc_st.append((lanes[0], cols[0], vals))
            return None
        if op.startswith("tcgen05.ld.sync.aligned.32x32b.x32"):
            p, off = self.addr(t, a[1])
            lanes, cols = self.tmem_range(t, p + off, 32, "tcgen05.ld")
            self.check_tmem_mma_free(lanes, cols, "tcgen05.ld")
            self.tc_event(t, "ld", lanes, cols, False)
            regs = [r.strip() for r in a[0][1:-1].split(",")]
            for r in regs:
                R.fly(r, f"the tcgen05.ld at instruction {t.pc} (no tcgen05.wait::ld)")
            t.tc_ld.append((regs, lanes[0], cols[0]))
            return None
        if op.startswith("tcgen05.mma"):
            self.tcgen05_mma(t, ins)
            return None
        if op.startswith("tcgen05.commit"):
            p, off = self.addr(t, a[0])
            self.tc_pipe.append(("commit", {"bar": p + off, "events": set(t.tc_releasable)}))
            return None
        raise SimError(f"no model for `{op}`")

    # -- TMEM allocation ---------------------------------------------------------------------
    def tmem_alloc(self, t: Thread, a: list[str]) -> None:
        """Warp-collective: the warp's n-th alloc returns one block for all 32 threads. The
        block is the highest free one, so a kernel that assumes column 0 reads garbage."""
        warp = t.tid // 32
        key = (warp, t.allocs)
        t.allocs += 1
        ncols = self.val(t, a[1])
        if key not in self.alloc_results:
            if warp in self.relinquished:
                raise SimError(f"warp {warp} allocates TMEM after relinquishing the permit")
            if ncols < 32 or ncols > TMEM_COLUMNS or ncols & (ncols - 1):
                raise SimError(f"tcgen05.alloc of {ncols} columns: a power of 2 in 32..512")
            starts = [
                c for c in range(0, TMEM_COLUMNS, ncols) if all(self.tmem_free[c : c + ncols])
            ]
            if not starts:
                raise SimError(f"tcgen05.alloc of {ncols} columns: TMEM is full")
            col = starts[-1]
            self.tmem_free[col : col + ncols] = [False] * ncols
            self.tmem_blocks[col] = ncols
            self.alloc_results[key] = col
            ev = self.tc_event(t, "alloc", (0, TMEM_LANES), (col, col + ncols), True, issuer=-1)
            self.alloc_results[(warp, "event", key[1])] = ev.id
        ev_id = self.alloc_results[(warp, "event", key[1])]
        t.tc_issued.add(ev_id)
        t.tc_since_fence.add(ev_id)
        p, off = self.addr(t, a[0])
        self.st_async(p + off, struct.pack("<I", self.alloc_results[key]))

    def tmem_dealloc(self, t: Thread, taddr: int, ncols: int) -> None:
        warp = t.tid // 32
        key = (warp, t.deallocs)
        t.deallocs += 1
        col = taddr & 0xFFFF
        if key in self.dealloc_done:
            return
        if taddr >> 16 or self.tmem_blocks.get(col) != ncols:
            raise SimError(f"tcgen05.dealloc of {ncols} columns at {taddr:#x}: not an allocation")
        self.check_tmem_mma_free((0, TMEM_LANES), (col, col + ncols), "tcgen05.dealloc")
        self.tc_event(t, "dealloc", (0, TMEM_LANES), (col, col + ncols), True)
        self.tmem_free[col : col + ncols] = [True] * ncols
        del self.tmem_blocks[col]
        self.dealloc_done.add(key)

    def check_tmem_mma_free(self, lanes, cols, what: str) -> None:
        for kind, op in self.tc_pipe:
            if kind == "mma" and _overlap(lanes, op["lanes"]) and _overlap(cols, op["cols"]):
                raise SimError(
                    f"{what} touches TMEM that the tcgen05.mma at instruction {op['pc']} still "
                    "writes (its commit barrier was not waited)"
                )

    # -- bulk stores ------------------------------------------------------------------------
    def retire_bulk(self, t: Thread, keep: int, writes: bool) -> None:
        """cp.async.bulk.wait_group[.read] N: all but the newest N groups have read their
        shared memory (and, without .read, written global memory)."""
        for g in t.bulk_groups[: max(len(t.bulk_groups) - keep, 0)]:
            if not g["read"]:
                for s in g["stores"]:
                    self.check_unchanged(s, "bulk store")
                g["read"] = True
            if writes:
                for s in g["stores"]:
                    self.bulk_write(s)
                g["stores"] = []
        if writes:
            t.bulk_groups = [g for g in t.bulk_groups if g["stores"]]

    def bulk_write(self, s: dict) -> None:
        """The box's rows into global memory, clipped to the tensor map's dims: the
        elements of a box reaching past the tensor are not written."""
        tm, (c0, c1) = s["tm"], s["cs"]
        for r, data in enumerate(s["snapshot"]):
            y = c1 + r
            if not 0 <= y < tm.dims[1]:
                continue
            n = min(tm.box[0], tm.dims[0] - c0)  # elements of the row inside (c0 >= 0)
            if n <= 0:
                continue
            o = y * tm.stride + c0 * tm.elem
            if o + n * tm.elem > tm.buf.size:
                raise SimError("a TMA store past the end of device memory (the map's dims)")
            tm.buf[o : o + n * tm.elem] = np.frombuffer(data, np.uint8)[: n * tm.elem]

    # -- wgmma ------------------------------------------------------------------------------
    def wgmma(self, threads: list[Thread], ins: Ins) -> None:
        """Issue: operands read now (they must be ready); the accumulator registers stay
        in flight until each thread's wgmma.wait_group retires the op."""
        m = re.search(r"m64n(\d+)k(\d+)\.f32\.(\w+)\.", ins.op)
        n, kk, ty = int(m.group(1)), int(m.group(2)), m.group(3)
        dtype = {"tf32": "f32", "bf16": "bf16", "f16": "f16"}[ty]
        elem = 4 if dtype == "f32" else 2
        t0 = threads[0]
        regs = [x.strip() for x in ins.args[0][1:-1].split(",")]
        for t in threads:
            stale = t.regs.written.intersection(regs)
            if stale:
                raise SimError(
                    f"wgmma at instruction {t.pc}: accumulator {sorted(stale)[0]} was written "
                    f"by thread {t.tid} since its last wgmma.fence"
                )
        da = decode_wgmma_desc(self.val(t0, ins.args[1]))
        db = decode_wgmma_desc(self.val(t0, ins.args[2]))
        # d, a, b, scale-d, imm-scale-a, imm-scale-b[, imm-trans-a, imm-trans-b]
        imm = [int(x) for x in ins.args[4:]]
        if imm[:2] != [1, 1] or (dtype != "f32" and (len(imm) != 4 or imm[2])):
            raise SimError(f"wgmma at instruction {t0.pc}: immediates {imm} are not modelled")
        trans_b = dtype != "f32" and imm[3] == 1
        da.check_kmajor_sw128("wgmma A")
        A, ra = self.read_kmajor(da, 64, kk * elem, elem, dtype)
        if trans_b:
            db.check_mnmajor_sw128("wgmma B")
            B, rb = self.read_mnmajor(db, n, kk, elem, dtype)
        else:
            db.check_kmajor_sw128("wgmma B")
            B, rb = self.read_kmajor(db, n, kk * elem, elem, dtype)  # B^T: [n, k]
        scale_d = bool(dict.__getitem__(t0.regs, ins.args[3]))
        op = {
            "P": A.astype(np.float64) @ B.T.astype(np.float64),
            "scale_d": scale_d,
            "regs": regs,
            "reads": ra + rb,
            "retired": set(),
            "pc": t0.pc,
        }
        op["snapshot"] = self._snapshot(op["reads"])
        self.wg_pending.append(op)
        for t in threads:
            for r in regs:
                t.regs.fly(r, f"the wgmma at instruction {t0.pc} (not yet waited)")
            t.wg_open.append(op)

    def wgmma_wait(self, t: Thread, keep: int) -> None:
        while len(t.wg_groups) > keep:
            for op in t.wg_groups.pop(0):
                w, lane = t.tid // 32, t.tid % 32
                for i, r in enumerate(op["regs"]):
                    row = 16 * w + lane // 4 + (8 if (i % 4) >= 2 else 0)
                    col = 8 * (i // 4) + 2 * (lane % 4) + (i % 2)
                    old = dict.__getitem__(t.regs, r) if op["scale_d"] else 0.0
                    t.regs.land(r, float(np.float32(old + op["P"][row, col])))
                op["retired"].add(t.tid)
                if len(op["retired"]) == THREADS:
                    self.check_unchanged(op, "wgmma")
                    self.wg_pending.remove(op)

    # -- tcgen05.mma --------------------------------------------------------------------------
    def tcgen05_mma(self, t: Thread, ins: Ins) -> None:
        """Issue: descriptors decoded in full, operands read now; the MMA runs on the tensor
        core's queue, in order, when its commit barrier is needed."""
        if t.tma_unfenced:
            raise SimError(
                f"tcgen05.mma at instruction {t.pc} follows a TMA wait without "
                "tcgen05.fence::after_thread_sync"
            )
        kind = ins.op.rsplit("::", 1)[1]
        p, off = self.addr(t, ins.args[0])
        d = p + off
        raw_a, raw_b, raw_i = (self.val(t, x) for x in ins.args[1:4])
        idesc = decode_idesc(raw_i, kind)
        da, db = decode_tcgen05_desc(raw_a), decode_tcgen05_desc(raw_b)
        da.check_kmajor_sw128("tcgen05.mma A")
        m, n = idesc.m, idesc.n
        A, ra = self.read_kmajor(da, m, 32, 2 if idesc.a_fmt != "f32" else 4, idesc.a_fmt)
        eb = 2 if idesc.b_fmt != "f32" else 4
        if idesc.transpose[1]:  # B MN-major
            if eb != 2:
                raise SimError("tcgen05.mma: an MN-major tf32 B is not modelled")
            db.check_mnmajor_sw128("tcgen05.mma B")
            B, rb = self.read_mnmajor(db, n, 32 // eb, eb, idesc.b_fmt)
        else:
            db.check_kmajor_sw128("tcgen05.mma B")
            B, rb = self.read_kmajor(db, n, 32, eb, idesc.b_fmt)
        lane0, col = d >> 16, d & 0xFFFF
        width = n if idesc.d_fmt == "f32" else n // 2
        self.check_allocated(col, width, "tcgen05.mma D")
        lanes, cols = (lane0, lane0 + m), (col, col + width)
        ev = self.tc_event(t, "mma", lanes, cols, True)
        op = {
            "P": A.astype(np.float64) @ B.T.astype(np.float64),
            "enable": bool(t.regs[ins.args[4]]),
            "d_fmt": idesc.d_fmt,
            "lanes": lanes,
            "cols": cols,
            "reads": ra + rb,
            "event": ev.id,
            "pc": t.pc,
        }
        op["snapshot"] = self._snapshot(op["reads"])
        self.tc_pipe.append(("mma", op))

    def apply_tcgen05(self, op: dict) -> None:
        (l0, l1), (c0, c1) = op["lanes"], op["cols"]
        block = self.tmem[l0:l1, c0:c1]
        if op["d_fmt"] == "f32":
            cur = block.view(np.float32).astype(np.float64)
            res = op["P"] + (cur if op["enable"] else 0)
            self.tmem[l0:l1, c0:c1] = res.astype(np.float32).view(np.uint32)
        else:  # f16 D: two halves per 32-bit column
            cur = block.copy().view(np.float16).astype(np.float64)
            res = op["P"] + (cur if op["enable"] else 0)
            self.tmem[l0:l1, c0:c1] = res.astype(np.float16).view(np.uint32)


def _rows(buf: np.ndarray, rows: int, pitch: int) -> np.ndarray:
    """A tensor's rows in its guarded device buffer: (rows, pitch) bytes."""
    return buf[: rows * pitch].reshape(rows, pitch)


def run_kernel(
    ptx: str,
    manifest_kernel: dict,
    args: list[np.ndarray],
    instances: int,
    ctas: list[int] | None = None,
    tma_loads: list | None = None,
) -> list[np.ndarray]:
    """Run `instances` CTAs one after another, with the parameters the runtime would
    pass (`vxc.backends.nvidia.runtime.plan_launch`); returns the stacked results.

    A tensor a tensor map describes lies in device memory with `GUARD` bytes of
    `GUARD_BYTE` after it (what an allocator's neighbour would be): the TMA unit reaches
    them only through a tensor map whose dims pass the tensor's end, or a store past the
    dims that is not clipped, and a run that changes them is an error naming the tensor.
    A tensor whose rows the launcher pads (`LaunchParam.pitch`: rows not a multiple of 16
    bytes) lies row by row at that pitch, its padding columns guard bytes too: a kernel
    that read them as data would read 0xA5 bytes, and one that wrote them fails the run.

    `ctas` runs only those of the grid (the others' outputs are left as they were);
    `tma_loads` collects each TMA load issued as (cta, tensor map parameter, coords)."""
    from vxc.backends.nvidia.runtime import plan_launch

    k = manifest_kernel
    memory = Global()
    params: dict = {}
    outs, status, ptrs = [], None, {}
    guarded: dict = {}  # (arg or result param) -> (the tensor's bytes, its guarded copy)
    for p in plan_launch(k, args, instances):
        if p.kind in ("tensormap", "pointer"):
            raw = p.array.reshape(-1).view(np.uint8)
            if p.arg_index is None:
                outs.append(p.array)
            if p.kind == "pointer":
                params[p.name] = ptrs.setdefault(p.arg_index, memory.add(raw))
            else:
                key = p.arg_index if p.arg_index is not None else p.name
                if key not in guarded:
                    # (rows, bytes of each, pitch): the layout the launcher uploads
                    rows = 1 if p.pitch is None else p.array.shape[0]
                    width = raw.size // rows
                    pitch = width if p.pitch is None else p.pitch
                    buf = np.full(rows * pitch + GUARD, GUARD_BYTE, np.uint8)
                    _rows(buf, rows, pitch)[:, :width] = raw.reshape(rows, width)
                    guarded[key] = (raw, buf, p.name, rows, pitch)
                tm = p.tensor_map
                params[p.name] = TensorMap(
                    guarded[key][1], tm.dims, tm.strides[0], tm.box, tm.swizzle, tm.elem_bytes
                )
        elif p.kind == "u64":
            params[p.name] = p.value
        elif p.kind == "status":
            status = p.array
            params[p.name] = memory.add(status.view(np.uint8))
    for i in range(instances) if ctas is None else ctas:
        cta = Cta(ptx, k["name"], params, k["dynamic_smem"], i, instances, memory)
        cta.run()
        if tma_loads is not None:
            tma_loads += [(i, *load) for load in cta.tma_loads]
    for raw, buf, name, rows, pitch in guarded.values():
        width = raw.size // rows
        data = _rows(buf, rows, pitch)[:, :width].reshape(-1)
        if raw.flags.writeable:
            raw[:] = data
        elif not np.array_equal(raw, data):  # a caller's read-only input (a jax array's)
            raise SimError(f"a TMA store wrote into {name}'s tensor, a read-only input")
        pad = _rows(buf, rows, pitch)[:, width:]
        if (pad != GUARD_BYTE).any():
            row, at = (int(x[0]) for x in np.nonzero(pad != GUARD_BYTE))
            raise SimError(
                f"a TMA store wrote into the row padding of {name}'s tensor (row {row}, "
                f"+{width + at} bytes of its {pitch}-byte pitch)"
            )
        end = rows * pitch
        if (buf[end:] != GUARD_BYTE).any():
            at = int(np.flatnonzero(buf[end:] != GUARD_BYTE)[0])
            raise SimError(f"a TMA store wrote past the end of {name}'s tensor (at +{at} bytes)")
    if status is not None and status.any():
        raise StatusError(int(status[0]))
    return outs
