"""kernels/gemm_any.vx on b200 and h100: C = A @ B for any m, n, k >= 1 through `edge`
views (LANGUAGE.md 4.2), which the NVIDIA backends lower to TMA boxes over each tensor's
real dims, so the tensor map zero-fills the boxes' elements past A's and B's ends and
clips C's stores. ptxas (the wheels' real tool) must accept it for sm_90a and sm_100a;
the PTX simulator (backends/nvidia/ptxsim.py, which places guard bytes after every
tensor) runs it against numpy on ragged shapes whose row pitches TMA can encode; a
shape it cannot encode is refused at launch with E7008."""

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


@pytest.mark.parametrize("target", ARCH)
def test_gemm_any_matches_numpy_on_a_ragged_shape(target):
    # m = 300: a last row tile of 44 rows; n = 200: a last column tile of 72 columns (and
    # B's second 64-column box of it wholly past n); k = 136: a second K tile of 8, whose
    # zero-filled rest must add nothing. Row pitches 272, 400 and 800 bytes: TMA's rule.
    c, ref = _run(target, 300, 200, 136, seed=3)
    np.testing.assert_array_equal(c, ref)


def test_a_row_pitch_tma_cannot_encode_is_refused_at_launch():
    # n = 13: B's rows are 26 bytes and C's 52, neither a multiple of 16, which
    # cuTensorMapEncodeTiled's globalStrides must be. Refused before any upload or run.
    ptx, kern = _ptx("h100")
    a, b, c = _inputs(130, 13, 16)
    with pytest.raises(runtime.TensorMapRefused) as e:
        ptxsim.run_kernel(ptx, kern, [130, 13, 16, a, b, c], 2)
    assert e.value.code == "E7008"
    msg = str(e.value)
    assert msg.startswith("E7008: b has shape (16, 13)") and "26 bytes" in msg, msg
    assert "multiple of 16" in msg and "multiple of 8 bf16 elements" in msg, msg
    assert np.isnan(c).all()  # nothing ran


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
