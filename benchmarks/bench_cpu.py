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
# This workplace pins OpenBLAS to an older core type (OPENBLAS_CORETYPE=Haswell) for old
# OpenBLAS builds; that would handicap numpy here. Compare against its best kernel.
PINNED = {
    v: os.environ.pop(v) for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ
}

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc import api, runtime  # noqa: E402
from vxc.backends.cpu import compile_module, host_target  # noqa: E402
from vxc.ir import parse_module  # noqa: E402

SEED = ROOT / "tests" / "ir" / "data" / "stream.vx.mlir"
KERNEL = ROOT / "kernels" / "stream.vx"


def build_from_source(cpu: str = "native") -> dict[str, bytes]:
    """The whole pipeline in process: parse, check, lower to vx, CPU backend."""
    source = api.Source("kernels/stream.vx", KERNEL.read_bytes())
    result = api.build(api.analyze([source]), "cpu", cpu=cpu)
    assert result.ok, result.diagnostics
    return result.outputs


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

    build_from_source()
    warm_src = statistics.median(_timed(build_from_source) for _ in range(10))
    src_outputs = build_from_source()

    rng = np.random.default_rng(0)
    tiles = rng.random((args.tiles, 128, 128), dtype=np.float32)
    w = rng.random((128, 128), dtype=np.float32)
    flops = 2.0 * 128 * 128 * 128 * args.tiles

    with tempfile.TemporaryDirectory() as tmp:
        kernel = runtime.load_outputs(outputs, tmp).stream
        t_vx = best_time(lambda: kernel(tiles, w), args.repeat)
        out = kernel(tiles, w)
    with tempfile.TemporaryDirectory() as tmp:
        src_kernel = runtime.load_outputs(src_outputs, tmp).stream
        t_src = best_time(lambda: src_kernel(tiles, w), args.repeat)
        np.testing.assert_allclose(src_kernel(tiles, w), out, rtol=1e-5)
    with tempfile.TemporaryDirectory() as tmp:  # what Bazel builds by default (portable)
        v3_kernel = runtime.load_outputs(build_from_source("x86-64-v3"), tmp).stream
        t_v3 = best_time(lambda: v3_kernel(tiles, w), args.repeat)
        np.testing.assert_allclose(v3_kernel(tiles, w), out, rtol=1e-5)

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
        ("vx stream, from hand IR", f"{flops / t_vx / 1e9:8.1f} GFLOP/s", f"{t_vx * 1e3:8.2f} ms"),
        (
            "vx stream, from kernels/",
            f"{flops / t_src / 1e9:8.1f} GFLOP/s",
            f"{t_src * 1e3:8.2f} ms",
        ),
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
        (
            "vx stream, --cpu x86-64-v3",
            f"{flops / t_v3 / 1e9:8.1f} GFLOP/s",
            f"{t_v3 * 1e3:8.2f} ms",
        ),
        ("vx / best numpy", f"{t_np / t_src:8.2f} x", "goal >= 0.5x (kernel from source)"),
        ("vx x86-64-v3 / best numpy", f"{t_np / t_v3:8.2f} x", "goal >= 0.5x (Bazel default)"),
        ("build, cold (o+h+json+so)", "", f"{cold * 1e3:8.1f} ms"),
        ("build, warm (o+h+json+so)", "", f"{warm * 1e3:8.1f} ms  goal <= 200 ms"),
        ("build, warm (object only)", "", f"{warm_obj * 1e3:8.1f} ms"),
        ("build from source, warm", "", f"{warm_src * 1e3:8.1f} ms  (check + lower + all files)"),
    ]
    print(f"stream, {args.tiles} tiles of 128x128 f32, host {target.cpu} ({target.triple})")
    print(
        f"numpy {np.__version__}; best of {args.repeat} runs; unset for numpy: {PINNED or 'none'}"
    )
    width = max(len(r[0]) for r in rows)
    for name, a, b in rows:
        print(f"  {name:<{width}}  {a:>18}  {b}")


if __name__ == "__main__":
    main()
