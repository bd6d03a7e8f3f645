"""The vxc kernels written in idiomatic Pallas, for the schedule comparison
(bench_tpu_schedule.py): the same computation on the same shapes, compiled by the same
libtpu for the same topology.

Each twin is a function of jax arrays (or ShapeDtypeStructs when traced) returning the
kernel's result, as `pl.pallas_call` users write it: BlockSpec pipelining over a grid,
or (the `manual` twin) two VMEM slots and explicit async copies, which is how a Pallas
user writes the double-buffered stream by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TILE = 128


def _dot(a, b, precision):
    return jnp.dot(a, b, preferred_element_type=jnp.float32, precision=precision)


def stream_blockspec(tiles, w, precision=None):
    """acc = sum_i tiles[i] @ w: a grid over the tiles, the output block resident."""
    n = tiles.shape[0]

    def body(t_ref, w_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += _dot(t_ref[0], w_ref[...], precision)

    return pl.pallas_call(
        body,
        grid=(n,),
        in_specs=[
            pl.BlockSpec((1, TILE, TILE), lambda i: (i, 0, 0)),
            pl.BlockSpec((TILE, TILE), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((TILE, TILE), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((TILE, TILE), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(tiles, w)


def stream_manual(tiles, w, precision=None):
    """The same with the tiles left in HBM and two VMEM slots filled by async copies:
    tile i+1's copy is started before tile i's matmul."""
    n = tiles.shape[0]

    def body(t_hbm, w_ref, o_ref, buf, sem):
        def copy(i, slot):
            return pltpu.make_async_copy(t_hbm.at[i], buf.at[slot], sem.at[slot])

        copy(0, 0).start()
        o_ref[...] = jnp.zeros_like(o_ref)

        def step(i, carry):
            slot = i % 2

            @pl.when(i + 1 < n)
            def _():
                copy(i + 1, 1 - slot).start()

            copy(i, slot).wait()
            o_ref[...] += _dot(buf[slot], w_ref[...], precision)
            return carry

        jax.lax.fori_loop(0, n, step, 0)

    return pl.pallas_call(
        body,
        in_specs=[
            pl.BlockSpec(memory_space=pl.ANY),
            pl.BlockSpec(memory_space=pltpu.MemorySpace.VMEM),
        ],
        out_specs=pl.BlockSpec(memory_space=pltpu.MemorySpace.VMEM),
        out_shape=jax.ShapeDtypeStruct((TILE, TILE), jnp.float32),
        scratch_shapes=[
            pltpu.MemorySpace.VMEM((2, TILE, TILE), tiles.dtype),
            pltpu.SemaphoreType.DMA((2,)),
        ],
    )(tiles, w)


def stream_grid_2d(tiles, w, instances: int, precision=None):
    """stream_grid: `instances` partial sums, each over its contiguous share of the tiles;
    a 2-D grid (instance: parallel, tile within the share: arbitrary)."""
    n = tiles.shape[0]
    per = n // instances

    def body(t_ref, w_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[0] += _dot(t_ref[0], w_ref[...], precision)

    return pl.pallas_call(
        body,
        grid=(instances, per),
        in_specs=[
            pl.BlockSpec((1, TILE, TILE), lambda p, i: (p * per + i, 0, 0)),
            pl.BlockSpec((TILE, TILE), lambda p, i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((1, TILE, TILE), lambda p, i: (p, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((instances, TILE, TILE), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(tiles, w)


def _gemm_grid(body, a, b, *rows, out_dtype, scratch=()):
    """Pallas's matmul idiom over 128 x 128 tiles of C: a 3-D grid (row and column tile:
    parallel, K step: arbitrary) whose BlockSpecs pipeline the K tiles of A and B; each
    of `rows` (a `[1, n]` operand: a bias) is read at the tile's columns."""
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        body,
        grid=(m // TILE, n // TILE, k // TILE),
        in_specs=[
            pl.BlockSpec((TILE, TILE), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((TILE, TILE), lambda i, j, kk: (kk, j)),
            *(pl.BlockSpec((1, TILE), lambda i, j, kk: (0, j)) for _ in rows),
        ],
        out_specs=pl.BlockSpec((TILE, TILE), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), out_dtype),
        scratch_shapes=list(scratch),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(a, b, *rows)


def gemm_blockspec(a, b):
    """gemm.vx: C = A @ B, bf16 in, f32 out, the f32 output block resident across the K
    steps and zeroed at the first."""

    def body(a_ref, b_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += _dot(a_ref[...], b_ref[...], None)

    return _gemm_grid(body, a, b, out_dtype=jnp.float32)


def gemm_epilogue_blockspec(a, b, bias):
    """gemm_epilogue.vx: C = relu(A @ B + bias) in bf16; the f32 accumulator in VMEM
    scratch, the epilogue at the last K step."""

    def body(a_ref, b_ref, bias_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += _dot(a_ref[...], b_ref[...], None)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = jnp.maximum(acc_ref[...] + bias_ref[...], 0.0).astype(o_ref.dtype)

    scratch = [pltpu.MemorySpace.VMEM((TILE, TILE), jnp.float32)]
    return _gemm_grid(body, a, b, bias, out_dtype=jnp.bfloat16, scratch=scratch)


SOFTMAX_ROWS = 8  # rows per grid step: softmax.vx's rows per instance


def softmax_blockspec(x):
    """softmax.vx: the row softmax of x [m, n] (n <= 1024), f32. A grid over blocks of 8
    whole rows, as Pallas users write a row softmax: the [8, n] block is in VMEM (at most
    32 KiB), so max, exp and sum are one pass over the resident block (vxc's kernel, whose
    tile is [8, 128] for the GPUs' sake, reads each row twice from HBM: an online pass,
    then the normalising one)."""
    m, n = x.shape

    def body(x_ref, o_ref):
        t = x_ref[...]
        e = jnp.exp(t - jnp.max(t, axis=1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)

    block = pl.BlockSpec((SOFTMAX_ROWS, n), lambda i: (i, 0))
    return pl.pallas_call(
        body,
        grid=(m // SOFTMAX_ROWS,),
        in_specs=[block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def flash_attention(q, k, v, causal: bool, scale: float, block_q=128, block_k_major=128,
                    block_k=128):  # fmt: skip
    """attention.vx's twin: jax's own Pallas flash attention
    (`jax.experimental.pallas.ops.tpu.flash_attention`), q, k, v [batch, heads, s, 128]
    bf16. Its smallest K block is 128 keys (`block_k` must be a multiple of 128); its
    defaults are 128 / 128 / 128."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    sizes = fa.BlockSizes(block_q=block_q, block_k_major=block_k_major, block_k=block_k,
                          block_b=1)  # fmt: skip
    return fa.flash_attention(q, k, v, causal=causal, sm_scale=scale, block_sizes=sizes)
