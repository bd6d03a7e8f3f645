"""The descriptor and tensor-map encoders against bit patterns worked out by hand from
the PTX ISA (matrix descriptor formats of wgmma and tcgen05, the tcgen05 instruction
descriptor for .kind::tf32 / .kind::f16) and cuda.h's enum values (read from
cuda-python, the library the runtime calls)."""

from __future__ import annotations

import pytest

from vxc.backends.nvidia import encoders as E


def test_wgmma_descriptor_k_major_128b_swizzle():
    # start 0x400 >> 4 = 0x40 (bits 0-13), LBO 16 >> 4 = 1 (bits 16-29),
    # SBO 1024 >> 4 = 0x40 (bits 32-45), swizzle 128B = 1 (bits 62-63).
    assert E.wgmma_smem_desc(0x400, 16, 1024, "128B") == 0x4000_0040_0001_0040
    assert E.kmajor_sw128_desc("sm_90a", 0x400) == 0x4000_0040_0001_0040
    assert E.wgmma_smem_desc(0, 0, 0, "none") == 0
    assert E.wgmma_smem_desc(0, 0, 0, "32B") == 3 << 62
    assert E.wgmma_smem_desc(0, 0, 0, "none", base_offset=5) == 5 << 49


def test_tcgen05_descriptor_has_version_and_its_own_swizzle_codes():
    # Same fields, plus version 1 at bit 46 and swizzle 128B = 2 at bits 61-63.
    assert E.tcgen05_smem_desc(0x400, 16, 1024, "128B") == 0x4000_4040_0001_0040
    assert E.kmajor_sw128_desc("sm_100a", 0x400) == 0x4000_4040_0001_0040
    assert E.tcgen05_smem_desc(0, 0, 0, "none") == 1 << 46
    assert E.tcgen05_smem_desc(0, 0, 0, "64B") == (1 << 46) | (4 << 61)
    assert E.tcgen05_smem_desc(0, 0, 0, "32B") == (1 << 46) | (6 << 61)


def test_mn_major_descriptor_puts_the_mn_block_stride_in_lbo():
    # A [128 K-rows, 128 N] bf16 B tile as TMA loads it: two 64-column blocks 16 KiB apart
    # (LBO 16384 >> 4 = 0x400 at bits 16-29), 8-row K groups 1024 B apart (SBO 0x40).
    assert E.mnmajor_sw128_desc("sm_90a", 16384, 0x400) == 0x4000_0040_0400_0040
    assert E.mnmajor_sw128_desc("sm_100a", 16384, 0x400) == 0x4000_4040_0400_0040


def test_descriptor_fields_are_checked():
    with pytest.raises(ValueError, match="multiple of 16"):
        E.wgmma_smem_desc(8, 16, 1024)
    with pytest.raises(ValueError, match="14 bits"):
        E.tcgen05_smem_desc(1 << 18, 16, 1024)


def test_tcgen05_instruction_descriptor_bit_patterns():
    # D f32 (1 << 4); A/B TF32 = 2 at bits 7-9 and 10-12; N >> 3 = 16 at 17-22; M >> 4 = 8 at 24-28.
    assert E.tcgen05_idesc("f32", 128, 128) == 0x0820_0910
    # BF16 = 1; N = 256 -> 32 << 17.
    assert E.tcgen05_idesc("bf16", 128, 256) == 0x0840_0490
    # F16 = 0.
    assert E.tcgen05_idesc("f16", 128, 128) == 0x0820_0010
    # Transpose bits (MN-major): 15 and 16; M = 64 -> 4 << 24.
    assert E.tcgen05_idesc("bf16", 64, 8, transpose_a=True, transpose_b=True) == (
        0x10 | 0x80 | 0x400 | 1 << 15 | 1 << 16 | 1 << 17 | 4 << 24
    )


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (("f64", 128, 128), "no operand type"),
        (("f32", 96, 128), "M is 64 or 128"),
        (("f32", 128, 264), "N = 264"),
        (("f32", 128, 24), "N = 24"),
    ],
)
def test_tcgen05_instruction_descriptor_rejects(args, msg):
    with pytest.raises(ValueError, match=msg):
        E.tcgen05_idesc(*args)


def test_swizzle128_layout_matches_the_tma_pattern():
    # Row r's 16-byte chunk c lands at chunk c ^ (r % 8) of its 128-byte row.
    assert E.swizzle128_offset(0, 0, 128) == 0
    assert E.swizzle128_offset(1, 0, 128) == 128 + 16
    assert E.swizzle128_offset(1, 16, 128) == 128
    assert E.swizzle128_offset(9, 16, 128) == 9 * 128
    assert E.swizzle128_offset(7, 127, 128) == 7 * 128 + ((7 ^ 7) * 16) + 15
    # The second 128-byte block of K starts after all rows of the first.
    assert E.swizzle128_offset(0, 128, 128) == 128 * 128
    # A bijection on one block.
    offs = {E.swizzle128_offset(r, b, 64) for r in range(64) for b in range(128)}
    assert offs == set(range(64 * 128))


def test_tma_enums_are_cuda_h_values():
    from cuda.bindings import driver as d

    assert E.TMA_DTYPES["f32"] == int(d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
    assert E.TMA_DTYPES["bf16"] == int(d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
    assert E.TMA_DTYPES["f16"] == int(d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
    assert E.TMA_DTYPES["i32"] == int(d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_INT32)
    assert E.TMA_SWIZZLE["none"] == int(d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE)
    assert E.TMA_SWIZZLE["128B"] == int(d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B)
    assert E.TMA_SWIZZLE["64B"] == int(d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B)


def test_tensor_map_fields_and_limits():
    tm = E.TensorMap("f32", (128, 1024), (512,), (32, 128), "128B")
    tm.check()
    assert tm.box_bytes == 16384
    d = tm.to_json()
    assert (d["data_type"], d["swizzle_code"], d["element_strides"]) == (7, 3, [1, 1])
    assert E.TensorMap.from_json(d) == tm
    with pytest.raises(E.TmaLimit) as e:
        E.TensorMap("f32", (128, 1024), (512,), (128, 257)).check()
    assert (e.value.value, e.value.limit) == (257, "at most 256")
    assert "257" in str(e.value) and "256" in str(e.value)
    with pytest.raises(E.TmaLimit, match="12; the TMA limit is a multiple of 16 bytes"):
        E.check_box("f32", (3, 128))
    with pytest.raises(E.TmaLimit, match="with the 128B swizzle"):
        E.check_box("f32", (64, 128), "128B")
    with pytest.raises(E.TmaLimit, match="row stride"):
        E.TensorMap("f32", (3, 8), (12,), (4, 8)).check()
