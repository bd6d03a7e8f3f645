"""Views, stores and shape parameters on the tpu (LANGUAGE.md 4.2, docs/TPU.md "Views,
stores and the grid"): kernels/gemm.vx and gemm_3stage.vx build, their views are DMAs of
`tpu.memref_slice`s of the HBM operands, `c` (`&mut`) is an output aliasing its input,
the grid is `(m / 128) * (n / 128)` from the `where` clause, and the interpreter matches
numpy exactly at several shapes; an async store (tests/backends/tpu/data/rows.vx) writes
in place; Mosaic's DMA bounds checks are off exactly when every region was proved."""

from __future__ import annotations

import numpy as np
import pytest
from tpu_kernels import ROOT, Built

from vxc.backends.tpu.export import exported, shape_value
from vxc.backends.tpu.interp import InterpError, run

GEMM = ROOT / "kernels" / "gemm.vx"
GEMM3 = ROOT / "kernels" / "gemm_3stage.vx"
ROWS = ROOT / "tests" / "backends" / "tpu" / "data" / "rows.vx"
SHAPES = [(128, 128, 128), (256, 128, 384), (128, 384, 256), (384, 256, 512)]


def gemm_inputs(m: int, n: int, k: int, seed: int = 0) -> list[np.ndarray]:
    """a, b in bf16 (multiples of 1/8 in [-1, 1): every product and partial sum is
    exact in f32, so the kernel's answer is numpy's bit for bit) and c, the output, full
    of a value the kernel must overwrite."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    a = (rng.integers(-8, 8, size=(m, k)) / 8).astype(ml_dtypes.bfloat16)
    b = (rng.integers(-8, 8, size=(k, n)) / 8).astype(ml_dtypes.bfloat16)
    return [a, b, np.full((m, n), 7.0, np.float32)]


def _interpret(b: Built, args: list[np.ndarray], text: str | None = None, grid=None):
    k = b.kernel
    return run(text or b.mosaic, args, [p.name for p in k.inputs], k.aliases, grid)


@pytest.fixture(scope="module")
def gemms(built):
    return {p.stem: built(p) for p in (GEMM, GEMM3)}


def test_gemm_lowers_views_to_slices_of_the_hbm_operands(gemms):
    b = gemms["gemm"]
    k = b.kernel
    assert [p.name for p in k.inputs] == ["a", "b", "c"]  # m, n, k come from the shapes
    assert k.shape_params == ["m", "n", "k"] and k.symbols == ["m", "k", "n"]
    assert [p.name for p in k.outputs] == ["c"] and k.aliases == [(2, 0)]
    assert k.grid_expr == "((m // 128) * (n // 128))" and k.grid_operands == 1
    # Two slices of a: tile 0 (whose size the waits also name) and tile kk; one of c.
    assert b.mosaic.count("tpu.memref_slice %arg1[") == 2
    assert b.mosaic.count("tpu.memref_slice %arg4[") == 1  # c's output operand
    assert "tpu.memref_slice %arg3[" not in b.mosaic  # c is read and written as the output
    manifest = b.outputs["gemm.tpu.json"].decode()
    assert '"aliases": [\n        {\n          "param": 2,\n          "result": 0' in manifest
    assert '"((m // 128) * (n // 128))"' in manifest and '"bounds_checks": false' in manifest


# gemm_3stage's where clause asks k >= 256.
CASES = [("gemm", s) for s in SHAPES] + [("gemm_3stage", s) for s in SHAPES if s[2] >= 256]


@pytest.mark.parametrize(
    "name,shape", CASES, ids=[f"{c}-{'x'.join(map(str, s))}" for c, s in CASES]
)
def test_gemm_matches_numpy_in_the_interpreter(gemms, name, shape):
    m, n, k = shape
    b = gemms[name]
    args = gemm_inputs(m, n, k)
    r = _interpret(b, args)
    (c,) = r.outputs
    np.testing.assert_array_equal(c, args[0].astype(np.float32) @ args[1].astype(np.float32))
    # One instance per 128 x 128 tile of c: the grid the where clause gives.
    instances = [e[1] for e in r.trace if e[0] == "instance"]
    assert instances == list(range((m // 128) * (n // 128)))


def test_gemm_trace_issues_the_next_k_tile_before_the_matmul(gemms):
    r = _interpret(gemms["gemm"], gemm_inputs(128, 128, 384))
    events = [e[0] for e in r.trace]
    # Tile 0 of a and b, then in each K step the next tiles' DMAs before the matmul.
    first = events.index("matmul")
    assert events[:first].count("dma_start") == 4  # tiles 0 and 1 of a and of b


def test_an_async_store_writes_in_place_and_leaves_the_rest(built):
    b = built(ROWS)
    k = b.kernel
    assert k.grid_expr == "(m // 8)" and k.aliases == [(1, 0)] and k.bounds_proved
    x = np.arange(24 * 128, dtype=np.float32).reshape(24, 128)
    y = np.full((24, 128), -1.0, np.float32)
    (out,) = _interpret(b, [x, y]).outputs
    np.testing.assert_array_equal(out, x)
    # The aliased output starts as the caller's array: a region no instance stores keeps
    # its value (a kernel that stores nothing leaves y as it was).
    lines = b.mosaic.splitlines()
    store = [max(i for i, ln in enumerate(lines) if op in ln) for op in ("enqueue", "wait_dma2")]
    assert all("%arg4 : memref<8x128xf32, #tpu.memory_space<vmem>>" in lines[i] for i in store)
    no_store = "\n".join(ln for i, ln in enumerate(lines) if i not in store)
    (kept,) = _interpret(b, [x, y], no_store).outputs
    np.testing.assert_array_equal(kept, y)


def test_a_deleted_store_wait_is_reported(built):
    b = built(ROWS)
    lines = b.mosaic.splitlines()
    k = max(i for i, line in enumerate(lines) if "tpu.wait_dma2" in line)
    text = "\n".join(lines[:k] + lines[k + 1 :])
    with pytest.raises(InterpError, match="semaphore left signalled"):
        _interpret(b, [np.zeros((8, 128), np.float32)] * 2, text)


def _backend_config(kernel) -> str:
    return exported(kernel).mlir_module()


def test_bounds_checks_are_off_exactly_when_every_region_is_proved(built, gemms):
    """gemm: every view and the store carry `proved = 1` (E6041) -> Mosaic's run-time DMA
    bounds checks are off; stream indexes a Vec (no proof in the IR) -> on; and gemm with
    one view's proof removed from its vx module -> on again."""
    from vxc import api
    from vxc.backends.tpu import mosaic_kernels
    from vxc.ir import parse_module, print_module
    from vxc.ir.from_hir import lower_program

    on = "disable_bounds_checks\\22: true"
    assert gemms["gemm"].kernel.bounds_proved and on in _backend_config(gemms["gemm"].kernel)
    stream = built(ROOT / "kernels" / "stream.vx").kernel
    assert not stream.bounds_proved and "disable_bounds_checks" not in _backend_config(stream)
    src = api.Source("kernels/gemm.vx", GEMM.read_bytes())
    checked = api.check_target(api.analyze([src]), "tpu")
    text = print_module(lower_program(checked.analysis.program, checked.plan))
    assert text.count("proved = 1") > 1
    unproved = parse_module(text.replace("proved = 1", "proved = 0", 1))
    (k,) = mosaic_kernels(unproved)
    assert not k.bounds_proved and "disable_bounds_checks" not in _backend_config(k)


