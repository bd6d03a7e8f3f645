"""The GPU check, run on the device machine over artifacts built here.

    # here:   .venv/bin/python tools/gpu_build.py                 (-> build/gpu/)
    # there:  PYTHONUNBUFFERED=1 PYTHONPATH=compiler python3 tools/gpu_check.py \\
    #             --artifacts build/gpu --out "$OUT"

It needs only the device image's Python, numpy, ml_dtypes and cuda-python: the runtime
(`vxc.backends.nvidia.runtime`) imports no jaxlib, lark or z3 (a test checks it). For each
artifact of the GPU's architecture it runs, in order:
- a correctness ladder before the full size: 1x1, 1x2, 1x5 (the mbarrier parity wraps),
  3x7 (instances x tiles per instance), then the full size; outputs NaN-poisoned on the
  device; inputs small integers, so tf32/bf16 products and f32 sums are exact and a
  result must equal numpy's; the first wrong instance/row/col is reported;
- every launch under a watchdog: `cuStreamQuery` polled for at most --timeout seconds
  (default 10), then `HANG <kernel> <shapes>` and exit 3 (the context cannot recover);
- the GEMMs (kernels/gemm.vx, gemm_3stage.vx, gemm_async.vx: C = A @ B, bf16 in, f32
  out, written into the `&mut` output in place) on their own ladder of (m, n, k): one instance and two K
  tiles, five K tiles (the ring's parity wraps), a 3 x 7 grid, then 4096^3; the first
  wrong row/col (and the instance owning it) is reported;
- the tile-arithmetic kernels on ladders of their own: kernels/gemm_epilogue.vx
  (relu(A @ B + bias) in bf16; small-integer inputs, so the result is exact and must
  equal numpy's bf16 rounding of it) and kernels/softmax.vx (normal inputs, within
  the simulator test's tolerance: ex2.approx is 2 ulp, see docs/NVIDIA.md) and
  kernels/attention.vx ((heads, sequence) 1x128, 1x256, 1x640 (the K/V ring's parity
  wraps), 3x896 (3 x 7 instances), then 8x2048; each causal and not; normal inputs,
  against a float64 numpy softmax(q k^T scale) v within the bf16 P's error);
- medians of repeated timed launches at the full size (CUDA events), in TB/s of tiles read
  (stream kernels) or TFLOP/s (GEMMs);
- same-GPU baselines in the same process where the image has them: a torch device copy of
  the same bytes, the Triton three-stage stream kernel (benchmarks/nvidia/triton_stream.py)
  and, for the GEMMs, cuBLAS through `torch.mm` on the same bf16 operands (with the
  bias and ReLU for gemm_epilogue), `torch.softmax` for softmax, and torch's
  `scaled_dot_product_attention` (flash backend, causal and not) for attention;
- compute-sanitizer memcheck and synccheck on a small launch (a child run of this script).
The kernels tools/gpu_build.py refused for this GPU's target are named first (`NOT
BUILT <source> for <target>: <code>: <message>`) and listed in the log's `not_built`.
A JSON log goes to --out/gpu_check.json. Exit status: 0 all match, 1 a mismatch or fault,
2 no usable GPU, 3 a hang. The whole run is sized for under 5 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc.backends.nvidia import runtime  # noqa: E402
from vxc.targets import TARGETS  # noqa: E402

LADDER = ((1, 1), (1, 2), (1, 5), (3, 7))  # (instances, tiles per instance)
FULL = (132, 256)  # one CTA per SM of an H100/H200, 256 tiles each
# The target each compute capability runs (the arch records of vxc/targets.py).
ARCH_OF_CAPABILITY = {t.arch.capability: t.name for t in TARGETS.values() if t.arch is not None}

# How each kernel's result follows from its inputs: every instance sums all the tiles
# ("sum"), or its contiguous share of them ("share"); result = sum @ w.
REFERENCES = {
    "stream": "sum",
    "stream_blocking": "sum",
    "stream_triple": "sum",
    "stream_grid": "share",
    "stream_grid_blocking": "share",
}


# The GEMM kernels: C[m, n] = A[m, k] @ B[k, n], one instance per 128 x 128 tile of C
# (gemm_async: gemm with the result tile's store a token, LANGUAGE.md 4.2).
GEMMS = {"gemm", "gemm3", "gemm_async", "gemm_any"}
# The source each kernel above is checked from (its artifact's stem): another file may
# have a kernel of the same name (seed_vx.vx's `stream` computes nothing to compare).
# kernels/attention.vx's entry is generic in its head dimension D: the build's instance at
# the default D = 128 is `attention__128` (LANGUAGE.md 3).
ATTENTION = "attention__128"
SOURCES = {"gemm3": "gemm_3stage", "rmsnorm": "layernorm", ATTENTION: "attention"}
# (m, n, k): 1 instance x 2 K tiles; 1 x 2 instances x 5 K tiles (a 2-slot ring's parity
# wraps twice); a 3 x 7 grid of instances; then the full size.
GEMM_LADDER = ((128, 128, 256), (128, 256, 640), (384, 896, 384))
GEMM_FULL = (4096, 4096, 4096)
# gemm_any (edge views, LANGUAGE.md 4.2): one instance of one row, edges on every side,
# then prime shapes, whose row pitches are not multiples of 16 bytes: the launcher pads
# them (cuMemcpy2D both ways; docs/NVIDIA.md "Tensor maps at launch").
GEMM_ANY_LADDER = ((1, 8, 8), (300, 200, 136), (1031, 520, 1000), (7, 13, 5), (131, 127, 257))

# The tile-arithmetic kernels' shapes: gemm_epilogue's are the GEMMs'; softmax's are
# (m, n): one instance, two column tiles, a row of 1024, then 8192 instances of 8 rows.
SOFTMAX_LADDER = ((8, 128), (8, 256), (24, 1024))
SOFTMAX_FULL = (65536, 1024)
NORM_LADDER = ((8, 128), (16, 512), (24, 4096))
NORM_FULL = (65536, 1024)
NORM_TOL = {"rtol": 1e-4, "atol": 1e-4}
SOFTMAX_TOL = {"rtol": 1e-5, "atol": 1e-7}  # tests/backends/nvidia/test_ptxsim_tiles.py
# kernels/attention.vx: (h, s, causal), one instance per (head, 128-query tile), K/V
# tiles of 64 keys (s / 64 per head): one instance and two K/V tiles; two instances and
# four; five instances and ten (the two-slot ring's parity wraps five times); 3 heads x 7
# query tiles (a 3 x 7 grid); then 8 heads of 2048 (TARGETS.md's largest tested shape,
# docs/PERFORMANCE.md's estimate). Every rung causal and not.
ATTENTION_HS = ((1, 128), (1, 256), (1, 640), (3, 896))
ATTENTION_FULL_HS = (8, 2048)
ATTENTION_LADDER = tuple((h, s, c) for h, s in ATTENTION_HS for c in (False, True))
ATTENTION_FULL = tuple((*ATTENTION_FULL_HS, c) for c in (False, True))
ATTENTION_QUERIES = 128  # rows of one instance
ATTENTION_KEYS = 64  # keys of one K/V tile
# P is rounded to bf16 before P @ V (2^-9 relative per term): tests/e2e/test_tile_kernels.py.
ATTENTION_TOL = 8e-3  # of max |reference|
HEAD_DIM = 128


def say(msg: str) -> None:
    print(f"gpu_check: {msg}", flush=True)


def _dtype(name: str):
    if name == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"f32": np.float32, "f16": np.float16}[name]


def make_inputs(meta: dict, tiles: int, rng) -> list[np.ndarray]:
    """Arguments for manifest kernel `meta`: a Vec of `tiles` tiles for each Vec argument,
    the declared shape for each tensor argument; small integers (exact in tf32/bf16)."""
    out = []
    for arg in meta["args"]:
        p = next(p for p in meta["params"] if p.get("arg") == arg and p["kind"] != "u64")
        shape = (tiles, *p["tile"]) if p.get("vec") else tuple(p.get("shape") or p["tile"])
        out.append(rng.integers(-3, 4, shape).astype(_dtype(p["dtype"])))
    return out


def reference(kind: str, instances: int, tiles: np.ndarray, w: np.ndarray) -> np.ndarray:
    t, w = tiles.astype(np.float64), w.astype(np.float64)
    if kind == "sum":
        return np.stack([t.sum(0) @ w] * instances)
    per = len(t) // instances
    return np.stack([t[k * per : (k + 1) * per].sum(0) @ w for k in range(instances)])


def first_bad(out: np.ndarray, ref: np.ndarray) -> dict | None:
    bad = np.argwhere(~np.isclose(out, ref, rtol=0, atol=0, equal_nan=False))
    if not len(bad):
        return None
    i, r, c = (int(x) for x in bad[0])
    return {"instance": i, "row": r, "col": c, "got": float(out[i, r, c]),
            "want": float(ref[i, r, c]), "wrong": int(len(bad))}  # fmt: skip


def rung(kernel, label: str, entry: dict, instances: int, args, judge, timeout, log) -> bool:
    """One poisoned launch of the ladder, logged; `judge(results)` is the first bad element
    or None. False on a mismatch or fault (a hang propagates: the caller exits)."""
    t0 = time.perf_counter()
    try:
        results = kernel.run(instances, *args, poison=True, timeout=timeout)
    except runtime.Hang:
        raise
    except runtime.CudaError as e:
        entry.update(ok=False, error=str(e))
        log.append(entry)
        say(f"{label}: FAULT {e}")
        return False
    bad = judge(results)
    entry.update(ok=bad is None, seconds=round(time.perf_counter() - t0, 4), first_bad=bad)
    log.append(entry)
    say(f"{label}: {'OK' if bad is None else f'MISMATCH {bad}'}")
    return bad is None


def check_kernel(kernel, kind: str, shapes, rng, timeout: float, log: list) -> bool:
    """The ladder for one kernel; False at the first mismatch or fault."""
    name = kernel.meta["name"]
    for instances, per in shapes:
        n = per if kind == "sum" else instances * per
        args = make_inputs(kernel.meta, n, rng)
        entry = {"kernel": name, "instances": instances, "tiles": n}
        ref = reference(kind, instances, *args)
        judge = lambda res, ref=ref: first_bad(res[0], ref)  # noqa: E731
        if not rung(kernel, f"{name} {instances}x{per}", entry, instances, args, judge,
                    timeout, log):  # fmt: skip
            return False
    return True


def gemm_inputs(m: int, n: int, k: int, rng) -> list:
    """(m, n, k, A, B, C): small integers in bf16, so every product and f32 sum is exact
    (|C| <= 9 k < 2^24); C is the output, written in place."""
    bf16 = _dtype("bf16")
    a = rng.integers(-3, 4, (m, k)).astype(bf16)
    b = rng.integers(-3, 4, (k, n)).astype(bf16)
    return [m, n, k, a, b, np.zeros((m, n), np.float32)]


def gemm_first_bad(c: np.ndarray, ref: np.ndarray, close=None, instance_of=None) -> dict | None:
    """The first element of the 2-D result `c` that is not `ref` (exactly, or `close`),
    and the instance owning it (`instance_of(row, col)`; a GEMM's 128 x 128 tiles, row
    of tiles by row of tiles, by default)."""
    ok = (c == ref) if close is None else close(c, ref)
    bad = np.argwhere(~ok)  # NaN (a tile never stored) is never equal or close
    if not len(bad):
        return None
    r, col = (int(x) for x in bad[0])
    if instance_of is None:
        instance = (r // 128) * -(-c.shape[1] // 128) + col // 128
    else:
        instance = instance_of(r, col)
    return {"instance": instance, "row": r, "col": col, "got": float(c[r, col]),
            "want": float(ref[r, col]), "wrong": int(len(bad))}  # fmt: skip


def check_gemm(kernel, shapes, rng, timeout: float, log: list) -> bool:
    """The GEMM ladder for one kernel; False at the first mismatch or fault."""
    name = kernel.meta["name"]
    for m, n, k in shapes:
        args = gemm_inputs(m, n, k, rng)
        instances = -(-m // 128) * -(-n // 128)  # gemm_any's edge tiles included
        entry = {"kernel": name, "instances": instances, "m": m, "n": n, "k": k}
        ref = args[3].astype(np.float32) @ args[4].astype(np.float32)  # exact: see gemm_inputs
        judge = lambda _, c=args[5], ref=ref: gemm_first_bad(c, ref)  # noqa: E731 - C in place
        if not rung(kernel, f"{name} {m}x{n}x{k}", entry, instances, args, judge, timeout, log):
            return False
    return True


def epilogue_inputs(m: int, n: int, k: int, rng) -> list:
    """gemm's inputs and a small-integer bias: relu(A @ B + bias) is an exact integer
    in f32, so its bf16 rounding is numpy's, exactly."""
    m_, n_, k_, a, b, _ = gemm_inputs(m, n, k, rng)
    bias = rng.integers(-20, 21, (1, n)).astype(np.float32)
    return [m_, n_, k_, a, b, bias, np.zeros((m, n), _dtype("bf16"))]


