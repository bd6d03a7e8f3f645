"""The artifact as a JAX user sees it: the README's lines deserialize the export, call it
inside `jax.jit` and lower the caller for platform tpu (as far as a machine without a TPU
goes); the custom call is a `tpu_custom_call` and the Vec length stays symbolic."""

from __future__ import annotations

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
