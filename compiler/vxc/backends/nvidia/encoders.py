"""Bit-level encoders the NVIDIA backends share, pure Python and unit-tested.

- `wgmma_smem_desc`: the 64-bit shared-memory matrix descriptor of `wgmma.mma_async`
  (PTX ISA, "Matrix Descriptor Format" of the asynchronous warpgroup MMA).
- `tcgen05_smem_desc`: the same for `tcgen05.mma` (sm_100a: a version field, a
  3-bit swizzle field at 61-63 with its own numbering).
- `tcgen05_idesc`: the 32-bit instruction descriptor of `tcgen05.mma` for
  `.kind::tf32` and `.kind::f16`.
- `TensorMap`: the fields `cuTensorMapEncodeTiled` takes, checked against the TMA
  limits (`TmaLimit` names the value and the limit).

Layout convention of every matrix operand in shared memory: K-major with the
128-byte swizzle, stored as K-blocks of 128 bytes of K by R rows (R * 128 bytes
each, 1024-byte aligned); inside a block, row r's 16-byte chunk c sits at chunk
`c ^ (r % 8)`. That is what a TMA load with SWIZZLE_128B and a box of
[128 / elem_bytes, R] writes, so A tiles come straight from TMA.
"""

from __future__ import annotations

from dataclasses import dataclass

from vxc.elements import BY_MLIR
from vxc.targets import TMA

SWIZZLE_BYTES = 128  # the swizzle span of every MMA operand
MMA_K_BYTES = 32  # bytes of K one wgmma / tcgen05.mma step consumes (k8 tf32, k16 f16)
ATOM_ROWS = 8  # rows of one swizzle atom (8 x 128 B = 1024 B)

# Element types of matmul operands -> (wgmma type name, tcgen05 kind, format code); their
# sizes are the element table's (vxc/elements.py). tcgen05 format codes (instruction
# descriptor bits 7-9 / 10-12): kind::f16 F16=0, BF16=1; kind::tf32 TF32=2.
MMA_TYPES = {
    "f32": ("tf32", "tf32", 2),
    "bf16": ("bf16", "f16", 1),
    "f16": ("f16", "f16", 0),
}


def elem_bytes(dtype: str) -> int:
    """Bytes of one element of IR type `dtype` (`f32`, `ui8`), from the element table."""
    return BY_MLIR[dtype].bytes


_WGMMA_SWIZZLE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
_TCGEN05_SWIZZLE = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}


def _field(value: int, bits: int, what: str) -> int:
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{what} = {value} does not fit in {bits} bits")
    return value


def _addr14(byte_value: int, what: str) -> int:
    if byte_value % 16:
        raise ValueError(f"{what} = {byte_value} is not a multiple of 16 bytes")
    return _field(byte_value >> 4, 14, what)


def wgmma_smem_desc(
    start: int, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0
) -> int:
    """Bits 0-13 start >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset
    >> 4, 49-51 base offset, 62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B)."""
    return (
        _addr14(start, "start address")
        | _addr14(lbo, "leading byte offset") << 16
        | _addr14(sbo, "stride byte offset") << 32
        | _field(base_offset, 3, "base offset") << 49
        | _WGMMA_SWIZZLE[swizzle] << 62
    )


def tcgen05_smem_desc(
    start: int, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0
) -> int:
    """Bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 46-47 version (1 on
    sm_100), 49-51 base offset, 52 LBO mode (0: relative), 61-63 swizzle (0 none,
    1 128B with 32B atoms, 2 128B, 4 64B, 6 32B)."""
    return (
        _addr14(start, "start address")
        | _addr14(lbo, "leading byte offset") << 16
        | _addr14(sbo, "stride byte offset") << 32
        | 1 << 46
        | _field(base_offset, 3, "base offset") << 49
        | _TCGEN05_SWIZZLE[swizzle] << 61
    )


def kmajor_sw128_desc(arch: str, start: int = 0) -> int:
    """The descriptor of a K-major, 128-byte-swizzled operand at `start`: the stride
    between 8-row groups is one atom (1024 B); the leading offset is unused for
    swizzled K-major layouts (one MMA step never leaves its 128-byte row) and set to 16
    bytes as CUTLASS does."""
    if arch == "sm_90a":
        return wgmma_smem_desc(start, 16, ATOM_ROWS * SWIZZLE_BYTES, "128B")
    return tcgen05_smem_desc(start, 16, ATOM_ROWS * SWIZZLE_BYTES, "128B")


def mnmajor_sw128_desc(arch: str, mn_block_bytes: int, start: int = 0) -> int:
    """The descriptor of an MN-major, 128-byte-swizzled operand at `start` (a B tile
    loaded by TMA as it lies in HBM: rows of K, MN contiguous): each 1024-byte atom is 8
    K-rows of 128 bytes of MN. For swizzled MN-major layouts the stride byte offset is
    the step between 8-row K groups (1024 B: a box's K-rows are contiguous) and the
    leading byte offset the step between 128-byte MN blocks (`mn_block_bytes`, one TMA
    box each) -- CUTLASS's make_gmma_desc / make_umma_desc<Major::MN>."""
    sbo = ATOM_ROWS * SWIZZLE_BYTES
    if arch == "sm_90a":
        return wgmma_smem_desc(start, mn_block_bytes, sbo, "128B")
    return tcgen05_smem_desc(start, mn_block_bytes, sbo, "128B")


