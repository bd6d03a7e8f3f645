"""`Kernel.to_jax()` on the cpu (vxc/frameworks/jax_ffi.py): the kernels of kernels/ as XLA
FFI custom calls under `jax.jit`, equal to numpy and pure JAX; two of them composed with
jnp ops in one jit; `jax.vmap` in one custom call; `jax.export`; the trace-time checks of
shapes, dtypes and `where` clauses; run-time statuses as XLA errors; and the handler
library built once and reused."""

from __future__ import annotations

import os
import subprocess

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no libtpu probe: the handler is cpu-only

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vxc
from vxc.frameworks import handler, jax_ffi, where
from vxc.runtime import ArgumentError, LaunchError

# XLA raises a custom call's error as JaxRuntimeError, or as ValueError where jax's C++
# dispatch path (a cached jit's later calls) translates the status.
XLA_ERROR = (jax.errors.JaxRuntimeError, ValueError)
ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
T = "Tensor<f32, [128, 128]>"
# Two integer scalars, neither a shape parameter: instance i returns tiles[first + step * i]
# (a Vec index is checked when it runs: VX_ERR_INDEX).
PICK = f"""
fn pick(tiles: &Vec<{T}>, first: i64, step: i64) -> {T} on Topology::TensorCore {{
  let t = transfer(tiles[first + step * instance()], Memory::VMEM);
  return transfer(t, Memory::HBM);
}}
"""


def _ints(shape, seed, dtype=jnp.bfloat16):
    """Small integers: every product and sum below is exact in f32."""
    return jnp.asarray(np.random.default_rng(seed).integers(-3, 4, shape), dtype)


def _f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


@pytest.fixture(scope="module")
def gemm():
    return vxc.compile(KERNELS / "gemm.vx").to_jax()


@pytest.fixture(scope="module")
def softmax():
    return vxc.compile(KERNELS / "softmax.vx").to_jax()


def test_gemm_under_jit_equals_numpy(gemm):
    a, b = _ints((256, 384), 1), _ints((384, 128), 2)
    c = jax.jit(gemm)(a, b)
    assert c.shape == (256, 128) and c.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(c), _f32(a) @ _f32(b))


def test_gemm_aliases_a_given_initial_value_and_donation_works(gemm):
    a, b = _ints((128, 256), 3), _ints((256, 256), 4)
    hlo = jax.jit(gemm).lower(a, b, jnp.ones((128, 256), jnp.float32)).as_text()
    assert "output_operand_alias" in hlo and "operand_index = 2" in hlo
    c = jax.jit(gemm, donate_argnums=2)(a, b, jnp.ones((128, 256), jnp.float32))
    np.testing.assert_array_equal(np.asarray(c), _f32(a) @ _f32(b))


def test_gemm_epilogue_equals_pure_jax():
    f = vxc.compile(KERNELS / "gemm_epilogue.vx").to_jax()
    key = jax.random.split(jax.random.key(0), 3)
    a = jax.random.normal(key[0], (256, 128), jnp.bfloat16)
    b = jax.random.normal(key[1], (128, 256), jnp.bfloat16)
    bias = jax.random.normal(key[2], (1, 256), jnp.float32)
    c = jax.jit(f)(a, b, bias)
    acc = jnp.dot(a, b, preferred_element_type=jnp.float32)
    want = jnp.maximum(acc + bias, 0.0).astype(jnp.bfloat16)
    assert c.dtype == jnp.bfloat16
    np.testing.assert_allclose(_f32(c), _f32(want), rtol=1e-2, atol=1e-2)


def test_softmax_equals_jax_nn_softmax(softmax):
    x = jax.random.normal(jax.random.key(1), (64, 384), jnp.float32) * 4
    y = jax.jit(softmax)(x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(jax.nn.softmax(x, axis=1)), atol=1e-6)


def test_a_jitted_composition_of_two_kernels_and_jnp_ops(gemm, softmax):
    def attention_like(q, k, v):
        scores = gemm(q, k.T) * 0.125  # vxc gemm, then XLA ops around it
        p = softmax(scores - 1.0)  # vxc softmax
        return jnp.dot(p, v.astype(jnp.float32))

    def reference(q, k, v):
        s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * 0.125
        return jnp.dot(jax.nn.softmax(s - 1.0, axis=1), v.astype(jnp.float32))

    q, k, v = _ints((128, 128), 5), _ints((256, 128), 6), _ints((256, 64), 7)
    got = jax.jit(attention_like)(q, k, v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(reference(q, k, v)), atol=1e-4)
    hlo = jax.jit(attention_like).lower(q, k, v).as_text()
    assert hlo.count("stablehlo.custom_call @vxc_") == 2


def test_vmap_is_one_custom_call_and_equals_the_loop(softmax):
    xs = jax.random.normal(jax.random.key(2), (3, 16, 128), jnp.float32)
    ys = jax.jit(jax.vmap(softmax))(xs)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(jax.nn.softmax(xs, axis=-1)), atol=1e-6)
    hlo = jax.jit(jax.vmap(softmax)).lower(xs).as_text()
    assert hlo.count("custom_call @vxc_") == 1 and "while" not in hlo


