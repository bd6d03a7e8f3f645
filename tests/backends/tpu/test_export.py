"""The artifact as a JAX user sees it: the README's lines deserialize the export, call it
inside `jax.jit` and lower the caller for platform tpu (as far as a machine without a TPU
goes); the custom call is a `tpu_custom_call` and the Vec length stays symbolic."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from tpu_kernels import ROOT

STREAM = ROOT / "kernels" / "stream.vx"


def test_readme_snippet_deserializes_and_lowers_for_tpu(built, tmp_path):
    (tmp_path / "stream.tpu.jax_export").write_bytes(built(STREAM).export)
    # -- the README's lines (docs/TPU.md), with n = 8 tiles --
    import jax
    import jax.numpy as jnp
    from jax import export

    exp = export.deserialize(bytearray((tmp_path / "stream.tpu.jax_export").read_bytes()))

    @jax.jit
    def f(tiles, w):
        return exp.call(tiles, w)

    tiles = jax.ShapeDtypeStruct((8, 128, 128), jnp.float32)
    w = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    lowered = f.trace(tiles, w).lower(lowering_platforms=("tpu",))
    # -- end --
    text = lowered.as_text()
    assert "tpu_custom_call" in text
    assert "tensor<8x128x128xf32>" in text
    assert exp.platforms == ("tpu",)
    assert str(exp.in_avals[0].shape[0]) == "tiles_len"
    assert exp.out_avals[0].shape == (128, 128)


def test_export_embeds_the_mosaic_module(built):
    from jax import export

    exp = export.deserialize(bytearray(built(STREAM).export))
    text = exp.mlir_module()
    assert "stablehlo.custom_call @tpu_custom_call" in text
    assert 'kernel_name = "stream"' in text
    # E6011 proved every DMA is waited: libtpu's exit check of the semaphores is off.
    assert r"\22disable_semaphore_checks\22: true" in text


def test_launch_precondition_is_an_export_constraint(built):
    """stream_grid's `where instances() <= tiles.len()`, built for 2 instances, becomes the
    export constraint tiles_len >= 2, a shape assertion in the exported module (checked
    when the caller's shapes are specialised: test_aot compiles it for 1 tile)."""
    from jax import export

    b = built(ROOT / "kernels" / "stream_grid.vx", 2)
    assert b.kernel.constraints == ["tiles_len >= 2"]
    assert b.kernel.preconditions == ["instances() <= tiles.len()"]
    text = export.deserialize(bytearray(b.export)).mlir_module()
    assert "symbolic shape constraint tiles_len >= 2" in text


def _vxc(args: list[str], cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the compiler's own default is under test
    return subprocess.run(
        [sys.executable, "-m", "vxc", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("stem", ["stream", "gemm"])
def test_the_export_does_not_depend_on_how_the_path_is_spelled(tmp_path, stem):
    # Relative from the checkout, absolute from elsewhere: the locations inside the
    # exported Mosaic module carried the spelling (16 bytes differed); gemm's grid-bound
    # wrapper recorded this install's export.py until it was traced in the pseudo file.
    path = ROOT / "kernels" / f"{stem}.vx"
    rel = _vxc(["build", f"kernels/{stem}.vx", "--target", "tpu", "-o", str(tmp_path / "a")], ROOT)
    ab = _vxc(["build", str(path), "--target", "tpu", "-o", str(tmp_path / "b")], tmp_path)
    assert rel.returncode == ab.returncode == 0, rel.stderr + ab.stderr
    for name in (f"{stem}.tpu.jax_export", f"{stem}.tpu.mosaic.mlir", f"{stem}.tpu.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    blob = (tmp_path / "a" / f"{stem}.tpu.jax_export").read_bytes()
    assert str(ROOT).encode() not in blob  # no path of this checkout in the artifact


def test_libtpu_and_xla_print_nothing_on_a_clean_build(tmp_path):
    r = _vxc(
        ["build", str(STREAM), "--target", "tpu", "--tpu-aot", "v5e", "-o", str(tmp_path)], ROOT
    )
    assert r.returncode == 0, r.stderr
    log = [ln for ln in r.stderr.splitlines() if re.match(r"[IWE]\d{4} ", ln)]
    assert not log, "\n".join(log)


def test_cli_aot_build_with_more_instances_than_the_default_length(tmp_path):
    grid = ROOT / "kernels" / "stream_grid.vx"
    args = ["build", str(grid), "--target", "tpu", "--tpu-instances", "5", "--tpu-aot", "v5e"]
    r = _vxc([*args, "-o", str(tmp_path)], ROOT)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "stream_grid.tpu.jax_export").exists()