def tcgen05_idesc(
    ab_type: str, m: int, n: int, *, transpose_a: bool = False, transpose_b: bool = False
) -> int:
    """The instruction descriptor of `tcgen05.mma .kind::tf32 / ::f16` with an f32 D:
    bits 4-5 D format (1 = F32), 7-9 A format, 10-12 B format, 15 / 16 transpose A / B
    (0 = K-major), 17-22 N >> 3, 24-28 M >> 4. Dense, no negation, no saturation."""
    if ab_type not in MMA_TYPES:
        raise ValueError(f"tcgen05.mma has no operand type {ab_type}")
    if m not in (64, 128):
        raise ValueError(f"tcgen05.mma cta_group::1 M is 64 or 128, not {m}")
    step = 8 if m == 64 else 16
    if not (step <= n <= 256 and n % step == 0):
        raise ValueError(f"tcgen05.mma N = {n} must be a multiple of {step} in [{step}, 256]")
    fmt = MMA_TYPES[ab_type][2]
    return (
        1 << 4
        | fmt << 7
        | fmt << 10
        | int(transpose_a) << 15
        | int(transpose_b) << 16
        | (n >> 3) << 17
        | (m >> 4) << 24
    )


def swizzle128_offset(row: int, byte_in_row: int, rows: int) -> int:
    """Byte offset of (row, byte of K) in the K-major 128-byte-swizzled layout of an
    operand with `rows` rows (see the module docstring)."""
    block, b = divmod(byte_in_row, SWIZZLE_BYTES)
    chunk, within = divmod(b, 16)
    return block * rows * SWIZZLE_BYTES + row * SWIZZLE_BYTES + ((chunk ^ (row % 8)) * 16) + within


# -- tensor maps ---------------------------------------------------------------------

# CUtensorMapDataType / CUtensorMapSwizzle values (cuda.h; the tests compare them with
# cuda-python's enums).
TMA_DTYPES = {
    "f16": 6,
    "f32": 7,
    "bf16": 9,
    "i32": 3,
    "ui8": 0,
    "ui16": 1,
    "i64": 5,
    "i1": 0,
}  # i1: a bool tile, one byte (0/1) an element as UINT8
TMA_SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
TMA_BOX_MAX = TMA.box_max  # each box dimension, in elements (vxc/targets.py, as E6012 checks)
TMA_ROW_MULTIPLE = TMA.row_multiple  # bytes: global row strides and the inner box row
TMA_MAX_RANK = 5
_SWIZZLE_SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}


class TmaLimit(ValueError):
    """A TMA box or tensor that breaks a hardware limit: `what` is `value`, the limit is
    `limit`."""

    def __init__(self, what: str, value: int, limit: str) -> None:
        super().__init__(what, value, limit)
        self.what, self.value, self.limit = what, value, limit

    def __str__(self) -> str:
        return f"{self.what} is {self.value}; the TMA limit is {self.limit}"


@dataclass(frozen=True)
class TensorMap:
    """The arguments of `cuTensorMapEncodeTiled`, innermost dimension first.

    dims / strides describe the global tensor (strides in bytes, one fewer than dims:
    dimension 0 is contiguous); box is the tile one TMA copy moves.
    """

    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str = "none"

    @property
    def elem_bytes(self) -> int:
        return elem_bytes(self.dtype)

    @property
    def box_bytes(self) -> int:
        n = self.elem_bytes
        for b in self.box:
            n *= b
        return n

    def check(self) -> None:
        """Raise `TmaLimit` for the first field outside the hardware limits."""
        check_box(self.dtype, self.box, self.swizzle)
        if len(self.dims) != len(self.box) or len(self.strides) != len(self.dims) - 1:
            raise ValueError("tensor map rank mismatch")
        for s in self.strides:
            if s % TMA_ROW_MULTIPLE:
                raise TmaLimit("a global row stride (bytes)", s, "a multiple of 16 bytes")

    def to_json(self) -> dict:
        return {
            "dtype": self.dtype,
            "data_type": TMA_DTYPES[self.dtype],
            "dims": list(self.dims),
            "strides": list(self.strides),
            "box": list(self.box),
            "element_strides": [1] * len(self.box),
            "swizzle": self.swizzle,
            "swizzle_code": TMA_SWIZZLE[self.swizzle],
            "interleave": 0,
            "l2_promotion": 0,
            "oob_fill": 0,
        }

    @staticmethod
    def from_json(d: dict) -> TensorMap:
        return TensorMap(
            d["dtype"], tuple(d["dims"]), tuple(d["strides"]), tuple(d["box"]), d["swizzle"]
        )


def check_box(dtype: str, box: tuple[int, ...], swizzle: str = "none") -> None:
    """A box (innermost first) against the TMA limits: at most 5 dimensions, each in
    1..256 elements, the inner row a multiple of 16 bytes and, swizzled, at most the
    swizzle span."""
    eb = elem_bytes(dtype) if dtype in TMA_DTYPES else None
    if eb is None:
        raise TmaLimit(f"element type {dtype} (bits)", 0, "one of f16, bf16, f32, i32")
    if not 1 <= len(box) <= TMA_MAX_RANK:
        raise TmaLimit("the box rank", len(box), f"1..{TMA_MAX_RANK}")
    for i, b in enumerate(box):
        if not 1 <= b <= TMA_BOX_MAX:
            raise TmaLimit(f"box dimension {i} (elements)", b, f"at most {TMA_BOX_MAX}")
    row = box[0] * eb
    if row % TMA_ROW_MULTIPLE:
        raise TmaLimit("the box row (bytes)", row, "a multiple of 16 bytes")
    span = _SWIZZLE_SPAN[swizzle]
    if span is not None and row > span:
        raise TmaLimit(f"the box row with the {swizzle} swizzle (bytes)", row, f"at most {span}")
