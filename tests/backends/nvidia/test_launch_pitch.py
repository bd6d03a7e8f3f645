"""The launcher's row pitches (runtime.plan_launch): a 2-D argument whose rows are not a
multiple of 16 bytes gets a device pitch rounded up to 16 and a tensor map with its real
dims and that stride; what stays refused (E7008) is what no layout fixes."""

from __future__ import annotations

import numpy as np
import pytest

from vxc.backends.nvidia import runtime

VIEW = {"name": "x_tmap", "kind": "tensormap", "arg": "x", "arg_index": 0, "dtype": "f32",
        "view": True, "box": [4, 8], "swizzle": "none", "tile": [8, 4]}  # fmt: skip


def _meta(*params) -> dict:
    return {"name": "k", "args": ["x"], "params": list(params)}


@pytest.mark.parametrize(("cols", "stride", "pitch"), [(4, 16, None), (8, 32, None),
                                                       (13, 64, 64), (1, 16, 16)])  # fmt: skip
def test_a_rows_pitch_is_rounded_up_to_16_bytes_only_where_it_is_not_one(cols, stride, pitch):
    (p,) = runtime.plan_launch(_meta(VIEW), [np.zeros((5, cols), np.float32)], 1)
    assert (p.tensor_map.dims, p.tensor_map.strides, p.pitch) == ((cols, 5), (stride,), pitch)


def test_a_padded_tensor_also_read_through_a_pointer_is_refused():
    ptr = {"name": "x_ptr", "kind": "pointer", "arg": "x", "arg_index": 0, "dtype": "f32",
           "shape": [5, 13]}  # fmt: skip
    meta = _meta(VIEW, ptr)
    runtime.plan_launch(meta | {"params": [VIEW, ptr | {"shape": [5, 8]}]},
                        [np.zeros((5, 8), np.float32)], 1)  # fmt: skip
    with pytest.raises(runtime.TensorMapRefused, match=r"E7008: x has shape \(5, 13\)") as e:
        runtime.plan_launch(meta, [np.zeros((5, 13), np.float32)], 1)
    assert "padded to 64 bytes" in str(e.value) and "x_ptr" in str(e.value)


def test_a_dimension_past_s32_coordinates_is_still_refused():
    wide = np.broadcast_to(np.zeros(1, np.float32), (1, 2**31))  # no memory behind it
    with pytest.raises(runtime.TensorMapRefused, match="signed 32-bit coordinates"):
        runtime._whole_map(VIEW, wide)
    assert runtime._whole_map(VIEW, wide[:, : 2**31 - 1]).dims == (2**31 - 1, 1)
