"""vx -> Mosaic: the module verifies with the tpu dialect registered, the seed-shaped
stream kernel matches its golden text (two tile buffers, two semaphores, the loop),
outputs are byte-identical run to run, and what Mosaic cannot express is a diagnostic."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from tpu_kernels import KERNELS, ROOT, build

from vxc.backends.tpu.context import parse_mosaic

GOLDEN = ROOT / "tests" / "backends" / "tpu" / "golden" / "stream.tpu.mosaic.mlir"
STREAM = ROOT / "kernels" / "stream.vx"


def test_stream_matches_golden_mosaic(built):
    text = built(STREAM).mosaic
    if os.environ.get("VX_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_seed_shape_two_buffers_two_semaphores_one_loop(built):
    text = built(STREAM).mosaic
    sig = re.search(r"func\.func @stream\((.*?)\) attributes", text).group(1)
    assert "memref<2x128x128xf32, #tpu.memory_space<vmem>>" in sig  # the two tile buffers
    assert "memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>" in sig
    assert "memref<2147483647x128x128xf32, #tpu.memory_space<any>>" in sig  # symbolic n
    assert text.count("scf.for") == 1
    loop = text[text.index("scf.for") :]
    body = loop[: loop.index("scf.yield")]
    # In the loop: issue tile i+1's DMA, then wait for tile i, then the matmul.
    assert body.index("tpu.enqueue_dma") < body.index("tpu.wait_dma2") < body.index("tpu.matmul")
    assert "dimension_semantics = [#tpu.dimension_semantics<parallel>]" in text
    assert "iteration_bounds = array<i64: 1>" in text


@pytest.mark.parametrize("path", KERNELS, ids=[p.stem for p in KERNELS])
def test_every_kernel_verifies_with_the_tpu_dialect(path, built):
    b = built(path)
    parse_mosaic(b.mosaic)  # raises unless the Mosaic verifier accepts it
    manifest = json.loads(b.outputs[f"{path.stem}.tpu.json"])
    assert manifest["target"] == "tpu"
    (k,) = manifest["kernels"]
    assert k["custom_call"] == "tpu_custom_call" and k["grid"]["dimension_semantics"] == [
        "parallel"
    ]


def test_stream_manifest_keeps_the_vec_length_symbolic(built):
    manifest = json.loads(built(STREAM).outputs["stream.tpu.json"])
    (k,) = manifest["kernels"]
    assert k["params"][0]["shape"] == ["tiles_len", 128, 128]
    assert k["dimension_variables"] == ["tiles_len"]
    assert k["results"][0]["shape"] == [128, 128]


def test_artifact_bytes_identical_in_process(built):
    again = build(STREAM).outputs
    assert again == built(STREAM).outputs


@pytest.mark.slow
def test_artifact_bytes_identical_across_processes(tmp_path):
    """Two fresh vxc processes build byte-identical artifacts."""
    outs = []
    for i in range(2):
        d = tmp_path / str(i)
        subprocess.run(
            [sys.executable, "-m", "vxc", "build", str(STREAM), "--target", "tpu", "-o", str(d)],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        outs.append({p.name: p.read_bytes() for p in sorted(d.iterdir())})
    assert outs[0] == outs[1]
    assert sorted(outs[0]) == ["stream.tpu.jax_export", "stream.tpu.json", "stream.tpu.mosaic.mlir"]
    assert b"/work/" not in outs[0]["stream.tpu.jax_export"]


def _refused(result, code: str):
    """The one diagnostic of a build the backend refused."""
    assert not result.ok and not result.outputs
    (d,) = result.diagnostics
    assert d.code == code, d
    return d


def test_seed_extern_call_is_a_clear_error():
    d = _refused(build(ROOT / "kernels" / "seed.vx"), "E7002")
    assert (d.span.file, d.span.line) == ("kernels/seed.vx", 10)
    msg = d.message
    assert "call to `matmul_acc`" in msg and "Mosaic" in msg and "extern fn" in msg


SKINNY = """\
fn skinny(x: &Tensor<f32, [262144, 1]>, y: &Tensor<f32, [262144, 1]>) -> Tensor<f32, [262144, 1]> on Topology::TensorCore {
  let xv = transfer(x, Memory::VMEM);
  let yv = transfer(y, Memory::VMEM);
  return transfer(xv, Memory::HBM);
}
"""


def test_tile_off_the_8x128_tiling_that_overflows_vmem_is_a_diagnostic(tmp_path):
    """The vx checker counts 1 MiB per tile; Mosaic pads 262144x1 f32 to (8, 128) tiles,
    128 MiB each (libtpu: "128.0x expansion"). vxc says so before libtpu runs."""
    from vxc import api

    src = api.Source("skinny.vx", SKINNY.encode())
    msg = _refused(api.build(api.analyze([src]), "tpu"), "E7008").message
    assert "`x`" in msg and "262144x1xf32" in msg and "(8, 128) tiles" in msg
    assert "128.00 MiB" in msg and "multiple of 128" in msg


def test_cli_reports_backend_errors_without_traceback(tmp_path, capsys):
    from vxc import cli

    path = tmp_path / "skinny.vx"
    path.write_text(SKINNY)
    rc = cli.main(["build", str(path), "--target", "tpu", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1
    # A coded diagnostic at the op's source line, rendered with it.
    assert err.startswith("error[E7008]: tpu backend:") and f"  --> {path}:2:12\n" in err, err
    assert "Traceback" not in err and "internal compiler error" not in err


def test_target_ir_is_the_mosaic_text(built):
    result = build(STREAM, emit="target-ir")
    assert result.outputs["stream.tpu.mosaic.mlir"].decode() == built(STREAM).mosaic


def test_lowering_rules_are_a_table():
    from vxc.backends.tpu.lower import RULES

    for op in ("vx.transfer", "vx.transfer_async", "vx.wait", "vx.matmul_acc", "scf.for"):
        assert op in RULES


def test_backend_error_names_the_vx_line():
    """A backend error on an op with a source location starts with file:line:col."""
    from vxc.backends.tpu import TpuError, mosaic_kernels
    from vxc.ir import parse_module

    text = (ROOT / "tests" / "backends" / "tpu" / "data" / "mm_f16.vx.mlir").read_text()
    # Place x in SMEM instead of VMEM: the tpu backend puts tiles in VMEM only.
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if line.lstrip().startswith("%0 = "))
    lines[k] = (
        lines[k]
        .replace('space = "VMEM"', 'space = "SMEM"')
        .replace('-> memref<128x128xf16, "VMEM">', '-> memref<128x128xf16, "SMEM">')
    )
    lines = [
        line.replace(
            'memref<128x128xf32, "VMEM">, memref<128x128xf16, "VMEM">,',
            'memref<128x128xf32, "VMEM">, memref<128x128xf16, "SMEM">,',
        )
        for line in lines
    ]
    with pytest.raises(TpuError) as e:
        mosaic_kernels(parse_module("\n".join(lines)))
    assert e.value.code == "E7005" and (e.value.span.file, e.value.span.line) == ("mm_f16.vx", 3)
    assert str(e.value).startswith("mm_f16.vx:3:3: tpu backend: `vx.transfer` into SMEM")


PICKS = """\
fn picks(tiles: &Vec<Tensor<f32, [8, 128]>>) -> Tensor<f32, [8, 128]> on Topology::TensorCore
    where tiles.len() >= 2 {
  let more = tiles.len() > 2;
  let last = (tiles.len() - 1) % 4;
  let v = transfer(tiles[last], Memory::VMEM);
  return transfer(v, Memory::HBM);
}
"""


def test_scalar_ops_with_attributes_are_rebuilt_in_mosaic():
    """Fuzz seeds 13 and 29: a comparison in a kernel (`arith.cmpi`, whose predicate is an
    attribute) crashed the scalar rule (AttributeError: 'str' object has no attribute
    'name') instead of building. The Mosaic module computes the index the .vx says."""
    from vxc import api
    from vxc.backends.tpu.interp import run

    result = api.build(api.analyze([api.Source("picks.vx", PICKS.encode())]), "tpu")
    assert result.ok, result.diagnostics
    mosaic = result.outputs["picks.tpu.mosaic.mlir"].decode()
    tiles = np.arange(6 * 8 * 128, dtype=np.float32).reshape(6, 8, 128)
    out = run(mosaic, [tiles], ["tiles"]).outputs[0]
    np.testing.assert_array_equal(out, tiles[(6 - 1) % 4])