def test_vmap_reads_an_unbatched_operand_in_place(gemm):
    a, b = _ints((4, 128, 128), 8), _ints((128, 256), 9)
    c = jax.jit(jax.vmap(gemm, in_axes=(0, None)))(a, b)
    np.testing.assert_array_equal(np.asarray(c), np.stack([_f32(x) @ _f32(b) for x in a]))
    hlo = jax.jit(jax.vmap(gemm, in_axes=(0, None))).lower(a, b).as_text()
    assert "tensor<128x256xbf16>" in hlo.split("custom_call")[1].split("->")[0]  # b as is


def test_nested_vmap(softmax):
    xs = jax.random.normal(jax.random.key(3), (2, 3, 8, 128), jnp.float32)
    ys = jax.jit(jax.vmap(jax.vmap(softmax)))(xs)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(jax.nn.softmax(xs, axis=-1)), atol=1e-6)


def test_jax_export_round_trip(gemm):
    a, b = _ints((128, 256), 10), _ints((256, 128), 11)
    checks = [jax.export.DisabledSafetyCheck.custom_call(gemm.target)]
    exported = jax.export.export(jax.jit(gemm), platforms=["cpu"], disabled_checks=checks)(a, b)
    again = jax.export.deserialize(exported.serialize())
    np.testing.assert_array_equal(np.asarray(again.call(a, b)), _f32(a) @ _f32(b))


def test_a_symbolic_shape_is_a_clear_error(softmax):
    (m,) = jax.export.symbolic_shape("m")
    with pytest.raises(ArgumentError, match=r"argument 'x' has symbolic dimension\(s\) \[m\]"):
        jax.export.export(jax.jit(softmax), platforms=["cpu"])(
            jax.ShapeDtypeStruct((m, 128), jnp.float32)
        )


def test_the_same_array_as_input_and_mut_initial_value(softmax):
    """Distinct arguments: XLA copies an operand that another operand also reads before
    it aliases it to a result, so the C entry never sees x overlapping y."""
    x = jax.random.normal(jax.random.key(4), (8, 128), jnp.float32)
    y = jax.jit(lambda x: softmax(x, x))(x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(jax.nn.softmax(x, axis=1)), atol=1e-6)


def test_a_shape_mismatch_is_an_error_at_trace_time(gemm):
    a, b = _ints((256, 384), 1), _ints((256, 128), 2)
    with pytest.raises(ArgumentError, match=r"shape parameter 'k' is 384 from argument 'a'"):
        jax.jit(gemm).trace(a, b)
    with pytest.raises(ArgumentError, match=r"argument 'a' must have dtype bfloat16, got float32"):
        jax.jit(gemm).trace(a.astype(jnp.float32), _ints((384, 128), 2))
    with pytest.raises(ArgumentError, match=r"argument 'b' must have shape \(k, n\), got \(384,\)"):
        jax.jit(gemm).trace(a, jnp.zeros((384,), jnp.bfloat16))


def test_a_where_clause_the_shapes_break_is_an_error_at_trace_time(gemm):
    a, b = _ints((200, 128), 1), _ints((128, 128), 2)
    with pytest.raises(LaunchError, match=r"VX_ERR_WHERE.*m % 128 == 0 is false for m = 200"):
        jax.jit(gemm).trace(a, b)


def test_an_instance_count_the_where_clause_contradicts_is_an_error_at_trace_time():
    f = vxc.compile(KERNELS / "softmax.vx").to_jax(instances=3)
    with pytest.raises(LaunchError, match=r"instances\(\) == m / 8 is false .* instances\(\) = 3"):
        jax.jit(f).trace(jnp.zeros((16, 128), jnp.float32))


def test_a_clause_only_the_run_decides_is_an_xla_error():
    """stream_grid's `instances() <= tiles.len()` is left to the C entry (a call the
    clause parser does not evaluate), whose status XLA raises."""
    f = vxc.compile(KERNELS / "stream_grid.vx").to_jax(instances=5)
    tiles, w = jnp.ones((4, 128, 128), jnp.bfloat16), jnp.ones((128, 128), jnp.bfloat16)
    with pytest.raises(
        XLA_ERROR, match=r"stream_grid.*VX_ERR_WHERE \(7\).*where instances\(\) <= tiles.len\(\)"
    ):
        jax.block_until_ready(jax.jit(f)(tiles, w))


def test_results_are_stacked_over_instances_as_launch_stacks_them():
    k = vxc.compile(KERNELS / "stream_grid.vx")
    tiles, w = _ints((4, 128, 128), 12), _ints((128, 128), 13)
    got = jax.jit(k.to_jax(instances=2))(tiles, w)
    want = k.launch(np.asarray(tiles), np.asarray(w), instances=2)
    assert got.shape == (2, 128, 128)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_a_grid_the_where_clause_does_not_give_needs_instances():
    with pytest.raises(TypeError, match=r"pass to_jax\(instances=N\)"):
        vxc.compile(PICK).to_jax()


