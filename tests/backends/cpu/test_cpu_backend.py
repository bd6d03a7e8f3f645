"""CPU backend end to end: build the hand-written seed kernel, run it natively
through vxc.runtime and from C, and compare with numpy."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from vxc import runtime
from vxc.backends.cpu import BackendError, compile_module, host_target, target_ir
from vxc.ir import parse_module

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "ir" / "data"
SEED = (DATA / "stream.vx.mlir").read_text()
BLOCKING = (DATA / "stream_blocking.vx.mlir").read_text()


def _build(text: str, name: str, tmp: Path) -> runtime.Artifact:
    outputs = compile_module(parse_module(text), name)
    return runtime.load_outputs(outputs, tmp / name)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    return _build(SEED, "stream", tmp_path_factory.mktemp("seed")).stream


@pytest.fixture(scope="module")
def stream_blocking(tmp_path_factory):
    return _build(BLOCKING, "stream_blocking", tmp_path_factory.mktemp("blk")).stream_blocking


def _exact_inputs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # Multiples of 1/8 in [-1, 1): every product and partial sum is exact in f32,
    # so any indexing or aliasing mistake shows as a mismatch, not rounding.
    rng = np.random.default_rng(seed)
    tiles = (rng.integers(-8, 8, size=(n, 128, 128)) / 8).astype(np.float32)
    w = (rng.integers(-8, 8, size=(128, 128)) / 8).astype(np.float32)
    return tiles, w


def _reference(tiles: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.einsum("nij,jk->ik", tiles.astype(np.float64), w.astype(np.float64))


@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_stream_matches_numpy(stream, n):
    tiles, w = _exact_inputs(n, seed=n)
    out = stream(tiles, w)
    assert out.shape == (128, 128) and out.dtype == np.float32
    np.testing.assert_allclose(out, _reference(tiles, w), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_stream_random_floats(stream, n):
    rng = np.random.default_rng(100 + n)
    tiles = rng.random((n, 128, 128), dtype=np.float32)
    w = rng.random((128, 128), dtype=np.float32)
    np.testing.assert_allclose(stream(tiles, w), _reference(tiles, w), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_blocking_variant_matches_numpy(stream_blocking, n):
    tiles, w = _exact_inputs(n, seed=1000 + n)
    np.testing.assert_allclose(stream_blocking(tiles, w), _reference(tiles, w), rtol=1e-5)


def test_ring_slots_are_honoured(tmp_path):
    # With one slot the prefetch of tile i overwrites tile i-1 before it is
    # consumed; the backend must reproduce exactly that aliasing, which shows
    # the IR's ring layout (not a private buffer per transfer) is what runs.
    one_slot = SEED.replace(
        "slots = 2 : i64, slot_bytes = 65536 : i64, ring = 0",
        "slots = 1 : i64, slot_bytes = 65536 : i64, ring = 0",
    )
    assert one_slot.count("slots = 1 : i64, slot_bytes = 65536 : i64, ring = 0") == 2
    kernel = _build(one_slot, "aliased", tmp_path).stream
    tiles, w = _exact_inputs(4, seed=7)
    expected = _reference(tiles[1:], w) + tiles[3].astype(np.float64) @ w
    np.testing.assert_allclose(kernel(tiles, w), expected, rtol=1e-5)


def test_non_contiguous_input_is_copied(stream):
    tiles, w = _exact_inputs(2, seed=3)
    wt = np.asfortranarray(w)
    np.testing.assert_allclose(stream(tiles, wt), _reference(tiles, w), rtol=1e-5)


def test_runtime_argument_errors(stream):
    tiles, w = _exact_inputs(2, seed=5)
    with pytest.raises(runtime.ArgumentError, match="'w' must have dtype float32, got float64"):
        stream(tiles, w.astype(np.float64))
    with pytest.raises(runtime.ArgumentError, match=r"'tiles' must have shape \(n, 128, 128\)"):
        stream(tiles[:, :64], w)
    with pytest.raises(
        runtime.ArgumentError, match=r"'w' must have shape \(128, 128\), got \(128,\)"
    ):
        stream(tiles, w[0])
    with pytest.raises(runtime.ArgumentError, match="takes 2 argument"):
        stream(tiles, w, w)
    with pytest.raises(runtime.ArgumentError, match="missing argument"):
        stream(tiles)
    with pytest.raises(runtime.ArgumentError, match="must be a numpy array"):
        stream(tiles.tolist(), w)
    np.testing.assert_allclose(stream(w=w, tiles=tiles), _reference(tiles, w), rtol=1e-5)


def test_empty_vec_reports_index_error(stream):
    _, w = _exact_inputs(1, seed=1)
    with pytest.raises(runtime.KernelError, match="VX_ERR_INDEX"):
        stream(np.zeros((0, 128, 128), np.float32), w)


def test_manifest_describes_the_kernel(tmp_path):
    outputs = compile_module(parse_module(SEED), "stream")
    assert sorted(outputs) == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o", "stream.cpu.so"]
    man = json.loads(outputs["stream.cpu.json"])
    assert man["target"] == "cpu" and man["cpu"] == host_target().cpu
    (k,) = man["kernels"]
    assert k["name"] == "stream" and k["topology"] == "TensorCore"
    assert k["params"] == [
        {
            "name": "tiles",
            "kind": "tensor",
            "dtype": "f32",
            "shape": [None, 128, 128],
            "space": "HBM",
            "const": True,
        },
        {
            "name": "w",
            "kind": "tensor",
            "dtype": "f32",
            "shape": [128, 128],
            "space": "HBM",
            "const": True,
        },
    ]
    assert k["results"][0]["shape"] == [128, 128]
    assert outputs["stream.cpu.o"][:4] == b"\x7fELF"


def test_builds_are_deterministic():
    a = compile_module(parse_module(SEED), "stream")
    b = compile_module(parse_module(SEED), "stream")
    assert a == b
    # A fresh interpreter (different hash seed) must produce the same bytes too.
    code = (
        "import sys, hashlib; from vxc.ir import parse_module; from vxc.backends.cpu import compile_module;"
        "o = compile_module(parse_module(sys.stdin.read()), 'stream');"
        "print({k: hashlib.sha256(v).hexdigest() for k, v in sorted(o.items())})"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT / "compiler"))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=SEED,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert proc.stdout.strip() == str(
        {k: hashlib.sha256(v).hexdigest() for k, v in sorted(a.items())}
    )


def test_matmul_is_vectorised():
    ir_text = target_ir(parse_module(SEED))
    assert "<16 x float>" in ir_text or "<8 x float>" in ir_text
    assert "llvm.fmuladd" in ir_text or "llvm.fma" in ir_text


C_MAIN = textwrap.dedent(
    """
    #include <math.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include "stream.cpu.h"

    int main(void) {
      enum { N = 3, D = 128 };
      float *tiles = malloc(sizeof(float) * N * D * D), w[D * D], out[D * D];
      for (int t = 0; t < N; t++)
        for (int i = 0; i < D * D; i++) tiles[t * D * D + i] = (float)((t + 3 * i) % 7 - 3) / 4;
      for (int i = 0; i < D * D; i++) w[i] = (float)(i % 5 - 2) / 2;
      int32_t st = stream(tiles, N, w, out);
      if (st != VX_OK) { printf("status %d\\n", st); return 1; }
      for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
          double ref = 0;
          for (int t = 0; t < N; t++)
            for (int k = 0; k < D; k++) ref += (double)tiles[t * D * D + i * D + k] * w[k * D + j];
          if (fabs(ref - out[i * D + j]) > 1e-5 * (1 + fabs(ref))) {
            printf("mismatch at %d,%d: %f vs %f\\n", i, j, out[i * D + j], ref);
            return 1;
          }
        }
      if (stream(tiles, 0, w, out) != VX_ERR_INDEX) { printf("empty vec accepted\\n"); return 1; }
      printf("ok %f\\n", out[0]);
      free(tiles);
      return 0;
    }
    """
)


def test_c_program_links_the_object(tmp_path):
    outputs = compile_module(parse_module(SEED), "stream", shared=False)
    for name, data in outputs.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "main.c").write_text(C_MAIN)
    exe = tmp_path / "main"
    subprocess.run(
        ["cc", "-std=c11", "-O1", "-Wall", "-Werror", "-I", str(tmp_path), str(tmp_path / "main.c"),
         str(tmp_path / "stream.cpu.o"), "-lm", "-o", str(exe)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    proc = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok ")


MM = """module attributes {{vx.target = "cpu"}} {{
  func.func @mm(%a: memref<{m}x{k}xf32, "HBM"> {{vx.name = "a"}}, %b: memref<{k}x{n}xf32, "HBM"> {{vx.name = "b"}}) -> memref<{m}x{n}xf32, "HBM"> attributes {{vx.topology = "TensorCore"}} {{
    %acc = "vx.zeros"() {{space = "HBM", offset = 0 : i64, slots = 1 : i64, slot_bytes = {bytes} : i64, ring = -1 : i64}} : () -> memref<{m}x{n}xf32, "HBM">
    "vx.matmul_acc"(%acc, %a, %b) {{transpose = ""}} : (memref<{m}x{n}xf32, "HBM">, memref<{m}x{k}xf32, "HBM">, memref<{k}x{n}xf32, "HBM">) -> ()
    "vx.matmul_acc"(%acc, %a, %b) {{transpose = ""}} : (memref<{m}x{n}xf32, "HBM">, memref<{m}x{k}xf32, "HBM">, memref<{k}x{n}xf32, "HBM">) -> ()
    return %acc : memref<{m}x{n}xf32, "HBM">
  }}
}}"""


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (13, 40, 7), (17, 33, 5), (8, 32, 64), (24, 96, 3)])
def test_matmul_edges(tmp_path, m, n, k):
    # Shapes that leave row and column remainders around the register tiles.
    kernel = _build(MM.format(m=m, n=n, k=k, bytes=m * n * 4), "mm", tmp_path).mm
    rng = np.random.default_rng(m * 100 + n)
    a = (rng.integers(-8, 8, size=(m, k)) / 8).astype(np.float32)
    b = (rng.integers(-8, 8, size=(k, n)) / 8).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), 2 * (a.astype(np.float64) @ b), rtol=1e-5)


SCALARS = """module attributes {vx.target = "cpu"} {
  func.func @pick(%flag: i1 {vx.name = "flag"}, %x: i64 {vx.name = "x"}, %y: f32 {vx.name = "y"}) -> (i64, f32) {
    %c3 = arith.constant 3 : i64
    %r:2 = scf.if %flag -> (i64, f32) {
      %m = arith.muli %x, %c3 : i64
      %f = arith.addf %y, %y : f32
      scf.yield %m, %f : i64, f32
    } else {
      %s = arith.subi %x, %c3 : i64
      scf.yield %s, %y : i64, f32
    }
    return %r#0, %r#1 : i64, f32
  }
  func.func @twice(%flag: i1 {vx.name = "flag"}, %x: i64 {vx.name = "x"}) -> i64 {
    %y = arith.constant 1.5 : f32
    %a:2 = func.call @pick(%flag, %x, %y) : (i1, i64, f32) -> (i64, f32)
    %b:2 = func.call @pick(%flag, %a#0, %y) : (i1, i64, f32) -> (i64, f32)
    return %b#0 : i64
  }
}"""


def test_scalars_branches_and_calls(tmp_path):
    art = _build(SCALARS, "scalars", tmp_path)
    assert art.pick(True, 5, 2.0) == (15, 4.0)
    assert art.pick(False, 5, 2.0) == (2, 2.0)
    assert art.twice(True, 2) == 18 and art.twice(False, 10) == 4
    with pytest.raises(runtime.ArgumentError, match="'x' must be a i64 scalar"):
        art.pick(True, 1.5, 2.0)


F16_MM = """module attributes {vx.target = "cpu"} {
  func.func @mm16(%acc: memref<4x4xf32, "HBM">, %a: memref<4x4xf16, "HBM">, %b: memref<4x4xf16, "HBM">) {
    "vx.matmul_acc"(%acc, %a, %b) {transpose = ""} : (memref<4x4xf32, "HBM">, memref<4x4xf16, "HBM">, memref<4x4xf16, "HBM">) -> ()
    return
  }
}"""


def test_unsupported_input_is_a_backend_error():
    # Valid vx (the dialect allows any shared operand type), but the CPU has no i8 matmul.
    module = parse_module(F16_MM.replace("xf16", "xi8"))
    with pytest.raises(BackendError, match="matmul_acc supports f32, bf16 and f16"):
        compile_module(module, "mm16")


def test_colliding_c_names_are_rejected():
    text = SEED.replace('{vx.name = "w"}', '{vx.name = "out"}')
    with pytest.raises(BackendError, match=r"\['out'\] collide"):
        compile_module(parse_module(text), "stream")


def test_the_backend_reads_no_target_out_of_the_module():
    """The driver hands the backend its `Target` record; the backend does not read the
    module's `vx.target` (a cpu build of a module marked tpu is the same build; the
    driver, `emit_target`, refuses to hand it one planned for another target)."""
    text = SEED.replace('vx.target = "cpu"', 'vx.target = "tpu"')
    a = compile_module(parse_module(text), "stream", shared=False)
    b = compile_module(parse_module(SEED), "stream", shared=False)
    assert a == b


HALF_MM = """module attributes {vx.target = "cpu"} {
  func.func @mmh(%a: memref<37x70xE, "HBM"> {vx.name = "a"}, %b: memref<70x45xE, "HBM"> {vx.name = "b"}) -> memref<37x45xf32, "HBM"> {
    %acc = "vx.zeros"() {offset = 0 : i64, ring = -1 : i64, slot_bytes = 6660 : i64, slots = 1 : i64, space = "VMEM"} : () -> memref<37x45xf32, "VMEM">
    "vx.matmul_acc"(%acc, %a, %b) {transpose = ""} : (memref<37x45xf32, "VMEM">, memref<37x70xE, "HBM">, memref<70x45xE, "HBM">) -> ()
    "vx.matmul_acc"(%acc, %a, %b) {transpose = ""} : (memref<37x45xf32, "VMEM">, memref<37x70xE, "HBM">, memref<70x45xE, "HBM">) -> ()
    %out = "vx.transfer"(%acc) {capacity = 0 : i64, edge_cost = 1 : i64, from = "VMEM", granule = 0 : i64, offset = 0 : i64, ring = -1 : i64, scope = "device", slot_bytes = 6660 : i64, slots = 1 : i64, space = "HBM", within = ""} : (memref<37x45xf32, "VMEM">) -> memref<37x45xf32, "HBM">
    return %out : memref<37x45xf32, "HBM">
  }
}"""


@pytest.mark.parametrize("elem", ["bf16", "f16"])
def test_half_precision_matmul_widens_to_f32(tmp_path, elem):
    """bf16/f16 operands (odd shapes: micro-kernel edges) accumulate in f32, exactly as
    numpy's f32 matmul of the same values widened."""
    import ml_dtypes

    art = runtime.load_outputs(
        compile_module(parse_module(HALF_MM.replace("xE", "x" + elem)), "mmh"), tmp_path
    )
    dtype = ml_dtypes.bfloat16 if elem == "bf16" else np.float16
    rng = np.random.default_rng(5)
    a = rng.standard_normal((37, 70), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((70, 45), dtype=np.float32).astype(dtype)
    ref = 2 * (a.astype(np.float64) @ b.astype(np.float64))
    out = art.mmh(a, b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    assert (
        art.mmh.launch(a, b, instances=3).tolist() == [out.tolist()] * 3
    )  # no instance() use: same
