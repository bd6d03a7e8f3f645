"""Kernels over whole tensors on the CPU: kernels/gemm.vx (bf16 in, f32 out, one instance
per 128 x 128 tile of C) on every core against numpy, and the check time of gemm.vx.

    .venv/bin/python benchmarks/bench_kernels.py [--sizes 1024 2048] [--repeat 5]

Goals (docs/PERFORMANCE.md, "Kernels"): bf16 gemm >= 1.2x numpy's f32 `a @ b` on the
widened data with as many OpenBLAS threads as cores, and >= 1.6x the GFLOP/s of the same
kernel on f32 tiles (gemm.vx with `bf16` replaced by `f32`), in the same run; the check
of gemm.vx warm <= 10 ms, every solver query included, and how many queries it asks.
"""

from __future__ import annotations

import os

CORES = len(os.sched_getaffinity(0))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = str(CORES)  # numpy gets as many BLAS threads as the kernel gets cores
for _var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # compare with OpenBLAS's best kernel
    os.environ.pop(_var, None)

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc import api, runtime  # noqa: E402

GEMM = ROOT / "kernels" / "gemm.vx"


def build(text: bytes, out: Path):
    source = api.Source("kernels/gemm.vx", text)
    result = api.build(api.analyze([source]), "cpu")
    assert result.ok, api.render(result.diagnostics, [source])
    return runtime.load_outputs(result.outputs, out)


def best(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def gemm_bench(sizes: list[int], repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = build(GEMM.read_bytes(), Path(tmp) / "bf16")
        f32 = build(GEMM.read_bytes().replace(b"bf16", b"f32"), Path(tmp) / "f32")
        for s in sizes:
            one_size(bf16, f32, s, repeat)


def one_size(bf16, f32, s: int, repeat: int) -> None:
    """One size: the bf16 kernel, the same kernel on f32 tiles, numpy on the widened data."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    c = np.empty((s, s), np.float32)
    n = (s // 128) ** 2
    flops = 2.0 * s**3
    t_bf16 = best(lambda: bf16.gemm.launch(n, s, s, s, a, b, c), repeat)
    err = float(np.abs(c - af.astype(np.float64) @ bf.astype(np.float64)).max())
    t_f32 = best(lambda: f32.gemm.launch(n, s, s, s, af, bf, c), repeat)
    t_np = best(lambda: af @ bf, repeat)
    g = {k: flops / t / 1e9 for k, t in (("bf16", t_bf16), ("f32", t_f32), ("np", t_np))}
    print(
        f"gemm {s}^3 ({n} instances, {CORES} cores): bf16 {t_bf16 * 1e3:.1f} ms "
        f"{g['bf16']:.1f} GFLOP/s | f32 kernel {g['f32']:.1f} GFLOP/s | numpy f32 "
        f"{CORES} threads {g['np']:.1f} GFLOP/s | bf16/numpy {g['bf16'] / g['np']:.2f}x "
        f"(goal 1.2) | bf16/f32 {g['bf16'] / g['f32']:.2f}x (goal 1.6) | max error "
        f"vs f64 {err:.2e}"
    )


def check_bench(repeat: int) -> None:
    source = api.Source("kernels/gemm.vx", GEMM.read_bytes())
    t0 = time.perf_counter()
    analysis = api.analyze([source])
    checked = api.check_target(analysis, "cpu")
    cold = time.perf_counter() - t0
    warm, full, cpu = [], [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        checked = api.check_target(analysis, "cpu")
        warm.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)  # what a loaded machine's wall time hides
        t0 = time.perf_counter()
        api.check([source], "cpu")
        full.append(time.perf_counter() - t0)
    stats = checked.solver.stats
    print(
        f"check gemm.vx: cold {cold * 1e3:.1f} ms | warm (analysis cached, the worker's case) "
        f"median {statistics.median(warm) * 1e3:.2f} ms (goal 10), CPU time median "
        f"{statistics.median(cpu) * 1e3:.2f} ms | warm from source "
        f"median {statistics.median(full) * 1e3:.2f} ms | {stats.obligations} solver queries, "
        f"{stats.seconds * 1e3:.2f} ms in z3 (warm)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {CORES} cores in the affinity mask, load {os.getloadavg()[0]:.2f}")
    check_bench(20)
    gemm_bench(args.sizes, args.repeat)


if __name__ == "__main__":
    main()
