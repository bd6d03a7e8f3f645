"""Views, outputs and shape parameters end to end (LANGUAGE.md sections 3 and 4.2):
kernels/gemm.vx and its three-stage variant checked, lowered (views and stores in the
vx dialect), built for the CPU and run through `vxc.runtime` and a C caller against
numpy; outputs are the caller's arrays, written in place, and bad ones are refused."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from vxc import api, cli, runtime
from vxc.backends.cpu import host_target
from vxc.backends.cpu.matmul import blocking_for
from vxc.ir import parse_module, print_module

ROOT = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16
KERNELS = {
    "gemm": ROOT / "kernels" / "gemm.vx",
    "gemm3": ROOT / "kernels" / "gemm_3stage.vx",
    "gemm_async": ROOT / "kernels" / "gemm_async.vx",  # the async store of 4.2
}
SHAPES = [(128, 128, 128), (256, 128, 384), (128, 384, 256), (384, 256, 512), (1024, 1024, 1024)]


def _source(name: str) -> api.Source:
    path = KERNELS[name]
    return api.Source(str(path.relative_to(ROOT)), path.read_bytes())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    arts = {}
    for name in KERNELS:
        result = api.build(api.analyze([_source(name)]), "cpu")
        assert result.ok, api.render(result.diagnostics, [_source(name)])
        out = tmp_path_factory.mktemp(name)
        arts[name] = (runtime.load_outputs(result.outputs, out), out, result.outputs)
    return arts


def _operands(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    return a, b, np.full((m, n), np.nan, np.float32)


def _reference(a, b) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_matches_numpy(built, name, shape):
    m, n, k = shape
    if name == "gemm3" and k < 256:
        pytest.skip("the three-stage kernel needs k >= 256 (its `where` clause)")
    art, _, _ = built[name]
    a, b, c = _operands(m, n, k)
    kernel = getattr(art, name)
    assert kernel.launch(m, n, k, a, b, c, instances=(m // 128) * (n // 128)) is None
    # f32 accumulation of exact bf16 products: within f32 rounding of the f64 product.
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-3 * np.sqrt(k))


def test_shape_parameters_are_inferred_from_the_arrays(built):
    art, _, _ = built["gemm"]
    a, b, c = _operands(256, 128, 128)
    art.gemm.launch(a=a, b=b, c=c, instances=2)
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-2)


def test_a_wrong_shape_parameter_is_refused_before_any_instance_runs(built):
    art, _, _ = built["gemm"]
    a, b, c = _operands(128, 128, 128)
    with pytest.raises(runtime.ArgumentError, match="shape parameter 'm' is 256"):
        art.gemm.launch(256, 128, 128, a, b, c, instances=2)
    assert np.isnan(c).all()  # nothing computed


def test_the_c_launcher_checks_shape_parameters(built):
    """The status of K_launch itself (a C caller has no runtime to check for it)."""
    _, out, _ = built["gemm"]
    lib = ctypes.CDLL(str(out / "gemm.cpu.so"))
    fn = lib.gemm_launch
    fn.restype = ctypes.c_int32
    a, b, c = _operands(128, 128, 128)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p

    def call(m: int) -> int:
        dims = [i64(128), i64(128)]
        return fn(
            i64(1), ctypes.c_int32(1), i64(m), i64(128), i64(128),
            ptr(a.ctypes.data), *dims, ptr(b.ctypes.data), *dims, ptr(c.ctypes.data), *dims,
        )  # fmt: skip

    assert call(256) == 8  # VX_ERR_SHAPE_PARAM: m says 256, a has 128 rows
    assert np.isnan(c).all()
    assert call(128) == 0
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-2)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda c: c.astype(np.float64), "dtype"),
        (lambda c: np.zeros((128, 256), np.float32), "shape parameter 'n'"),
        (lambda c: np.asfortranarray(np.zeros((256, 256), np.float32)[:128, :128]), "C-contig"),
        (lambda c: _read_only(c), "writable"),
        (lambda c: [[0.0]], "numpy array"),
    ],
    ids=["dtype", "shape", "non-contiguous", "read-only", "list"],
)
def test_bad_outputs_are_refused(built, make, why):
    art, _, _ = built["gemm"]
    a, b, c = _operands(128, 128, 128)
    with pytest.raises(runtime.ArgumentError, match=why):
        art.gemm.launch(128, 128, 128, a, b, make(c), instances=1)


def _read_only(c: np.ndarray) -> np.ndarray:
    c.flags.writeable = False
    return c


def test_header_documents_outputs_and_shapes(built):
    _, out, _ = built["gemm"]
    header = (out / "gemm.cpu.h").read_text()
    assert " *   a: bf16[m, k] @ CPU_DRAM\n" in header
    assert "c: f32[m, n] @ CPU_DRAM (output: the caller allocates it" in header
    assert "a_dim0 == m" in header and "(else VX_ERR_SHAPE_PARAM)" in header
    assert "float *c, int64_t c_dim0, int64_t c_dim1" in header  # writable: no const
    assert "const uint16_t *a" in header


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_c_caller_computes_numpys_answer(built, name, tmp_path):
    _, out, _ = built[name]
    stem = KERNELS[name].stem  # the artifact is named after the file, the function after fn
    m, n, k = 256, 384, 256
    a, b, c = _operands(m, n, k, seed=3)
    a.view(np.uint16).tofile(tmp_path / "a.bin")
    b.view(np.uint16).tofile(tmp_path / "b.bin")
    (tmp_path / "main.c").write_text(
        f"""#include <stdio.h>