def epilogue_reference(args: list) -> np.ndarray:
    exact = np.maximum(args[3].astype(np.float32) @ args[4].astype(np.float32) + args[5], 0)
    return exact.astype(_dtype("bf16")).astype(np.float32)


def softmax_inputs(m: int, n: int, rng) -> list:
    x = (rng.standard_normal((m, n)) * 8).astype(np.float32)
    return [m, n, x, np.zeros((m, n), np.float32)]


def softmax_reference(args: list) -> np.ndarray:
    x = args[2].astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _softmax_close(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.isclose(y, ref, equal_nan=False, **SOFTMAX_TOL)


def norm_inputs(m: int, n: int, rng, bias: bool) -> list:
    """kernels/layernorm.vx's arguments: (m, n, eps, x, g[, b], y)."""
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(np.float32)
    g, b = (rng.standard_normal((1, n)).astype(np.float32) for _ in range(2))
    return [m, n, np.float32(1e-5), x, g, *([b] if bias else []), np.zeros((m, n), np.float32)]


def norm_reference(args: list) -> np.ndarray:
    """Layer norm (with a bias argument) or RMS norm, in f64."""
    x, g = args[3].astype(np.float64), args[4]
    if len(args) == 7:
        c = x - x.mean(1, keepdims=True)
        return c / np.sqrt((c * c).mean(1, keepdims=True) + 1e-5) * g + args[5]
    return x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * g


def _norm_close(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.isclose(y, ref, equal_nan=False, **NORM_TOL)


def attention_inputs(h: int, s: int, causal: bool, rng) -> list:
    """kernels/attention.vx's arguments (h, s, n, causal, scale, q, k, v, o): q, k, v
    normal in bf16 (the kernel computes the causal mask itself); o the output, written
    in place."""
    n = h * s
    bf16 = _dtype("bf16")
    q, k, v = (rng.standard_normal((n, HEAD_DIM)).astype(bf16) for _ in range(3))
    scale = np.float32(HEAD_DIM**-0.5)
    return [h, s, n, causal, scale, q, k, v, np.zeros((n, HEAD_DIM), np.float32)]


def attention_reference(args: list) -> np.ndarray:
    """softmax(q k^T * scale) v per head in f64 (-inf after the diagonal when causal)."""
    h, s, _, causal, scale, q, k, v = args[:8]
    q, k, v = (t.astype(np.float64).reshape(h, s, HEAD_DIM) for t in (q, k, v))
    sc = q @ k.transpose(0, 2, 1) * float(scale)
    if causal:
        sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).reshape(h * s, HEAD_DIM)


def _attention_close(o: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.abs(o - ref) <= ATTENTION_TOL * np.abs(ref).max()  # NaN: never close


def attention_flops(h: int, s: int, causal: bool) -> float:
    """QK^T and PV: 4 s^2 d per head; causal counts half (FlashAttention's convention)."""
    return 4.0 * h * s * s * HEAD_DIM / (2 if causal else 1)


@dataclass(frozen=True)
class TileCheck:
    """How the device script checks one tile-arithmetic kernel: its arguments for a
    shape, the instances that shape launches, the numpy reference, which argument is the
    output (written in place), how close it must be (None: exactly equal), the instance
    owning a row/col, the full sizes timed, and the rate a time is reported in."""

    ladder: tuple
    full: tuple
    inputs: Callable
    instances: Callable
    reference: Callable
    out: int
    close: Callable | None
    instance_of: Callable | None  # None: a GEMM's 128 x 128 output tiles
    rate: Callable  # (shape, args, seconds) -> {"tflop_s" | "tb_s": x}


def _norm_check(bias: bool) -> TileCheck:
    """layer norm (bias: three passes read x) or RMS norm (two), 8 rows an instance."""
    passes = 3 if bias else 2
    return TileCheck(
        NORM_LADDER,
        (NORM_FULL,),
        lambda s, rng: norm_inputs(*s, rng, bias=bias),
        lambda s: s[0] // 8,
        norm_reference,
        6 if bias else 5,
        _norm_close,
        lambda r, _: r // 8,
        lambda _, a, t: {"tb_s": (passes + 1) * a[3].nbytes / t / 1e12},
    )


TILE_CHECKS = {
    "gemm_epilogue": TileCheck(
        GEMM_LADDER,
        (GEMM_FULL,),
        lambda s, rng: epilogue_inputs(*s, rng),
        lambda s: (s[0] // 128) * (s[1] // 128),
        epilogue_reference,
        6,
        None,
        None,
        lambda s, _, t: {"tflop_s": 2.0 * s[0] * s[1] * s[2] / t / 1e12},
    ),
    "softmax": TileCheck(
        SOFTMAX_LADDER,
        (SOFTMAX_FULL,),
        lambda s, rng: softmax_inputs(*s, rng),
        lambda s: s[0] // 8,
        softmax_reference,
        3,
        _softmax_close,
        lambda r, _: r // 8,  # 8 rows an instance
        lambda _, a, t: {"tb_s": 3 * a[2].nbytes / t / 1e12},  # two passes read x, one writes y
    ),
    "layernorm": _norm_check(bias=True),
    "rmsnorm": _norm_check(bias=False),
    ATTENTION: TileCheck(
        ATTENTION_LADDER,
        ATTENTION_FULL,
        lambda s, rng: attention_inputs(*s, rng),
        lambda s: s[0] * (s[1] // ATTENTION_QUERIES),
        attention_reference,
        8,
        _attention_close,
        lambda r, _: r // ATTENTION_QUERIES,  # heads outermost: instance i owns rows 128 i..
        lambda s, _, t: {"tflop_s": attention_flops(*s) / t / 1e12},
    ),
}
TILE_KERNELS = set(TILE_CHECKS)


def _label(name: str, shape) -> str:
    """`softmax 8x256`, `attention 1x128 causal`: the sizes, then the flag if any."""
    sizes = "x".join(str(x) for x in shape if not isinstance(x, bool))
    flags = "".join(" causal" if x else " full" for x in shape if isinstance(x, bool))
    return f"{name} {sizes}{flags}"


def check_tile_kernel(kernel, shapes, rng, timeout: float, log: list) -> bool:
    """The ladder of a tile-arithmetic kernel; False at the first mismatch or fault."""
    name = kernel.meta["name"]
    tc = TILE_CHECKS[name]
    for shape in shapes:
        args = tc.inputs(shape, rng)
        entry = {"kernel": name, "instances": tc.instances(shape), "shape": list(shape)}
        ref = tc.reference(args)
        judge = lambda _, c=args[tc.out], ref=ref: gemm_first_bad(  # noqa: E731 - in place
            c.astype(np.float64), ref, tc.close, tc.instance_of
        )
        if not rung(kernel, _label(name, shape), entry, tc.instances(shape), args, judge,
                    timeout, log):  # fmt: skip
            return False
    return True


def timed_tile_kernel(kernel, rng, repeat: int) -> list[dict]:
    """Medians of `repeat` launches at each of the kernel's full sizes."""
    name = kernel.meta["name"]
    tc = TILE_CHECKS[name]
    out = []
    for shape in tc.full:
        args = tc.inputs(shape, rng)
        ts = kernel.times(tc.instances(shape), *args, repeat=repeat)
        med = statistics.median(ts)
        out.append({"kernel": name, "shape": list(shape), "median_s": med, "min_s": min(ts),
                    "repeat": repeat, **tc.rate(shape, args, med)})  # fmt: skip
    return out


def torch_tile_baselines(repeat: int) -> dict:
    """torch on the tile kernels' full sizes: cuBLAS's addmm + relu in bf16 for
    gemm_epilogue, torch.softmax (f32) for softmax."""
    try:
        import torch
    except ImportError as e:
        return {"skipped": f"no torch ({e})"}
    m, n, k = TILE_CHECKS["gemm_epilogue"].full[0]
    a = torch.randint(-3, 4, (m, k), device="cuda").to(torch.bfloat16)
    b = torch.randint(-3, 4, (k, n), device="cuda").to(torch.bfloat16)
    bias = torch.randint(-20, 21, (n,), device="cuda").to(torch.bfloat16)
    med = torch_median(torch, lambda: torch.relu(torch.addmm(bias, a, b)), repeat)
    out = {"torch_addmm_relu_bf16": {"median_s": med, "tflop_s": 2.0 * m * n * k / med / 1e12}}
    sm, sn = TILE_CHECKS["softmax"].full[0]
    x = torch.randn(sm, sn, device="cuda")
    med = torch_median(torch, lambda: torch.softmax(x, dim=1), repeat)
    out["torch_softmax_f32"] = {"median_s": med, "tb_s": 2 * x.numel() * 4 / med / 1e12}
    out["torch_sdpa_bf16"] = sdpa_baseline(torch, repeat)
    return out


def sdpa_baseline(torch, repeat: int) -> dict:
    """torch's scaled_dot_product_attention on attention's full size, causal and not,
    bf16 in and out ([1, h, s, 128]: the same per-head work), its flash backend forced
    where this torch can (torch.nn.attention.sdpa_kernel); the backend used is logged."""
    import torch.nn.functional as F

    h, s = ATTENTION_FULL_HS
    q, k, v = (torch.randn(1, h, s, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))  # fmt: skip
    import contextlib

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        flash = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # noqa: E731
    except ImportError:  # an older torch: only its default choice (flash where it applies)
        flash = None
    out: dict = {"h": h, "s": s}
    for causal in (False, True):
        fn = lambda c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c)  # noqa: E731
        key, backend = "causal" if causal else "full", "default"
        try:
            with flash() if flash else contextlib.nullcontext():
                med = torch_median(torch, fn, repeat)
            backend = "flash" if flash else backend
        except RuntimeError as e:  # no flash kernel for this GPU / torch: said, then default
            out[f"{key}_flash_error"] = str(e)[:300]
            med = torch_median(torch, fn, repeat)
        out[key] = {"backend": backend, "median_s": med,
                    "tflop_s": attention_flops(h, s, causal) / med / 1e12}  # fmt: skip
    return out


def timed_gemm(kernel, rng, repeat: int) -> dict:
    m, n, k = GEMM_FULL
    args = gemm_inputs(m, n, k, rng)
    ts = kernel.times((m // 128) * (n // 128), *args, repeat=repeat)
    med = statistics.median(ts)
    return {"kernel": kernel.meta["name"], "m": m, "n": n, "k": k, "median_s": med,
            "min_s": min(ts), "repeat": repeat, "tflop_s": 2.0 * m * n * k / med / 1e12}  # fmt: skip


def torch_median(torch, fn, repeat: int) -> float:
    """Median seconds of `repeat` launches of `fn` (CUDA events), after one warm-up."""
    ts = []
    for _ in range(repeat + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts[1:])


def cublas_gemm(repeat: int) -> dict:
    """cuBLAS through torch on the same shape and operand type (bf16 in; torch.mm's
    output is bf16, so this is an upper bound on what an f32-out GEMM can reach)."""
    try:
        import torch
    except ImportError as e:
        return {"skipped": f"no torch ({e})"}
    m, n, k = GEMM_FULL
    a = torch.randint(-3, 4, (m, k), device="cuda").to(torch.bfloat16)
    b = torch.randint(-3, 4, (k, n), device="cuda").to(torch.bfloat16)
    med = torch_median(torch, lambda: torch.mm(a, b), repeat)
    return {"m": m, "n": n, "k": k, "median_s": med, "tflop_s": 2.0 * m * n * k / med / 1e12}


def timed(kernel, rng, repeat: int) -> dict:
    instances, per = FULL
    n = instances * per
    args = make_inputs(kernel.meta, n, rng)
    ts = kernel.times(instances, *args, repeat=repeat)
    med = statistics.median(ts)
    read = args[0].nbytes
    flops = 2.0 * 128**3 * n
    return {"kernel": kernel.meta["name"], "instances": instances, "tiles": n,
            "median_s": med, "min_s": min(ts), "repeat": repeat,
            "tb_s": read / med / 1e12, "tflop_s": flops / med / 1e12}  # fmt: skip


def baselines(nbytes: int, repeat: int) -> dict:
    """Same-GPU references in this process, where the image has torch / triton."""
    out: dict = {}
    try:
        import torch
    except ImportError as e:
        return {"skipped": f"no torch ({e})"}
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    med = torch_median(torch, lambda: y.copy_(x), repeat)
    out["torch_copy"] = {"bytes": nbytes, "median_s": med, "tb_s_read": nbytes / med / 1e12}
    try:
        sys.path.insert(0, str(ROOT / "benchmarks" / "nvidia"))
        import triton_stream

        out["triton_stream_3_stage"] = triton_stream.measure(*FULL, repeat=repeat)
    except ImportError as e:
        out["triton_stream_3_stage"] = {"skipped": f"no triton ({e})"}
    return out


# The kernels compute-sanitizer checks on their small ladders: `stream` (the transfer
# tokens' ring), `gemm` (TMA loads at the views' coordinates, the TMA store into C),
# `gemm_async` (the store token's bulk-group wait before exit), `gemm_epilogue` (the
# epilogue's stores from the accumulator), `softmax` (tile
# arithmetic's barriers and shfl butterflies), `attention` (its K/V ring and online
# softmax). A kernel not built for the GPU is named by the child run's NOT BUILT line.
SANITIZED = ("stream", "gemm", "gemm_async", "gemm_epilogue", "softmax", ATTENTION)


def sanitizer(artifacts: Path, timeout: float) -> dict:
    """compute-sanitizer memcheck and synccheck on small launches of SANITIZED; a tool's
    `ok` is False when it reports an error (exit 9) or the child run fails."""
    exe = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(exe).exists():
        return {"skipped": "no compute-sanitizer on this machine"}
    res = {}
    for tool in ("memcheck", "synccheck"):
        cmd = [exe, "--tool", tool, "--error-exitcode", "9", sys.executable, __file__,
               "--artifacts", str(artifacts), "--small", "--no-sanitizer", "--no-baselines",
               "--timeout", str(timeout)]  # fmt: skip
        cmd += [x for name in SANITIZED for x in ("--only", name)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
            res[tool] = {"rc": p.returncode, "ok": p.returncode == 0,
                         "tail": (p.stdout + p.stderr)[-1500:]}  # fmt: skip
        except subprocess.TimeoutExpired:  # said, not a finding: the child may be slow
            res[tool] = {"rc": None, "ok": None, "tail": "timed out after 120 s"}
        say(f"compute-sanitizer {tool}: rc {res[tool]['rc']}")
    return res


def kind_of(name: str, stem: str) -> str | None:
    """How the kernel `name` of the artifact built from `stem`.vx is checked: "gemm",
    "tile", a stream reference ("sum" / "share"), or None (no numpy reference)."""
    if stem != SOURCES.get(name, name):
        return None
    return "gemm" if name in GEMMS else "tile" if name in TILE_KERNELS else REFERENCES.get(name)


def not_built(index: dict, target: str) -> list[dict]:
    """The kernels tools/gpu_build.py could not build for `target`, each with its coded
    refusal, said at the start of the run: a kernel missing from the check is never
    silent (its absence is not a pass)."""
    out = [{"source": e["source"], "refused": e["refused"]}
           for e in index["artifacts"] if e["target"] == target and "refused" in e]  # fmt: skip
    for e in out:
        say(f"NOT BUILT {e['source']} for {target}: {e['refused']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=str(ROOT / "build" / "gpu"))
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_check_out"))
    ap.add_argument("--only", action="append", help="run only these kernels")
    ap.add_argument("--small", action="store_true", help="the ladder only: no full size")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=runtime.WATCHDOG_S)
    ap.add_argument("--no-sanitizer", action="store_true")
    ap.add_argument("--no-baselines", action="store_true")
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log: dict = {"machine": platform.node(), "runs": [], "timings": [], "started": time.time()}

    def finish(status: int | str) -> int | str:
        log["status"] = status
        log["seconds"] = round(time.time() - log["started"], 1)
        (out_dir / "gpu_check.json").write_text(json.dumps(log, indent=1, default=str) + "\n")
        return status

    ok, why = runtime.gpu_status()
    log["gpu"] = why
    if not ok:
        say(f"{why}; nothing to run")
        return finish(2)
    cap = runtime.device_capability()
    target = ARCH_OF_CAPABILITY.get(cap)
    log["capability"], log["target"] = list(cap), target
    if target is None:
        say(f"compute capability {cap[0]}.{cap[1]} has no vx target")
        return finish(2)
    artifacts = Path(args.artifacts)
    index = json.loads((artifacts / "index.json").read_text())
    shapes = LADDER if args.small else (*LADDER, FULL)
    log["not_built"] = not_built(index, target)
    rng = np.random.default_rng(0)
    status = 0
    for entry in index["artifacts"]:
        if entry["target"] != target or "manifest" not in entry:
            continue
        art = runtime.load(artifacts / entry["manifest"])
        for name, kernel in art.kernels.items():
            if args.only and name not in args.only:
                continue
            kind = kind_of(name, Path(entry["manifest"]).name.split(".")[0])
            if kind is None:
                say(f"{name}: no numpy reference in REFERENCES; not run")
                log["runs"].append({"kernel": name, "skipped": "no reference"})
                continue
            try:
                if kind == "gemm":
                    rungs = GEMM_ANY_LADDER if name == "gemm_any" else GEMM_LADDER
                    ladder = rungs if args.small else (*rungs, GEMM_FULL)
                    good = check_gemm(kernel, ladder, rng, args.timeout, log["runs"])
                elif kind == "tile":
                    tc = TILE_CHECKS[name]
                    ladder = tc.ladder if args.small else (*tc.ladder, *tc.full)
                    good = check_tile_kernel(kernel, ladder, rng, args.timeout, log["runs"])
                else:
                    good = check_kernel(kernel, kind, shapes, rng, args.timeout, log["runs"])
                # Timed: the GEMMs, and the stream kernels whose instances read disjoint
                # tiles (a "sum" kernel's instances all read the same tiles, from L2).
                if good and not args.small and kind == "gemm":
                    t = timed_gemm(kernel, rng, args.repeat)
                    log["timings"].append(t)
                    say(f"{name} {'x'.join(map(str, GEMM_FULL))}: {t['median_s'] * 1e3:.3f} "
                        f"ms median, {t['tflop_s']:.1f} TFLOP/s")  # fmt: skip
                elif good and not args.small and kind == "tile":
                    for t in timed_tile_kernel(kernel, rng, args.repeat):
                        log["timings"].append(t)
                        say(f"{name}: {json.dumps(t)}")
                elif good and not args.small and kind == "share":
                    t = timed(kernel, rng, args.repeat)
                    log["timings"].append(t)
                    say(f"{name} {FULL[0]}x{FULL[1]}: {t['median_s'] * 1e3:.3f} ms median, "
                        f"{t['tb_s']:.2f} TB/s, {t['tflop_s']:.1f} TFLOP/s")  # fmt: skip
            except runtime.Hang as e:
                say(str(e))
                log["hang"] = str(e)
                finish(3)
                os._exit(3)  # the kernel still spins: no clean-up can return
            status |= 0 if good else 1
            finish("running")  # kept current: gpu_check.sh's timeout kills without a word
    if not args.no_baselines and not args.small:
        nbytes = FULL[0] * FULL[1] * 128 * 128 * 2
        log["baselines"] = baselines(nbytes, args.repeat)
        log["baselines"]["cublas_bf16_gemm"] = cublas_gemm(args.repeat)
        log["baselines"]["tile_kernels"] = torch_tile_baselines(args.repeat)
        say(f"baselines: {json.dumps(log['baselines'], default=str)[:400]}")
    if not args.no_sanitizer:
        log["sanitizer"] = sanitizer(artifacts, args.timeout)
        if any(r.get("ok") is False for r in log["sanitizer"].values() if isinstance(r, dict)):
            status |= 1  # a memcheck / synccheck finding fails the check like a mismatch
    missing = f"; {len(log['not_built'])} not built (above)" if log["not_built"] else ""
    verdict = "all results match numpy" if not status else "MISMATCH"
    say(f"{verdict}{missing}; log {out_dir}/gpu_check.json")
    return finish(status)


if __name__ == "__main__":
    sys.exit(main())
