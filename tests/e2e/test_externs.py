"""`extern fn` on the CPU end to end: the generated header's constness follows the
declaration (`&mut` is a plain pointer, `&` and by-value are `const`), so a C definition
written from the header compiles with -Werror; `vxc.runtime.load(..., externs=[lib.so])`
supplies the definitions and the kernels run against numpy."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime

ROOT = Path(__file__).resolve().parents[2]

ACCUMULATE = """\
extern fn add_tile(acc: &mut Tensor<f32, [8, 8]>, t: &Tensor<f32, [8, 8]>) -> void on Topology::TensorCore;
extern fn peek(t: Tensor<f32, [8, 8]>) -> void on Topology::TensorCore;

fn total(tiles: &Vec<Tensor<f32, [8, 8]>>) -> Tensor<f32, [8, 8]> on Topology::TensorCore {
  let mut acc = transfer(tiles[0], Memory::VMEM);
  for i in 1..tiles.len() {
    let t = transfer(tiles[i], Memory::VMEM);
    add_tile(&mut acc, &t);
  }
  peek(transfer(tiles[0], Memory::VMEM));
  return transfer(acc, Memory::HBM);
}
"""

# Written from the header's prototypes: gcc rejects a definition whose qualifiers differ.
ACCUMULATE_C = """\
#include "acc.cpu.h"
static int peeks;
int32_t add_tile(float *acc, const float *t) {
  for (int i = 0; i < 64; i++) acc[i] += t[i];
  return VX_OK;
}
int32_t peek(const float *t) { peeks += t[0] == t[0]; return VX_OK; }
int acc_peeks(void) { return peeks; }
"""

SEED_C = """\
#include "seed.cpu.h"
static double total;
static int calls;
int32_t matmul_acc(const float *t) {
  calls++;
  for (int i = 0; i < 128 * 128; i++) total += t[i];
  return VX_OK;
}
double seed_total(void) { return total; }
int seed_calls(void) { return calls; }
"""


def _build(tmp_path: Path, name: str, text: bytes) -> Path:
    src = api.Source(f"{name}.vx", text)
    result = api.build(api.analyze([src]), "cpu", cpu="x86-64-v3")
    assert result.ok, api.render(result.diagnostics, [src])
    out = tmp_path / name
    out.mkdir()
    for file, data in result.outputs.items():
        (out / file).write_bytes(data)
    return out


def _shared(tmp_path: Path, include: Path, c_text: str, name: str) -> Path:
    (tmp_path / f"{name}.c").write_text(c_text)
    lib = tmp_path / f"lib{name}.so"
    subprocess.run(
        ["cc", "-std=c11", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-I", str(include),
         str(tmp_path / f"{name}.c"), "-o", str(lib)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return lib


def test_header_constness_follows_the_declaration(tmp_path):
    out = _build(tmp_path, "acc", ACCUMULATE.encode())
    header = (out / "acc.cpu.h").read_text()
    assert "int32_t add_tile(float *acc, const float *t);" in header
    assert "int32_t peek(const float *t);" in header
    # A real C definition against the header: conflicting qualifiers would fail here.
    _shared(tmp_path, out, ACCUMULATE_C, "acc")


def test_externs_supply_the_definitions_and_the_kernel_runs(tmp_path):
    out = _build(tmp_path, "acc", ACCUMULATE.encode())
    lib = _shared(tmp_path, out, ACCUMULATE_C, "acc")
    art = runtime.load(out, externs=[lib])
    tiles = np.random.default_rng(0).standard_normal((5, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(art.total(tiles), tiles.sum(axis=0), rtol=1e-6)
    assert art.externs[0].acc_peeks() == 1


def test_seed_runs_with_a_c_matmul_acc(tmp_path):
    """kernels/seed.vx built for the CPU: its one-argument `matmul_acc` is a C function
    in a .so; the kernel hands it every tile (staged in VMEM), in order."""
    out = _build(tmp_path, "seed", (ROOT / "kernels" / "seed.vx").read_bytes())
    lib = _shared(tmp_path, out, SEED_C, "seed")
    art = runtime.load(out / "seed.cpu.json", externs=[str(lib)])
    tiles = np.random.default_rng(1).integers(-4, 5, (6, 128, 128)).astype(np.float32)
    assert art.stream(tiles) is None
    ext = art.externs[0]
    ext.seed_total.restype = ctypes.c_double
    ext.seed_calls.restype = ctypes.c_int
    assert ext.seed_calls() == 6
    assert ext.seed_total() == float(tiles.astype(np.float64).sum())


UNDEFINED = """\
extern fn nowhere_defined(t: &Tensor<f32, [8, 8]>) -> void on Topology::TensorCore;

