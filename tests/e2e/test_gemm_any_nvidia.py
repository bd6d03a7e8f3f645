"""kernels/gemm_any.vx on b200 and h100: C = A @ B for any m, n, k >= 1 through `edge`
views (LANGUAGE.md 4.2), which the NVIDIA backends lower to TMA boxes over each tensor's
real dims, so the tensor map zero-fills the boxes' elements past A's and B's ends and
clips C's stores. ptxas (the wheels' real tool) must accept it for sm_90a and sm_100a;
the PTX simulator (backends/nvidia/ptxsim.py, which places guard bytes after every
tensor) runs it against numpy on ragged shapes, prime ones included: a row pitch that is
not a multiple of 16 bytes (which a tensor map's stride must be) is padded by the
launcher, whose padding columns the simulator fills with guard bytes too."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from vxc import api
from vxc.backends.nvidia import ptx_text, ptxsim, runtime, toolchain
from vxc.backends.nvidia.manifest import Manifest
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernels" / "gemm_any.vx"
ARCH = {"h100": "sm_90a", "b200": "sm_100a"}


def _analysis() -> api.Analysis:
    return api.analyze([api.Source(str(SOURCE), SOURCE.read_bytes())])


def _ptx(target: str) -> tuple[str, dict]:
    checked = api.check_target(_analysis(), target)
    _, ptx, kernels = ptx_text(api.backend_module(checked), TARGETS[checked.target])
    return ptx, kernels[0]


def _inputs(m: int, n: int, k: int, seed: int = 0):
    """Small integers: exact in bf16 and in an f32 accumulator, so C must equal numpy's.
    C starts as NaN, so an element no store wrote shows."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    return a, b, np.full((m, n), np.nan, np.float32)