#include <stdlib.h>
#include "{stem}.cpu.h"
static void *load(const char *path, size_t n) {{
  void *p = malloc(n); FILE *f = fopen(path, "rb");
  if (!f || fread(p, 1, n, f) != n) exit(3);
  fclose(f); return p;
}}
int main(void) {{
  const int64_t m = {m}, n = {n}, k = {k};
  uint16_t *a = load("a.bin", m * k * 2), *b = load("b.bin", k * n * 2);
  float *c = malloc(m * n * sizeof(float)); /* the caller allocates the output */
  int32_t s = {name}_launch((m / 128) * (n / 128), 0, m, n, k, a, m, k, b, k, n, c, m, n);
  if (s != VX_OK) return 10 + s;
  FILE *f = fopen("c.bin", "wb"); fwrite(c, sizeof(float), m * n, f); fclose(f);
  return 0;
}}
"""
    )
    exe = tmp_path / "main"
    subprocess.run(
        ["cc", "-O1", "-I", str(out), str(tmp_path / "main.c"), str(out / f"{stem}.cpu.so"),
         f"-Wl,-rpath,{out}", "-o", str(exe)],
        check=True,
    )  # fmt: skip
    subprocess.run([str(exe)], cwd=tmp_path, check=True)
    got = np.fromfile(tmp_path / "c.bin", np.float32).reshape(m, n)
    np.testing.assert_allclose(got, _reference(a, b), rtol=1e-5, atol=1e-2)


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_views_and_stores_round_trip_in_vx_mlir(target):
    result = api.build(api.analyze([_source("gemm")]), target, emit="vx-mlir")
    assert result.ok
    text = next(iter(result.outputs.values())).decode()
    assert '"vx.view"' in text and '"vx.store"' in text and "proved = 1" in text
    assert "disjoint = 1" in text
    assert print_module(parse_module(text)) == text


def test_const_instantiates_a_generic_entry(tmp_path, capsys):
    src = tmp_path / "scale.vx"
    src.write_text(
        "fn scale<const N: i64>(x: &Tensor<f32, [N, 128]>) -> Tensor<f32, [N, 128]>\n"
        "    on Topology::TensorCore {\n"
        "  let t = transfer(x, Memory::VMEM);\n  return transfer(t, Memory::HBM);\n}\n"
    )
    assert cli.main(["build", "--target", "cpu", "--out", str(tmp_path), str(src)]) == 1
    assert "E0109" in capsys.readouterr().err  # not an empty artifact
    assert not (tmp_path / "scale.cpu.json").exists()
    args = ["build", "--target", "cpu", "--const", "N=64", "--out", str(tmp_path), str(src)]
    assert cli.main(args) == 0
    art = runtime.load(tmp_path / "scale.cpu.json")
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    np.testing.assert_array_equal(art.scale__64(x), x)
    assert cli.main(["check", "--const", "N", str(src)]) == 2
    assert "--const takes NAME=INTEGER, found `N`" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["b200", "h100"])
def test_gemm_builds_for_the_nvidia_targets(target, tmp_path):
    """TMA boxes at the views' coordinates and a TMA store into C (docs/NVIDIA.md; the
    simulator runs it against numpy in tests/backends/nvidia/test_ptxsim.py). The tpu
    builds it too (tests/backends/tpu/test_tpu_views.py): no target refuses gemm now."""
    rc = cli.main(["build", "--target", target, "--out", str(tmp_path), str(KERNELS["gemm"])])
    assert rc == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"gemm.{target}.fatbin",
                                                          f"gemm.{target}.json"]  # fmt: skip


@pytest.mark.skipif(
    shutil.which("objdump") is None or "avx512_bf16" not in Path("/proc/cpuinfo").read_text(),
    reason="needs objdump and a CPU with AVX512_BF16",
)
def test_bf16_matmul_uses_vdpbf16ps_natively_and_widens_on_portable_levels(tmp_path):
    """The native build's bf16 `matmul_acc` is `vdpbf16ps` where the microarchitecture
    table picks it for this host (matmul.BF16_VECTOR_PATH, else the widening);
    x86-64-v4 (no AVX512_BF16) keeps the widening path, and both give numpy's answer
    (test_gemm_matches_numpy runs the native one)."""
    host = host_target()
    dot = blocking_for(host.features, host.cpuid).bf16dot
    counts = {}
    for cpu in ("native", "x86-64-v4"):
        result = api.build(api.analyze([_source("gemm")]), "cpu", cpu=cpu)
        assert result.ok
        obj = tmp_path / f"{cpu}.o"
        obj.write_bytes(result.outputs["gemm.cpu.o"])
        dis = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True).stdout
        counts[cpu] = dis.count("vdpbf16ps")
        art = runtime.load_outputs(result.outputs, tmp_path / cpu)
        a, b, c = _operands(256, 256, 256, seed=5)
        art.gemm.launch(a=a, b=b, c=c, instances=4)
        np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-2)
    assert (counts["native"] > 0) is dot and counts["x86-64-v4"] == 0, counts


def test_a_view_moved_within_its_space_is_stored_as_it_is(tmp_path):
    """`transfer(x[..], Memory::HBM)` on the cpu copies nothing (HBM is the tensor's own
    space), so the store's source is the view itself: stored region to region (the fuzzer
    found this one an AttributeError in the cpu backend)."""
    text = b"""\
