"""The schedule the tpu lowering emits (docs/TPU.md "Schedule"; issue 22 item 4): a
zero-filled accumulator that only matmul_acc updates in loops lives in vector
registers (no zero-fill stores, the K loop carries it, one store before the DMA that
needs it), f32 operands keep it in VMEM; a blocking transfer of read-only data that the
next loop needs starts before tile 0's DMA and is waited just before that loop."""

from __future__ import annotations

import numpy as np
import pytest
from test_tpu_views import GEMM, _interpret, gemm_inputs
from tpu_kernels import ROOT

GEMM_EPILOGUE = ROOT / "kernels" / "gemm_epilogue.vx"
STREAM = ROOT / "kernels" / "stream.vx"
STREAM_GRID = ROOT / "kernels" / "stream_grid.vx"


def _lines(text: str, *words: str) -> list[int]:
    return [i for i, ln in enumerate(text.splitlines()) if all(w in ln for w in words)]


@pytest.mark.parametrize("path", [GEMM, GEMM_EPILOGUE], ids=["gemm", "gemm_epilogue"])
def test_a_bf16_accumulator_lives_in_registers_across_the_k_loop(built, path):
    text = built(path).mosaic
    (loop,) = _lines(text, "scf.for")
    assert "vector<128x128xf32>" in text.splitlines()[loop]  # the accumulator, carried
    # No zero-fill: nothing is stored before the loop; the matmuls add onto a constant
    # zero (the product alone) and the sum is an `arith.addf` outside the MXU op.
    assert not [i for i in _lines(text, "tpu.vector_store") if i < loop]
    matmuls = _lines(text, "tpu.matmul")
    assert len(matmuls) == 2 and all("%cst" in text.splitlines()[i] for i in matmuls)
    assert all("arith.addf" in text.splitlines()[i + 1] for i in matmuls)
    # gemm stores it once, for the DMA into c; gemm_epilogue's epilogue reads the vector.
    stores = _lines(text, "tpu.vector_store", "vector<128x128xf32>")
    assert len(stores) == (1 if path == GEMM else 0)


def test_an_f32_accumulator_stays_in_vmem(built):
    text = built(STREAM).mosaic
    (loop,) = _lines(text, "scf.for")
    assert "vector<" not in text.splitlines()[loop]
    assert [i for i in _lines(text, "tpu.vector_store") if i < loop]  # the zero-fill


@pytest.mark.parametrize("instances", [0, 2])
def test_w_travels_with_tile_0_and_is_waited_before_the_loop(built, instances):
    path = STREAM if instances == 0 else STREAM_GRID
    b = built(path, instances) if instances else built(path)
    text = b.mosaic
    w = "source(%arg2 :"  # w's HBM operand (tiles are %arg1)
    starts = _lines(text, "tpu.enqueue_dma")
    (loop,) = _lines(text, "scf.for")
    (w_wait,) = _lines(text, "tpu.wait_dma2", "src(%arg2 :")
    assert w in text.splitlines()[starts[0]]  # w first, then tile 0, then w's wait
    assert starts[0] < starts[1] < w_wait < loop
    # On a semaphore of its own: not the blocking transfers' shared one (the first
    # one-semaphore scratch operand), which a blocking wait could take its bytes from.
    lines = text.splitlines()
    sem = lines[starts[0]].split("target_semaphore(")[1].split(" ")[0]
    (squeeze,) = [ln for ln in lines if ln.strip().startswith(sem + " = ")]
    (sliced,) = [ln for ln in lines if ln.strip().startswith(squeeze.split()[3] + " = ")]
    one = "memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>"
    args = [a.split(":")[0].strip() for a in lines[1].split("(", 1)[1].split(", %")]
    ones = ["%" + a.lstrip("%") for a in args if one in lines[1].split(a + ": ")[1][: len(one)]]
    assert len(ones) == 2 and f"tpu.memref_slice {ones[1]}[" in sliced


def test_stream_grid_trace_starts_tile_0_before_w_arrives(built):
    """The interpreter writes a DMA's destination at its wait: tile 0's DMA starts while
    w's is in flight, and every instance still computes its share exactly."""
    from vxc.backends.tpu.interp import run

    b = built(STREAM_GRID, 2)
    rng = np.random.default_rng(0)
    import ml_dtypes

    tiles = (rng.integers(-8, 8, size=(6, 128, 128)) / 8).astype(ml_dtypes.bfloat16)
    w = (rng.integers(-8, 8, size=(128, 128)) / 8).astype(ml_dtypes.bfloat16)
    r = run(b.mosaic, [tiles, w], ["tiles", "w"])
    events = [(e[0], e[1]) for e in r.trace if e[0] in ("dma_start", "dma_wait")]
    first_w_wait = events.index(("dma_wait", "w"))
    assert ("dma_start", "tiles[0]") in events[:first_w_wait]
    (out,) = r.outputs
    t32, w32 = tiles.astype(np.float32), w.astype(np.float32)
    for i in range(2):
        np.testing.assert_array_equal(out[i], sum(t32[j] @ w32 for j in range(3 * i, 3 * i + 3)))


def test_gemm_epilogue_starts_its_bias_dma_after_the_k_loop(built):
    """Measured (docs/PERFORMANCE.md): started before the K loop the bias's DMA costs
    bundles (its addresses live across the loop); after it, none, and it overlaps the
    last K step's waits and matmul, waited before the epilogue's add."""
    text = built(GEMM_EPILOGUE).mosaic.splitlines()
    (start,) = [i for i, ln in enumerate(text) if "tpu.enqueue_dma" in ln and "1x128xf32" in ln]
    (wait,) = [i for i, ln in enumerate(text) if "tpu.wait_dma2" in ln and "1x128xf32" in ln]
    loop_end = max(i for i, ln in enumerate(text) if ln.startswith("    }"))
    matmul = max(i for i, ln in enumerate(text) if "tpu.matmul" in ln)
    add = min(i for i, ln in enumerate(text) if "vector.broadcast" in ln and "1x128xf32" in ln)
    assert loop_end < start < matmul < wait < add


@pytest.mark.slow
@pytest.mark.parametrize("path", [GEMM, GEMM_EPILOGUE], ids=["gemm", "gemm_epilogue"])
def test_libtpu_compiles_the_register_accumulator_for_many_k_steps(built, path):
    """An accumulator carried through the K loop as `tpu.matmul`'s own accumulator
    crashes libtpu 0.0.42.1 for v6e (a stack overflow in MigrateInstructionUsers) once
    the loop runs twice (k >= 384); the matmul onto zero plus an `arith.addf` compiles.
    k = 1024 (7 trips) for both chips, and the compiled module matches numpy."""
    from vxc.backends.tpu.aot import compile_export, specialised_mosaic
    from vxc.backends.tpu.export import shape_value

    b = built(path)
    k = b.kernel
    sizes = {"m": 256, "n": 128, "k": 1024}
    for topo in ("v5e", "v6e"):
        (text,) = specialised_mosaic(compile_export(b.export, k, topo, sizes))
        if path != GEMM:
            continue
        args = gemm_inputs(256, 128, 1024)
        grid = [shape_value(k.grid_expr, sizes)]
        (c,) = _interpret(b, args, text, grid).outputs
        np.testing.assert_array_equal(c, args[0].astype(np.float32) @ args[1].astype(np.float32))
