"""CPU backend benchmark: the seed `stream` kernel vs numpy on one core, and build time.

    .venv/bin/python benchmarks/bench_cpu.py [--tiles 256] [--repeat 20]

Goals (docs/PERFORMANCE.md, "CPU backend"): kernel >= 0.5x numpy GFLOP/s with
one BLAS thread, measured in the same run; warm in-process build <= 200 ms.
"""

from __future__ import annotations

import os

# BLAS reads these when numpy is first imported: one thread, to compare one core with one core.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc import runtime  # noqa: E402
from vxc.backends.cpu import compile_module, host_target  # noqa: E402
from vxc.ir import parse_module  # noqa: E402

SEED = ROOT / "tests" / "ir" / "data" / "stream.vx.mlir"


def best_time(fn, repeat: int) -> float:
    fn()  # warm caches and page in buffers
    return min(_timed(fn) for _ in range(repeat))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    text = SEED.read_text()

    # Build time: the first build pays for LLVM/MLIR initialisation; "warm" is the median after.
    t0 = time.perf_counter()
    outputs = compile_module(parse_module(text), "stream")
    cold = time.perf_counter() - t0
    warm = statistics.median(
        _timed(lambda: compile_module(parse_module(text), "stream")) for _ in range(10)
    )
    warm_obj = statistics.median(
        _timed(lambda: compile_module(parse_module(text), "stream", shared=False))
        for _ in range(10)
    )

    rng = np.random.default_rng(0)
    tiles = rng.random((args.tiles, 128, 128), dtype=np.float32)
    w = rng.random((128, 128), dtype=np.float32)
    flops = 2.0 * 128 * 128 * 128 * args.tiles

    with tempfile.TemporaryDirectory() as tmp:
        kernel = runtime.load_outputs(outputs, tmp).stream
        t_vx = best_time(lambda: kernel(tiles, w), args.repeat)
        out = kernel(tiles, w)

    def numpy_loop() -> np.ndarray:
        acc = np.zeros((128, 128), np.float32)
        for i in range(args.tiles):
            acc += tiles[i] @ w
        return acc

    buf = np.empty_like(tiles)

    def numpy_batched() -> np.ndarray:
        return np.matmul(tiles, w, out=buf).sum(axis=0)

    t_loop = best_time(numpy_loop, args.repeat)
    t_batch = best_time(numpy_batched, args.repeat)
    np.testing.assert_allclose(out, numpy_loop(), rtol=1e-4)

    t_np = min(t_loop, t_batch)
    target = host_target()
    rows = [
        ("vx cpu stream kernel", f"{flops / t_vx / 1e9:8.1f} GFLOP/s", f"{t_vx * 1e3:8.2f} ms"),
        (
            "numpy loop (1 thread)",
            f"{flops / t_loop / 1e9:8.1f} GFLOP/s",
            f"{t_loop * 1e3:8.2f} ms",
        ),
        (
            "numpy batched (1 thread)",
            f"{flops / t_batch / 1e9:8.1f} GFLOP/s",
            f"{t_batch * 1e3:8.2f} ms",
        ),
        ("vx / best numpy", f"{t_np / t_vx:8.2f} x", "goal >= 0.5x"),
        ("build, cold (o+h+json+so)", "", f"{cold * 1e3:8.1f} ms"),
        ("build, warm (o+h+json+so)", "", f"{warm * 1e3:8.1f} ms  goal <= 200 ms"),
        ("build, warm (object only)", "", f"{warm_obj * 1e3:8.1f} ms"),
    ]
    print(f"stream, {args.tiles} tiles of 128x128 f32, host {target.cpu} ({target.triple})")
    print(f"numpy {np.__version__}; best of {args.repeat} runs")
    width = max(len(r[0]) for r in rows)
    for name, a, b in rows:
        print(f"  {name:<{width}}  {a:>18}  {b}")


if __name__ == "__main__":
    main()