def _run(target: str, m: int, n: int, k: int, seed: int = 0):
    ptx, kern = _ptx(target)
    a, b, c = _inputs(m, n, k, seed)
    instances = -(-m // 128) * -(-n // 128)
    assert ptxsim.run_kernel(ptx, kern, [m, n, k, a, b, c], instances) == []
    return c, a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("target", ARCH)
def test_ptxas_accepts_gemm_any(target):
    result = api.build(_analysis(), target)
    assert result.ok, [d.message for d in result.diagnostics]
    files = result.outputs
    (k,) = Manifest.from_bytes(files[f"gemm_any.{target}.json"]).kernels
    sass = toolchain.sass(files[f"gemm_any.{target}.fatbin"])
    assert toolchain.missing_sass(sass, ARCH[target]) == []
    # Each edge tile is one TMA box per 128-byte column block (A, B) and one TMA store (C):
    # no per-element bounds checks, no scalar global loads.
    assert len(re.findall(r"\bUTMALDG\.2D\b", sass)) == 8
    assert len(re.findall(r"\bUTMASTG\.2D\b", sass)) == 1
    assert not re.search(r"\bLDG\b", sass)
    # The only scalar stores: the status word, one per `where` clause it can fail.
    assert len(re.findall(r"\bSTG\b", sass)) == len(k["requires"]) == 6
    assert 0 < k["registers"] <= 255
    # A zero fill needs no select, so no dims parameters: the tensor maps' dims do it all.
    assert [p["name"] for p in k["params"]] == [
        "m", "n", "k", "a_tmap", "b_tmap_mn", "c_tmap_rm", "vx_status",
    ]  # fmt: skip


def _plans(monkeypatch) -> list:
    """Each launch plan (runtime.plan_launch's) the simulator is given, as it is run."""
    plans, plan = [], runtime.plan_launch

    def spy(*args):
        plans.append(plan(*args))
        return plans[-1]

    monkeypatch.setattr(runtime, "plan_launch", spy)
    return plans


def _layouts(plan) -> dict:
    """tensor map -> (its stride, the device pitch the launcher lays the rows out at)."""
    return {p.name: (p.tensor_map.strides[0], p.pitch) for p in plan if p.tensor_map}


@pytest.mark.parametrize("target", ARCH)
def test_gemm_any_matches_numpy_on_a_ragged_shape(target, monkeypatch):
    # m = 300: a last row tile of 44 rows; n = 200: a last column tile of 72 columns (and
    # B's second 64-column box of it wholly past n); k = 136: a second K tile of 8, whose
    # zero-filled rest must add nothing. Row pitches 272, 400 and 800 bytes, multiples of
    # 16: each tensor uploaded as it is (no pitch of its own), its stride its own rows.
    plans = _plans(monkeypatch)
    c, ref = _run(target, 300, 200, 136, seed=3)
    np.testing.assert_array_equal(c, ref)
    assert _layouts(plans[0]) == {
        "a_tmap": (272, None), "b_tmap_mn": (400, None), "c_tmap_rm": (800, None),
    }  # fmt: skip


def _padded(cols: int, elem: int) -> int:
    return -(-cols * elem // 16) * 16


@pytest.mark.parametrize("target", ARCH)
@pytest.mark.parametrize(("m", "n", "k"), [(7, 13, 5), (131, 127, 257)])
def test_gemm_any_matches_numpy_at_prime_shapes(target, m, n, k, monkeypatch):
    # No row pitch here is a multiple of 16 bytes (A's k x 2, B's n x 2, C's n x 4): each
    # tensor lies on the device at its pitch rounded up, its padding columns guard bytes
    # in the simulator (a kernel reading them as data would sum 0xA5A5 bf16s; writing
    # them fails the run), the maps' dims the real ones.
    plans = _plans(monkeypatch)
    c, ref = _run(target, m, n, k, seed=m)
    np.testing.assert_array_equal(c, ref)
    a, b, cp = _padded(k, 2), _padded(n, 2), _padded(n, 4)
    assert _layouts(plans[0]) == {"a_tmap": (a, a), "b_tmap_mn": (b, b), "c_tmap_rm": (cp, cp)}
    assert (a, b, cp) != (k * 2, n * 2, n * 4) and all(x % 16 == 0 for x in (a, b, cp))


def test_the_padded_layout_is_what_the_maps_stride_reads(monkeypatch):
    # A launcher that encoded the padded stride but uploaded B as it is (rows 26 bytes
    # apart) reads B's rows from the wrong places: the run is no longer numpy's.
    plan = runtime.plan_launch

    def unpadded(*args):
        out = plan(*args)
        for p in out:
            p.pitch = None if p.name == "b_tmap_mn" else p.pitch
        return out

    monkeypatch.setattr(runtime, "plan_launch", unpadded)
    c, ref = _run("h100", 7, 13, 5)
    assert not np.array_equal(c, ref)


def test_the_row_padding_of_the_output_is_never_written(monkeypatch):
    # C is [7, 13] f32, its rows padded from 52 to 64 bytes. With C's map as wide as its
    # padded rows (what a launcher encoding the pitch's dims would do), the clipped store
    # reaches the padding columns, and the run says so; the real map's never does.
    whole = runtime._whole_map

    def wide(p, a):
        tm = whole(p, a)
        if p["arg"] != "c":
            return tm
        cols = tm.strides[0] // tm.elem_bytes
        return type(tm)(tm.dtype, (cols, tm.dims[1]), tm.strides, tm.box, tm.swizzle)

    monkeypatch.setattr(runtime, "_whole_map", wide)
    with pytest.raises(
        ptxsim.SimError, match=r"row padding of c_tmap_rm's tensor \(row 0, \+52 bytes"
    ):
        _run("h100", 7, 13, 5)


@pytest.mark.parametrize("target", ARCH)
def test_nothing_past_the_outputs_end_is_written(target, monkeypatch):
    # C is [130, 8] and its two edge tiles [128, 128] reach 126 rows and 120 columns past
    # it. The simulator keeps guard bytes after C's bytes (as an allocator's neighbour):
    # a store that is not clipped to the tensor map's dims writes them and fails the run.
    c, ref = _run(target, 130, 8, 8)
    np.testing.assert_array_equal(c, ref)

    # The same run with C's tensor map as tall as its tiles (what a launcher that rounded
    # the rows up to the box would encode) does write past C's end, and the run says so.
    whole = runtime._whole_map

    def rounded(p, a):
        tm = whole(p, a)
        if p["arg"] != "c":
            return tm
        rows = -(-tm.dims[1] // tm.box[1]) * tm.box[1]
        return type(tm)(tm.dtype, (tm.dims[0], rows), tm.strides, tm.box, tm.swizzle)

    monkeypatch.setattr(runtime, "_whole_map", rounded)
    with pytest.raises(ptxsim.SimError, match="past the end of c_tmap_rm"):
        _run(target, 130, 8, 8)
