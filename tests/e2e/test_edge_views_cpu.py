"""`edge` views on the cpu (LANGUAGE.md 4.2, "Ragged edges"): kernels/gemm_any.vx at
ragged and prime shapes against numpy, with nothing written past the end of the output;
a fill that is a run-time scalar, of f32, bf16, i32 and bool tensors, read past the end
in both dimensions; and the edge ops in the vx dialect the cpu lowers."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc import api
from vxc.ir import parse_module, print_module
from vxc.runtime import LaunchError

ROOT = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16
GEMM_ANY = ROOT / "kernels" / "gemm_any.vx"

# 1 and primes on both sides of the 128-element tile, one shape of whole tiles, and the
# spec's upper end (TARGETS.md: "1..2048, primes included").
SHAPES = [
    (1, 1, 1),
    (7, 3, 5),
    (127, 129, 131),
    (300, 200, 257),
    (128, 256, 128),
    (257, 13, 383),
    (2039, 1021, 509),
]


def _tiles(x: int) -> int:
    return (x + 127) // 128


@pytest.fixture(scope="module")
def gemm_any():
    return vxc.compile(GEMM_ANY, target="cpu")


@pytest.mark.parametrize("m,n,k", SHAPES, ids=lambda s: str(s))
def test_gemm_any_matches_numpy_and_writes_nothing_past_the_end(gemm_any, m, n, k):
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a = rng.integers(-3, 4, (m, k)).astype(BF16)
    b = rng.integers(-3, 4, (k, n)).astype(BF16)
    # The output is the head of a larger buffer: a store past its last row would land in
    # the rows after it, which must keep their sentinel.
    backing = np.full((m + 128, n), 7.0, np.float32)
    c = backing[:m]
    gemm_any.launch(m, n, k, a, b, c, instances=_tiles(m) * _tiles(n))
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))
    assert np.all(backing[m:] == 7.0)


def test_gemm_any_refuses_a_launch_of_the_wrong_count(gemm_any):
    a, b = np.ones((300, 5), BF16), np.ones((5, 200), BF16)
    with pytest.raises(LaunchError, match="VX_ERR_WHERE"):
        gemm_any.launch(300, 200, 5, a, b, np.zeros((300, 200), np.float32), instances=4)


PAD = """
fn pad(m: i64, p: i64, fill: {e}, x: &Tensor<{e}, [m, 96]>, out: &mut Tensor<{e}, [p, 128]>)
    -> void on Topology::TensorCore
    where m >= 1, m <= 1048576, p == (m + 127) / 128 * 128, instances() == (m + 127) / 128 {{
  let r = instance() * 128;
  let t = transfer(edge(x[r .. r + 128, 0 .. 128], fill), Memory::VMEM);
  transfer(t, out[r .. r + 128, 0 .. 128]);
}}
"""


@pytest.mark.parametrize(
    "elem,fill", [("f32", -2.5), ("bf16", 3.0), ("i32", -7), ("bool", True)], ids=str
)
@pytest.mark.parametrize("m", [1, 100, 128, 300])
def test_an_edge_view_reads_its_fill_past_the_end_in_both_dimensions(tmp_path, elem, fill, m):
    """96 columns read as 128 and `m` rows as a whole number of tiles: every element past
    either end is the run-time `fill`, every element inside is the tensor's."""
    src = tmp_path / f"pad_{elem}.vx"
    src.write_text(PAD.format(e=elem))
    k = vxc.compile(src, target="cpu")
    dtype = {"f32": np.float32, "bf16": BF16, "i32": np.int32, "bool": np.bool_}[elem]
    x = (np.arange(m * 96).reshape(m, 96) % 5 == 1).astype(dtype)
    p = _tiles(m) * 128
    out = np.zeros((p, 128), dtype)
    k.launch(m, p, fill, x, out, instances=p // 128)
    want = np.full((p, 128), fill, dtype)
    want[:m, :96] = x
    np.testing.assert_array_equal(out, want)


def test_the_edge_ops_round_trip_in_vx_mlir():
    source = api.Source(str(GEMM_ANY.relative_to(ROOT)), GEMM_ANY.read_bytes())
    result = api.build(api.analyze([source]), "cpu", emit="vx-mlir")
    assert result.ok
    text = next(iter(result.outputs.values())).decode()
    # the four reads of A and B are edge views; the one store into C is clipped
    assert text.count('"vx.edge_view"') == 4 and '"vx.view"' not in text
    assert text.count("edge_view = 1 : i64") == 1
    assert print_module(parse_module(text)) == text