def test_scalars_are_operands_traced_or_not_and_batch():
    f = vxc.compile(PICK).to_jax(instances=2)
    tiles = jnp.arange(6 * 128 * 128, dtype=jnp.float32).reshape(6, 128, 128)
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(tiles, 1, 3)), tiles[jnp.array([1, 4])])
    traced = jax.jit(lambda t, first: f(t, first, 1))
    np.testing.assert_array_equal(np.asarray(traced(tiles, jnp.int32(3))), tiles[3:5])
    many = jax.jit(jax.vmap(f, in_axes=(None, 0, None)))(tiles, jnp.arange(3), 2)
    np.testing.assert_array_equal(
        np.asarray(many), np.stack([tiles[jnp.array([i, i + 2])] for i in range(3)])
    )
    with pytest.raises(XLA_ERROR, match=r"pick.*VX_ERR_INDEX"):
        jax.block_until_ready(jax.jit(f)(tiles, 5, 1))


def test_repeated_to_jax_and_calls_reuse_the_handler(gemm, monkeypatch):
    targets = dict(jax_ffi._TARGETS)
    stamp = gemm.library.stat().st_mtime_ns

    def no_build(*args, **kwargs):
        raise AssertionError("the handler was compiled again")

    monkeypatch.setattr(handler.subprocess, "run", no_build)
    again = vxc.compile(KERNELS / "gemm.vx").to_jax()
    assert (again.target, again.library) == (gemm.target, gemm.library)
    a, b = _ints((128, 128), 14), _ints((128, 128), 15)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(jax.jit(again)(a, b)), _f32(a) @ _f32(b))
    assert jax_ffi._TARGETS == targets and gemm.library.stat().st_mtime_ns == stamp


def test_two_builds_of_one_kernel_name_run_their_own_code():
    """Both artifacts' libraries have the soname `pick.cpu.so`: a handler bound to it by
    name would run the first build; each links its own object instead."""
    tiles = jnp.arange(6 * 128 * 128, dtype=jnp.float32).reshape(6, 128, 128)
    for first in (1, 2):
        source = PICK.replace("tiles[first + step * instance()]", f"tiles[{first}]")
        f = vxc.compile(source).to_jax(instances=1)
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(tiles, 0, 0))[0], tiles[first])


# An `extern fn` the kernel calls, defined by a C library the test builds.
DOUBLE = """
extern fn double_it(t: &mut Tensor<f32, [8, 8]>) -> void on Topology::TensorCore;

fn twice(x: &Tensor<f32, [8, 8]>) -> Tensor<f32, [8, 8]> on Topology::TensorCore {
  let mut t = transfer(x, Memory::VMEM);
  double_it(&mut t);
  return transfer(t, Memory::HBM);
}
"""
DOUBLE_C = "#include <stdint.h>\nint32_t double_it(float *t) { for (int i = 0; i < 64; i++) t[i] *= 2; return 0; }\n"


def test_a_kernel_calling_an_extern_fn(tmp_path):
    """The handler links the artifact's object, whose extern calls the loader resolves
    from the externs= library (loaded RTLD_GLOBAL before the handler)."""
    (tmp_path / "double.c").write_text(DOUBLE_C)
    lib = tmp_path / "libdouble.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, tmp_path / "double.c"], check=True)
    f = vxc.compile(DOUBLE, externs=(lib,)).to_jax(instances=1)
    x = jnp.arange(64, dtype=jnp.float32).reshape(8, 8)
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x))[0], np.asarray(x) * 2)


def test_gpu_kernels_say_to_jax_is_not_there_yet():
    k = vxc.compile(KERNELS / "softmax.vx", target="b200")
    with pytest.raises(NotImplementedError, match="a b200 kernel is not supported yet"):
        k.to_jax()


def test_where_clauses_evaluate_as_vx_does_or_are_left_to_the_run():
    """Vx's `/` and `%` truncate toward zero; what the parser does not evaluate exactly
    (`instance()`, `!`, a call, an unknown name, a division by zero) is not refused here."""
    assert where.broken(["-7 / 2 == -3", "-7 % 2 == -1", "m >= 8 && m <= 16"], {"m": 8}) == []
    assert where.broken(["m % 128 == 0 || m == 1", "m < 4"], {"m": 100}) == [
        "m % 128 == 0 || m == 1",
        "m < 4",
    ]
    unknown = ["instance() < m", "!(m == 0)", "tiles.len() >= 1", "q > 0", "m / (m - m) == 0"]
    assert where.broken(unknown, {"m": 3}) == []
    grid = where.instances_expr(["m % 8 == 0", "m / 8 == instances()"], {"m"})
    assert grid is not None and where.value(grid, {"m": 64}) == 8
    assert where.instances_expr(["instances() == tiles.len()"], {"m"}) is None