@pytest.mark.parametrize("name", ["softmax", "gemm"])
def test_tensor_parameters_stay_in_hbm_where_the_kernel_moves_them(built, name):
    """A tensor parameter lives in HBM and the kernel moves it with its own DMAs. Left to
    choose, XLA copied an operand that fits into VMEM before the call (softmax's x at
    [64, 1024], gemm's A: `copy-start` to memory space S(1)) and libtpu lowered the
    kernel's DMAs of it to vector load/store loops; the export now colours every tensor
    operand and result HBM, so the compiled call takes the arguments as they are."""
    from vxc.backends.tpu.aot import compile_export

    b = built(ROOT / "kernels" / f"{name}.vx")
    sizes = {"m": 64, "n": 1024} if name == "softmax" else {"m": 256, "n": 256, "k": 1024}
    hlo = compile_export(b.export, b.kernel, "v5e", sizes).as_text()
    assert "tpu_custom_call" in hlo
    assert "copy-start" not in hlo and "S(1)" not in hlo, hlo[:2000]


def test_an_override_keeps_a_static_grid(built):
    """`--tpu-instances N` still fixes the grid (iteration_bounds = [N], no leading
    grid operand); the where clause is then an export constraint on the shapes."""
    b = built(GEMM, 2)
    assert "iteration_bounds = array<i64: 2>" in b.mosaic and b.kernel.grid_operands == 0
    assert "instances() == m / 128 * (n / 128)" in b.kernel.preconditions
    assert "floordiv(m, 128) * floordiv(n, 128) == 2" in b.kernel.constraints
    args = gemm_inputs(128, 256, 256)
    (c,) = _interpret(b, args).outputs
    np.testing.assert_array_equal(c, args[0].astype(np.float32) @ args[1].astype(np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("topo", ["v5e", "v6e"])
@pytest.mark.parametrize("path", [GEMM, GEMM3, ROWS], ids=["gemm", "gemm_3stage", "rows"])
def test_libtpu_compiles_and_the_compiled_module_matches_numpy(built, path, topo):
    """libtpu compiles the export for two shapes; the module it specialised (the grid
    bound then a run-time operand, passed as the export passes it) matches numpy."""
    from vxc.backends.tpu.aot import compile_export, lengths_for, specialised_mosaic

    b = built(path)
    k = b.kernel
    for prefer in (4, 300):
        sizes = lengths_for(k, prefer)
        compiled = compile_export(b.export, k, topo, sizes)
        (text,) = specialised_mosaic(compiled)
        assert "2147483647" not in text and "iteration_bounds = array<i64: -92" in text
        grid = [shape_value(k.grid_expr, sizes)]
        if path == ROWS:
            x = np.arange(sizes["m"] * 128, dtype=np.float32).reshape(-1, 128)
            (out,) = _interpret(b, [x, np.zeros_like(x)], text, grid).outputs
            np.testing.assert_array_equal(out, x)
            continue
        args = gemm_inputs(sizes["m"], sizes["n"], sizes["k"])
        (c,) = _interpret(b, args, text, grid).outputs
        np.testing.assert_array_equal(c, args[0].astype(np.float32) @ args[1].astype(np.float32))


def test_a_launch_must_match_the_grid_the_shapes_give(gemms, tmp_path):
    """`art.gemm.launch(N, a, b, c)`: N must be (m / 128) * (n / 128) for these shapes, as
    on the cpu; the right count goes on to the call (which needs a TPU: NoTpu here)."""
    from vxc import runtime
    from vxc.backends.tpu.runtime import NoTpu

    art = runtime.load_outputs(gemms["gemm"].outputs, tmp_path)
    args = gemm_inputs(256, 384, 128)
    with pytest.raises(ValueError, match=r"runs \(\(m // 128\) \* \(n // 128\)\) = 6 instances"):
        art.gemm.launch(*args, instances=5)
    with pytest.raises(NoTpu):
        art.gemm.launch(*args, instances=6)


def _lowered(b: Built, m: int, n: int, k: int) -> str:
    import jax
    import jax.numpy as jnp
    from jax import export

    exp = export.deserialize(bytearray(b.export))
    specs = [jax.ShapeDtypeStruct(s, jnp.dtype(d)) for s, d in
             (((m, k), "bfloat16"), ((k, n), "bfloat16"), ((m, n), "float32"))]  # fmt: skip
    return jax.jit(exp.call).trace(*specs).lower(lowering_platforms=("tpu",)).as_text()


def test_the_export_checks_the_where_clauses_the_proofs_assume(gemms, built):
    """gemm's `m % 128 == 0, ...` are `mod(m, 128) == 0` constraints of the export (the
    override's grid clause one more): jax.export asserts them at every call, so the
    bounds proofs' assumptions are checked before Mosaic's own checks are dropped."""
    k = gemms["gemm"].kernel
    assert k.constraints[:3] == ["mod(m, 128) == 0", "mod(n, 128) == 0", "mod(k, 128) == 0"]
    assert k.bounds_proved
    text = _lowered(gemms["gemm"], 256, 128, 384)
    for d in "mnk":
        assert f"symbolic shape constraint 128*floordiv({d}, 128) == {d}" in text
    override = _lowered(built(GEMM, 2), 128, 256, 256)
    assert "constraint floordiv(m, 128) * floordiv(n, 128) == 2" in override


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(200, 128, 128), (128, 128, 64)])
def test_a_call_the_where_clause_forbids_does_not_compile(gemms, shape):
    from vxc.backends.tpu.aot import compile_export

    m, n, k = shape
    with pytest.raises(ValueError, match="Error refining shapes"):
        compile_export(gemms["gemm"].export, gemms["gemm"].kernel, "v5e", {"m": m, "n": n, "k": k})
