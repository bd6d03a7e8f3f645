"""`vxc.compile` and `vxc.Kernel` (vxc/pyapi.py): the stream kernel and kernels/gemm.vx
compiled in process and run on the cpu against numpy, the tpu kernels in the Mosaic
interpreter and the nvidia kernels in the PTX simulator, coded build errors as
`CompileError`, shape parameters inferred from the arrays, the compile cache, and an
`import vxc` that loads nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc.errors import NotRunnableHere
from vxc.runtime import ArgumentError, LaunchError

ROOT = Path(__file__).resolve().parents[2]
STREAM = ROOT / "kernels" / "stream.vx"
STREAM_GRID = ROOT / "kernels" / "stream_grid.vx"
GEMM = ROOT / "kernels" / "gemm.vx"
GEMMS = [GEMM, ROOT / "kernels" / "gemm_3stage.vx"]
# The kernels every backend builds today, each a sum of tile products: name -> (tile
# shape, w shape, dtype, whether instance k sums only its share of the tiles).
SUMS = {
    "stream": ((128, 128), (128, 128), np.float32, False),
    "stream_blocking": ((128, 128), (128, 128), np.float32, False),
    "stream_triple": ((128, 64), (64, 128), np.float32, False),
    "stream_grid": ((128, 128), (128, 128), ml_dtypes.bfloat16, True),
}
BF16 = ml_dtypes.bfloat16


def _ints(shape, seed, dtype=np.float32):
    """Small integers: every product and sum is exact in f32 (and bf16 inputs are exact)."""
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(dtype)


def _gemm_inputs(m=256, n=384, k=256):
    a = _ints((m, k), 1, BF16)
    b = _ints((k, n), 2, BF16)
    return a, b, np.zeros((m, n), np.float32), a.astype(np.float32) @ b.astype(np.float32)


def test_import_vxc_loads_nothing_else():
    probe = (
        "import sys, time\n"
        "t = time.perf_counter(); import vxc; dt = time.perf_counter() - t\n"
        "heavy = sorted(m for m in sys.modules if m.startswith('vxc.') or m.split('.')[0] in "
        "('numpy', 'jax', 'jaxlib', 'z3', 'lark', 'llvmlite', 'google'))\n"
        "print(dt); print(' '.join(heavy))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[1:] in ([], [""]), f"import vxc loaded {out[1]}"
    assert float(out[0]) < 0.5, f"import vxc took {float(out[0]):.3f} s"
    assert callable(vxc.compile) and "compile" in dir(vxc)


def test_stream_on_the_cpu_matches_numpy():
    k = vxc.compile(STREAM)
    tiles, w = _ints((5, 128, 128), 3), _ints((128, 128), 4)
    np.testing.assert_array_equal(k(tiles, w), tiles.sum(0) @ w)
    np.testing.assert_array_equal(k(tiles=tiles, w=w), tiles.sum(0) @ w)
    stacked = k.launch(tiles, w, instances=3)  # no instance(): every instance sums all
    assert stacked.shape == (3, 128, 128)
    np.testing.assert_array_equal(stacked, np.stack([tiles.sum(0) @ w] * 3))


def test_stream_grid_launch_and_its_where_clause():
    k = vxc.compile(str(STREAM_GRID))
    tiles, w = _ints((4, 128, 128), 5, BF16), _ints((128, 128), 6, BF16)
    parts = k.launch(tiles, w, instances=2)
    t, wf = tiles.astype(np.float32), w.astype(np.float32)
    np.testing.assert_array_equal(parts, np.stack([t[:2].sum(0) @ wf, t[2:].sum(0) @ wf]))
    with pytest.raises(LaunchError, match="VX_ERR_WHERE"):
        k.launch(tiles[:1], w, instances=2)  # more instances than tiles


@pytest.mark.parametrize("path", GEMMS, ids=[p.stem for p in GEMMS])
def test_gemm_on_the_cpu_infers_its_shape_parameters(path):
    g = vxc.compile(path)
    assert g.param_names() == ["m", "n", "k", "a", "b", "c"]
    assert g.shape_params() == ["m", "n", "k"]
    a, b, c, ref = _gemm_inputs()
    assert g.launch(a, b, c, instances=6) is None  # void: c is written in place
    np.testing.assert_array_equal(c, ref)
    c2 = np.zeros_like(c)
    g.launch(a=a, b=b, c=c2, instances=6)
    np.testing.assert_array_equal(c2, ref)
    c3 = np.zeros_like(c)
    g.launch(256, 384, 256, a, b, c3, instances=6)  # given: checked against the arrays
    np.testing.assert_array_equal(c3, ref)
    with pytest.raises(ArgumentError, match="shape parameter 'm' is 128"):
        g.launch(128, 384, 256, a, b, c3, instances=6)
    with pytest.raises(LaunchError, match="VX_ERR_WHERE"):
        g.launch(a, b, c3, instances=5)  # instances() == (m / 128) * (n / 128)


def test_source_text_consts_and_the_cache():
    src = """
