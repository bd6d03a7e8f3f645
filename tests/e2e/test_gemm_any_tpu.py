"""kernels/gemm_any.vx on the tpu in the Mosaic interpreter (backends/tpu/interp.py), against
numpy, at shapes whose every dimension is ragged (primes, 1, 7, 300): the edge tiles read
zeros past the tensors' ends and store only their part of C. The interpreter lays every HBM
tensor out in the tile padding libtpu gives it, its padding NaN (so a fill that missed an
element would show), and refuses any DMA past that padding; the output is a view of a
larger buffer whose other elements must stay untouched; and the module libtpu specialised
(its shape branches folded) computes the same. A non-zero fill reaches the tile."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc import api

BF16 = ml_dtypes.bfloat16
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
GEMM_ANY = ROOT / "kernels" / "gemm_any.vx"
SHAPES = [(1, 1, 1), (7, 7, 7), (127, 129, 131), (131, 7, 257), (300, 257, 129),
          (1, 300, 7), (257, 1, 127), (129, 131, 1)]  # fmt: skip


def _inputs(m: int, n: int, k: int, seed: int = 0):
    """a, b: multiples of 1/8 in [-1, 1) in bf16, so every product and sum is exact in f32."""
    rng = np.random.default_rng(seed)
    a = (rng.integers(-8, 8, size=(m, k)) / 8).astype(BF16)
    b = (rng.integers(-8, 8, size=(k, n)) / 8).astype(BF16)
    return a, b


def _grid(m: int, n: int) -> int:
    return ((m + 127) // 128) * ((n + 127) // 128)


@pytest.fixture(scope="module")
def kernel() -> vxc.Kernel:
    return vxc.compile(GEMM_ANY, target="tpu", interpret=True)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_any_matches_numpy(kernel, shape):
    m, n, k = shape
    a, b = _inputs(m, n, k)
    # C is a view of a larger buffer: the kernel writes C, nothing around it.
    big = np.full((m + 9, n + 130), -3.0, np.float32)
    c = big[3 : 3 + m, 1 : 1 + n]
    kernel.launch(a, b, c, instances=_grid(m, n))
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))
    untouched = np.ones(big.shape, bool)
    untouched[3 : 3 + m, 1 : 1 + n] = False
    assert (big[untouched] == -3.0).all()


@pytest.mark.parametrize(
    "shape", [(3, 300, 2), (129, 131, 257)], ids=lambda s: "x".join(map(str, s))
)
def test_the_module_libtpu_specialised_matches_numpy(shape):
    """libtpu compiles the export for these shapes (v5e); the Mosaic module inside it (the
    placeholders replaced by the shapes, so the short-tensor branches are constants)
    computes numpy's answer in the interpreter."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "backends" / "tpu"))
    from tpu_kernels import Built

    from vxc.backends.tpu.aot import compile_export, specialised_mosaic
    from vxc.backends.tpu.interp import run

    m, n, k = shape
    b = Built(GEMM_ANY)
    (text,) = specialised_mosaic(
        compile_export(b.export, b.kernel, "v5e", {"m": m, "n": n, "k": k})
    )
    assert "2147483647" not in text
    a, bb = _inputs(m, n, k, seed=1)
    c = np.full((m, n), np.nan, np.float32)
    names = [p.name for p in b.kernel.inputs]
    (out,) = run(text, [a, bb, c], names, b.kernel.aliases, [_grid(m, n)]).outputs
    np.testing.assert_array_equal(out, a.astype(np.float32) @ bb.astype(np.float32))


FILL = """
fn pad(m: i64, x: &Tensor<f32, [m, 100]>, y: &mut Tensor<f32, [128, 128]>) -> void on Topology::TensorCore
    where m >= 1, m <= 128, instances() == 1 {
  let t = transfer(edge(x[0 .. 128, 0 .. 128], 5.5), Memory::VMEM);
  transfer(t, y[0 .. 128, 0 .. 128]);
}
"""


@pytest.mark.parametrize("m", [1, 3, 100, 128])
def test_the_fill_is_every_element_outside_the_tensor(m):
    src = api.Source("pad.vx", FILL.encode())
    assert api.build(api.analyze([src]), "tpu").ok
    pad = vxc.compile(FILL, target="tpu", interpret=True, filename="pad.vx")
    x = np.arange(m * 100, dtype=np.float32).reshape(m, 100)
    y = np.full((128, 128), np.nan, np.float32)
    pad.launch(x, y, instances=1)
    want = np.full((128, 128), 5.5, np.float32)
    want[:m, :100] = x
    np.testing.assert_array_equal(y, want)


COPY = """
fn copy(m: i64, n: i64, x: &Tensor<f32, [m, n]>, y: &mut Tensor<f32, [m, n]>) -> void on Topology::TensorCore
    where m >= 1, n >= 1, n <= 128, instances() == (m + 127) / 128 {
  let r = instance() * 128;
  let t = transfer(edge(x[r .. r + 128, 0 .. 128], 0.0), Memory::VMEM);
  let st = transfer_async(t, edge(y[r .. r + 128, 0 .. 128]));
  wait(st);
}
"""


def test_an_async_edge_store_writes_only_the_tensor():
    """A blocking edge read and an async edge store (its chunks waited at the token's
    wait): libtpu compiles it for v5e and v6e, and y, a view of a larger buffer, becomes x
    with nothing around it written."""
    from vxc.backends.tpu import mosaic_kernels
    from vxc.backends.tpu.aot import compile_export

    src = api.Source("copy.vx", COPY.encode())
    r = api.build(api.analyze([src]), "tpu")
    assert r.ok, api.render(r.diagnostics, [src])
    (k,) = mosaic_kernels(api.backend_module(api.check_target(api.analyze([src]), "tpu")))
    for topo in ("v5e", "v6e"):
        for m, n in ((3, 7), (300, 128)):
            compile_export(r.outputs["copy.tpu.jax_export"], k, topo, {"m": m, "n": n})
    copy = vxc.compile(COPY, target="tpu", interpret=True, filename="copy.vx")
    for m, n in ((1, 1), (3, 7), (129, 100), (300, 128)):
        x = np.arange(m * n, dtype=np.float32).reshape(m, n)
        big = np.full((m + 5, 140), -1.0, np.float32)
        y = big[2 : 2 + m, 3 : 3 + n]
        copy.launch(x, y, instances=(m + 127) // 128)
        np.testing.assert_array_equal(y, x)
        untouched = np.ones(big.shape, bool)
        untouched[2 : 2 + m, 3 : 3 + n] = False
        assert (big[untouched] == -1.0).all()
