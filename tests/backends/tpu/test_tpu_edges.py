"""`edge` views on the tpu (LANGUAGE.md 4.2, docs/TPU.md "Edge views", backends/tpu/edge.py):
kernels/gemm_any.vx builds with `vxc build --target tpu` and libtpu compiles it for v5e and
v6e at ragged shapes (1 row, 3 rows, primes); its Mosaic reads a ragged tile as whole-tile
chunks plus a fill and stores only the output's part; the interpreter lays HBM tensors out
in the tile padding libtpu gives the operands, and a DMA past it fails loudly; what Mosaic
cannot express is refused with E7004."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from tpu_kernels import ROOT, Built

from vxc.backends.tpu.interp import InterpError, run, tile_padded

GEMM_ANY = ROOT / "kernels" / "gemm_any.vx"
# (m, n, k): a 1x1 product, tensors of 2 and 3 rows (padded to 2 and 4), primes.
AOT_SHAPES = [(1, 1, 1), (3, 300, 2), (7, 129, 131), (300, 257, 127)]


@pytest.fixture(scope="module")
def gemm_any(built) -> Built:
    return built(GEMM_ANY)


def test_vxc_build_for_tpu_succeeds_and_the_mosaic_handles_the_edges(tmp_path, capsys):
    """`vxc build --target tpu` (with libtpu's AOT check for v5e and v6e) writes the
    artifact; the Mosaic has the edge handling."""
    from vxc import cli

    argv = ["build", str(GEMM_ANY), "--target", "tpu", "--tpu-aot", "v5e,v6e"]
    rc = cli.main([*argv, "-o", str(tmp_path)])
    assert rc == 0, capsys.readouterr().err
    mosaic = (tmp_path / "gemm_any.tpu.mosaic.mlir").read_text()
    # Four ragged reads (a and b, before and in the K loop) and one ragged store: each a
    # whole-tile DMA when the region is inside, else chunks of 128/64/32/16/8 rows (or
    # all the rows of a short tensor: 2 or 4 for bf16, 1, 2 or 4 for f32) times 128
    # lanes; the waits repeat the tree.
    dmas = 4 * (1 + 5 + 2) + (1 + 5 + 3)
    assert mosaic.count("tpu.enqueue_dma") == dmas == mosaic.count("tpu.wait_dma2")
    for rows in (128, 64, 32, 16, 8, 4, 2):
        assert f"-> memref<{rows}x128xbf16, #tpu.memory_space<any>>" in mosaic
    for rows in (128, 64, 32, 16, 8, 4, 2, 1):
        assert f"-> memref<{rows}x128xf32, #tpu.memory_space<any>>" in mosaic
    # The fill: lanes and rows compared with the inside counts, then a select (bf16 in f32).
    assert mosaic.count("tpu.iota") == 2 * 4
    assert mosaic.count("arith.select") >= 4 and mosaic.count("arith.truncf") >= 4
    assert '"bounds_checks": false' in (tmp_path / "gemm_any.tpu.json").read_text()


@pytest.mark.parametrize("topo", ["v5e", "v6e"])
def test_libtpu_compiles_gemm_any_at_ragged_shapes(gemm_any, topo):
    """libtpu accepts every chunk it keeps once the shapes are known, and lays the
    operands out in the tile padding the interpreter models (`tile_padded`)."""
    from vxc.backends.tpu.aot import compile_export

    dtypes = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}
    for m, n, k in AOT_SHAPES:
        text = compile_export(gemm_any.export, gemm_any.kernel, topo, {"m": m, "n": n, "k": k})
        layouts = re.findall(r"(bf16|f32)\[(\d+),(\d+)\]\{1,0:T\((\d+),128\)", text.as_text())
        assert {(int(r), int(c)) for _, r, c, _ in layouts} >= {(m, k), (k, n), (m, n)}
        for dt, r, c, t in layouts:
            r, c, t = int(r), int(c), int(t)
            assert tile_padded((r, c), dtypes[dt]) == (-(-r // t) * t, -(-c // 128) * 128)


_DMA = """
module {{
  func.func @k(%arg0: i32, %a: memref<{m}x{n}xf32, #tpu.memory_space<any>>,
      %o: memref<{m}x{n}xf32, #tpu.memory_space<any>>, %v: memref<8x128xf32, #tpu.memory_space<vmem>>,
      %sem: memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) attributes {{
      dimension_semantics = [#tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 1>,
      scalar_prefetch = 0 : i64, scratch_operands = 2 : i64, tpu.core_type = #tpu.core_type<tc>,
      window_params = [{{}}, {{}}]}} {{
    %c0 = arith.constant 0 : i32
    %s = tpu.memref_slice %a[%c0, %c0] : memref<{m}x{n}xf32, #tpu.memory_space<any>> -> memref<8x128xf32, #tpu.memory_space<any>>
    tpu.enqueue_dma source(%s : memref<8x128xf32, #tpu.memory_space<any>>) target(%v : memref<8x128xf32, #tpu.memory_space<vmem>>) target_semaphore(%sem : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>)
    tpu.wait_dma2 semaphore(%sem : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) src(%s : memref<8x128xf32, #tpu.memory_space<any>>) dst(%v : memref<8x128xf32, #tpu.memory_space<vmem>>)
    return
  }}
}}
"""


def test_a_dma_reaches_into_the_tile_padding_and_no_further():
    """An (8, 128) tile of a 7 x 100 f32 tensor lies in its padding (8 x 128); of a 3 x 100
    one (padded to 4 rows, as libtpu lays it out) it reaches past it: out of bounds."""
    x = np.ones((7, 100), np.float32)
    run(_DMA.format(m=7, n=100), [x])
    with pytest.raises(
        InterpError, match=r"out of bounds: .* a dimension of 3 \(3 in its tile padding of 4\)"
    ):
        run(_DMA.format(m=3, n=100), [x[:3]])


RAGGED = """
fn f(m: i64, x: &Tensor<f32, [m, 256]>, y: &mut Tensor<f32, [m, 256]>) -> void on Topology::TensorCore
    where m >= 1, instances() == (m + 127) / 128 {
  let r = instance() * 128;
  let t = transfer(edge(x[r .. r + 128, OFF .. OFF + 128], 0.0), Memory::VMEM);
  transfer(t, edge(y[r .. r + 128, 0 .. 128]));
}
"""


@pytest.mark.parametrize(
    "off,message",
    [
        ("1", "offset 1 is not provably a multiple of 128"),
        ("0", None),
    ],
)
def test_an_unaligned_edge_view_is_refused(off, message):
    from vxc import api

    src = api.Source("ragged.vx", RAGGED.replace("OFF", off).encode())
    r = api.build(api.analyze([src]), "tpu")
    if message is None:
        assert r.ok, api.render(r.diagnostics, [src])
        return
    assert not r.ok
    text = api.render(r.diagnostics, [src])
    assert "E7004" in text and message in text