fn scaled<const N: i64>(x: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let xv = transfer(x, Memory::VMEM);
  for i in 0..N {
    matmul_acc(&mut acc, &xv, &xv);
  }
  return transfer(acc, Memory::HBM);
}
"""
    three = vxc.compile(src, consts={"N": 3})
    assert vxc.compile(src, consts={"N": 3}) is three  # cached by source and options
    two = vxc.compile(src, consts={"N": 2})
    assert two is not three
    x = _ints((128, 128), 7)
    np.testing.assert_array_equal(three(x), 3 * (x @ x))
    np.testing.assert_array_equal(two(x), 2 * (x @ x))


def test_a_build_error_is_a_compile_error_with_its_codes():
    src = """fn leak(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let t = transfer_async(tiles[0], Memory::VMEM);
}
"""
    with pytest.raises(vxc.CompileError) as e:
        vxc.compile(src, filename="leak.vx")
    assert e.value.codes == ["E6011"]
    assert e.value.diagnostics[0].span.line == 2
    assert "error[E6011]" in str(e.value) and "--> leak.vx:2:7" in str(e.value)


def test_bad_requests_say_what_is_wrong(tmp_path):
    with pytest.raises(TypeError, match="unknown option"):
        vxc.compile(STREAM, tpu_instance=2)
    with pytest.raises(FileNotFoundError):
        vxc.compile(str(tmp_path / "missing.vx"))
    with pytest.raises(vxc.errors.Unsupported, match="unknown target"):
        vxc.compile(STREAM, target="gpu")
    with pytest.raises(TypeError, match="missing"):
        vxc.compile(STREAM, target="tpu", interpret=True)(np.zeros((1, 128, 128), np.float32))


def test_stream_in_the_tpu_interpreter():
    k = vxc.compile(STREAM, target="tpu", interpret=True)
    tiles, w = _ints((3, 128, 128), 8), _ints((128, 128), 9)
    np.testing.assert_array_equal(k(tiles, w), tiles.sum(0) @ w)
    grid = vxc.compile(STREAM_GRID, target="tpu", interpret=True)
    with pytest.raises(ArgumentError, match="'tiles' must have dtype bfloat16"):
        grid(tiles, w)  # the manifest's dtypes are checked as on the cpu
    tiles, w = tiles.astype(BF16), w.astype(BF16)
    parts = grid.launch(tiles[:2], w, instances=2)  # rebuilt for a grid of 2
    t, wf = tiles.astype(np.float32), w.astype(np.float32)
    np.testing.assert_array_equal(parts, np.stack([t[0] @ wf, t[1] @ wf]))


@pytest.mark.parametrize("target", ["b200", "h100"])
def test_stream_in_the_ptx_simulator(target):
    k = vxc.compile(STREAM, target=target, interpret=True)
    tiles, w = _ints((2, 128, 128), 10), _ints((128, 128), 11)
    np.testing.assert_array_equal(k(tiles, w), tiles.sum(0) @ w)
    grid = vxc.compile(STREAM_GRID, target=target, interpret=True)
    parts = grid.launch(tiles.astype(BF16), w.astype(BF16), instances=2)
    np.testing.assert_array_equal(parts, np.stack([tiles[0] @ w, tiles[1] @ w]))
    with pytest.raises(LaunchError, match=r"VX_ERR_WHERE .*instances\(\) <= tiles.len\(\)"):
        grid.launch(tiles[:1].astype(BF16), w.astype(BF16), instances=2)  # the status word


def test_without_the_hardware_a_call_says_how_to_run_here():
    k = vxc.compile(STREAM, target="b200")  # compiles anywhere; running needs a B200
    tiles, w = _ints((1, 128, 128), 12), _ints((128, 128), 13)
    try:
        out = k(tiles, w)
    except NotRunnableHere as e:
        assert "interpret=True" in str(e) and "\n" not in str(e)
        return
    np.testing.assert_array_equal(out, tiles[0] @ w)  # a B200 answered here


def _sum_reference(name: str, tiles, w, instances: int):
    t, w = tiles.astype(np.float64), w.astype(np.float64)
    if not SUMS[name][3]:
        return np.stack([t.sum(0) @ w] * instances)
    per = len(t) // instances
    return np.stack([t[i * per : (i + 1) * per].sum(0) @ w for i in range(instances)])


INTERPRETED = [
    pytest.param(name, target, marks=[pytest.mark.slow] if target != "tpu" else [])
    for target in ("tpu", "b200", "h100")
    for name in SUMS
]


@pytest.mark.parametrize(("name", "target"), INTERPRETED)
def test_every_streaming_kernel_in_the_interpreters(name, target):
    tile, wshape, dtype, _ = SUMS[name]
    k = vxc.compile(ROOT / "kernels" / f"{name}.vx", target=target, interpret=True)
    tiles, w = _ints((4, *tile), 14, dtype), _ints(wshape, 15, dtype)
    out = k.launch(tiles, w, instances=2)
    np.testing.assert_array_equal(out, _sum_reference(name, tiles, w, 2))


@pytest.mark.parametrize(
    ("path", "target"),
    [pytest.param(p, t, id=f"{p.stem}-{t}") for p in GEMMS for t in ("tpu", "b200", "h100")],
)
def test_gemm_in_the_interpreters(path, target):
    g = vxc.compile(path, target=target, interpret=True)
    a, b, c, ref = _gemm_inputs(128, 256, 256)
    g.launch(a, b, c, instances=2)
    np.testing.assert_array_equal(c, ref)


def test_a_launch_the_where_clause_refuses_in_the_tpu_interpreter_is_a_launch_error():
    """gemm's grid comes from its shapes (`instances() == (m / 128) * (n / 128)`): another
    count is refused as the cpu refuses it (this raised a TypeError of its own)."""
    g = vxc.compile(GEMM, target="tpu", interpret=True)
    a, b, c, _ = _gemm_inputs(128, 256, 128)
    with pytest.raises(LaunchError, match=r"VX_ERR_WHERE \(7\).*2 for these shapes; a launch of 3"):
        g.launch(a, b, c, instances=3)
    assert not c.any()


def test_what_is_a_path_and_what_is_source(tmp_path):
    plain = tmp_path / "plain_name"  # a file without the .vx suffix is still a path
    plain.write_bytes(STREAM.read_bytes())
    assert vxc.compile(str(plain)).name == "stream"
    one_line = "fn one() -> i64 on Topology::TensorCore { return 1; }" + " " * 5000
    assert vxc.compile(one_line).name == "one"  # longer than a file name may be
    with pytest.raises(vxc.CompileError) as e:
        vxc.compile("fn broken(")  # one line, no file of that name: source
    assert e.value.codes == ["E0002"] and "input.vx:1:" in str(e.value)
