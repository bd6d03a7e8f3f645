"""The GPU check's baseline for stream_grid: the same computation written in Triton, as a
Triton user would (a three-stage software pipeline), run on the same GPU in the same
process (tools/gpu_check.py). Each program sums its contiguous share of bf16 tiles,
`acc += tile @ w` in f32, and stores one 128x128 f32 result.

Only the device image has triton and torch; nothing here is imported on this machine.
"""

from __future__ import annotations

import statistics

import torch
import triton
import triton.language as tl

TILE = 128


@triton.jit
def _stream(tiles, w, out, per, TILE: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, TILE)[:, None] * TILE + tl.arange(0, TILE)[None, :]
    wt = tl.load(w + rows)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    base = pid * per
    for i in tl.range(0, per, num_stages=3):
        t = tl.load(tiles + (base + i).to(tl.int64) * TILE * TILE + rows)
        acc += tl.dot(t, wt)
    tl.store(out + pid.to(tl.int64) * TILE * TILE + rows, acc)


def measure(instances: int, per: int, repeat: int = 20) -> dict:
    """Median seconds and TB/s of tiles read, over `repeat` timed launches."""
    g = torch.Generator(device="cuda").manual_seed(0)
    tiles = torch.randint(-3, 4, (instances * per, TILE, TILE), generator=g, device="cuda")
    tiles = tiles.to(torch.bfloat16)
    w = torch.randint(-3, 4, (TILE, TILE), generator=g, device="cuda").to(torch.bfloat16)
    out = torch.empty((instances, TILE, TILE), dtype=torch.float32, device="cuda")
    ts = []
    for _ in range(repeat + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        _stream[(instances,)](tiles, w, out, per, TILE=TILE, num_warps=4)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    ref = tiles.float().reshape(instances, per, TILE, TILE).sum(1) @ w.float()
    med = statistics.median(ts[1:])
    return {
        "median_s": med,
        "tb_s": tiles.numel() * 2 / med / 1e12,
        "max_abs_err": float((out - ref).abs().max()),
    }
