"""bf16 `matmul_acc` on Intel AMX (vxc/backends/cpu/amx.py, issue 34).

- Everywhere (x86-64 with AVX-512): the kernel's tile program (addresses, strides, the K
  loop, B's pair packing) runs with the tile instructions written out in plain IR by
  their documented semantics (`SoftTiles`, Intel SDM: TILELOADD, TDPBF16PS, TILESTORED)
  and matches numpy, alone and in the whole pipeline (the lowering's sites with the
  permission taken as granted); a target with AMX gets `ldtilecfg`/`tileloadd`/
  `tdpbf16ps`/`tilestored`/`tilerelease` in its object and `amx` among the manifest's
  variants; where the tile state is refused or VX_CPU_VARIANT names another variant,
  that object runs its vector path, says so (`vxc.runtime` and a C program alike), and
  still matches numpy.
- On a host with AMX (skipped elsewhere, with the reason): kernels/gemm.vx,
  kernels/gemm_epilogue.vx and direct matmuls run on AMX, `K__vx_amx()` says so, and the
  answers are numpy's (f64 of the bf16 inputs).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir as ll

from vxc import api, runtime
from vxc.backends.cpu import HostTarget, compile_module, host_target
from vxc.backends.cpu import amx as amx_ll
from vxc.backends.cpu.codegen import data_layout, optimize, target_machine
from vxc.backends.cpu.loops import I64, counted_loop
from vxc.backends.cpu.matmul import AMX_FEATURES, define_pack, has_amx
from vxc.ir import parse_module

ROOT = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16
HOST = host_target()
I1, I8, I16, I32 = ll.IntType(1), ll.IntType(8), ll.IntType(16), ll.IntType(32)
F32, PTR = ll.FloatType(), ll.PointerType()
TILE = 1024  # bytes: 16 rows of 64

# The AMX path is opt-in (VX_CPU_VARIANT=amx) until it has run on AMX hardware: these
# tests run it where the host has AMX and the run opts in (`VX_CPU_VARIANT=amx pytest
# tests/e2e/test_amx.py` on an Intel Sapphire/Emerald Rapids host).
OPTED_IN = os.environ.get("VX_CPU_VARIANT") == "amx"
needs_amx = pytest.mark.skipif(
    not has_amx(HOST.features) or not OPTED_IN,
    reason=f"this host's CPU ({HOST.cpu}) has no AMX-TILE/AMX-BF16: the AMX path cannot run"
    if not has_amx(HOST.features)
    else "the AMX path is opt-in until it has run on AMX hardware: set VX_CPU_VARIANT=amx",
)
needs_avx512 = pytest.mark.skipif(
    "+avx512f" not in HOST.features.split(","),
    reason=f"this host's CPU ({HOST.cpu}) has no AVX-512, which every AMX CPU has",
)


def _c(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


class SoftTiles:
    """The tile instructions' documented semantics in plain IR, over eight tiles of 16 rows
    x 64 bytes in a stack buffer: the kernel's tile program is checked on any host."""

    def __init__(self, module: ll.Module):
        self.module = module
        name, memcpy = "llvm.memcpy.p0.p0.i64", ll.FunctionType(ll.VoidType(), [PTR, PTR, I64, I1])
        self.memcpy = module.globals.get(name) or ll.Function(module, memcpy, name=name)

    def configure(self, b: ll.IRBuilder) -> None:
        buf = b.alloca(ll.ArrayType(I8, 8 * TILE), name="tiles")
        # An opaque pointer (llvmlite types an alloca's; the f32 stores below need untyped).
        self.tiles = b.inttoptr(b.ptrtoint(buf, I64), PTR)

    def _at(self, b: ll.IRBuilder, tile: int, offset: ll.Value) -> ll.Value:
        return b.gep(self.tiles, [b.add(_c(tile * TILE), offset)], inbounds=True, source_etype=I8)

    def _rows(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value, load: bool):
        def row(r: ll.Value, _c0: list) -> list:
            mem = b.gep(ptr, [b.mul(r, stride)], source_etype=I8)
            reg = self._at(b, tile, b.mul(r, _c(64)))
            dst, src = (reg, mem) if load else (mem, reg)
            b.call(self.memcpy, [dst, src, _c(64), ll.Constant(I1, 0)])
            return []

        counted_loop(b, _c(0), _c(16), _c(1), row, name="soft.rows")

    def load(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value) -> None:
        self._rows(b, tile, ptr, stride, load=True)

    def store(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value) -> None:
        self._rows(b, tile, ptr, stride, load=False)

    def _bf16(self, b: ll.IRBuilder, tile: int, offset: ll.Value) -> ll.Value:
        bits = b.load(self._at(b, tile, offset), typ=I16)
        return b.bitcast(b.shl(b.zext(bits, I32), ll.Constant(I32, 16)), F32)

    def dot(self, b: ll.IRBuilder, c: int, a: int, bt: int) -> None:
        """C[m][n] += sum_p A[m][2p] B[p][2n] + A[m][2p+1] B[p][2n+1] (f32 rows of 16)."""

        def element(m: ll.Value, n: ll.Value) -> None:
            at = self._at(b, c, b.add(b.mul(m, _c(64)), b.mul(n, _c(4))))

            def pair(p: ll.Value, acc: list) -> list:
                a_off = b.add(b.mul(m, _c(64)), b.mul(p, _c(4)))
                b_off = b.add(b.mul(p, _c(64)), b.mul(n, _c(4)))
                total = acc[0]
                for half in (0, 2):
                    x = self._bf16(b, a, b.add(a_off, _c(half)))
                    y = self._bf16(b, bt, b.add(b_off, _c(half)))
                    total = b.fadd(total, b.fmul(x, y))
                return [total]

            (total,) = counted_loop(b, _c(0), _c(16), _c(1), pair, [b.load(at, typ=F32)])
            b.store(total, at)

        def rows(m: ll.Value, _c0: list) -> list:
            def cols(n: ll.Value, _c1: list) -> list:
                element(m, n)
                return []

            counted_loop(b, _c(0), _c(16), _c(1), cols, name="soft.n")
            return []

        counted_loop(b, _c(0), _c(16), _c(1), rows, name="soft.m")

    def release(self, b: ll.IRBuilder) -> None:
        """Nothing to give back: the tiles are a stack buffer."""