fn rows(m: i64, x: &Tensor<f32, [m, 128]>, out: &mut Tensor<f32, [m, 128]>) -> void
    on Topology::TensorCore where m % 128 == 0, instances() == m / 128 {
  let r = instance() * 128;
  let t = transfer(x[r .. r + 64, 64 .. 128], Memory::HBM);
  transfer(t, out[r + 64 .. r + 128, 0 .. 64]);
}
"""
    src = api.Source("rows.vx", text)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    art = runtime.load_outputs(result.outputs, tmp_path)
    x = np.arange(3 * 128 * 128, dtype=np.float32).reshape(3 * 128, 128)
    out = np.zeros_like(x)
    art.rows.launch(3 * 128, x, out, instances=3)
    want = np.zeros_like(x)
    for p in range(3):
        want[p * 128 + 64 : p * 128 + 128, 0:64] = x[p * 128 : p * 128 + 64, 64:128]
    np.testing.assert_array_equal(out, want)


def test_a_view_moved_within_its_space_is_returned_as_it_is(tmp_path):
    """A view moved within its own space and returned is copied into the result (the
    fuzzer found this one an AttributeError too)."""
    text = b"""\
fn tile<const T: i64>(i: i64, x: &Tensor<f32, [1024, 128]>) -> Tensor<f32, [T, 128]>
    on Topology::TensorCore where i >= 0, i < 1024 / T {
  let t = transfer(x[i * T .. (i + 1) * T, 0 .. 128], Memory::HBM);
  return transfer(t, Memory::HBM);
}
fn main(x: &Tensor<f32, [1024, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  return tile::<128>(3, x);
}
"""
    src = api.Source("tile.vx", text)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    art = runtime.load_outputs(result.outputs, tmp_path)
    x = np.arange(1024 * 128, dtype=np.float32).reshape(1024, 128)
    np.testing.assert_array_equal(art.main(x), x[384:512])


def test_a_view_no_transfer_copied_is_refused_where_a_tile_is_needed():
    """Anywhere else (an extern's argument) it would be the view itself: a coded refusal
    at the use, with the fix, not a crash."""
    text = b"""\
extern fn touch(t: &Tensor<f32, [128, 128]>) -> void on Topology::TensorCore;
fn k(x: &Tensor<f32, [256, 128]>) -> void on Topology::TensorCore {
  let t = transfer(x[128 .. 256, 0 .. 128], Memory::HBM);
  touch(&t);
}
"""
    src = api.Source("ext.vx", text)
    analysis = api.analyze([src])
    assert api.check_target(analysis, "cpu").ok
    result = api.build(analysis, "cpu", "target-ir")
    [d] = result.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("E7005", 4, 3)
    assert "Memory::VMEM" in d.help