fn k(a: &Tensor<f32, [8, 8]>) -> void on Topology::TensorCore {
  let v = transfer(a, Memory::VMEM);
  nowhere_defined(&v);
}
"""


def test_missing_externs_are_named(tmp_path):
    # A name no test defines: loaded libraries stay in the process (RTLD_GLOBAL).
    out = _build(tmp_path, "undef", UNDEFINED.encode())
    with pytest.raises(runtime.ArgumentError) as e:
        runtime.load(out)
    assert "calls extern fn(s) nowhere_defined" in str(e.value)
    assert "externs=[path.so" in str(e.value)
    # A library that defines something else: still named, not an `undefined symbol`.
    other = _shared(tmp_path, out, "int unrelated(void) { return 1; }\n", "other")
    with pytest.raises(runtime.ArgumentError) as e:
        runtime.load(out, externs=[other])
    assert f"none of {other} defines them" in str(e.value)
    with pytest.raises(FileNotFoundError, match="extern library"):
        runtime.load(out, externs=[tmp_path / "nope.so"])


def test_a_second_definition_of_an_extern_is_refused(tmp_path):
    """The loader binds an extern to the first global definition: an artifact loaded with
    a different library defining the same name would silently call the first one."""
    out = _build(tmp_path, "acc", ACCUMULATE.encode())
    first = _shared(tmp_path, out, ACCUMULATE_C, "acc")
    second = _shared(tmp_path, out, ACCUMULATE_C.replace("+= t[i]", "-= t[i]"), "acc2")
    code = (
        "import sys, vxc.runtime as r\n"
        "r.load(sys.argv[1], externs=[sys.argv[2]])\n"
        "try:\n    r.load(sys.argv[1], externs=[sys.argv[3]])\n"
        "except r.ArgumentError as e:\n    print(e); sys.exit(3)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(out), str(first), str(second)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert p.returncode == 3, p.stdout + p.stderr
    assert "extern `add_tile` is already defined in this process" in p.stdout


PASS_THROUGH = """\
extern fn fill(t: &mut Tensor<f32, [8, 8]>) -> void on Topology::TensorCore;
extern fn look(t: &Tensor<f32, [8, 8]>) -> void on Topology::TensorCore;

// `fill` writes all of `a`: one instance only (E6042 otherwise)
fn k(a: &mut Tensor<f32, [8, 8]>, b: &Tensor<f32, [8, 8]>) -> void on Topology::TensorCore
    where instances() == 1 {
  fill(a);
  look(b);
}
"""

PASS_THROUGH_C = """\
#include "pass.cpu.h"
int32_t fill(float *t) { for (int i = 0; i < 64; i++) t[i] = (float)i; return VX_OK; }
int32_t look(const float *t) { return t[0] == t[0] ? VX_OK : VX_OK; }
"""

# A C caller hands the kernel a read-only `b`: with -Werror this fails to compile if the
# header dropped its const.
PASS_THROUGH_CALLER = """#include "pass.cpu.h"
static const float weights[64];
int call_k(float *a) { return k(a, weights); }
"""


def test_a_kernel_parameter_passed_to_an_extern_keeps_its_declared_constness(tmp_path):
    """The kernel's own header follows what its externs may write: `b` goes to a `&`
    extern and stays `const`; `a` goes to a `&mut` one and is writable."""
    out = _build(tmp_path, "pass", PASS_THROUGH.encode())
    assert "int32_t k(float *a, const float *b);" in (out / "pass.cpu.h").read_text()
    (tmp_path / "caller.c").write_text(PASS_THROUGH_CALLER)
    subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Werror", "-c", "-I", str(out), str(tmp_path / "caller.c"),
         "-o", str(tmp_path / "caller.o")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    lib = _shared(tmp_path, out, PASS_THROUGH_C, "pass")
    art = runtime.load(out, externs=[lib])
    a = np.zeros((8, 8), np.float32)
    assert art.k(a, np.ones((8, 8), np.float32)) is None
    np.testing.assert_array_equal(a, np.arange(64, dtype=np.float32).reshape(8, 8))