def _soft_kernel(transposed_b: bool):
    """`run(acc, a, b, scratch, m, n, k)`: pack B (or B^T) into pairs, then the AMX kernel's
    tile program on `SoftTiles`, compiled for this host (MCJIT)."""
    module = ll.Module(name="soft_amx")
    module.triple, module.data_layout = HOST.triple, data_layout(HOST)
    kernel = amx_ll.define_matmul_amx(module, SoftTiles(module), name="soft_amx")
    pack = define_pack(module, transposed_b)
    fn = ll.Function(module, ll.FunctionType(ll.VoidType(), [PTR] * 4 + [I64] * 3), name="run")
    acc, a, bm, scratch, m, n, k = fn.args
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    b.call(pack, [scratch, bm, k, n])
    b.call(kernel, [acc, a, scratch, m, n, k])
    b.ret_void()
    # The engine owns its target machine: a new one, not codegen's shared one.
    machine = llvm.Target.from_triple(HOST.triple).create_target_machine(
        cpu=HOST.cpu, features=HOST.features, opt=3
    )
    engine = llvm.create_mcjit_compiler(optimize(str(module), HOST), machine)
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4, *[ctypes.c_int64] * 3)
    return engine, proto(engine.get_function_address("run"))


def _inputs(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    acc = rng.standard_normal((m, n)).astype(np.float32)  # accumulated onto, not replaced
    return a, b, acc


def _assert_product(got: np.ndarray, acc0: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """f32 accumulation of exact bf16 products against numpy's f64 of the same inputs."""
    want = acc0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    terms = np.abs(acc0) + np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(got - want) <= terms * 2**-18), np.abs(got - want).max()


SHAPES = [(32, 32, 32), (64, 96, 128), (128, 128, 128), (96, 64, 256)]


@pytest.mark.parametrize("transposed_b", [False, True], ids=["b", "bT"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_tile_program_computes_numpys_product(shape, transposed_b):
    m, n, k = shape
    a, b, acc0 = _inputs(m, n, k, seed=m + n + k)
    engine, run = _soft_kernel(transposed_b)
    operand = np.ascontiguousarray(b.T) if transposed_b else b
    acc, scratch = acc0.copy(), np.zeros(k * n, np.uint16)
    run(*(x.ctypes.data for x in (acc, a, operand, scratch)), m, n, k)
    del engine  # the code lives as long as the engine
    _assert_product(acc, acc0, a, b)


def test_the_tile_config_is_palette_1_with_eight_16_by_64_byte_tiles():
    """The `ldtilecfg` operand as the SDM lays it out (SoftTiles does not read it): byte 0
    the palette, bytes 1-15 zero (start_row, reserved), colsb of tiles 0-15 as u16 from
    byte 16, rows as u8 from byte 48; tiles 8-15 unused (zero)."""
    module = ll.Module()
    cfg = bytes(amx_ll._tile_config(module).initializer.constant)
    assert len(cfg) == 64 and cfg[0] == 1 and not any(cfg[1:16])
    colsb = [int.from_bytes(cfg[16 + 2 * t : 18 + 2 * t], "little") for t in range(16)]
    assert colsb == [64] * 8 + [0] * 8
    assert list(cfg[48:64]) == [16] * 8 + [0] * 8


@pytest.mark.parametrize(
    ("m", "n", "k", "fits"),
    [(32, 32, 32, True), (128, 96, 64, True), (48, 32, 32, False), (32, 32, 16, False)],
)
def test_only_whole_blocks_take_the_amx_path(m, n, k, fits):
    assert amx_ll.amx_fits(m, n, k) is fits


def _amx_target() -> HostTarget:
    """This host's target with the AMX units added: what an AMX host of its kind compiles."""
    return HostTarget(HOST.triple, HOST.cpu, HOST.features + "," + ",".join(AMX_FEATURES))


def _vx_module(name: str, text: str | None = None):
    source = api.Source(f"kernels/{name}.vx", text.encode() if text else _kernel_bytes(name))
    result = api.build(api.analyze([source]), "cpu", emit="vx-mlir:after=fold-transpose")
    assert result.ok, api.render(result.diagnostics, [source])
    (mlir,) = result.outputs.values()
    return parse_module(mlir.decode())


def _kernel_bytes(name: str) -> bytes:
    return (ROOT / "kernels" / f"{name}.vx").read_bytes()


def _vector_variant() -> str:
    return "avx512bf16" if "+avx512bf16" in HOST.features.split(",") else "f32"


@needs_avx512
def test_a_target_with_amx_compiles_gemm_to_tile_instructions():
    target = _amx_target()
    out = compile_module(_vx_module("gemm"), "gemm", target=target, link=False)
    assert json.loads(out["gemm.cpu.json"])["variants"] == {"gemm": ["amx", _vector_variant()]}
    assert "int32_t gemm__vx_amx(void);" in out["gemm.cpu.h"].decode()
    from vxc.backends.cpu import lower_to_llvm

    text, _ = lower_to_llvm(_vx_module("gemm"), target)
    asm = target_machine(target).emit_assembly(optimize(text, target))
    for insn in ("ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"):
        assert insn in asm, insn


def _gemm_on_amx_target(tmp_path: Path):
    out = compile_module(_vx_module("gemm"), "gemm", target=_amx_target())
    return runtime.load_outputs(out, tmp_path)


def _run_gemm(kernel, m: int, n: int, k: int) -> None:
    a, b, _ = _inputs(m, n, k, seed=7)
    c = np.zeros((m, n), np.float32)
    kernel.launch(m, n, k, a, b, c, instances=(m // 128) * (n // 128))
    _assert_product(c, np.zeros_like(c), a, b)


@needs_avx512
def test_vx_cpu_variant_keeps_the_vector_path(tmp_path, monkeypatch):
    """VX_CPU_VARIANT=avx512: the object built for AMX runs its vector path, says -1."""
    monkeypatch.setenv("VX_CPU_VARIANT", "avx512")
    art = _gemm_on_amx_target(tmp_path)
    assert art.gemm.variants == ("amx", _vector_variant())
    assert art.gemm.amx == -1
    _run_gemm(art.gemm, 256, 128, 256)


@needs_avx512
@pytest.mark.skipif(
    has_amx(HOST.features), reason="this host has AMX: the OS grants the tile state"
)
def test_a_refused_tile_state_runs_the_vector_path_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("VX_CPU_VARIANT", "amx")  # opted in: the OS is asked, and refuses
    with pytest.warns(RuntimeWarning, match="refused this process the tile state"):
        art = _gemm_on_amx_target(tmp_path)
    assert art.gemm.amx == 0
    _run_gemm(art.gemm, 256, 128, 256)


C_MAIN = r"""
#include <stdio.h>
#include "gemm.cpu.h"
static uint16_t a[128][128], b[128][128];
static float c[128][128];
int main(void) {
  int amx = gemm__vx_amx();
  for (int i = 0; i < 128; i++) {
    b[i][i] = 0x3f80;                                  /* bf16 1.0: B = identity */
    for (int k = 0; k < 128; k++) a[i][k] = 0x3f80 + ((i + k) % 8 << 7); /* 1, 2, 4, .. */
  }
  int s = gemm_launch(1, 0, 128, 128, 128, &a[0][0], 128, 128, &b[0][0], 128, 128, &c[0][0],
                      128, 128);
  double sum = 0;
  for (int i = 0; i < 128; i++)
    for (int j = 0; j < 128; j++) sum += c[i][j];
  printf("%d %d %g %g\n", amx, s, c[3][5], sum);
  return 0;
}
"""


@needs_avx512
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.parametrize("variant", [None, "avx512", "amx"])
def test_the_c_entry_chooses_as_the_runtime_does(tmp_path, variant):
    """A C program over the object built for AMX: `gemm__vx_amx()` (the header's) answers
    1 on an AMX host, 0 where the OS refuses, -1 under VX_CPU_VARIANT; the launch's answer
    is right on each path."""
    out = compile_module(_vx_module("gemm"), "gemm", target=_amx_target(), link=False)
    for name in ("gemm.cpu.o", "gemm.cpu.h"):
        (tmp_path / name).write_bytes(out[name])
    (tmp_path / "main.c").write_text(C_MAIN)
    exe = tmp_path / "main"
    cmd = ["cc", "-O1", "-I", str(tmp_path), str(tmp_path / "main.c"), str(tmp_path / "gemm.cpu.o")]
    subprocess.run([*cmd, "-o", str(exe)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "VX_CPU_VARIANT"}
    if variant:
        env["VX_CPU_VARIANT"] = variant
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True, env=env)
    want_amx = "-1" if variant != "amx" else ("1" if has_amx(HOST.features) else "0")
    if variant == "amx" and has_amx(HOST.features) and not OPTED_IN:
        pytest.skip("the AMX path is opt-in until it has run on AMX hardware")
    # c = a (B is the identity): a[3][5] = 2^((3 + 5) % 8) = 1; each row sums 16 x 255.
    assert got.stdout.split() == [want_amx, "0", "1", str(128 * 16 * 255)]


def _matmul_source(m: int, n: int, k: int, tb: bool) -> str:
    ys, b = ([n, k], "transpose(b)") if tb else ([k, n], "b")
    return (
        f"fn mm(x: &Tensor<bf16, [{m}, {k}]>, y: &Tensor<bf16, {ys}>,"
        f" z: &Tensor<f32, [{m}, {n}]>) -> Tensor<f32, [{m}, {n}]> on Topology::TensorCore {{\n"
        "  let a = transfer(x, Memory::VMEM);\n"
        "  let b = transfer(y, Memory::VMEM);\n"
        "  let mut acc = transfer(z, Memory::ACC);\n"
        f"  matmul_acc(&mut acc, &a, &{b});\n"
        "  return transfer(acc, Memory::HBM);\n"
        "}\n"
    )


def _granted(module: ll.Module) -> ll.Function:
    """An `i1 ()` that answers "granted" without asking: for SoftTiles, which need no OS."""
    name = "__vx_soft_ready"
    if name in module.globals:
        return module.globals[name]
    fn = ll.Function(module, ll.FunctionType(I1, []), name=name)
    fn.linkage = "internal"
    ll.IRBuilder(fn.append_basic_block("entry")).ret(ll.Constant(I1, 1))
    return fn


@pytest.fixture
def soft_amx(monkeypatch):
    """Builds for a target with AMX whose sites run SoftTiles, the permission taken as
    granted: the lowering's AMX sites (the pack into B's scratch, the kernel's arguments,
    the branch on the permission) run in the whole pipeline on a host without AMX."""
    import vxc.backends.cpu.lower as lower

    monkeypatch.setattr(amx_ll, "AmxTiles", SoftTiles)
    monkeypatch.setattr(lower, "define_amx_ready", _granted)
    monkeypatch.setenv("VX_CPU_VARIANT", "avx512")  # K__vx_amx asks nothing: -1, no warning

    def build(name: str, tmp: Path, text: str | None = None):
        out = compile_module(_vx_module(name, text), name, target=_amx_target())
        kernel = getattr(runtime.load_outputs(out, tmp), name)
        assert "amx" in kernel.variants
        return kernel

    return build


@needs_avx512
@pytest.mark.parametrize("tb", [False, True], ids=["b", "bT"])
@pytest.mark.parametrize(
    "shape", [(64, 96, 128), (96, 64, 256)], ids=lambda s: "x".join(map(str, s))
)
def test_the_pipelines_amx_site_computes_numpys_product(tmp_path, soft_amx, shape, tb):
    m, n, k = shape
    kernel = soft_amx("mm", tmp_path, _matmul_source(m, n, k, tb))
    a, b, acc0 = _inputs(m, n, k, seed=5)
    got = kernel(a, np.ascontiguousarray(b.T) if tb else b, acc0)
    _assert_product(got, acc0, a, b)


@needs_avx512
def test_the_pipelines_amx_sites_run_gemm_epilogue(tmp_path, soft_amx):
    from test_tile_kernels import assert_gemm_epilogue, gemm_epilogue_inputs

    kernel = soft_amx("gemm_epilogue", tmp_path)
    m, n, k = 256, 384, 256
    a, b, bias, c = gemm_epilogue_inputs((m, n, k))
    kernel.launch(m, n, k, a, b, bias, c, instances=(m // 128) * (n // 128))
    assert_gemm_epilogue(a, b, bias, c)


# ---- on AMX ----------------------------------------------------------------------------
def _native(name: str, tmp: Path, text: str | None = None):
    source = api.Source(f"kernels/{name}.vx", text.encode() if text else _kernel_bytes(name))
    result = api.build(api.analyze([source]), "cpu")
    assert result.ok, api.render(result.diagnostics, [source])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a refusal is a failure on a host that has AMX
        art = runtime.load_outputs(result.outputs, tmp)
    return getattr(art, name)


def _on_amx(kernel) -> None:
    """The variant actually run, not assumed: the object's own answer."""
    assert "amx" in kernel.variants, kernel.variants
    assert kernel.amx == 1, f"{kernel.name}__vx_amx() = {kernel.amx}"


@needs_amx
@pytest.mark.parametrize("shape", [(128, 128, 128), (256, 384, 512), (512, 256, 128)], ids=str)
def test_gemm_runs_on_amx(tmp_path, monkeypatch, shape):
    monkeypatch.setenv("VX_CPU_VARIANT", "amx")
    kernel = _native("gemm", tmp_path)
    _on_amx(kernel)
    _run_gemm(kernel, *shape)


@needs_amx
def test_gemm_epilogue_runs_on_amx(tmp_path, monkeypatch):
    from test_tile_kernels import assert_gemm_epilogue, gemm_epilogue_inputs

    monkeypatch.setenv("VX_CPU_VARIANT", "amx")
    kernel = _native("gemm_epilogue", tmp_path)
    _on_amx(kernel)
    m, n, k = 256, 384, 256
    a, b, bias, c = gemm_epilogue_inputs((m, n, k))
    kernel.launch(m, n, k, a, b, bias, c, instances=(m // 128) * (n // 128))
    assert_gemm_epilogue(a, b, bias, c)


@needs_amx
@pytest.mark.parametrize("tb", [False, True], ids=["b", "bT"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_a_matmul_runs_on_amx(tmp_path, monkeypatch, shape, tb):
    monkeypatch.setenv("VX_CPU_VARIANT", "amx")
    m, n, k = shape
    kernel = _native("mm", tmp_path, _matmul_source(m, n, k, tb))
    _on_amx(kernel)
    a, b, acc0 = _inputs(m, n, k, seed=3)
    got = kernel(a, np.ascontiguousarray(b.T) if tb else b, acc0)
    _assert_product(got, acc0, a, b)
