"""Programs a new user writes that once crashed or were wrongly rejected (issue 8).

Each runs the whole pipeline through `vxc.api` (parse, HIR, checks, and for the cpu a
real build with jaxlib and llvmlite) and asserts the diagnostic or the artifact.
"""

from __future__ import annotations

import pytest

from vxc import api

FINISH_TWICE = """\
fn finish(t: &Tensor<f32, [32, 32]>, acc: &mut Tensor<f32, [32, 32]>) -> void on Topology::TensorCore {
  let x = transfer(t, Memory::VMEM);
  matmul_acc(acc, &x, &x);
}

fn k(a: &Tensor<f32, [32, 32]>) -> void on Topology::TensorCore {
  let mut acc = Tensor<f32>([32, 32]);
  finish(a, &mut acc);
  let v = transfer(a, Memory::VMEM);
  finish(&v, &mut acc);
}
"""


def _check(text: str, target: str) -> api.Checked:
    return api.check([api.Source("t.vx", text.encode())], target)


def _codes(checked: api.Checked) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for d in checked.diagnostics]


@pytest.mark.parametrize("target", ["cpu", "tpu"])
def test_helper_called_from_two_placements_checks(target):
    # One declaration, two placement instances (`finish<HBM, VMEM>`, `finish<VMEM, VMEM>`):
    # each instance has its own HIR, so checking the second does not disturb the first.
    checked = _check(FINISH_TWICE, target)
    assert _codes(checked) == []
    fns = checked.analysis.program.functions
    assert {"finish<HBM, VMEM>", "finish<VMEM, VMEM>"} <= set(fns)
    a, b = fns["finish<HBM, VMEM>"], fns["finish<VMEM, VMEM>"]
    assert a.decl is not b.decl
    assert a.params[0].ty.show() != b.params[0].ty.show()


def test_helper_called_from_two_placements_builds_on_cpu():
    analysis = api.analyze([api.Source("t.vx", FINISH_TWICE.encode())])
    result = api.build(analysis, "cpu", emit="vx-mlir")
    assert result.ok, result.diagnostics
    text = result.outputs["t.cpu.mlir"].decode()
    assert "@finish__HBM_VMEM" in text and "@finish__VMEM_VMEM" in text


SPAWN_SAFE = """\
Memory Near { capacity: 1 MB }
Topology Safe {
  memory: Memory::Near,
  visible: [Memory::Near],
  transfer Memory::CPU_DRAM -> Memory::Near : 10 sync
}
Topology Fast {
  memory: Memory::Near,
  visible: [Memory::Near],
  transfer Memory::CPU_DRAM -> Memory::Near : 1 relaxed
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Safe {
}
fn host(t: &Tensor<f32, [16, 16]>) -> void {
  spawn on(Topology::Safe) {
    let near = transfer(t, Memory::Near);
    consume(&near);
  }
}
"""


@pytest.mark.parametrize("target", ["cpu", "tpu"])
def test_spawn_routes_over_its_topology_everywhere(target):
    # Placement, the seam checker and the lowering all read one plan: the transfer in the
    # `spawn on(Topology::Safe)` block crosses Safe's sync edge, not Fast's cheaper
    # relaxed one (was a false E6004 "crossed the relaxed seam").
    checked = _check(SPAWN_SAFE, target)
    assert _codes(checked) == [("W1027", 10)]  # the relaxed edge is declared, not crossed
    analysis = api.analyze([api.Source("t.vx", SPAWN_SAFE.encode())])
    text = api.build(analysis, target, emit="vx-mlir").outputs[f"t.{target}.mlir"].decode()
    (line,) = [ln for ln in text.splitlines() if "vx.transfer" in ln]
    assert "edge_cost = 10" in line and 'from = "CPU_DRAM"' in line


def test_relaxed_route_in_spawn_is_still_e6004():
    # The same plan, with the block on Fast: the relaxed seam is crossed and reported.
    checked = _check(
        SPAWN_SAFE.replace("spawn on(Topology::Safe)", "spawn on(Topology::Fast)"), "tpu"
    )
    assert ("E6004", 17) in _codes(checked)


SEED_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "seed.cpu.h"

/* The seed's one-argument `matmul_acc` is an `extern fn`: a C symbol the caller links.
   It receives a plain pointer to each tile (staged in VMEM by the kernel). */
static int calls;
static double total;
int32_t matmul_acc(const float *t) {
  calls++;
  for (int i = 0; i < 128 * 128; i++) total += t[i];
  return VX_OK;
}

int main(void) {
  enum { N = 5, D = 128 };
  float *tiles = malloc(sizeof(float) * N * D * D);
  double want = 0;
  for (int i = 0; i < N * D * D; i++) {
    tiles[i] = (float)(i % 9) - 4.0f + (float)(i / (D * D));
    want += tiles[i];
  }
  int32_t st = stream(tiles, N);
  printf("status %d calls %d sum %.1f want %.1f\n", st, calls, total, want);
  free(tiles);
  return st != VX_OK || calls != N || total != want;
}
"""


def test_seed_builds_on_cpu_and_links_its_extern(tmp_path):
    """`vxc build kernels/seed.vx --target cpu` writes an object and a header; a C
    definition of the extern `matmul_acc` links against it and sees every tile."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "vxc", "build", str(root / "kernels" / "seed.vx"),
         "--target", "cpu", "--cpu", "x86-64-v3", "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert {"seed.cpu.o", "seed.cpu.h"} <= {p.name for p in out.iterdir()}
    header = (out / "seed.cpu.h").read_text()
    assert "int32_t matmul_acc(const float *t);" in header
    assert "int32_t stream(const float *tiles, int64_t tiles_dim0);" in header
    (tmp_path / "main.c").write_text(SEED_MAIN)
    exe = tmp_path / "main"
    subprocess.run(
        ["cc", "-std=c11", "-O1", "-Wall", "-Werror", "-I", str(out), str(tmp_path / "main.c"),
         str(out / "seed.cpu.o"), "-o", str(exe)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("status 0 calls 5 ")


EXTERN_VMEM = """\
extern fn consume(t: &Tensor<f32, [32, 32]>) -> void on Topology::TensorCore;

fn k(a: &Tensor<f32, [32, 32]>) -> void on Topology::TensorCore {
  let v = transfer(a, Memory::VMEM);
  consume(&v);
}
"""


@pytest.mark.parametrize("target", ["cpu", "tpu"])
def test_extern_called_with_a_vmem_tile(target):
    checked = _check(EXTERN_VMEM, target)
    assert _codes(checked) == []
    analysis = api.analyze([api.Source("t.vx", EXTERN_VMEM.encode())])
    text = api.build(analysis, target, emit="vx-mlir").outputs[f"t.{target}.mlir"].decode()
    # The extern's parameter is placement-polymorphic: the IR casts the VMEM tile.
    assert "memref.memory_space_cast" in text


def test_extern_called_with_a_vmem_tile_builds_on_cpu():
    analysis = api.analyze([api.Source("t.vx", EXTERN_VMEM.encode())])
    result = api.build(analysis, "cpu", cpu="x86-64-v3")
    assert result.ok, result.diagnostics
    assert "int32_t consume(const float *t);" in result.outputs["t.cpu.h"].decode()
    assert "t.cpu.o" in result.outputs


ENTRY_TOKEN = """\
fn k(a: Tensor<f32, [32, 32]>) -> Token<Tensor<f32, [32, 32]>, Memory::VMEM> on Topology::TensorCore {
  return transfer_async(a, Memory::VMEM);
}
"""


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_kernel_entry_returning_a_token_is_a_check_diagnostic(target):
    # A language rule, so `vxc check` reports it on every target (E0401, with a span),
    # and the build never reaches a backend (was: check exit 0, cpu build exit 2).
    checked = _check(ENTRY_TOKEN, target)
    assert [(d.code, d.span.line, d.span.column) for d in checked.diagnostics] == [("E0401", 1, 35)]
    analysis = api.analyze([api.Source("t.vx", ENTRY_TOKEN.encode())])
    result = api.build(analysis, target, emit="vx-mlir")
    assert not result.ok and result.outputs == {}
