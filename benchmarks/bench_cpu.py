"""CPU backend benchmark: the seed `stream` kernel vs numpy on one core, build time, the
launch grid (`stream_grid`) on every core, and the bf16 gemm against numpy and XLA:CPU.

    .venv/bin/python benchmarks/bench_cpu.py [--tiles 256] [--repeat 20] [--only grid]
    .venv/bin/python benchmarks/bench_cpu.py --only gemm [--gemm-sizes 1024,2048] [--repeat 11]

Goals (docs/PERFORMANCE.md, "CPU backend"): kernel >= 0.5x numpy GFLOP/s with
one BLAS thread, measured in the same run; warm in-process build <= 200 ms.
Grid (docs/PERFORMANCE.md, "Launch grid"): 2 instances >= 1.7x one instance on the
same tiles, and >= 1.0x numpy with 2 OpenBLAS threads (f32, and bf16 against numpy's
f32 on the widened data: numpy has no bf16 matmul). numpy's 2-thread figures come
from a child process of this run (OpenBLAS reads its thread count at import).
Gemm (docs/PERFORMANCE.md, "bf16 gemm on AMX"; issue 34): kernels/gemm.vx with bf16
inputs and f32 out on 2 threads, against numpy f32 (2 BLAS threads) on the widened data
and XLA:CPU's `jnp.dot` of the bf16 inputs with f32 accumulation, interleaved in one
child process pinned to 2 cores; it prints the CPU model, the matmul variant the kernel
runs (`amx` where the host has it) and the load. Goal at 2048^3: vx >= 1.0x XLA:CPU.
Fused (docs/PERFORMANCE.md, "Fused tile trees"; issue 31; cpu_fused.py): softmax.vx and
the natural softmax against `jax.nn.softmax`, gemm_epilogue.vx against gemm.vx and
attention.vx, each fused and unfused, in one child pinned to 2 cores:

    .venv/bin/python benchmarks/bench_cpu.py --only fused [--repeat 20] [--epilogue-sizes 1024,2048]
"""

from __future__ import annotations

import os

# BLAS reads these when numpy is first imported: one thread, to compare one core with one core
# (the grid's numpy child asks for more through VX_BENCH_BLAS_THREADS).
BLAS_THREADS = os.environ.get("VX_BENCH_BLAS_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = BLAS_THREADS
# This workplace pins OpenBLAS to an older core type (OPENBLAS_CORETYPE=Haswell) for old
# OpenBLAS builds; that would handicap numpy here. Compare against its best kernel.
PINNED = {
    v: os.environ.pop(v) for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ
}

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
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
GRID = ROOT / "kernels" / "stream_grid.vx"


def build_from_source(cpu: str = "native") -> dict[str, bytes]:
    """The whole pipeline in process: parse, check, lower to vx, CPU backend."""
    source = api.Source("kernels/stream.vx", KERNEL.read_bytes())
    result = api.build(api.analyze([source]), "cpu", cpu=cpu)
    assert result.ok, result.diagnostics
    return result.outputs


def best_time(fn, repeat: int) -> float:
    fn()  # warm caches and page in buffers
    return min(_timed(fn) for _ in range(repeat))


def interleaved(fns, repeat: int) -> list[float]:
    """Best time of each function, run in turn `repeat` times (after one warm-up each)."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], _timed(fn))
    return best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def grid_kernel(elem: str):
    """kernels/stream_grid.vx built in process (`bf16`, or `f32` by swapping the tile type)."""
    text = GRID.read_text()
    if elem != "bf16":
        text = text.replace("Tensor<bf16,", f"Tensor<{elem},")
    source = api.Source("kernels/stream_grid.vx", text.encode())
    result = api.build(api.analyze([source]), "cpu")
    assert result.ok, result.diagnostics
    tmp = tempfile.mkdtemp(prefix="vx-bench-grid-")
    return runtime.load_outputs(result.outputs, tmp).stream_grid


def numpy_times(tiles: np.ndarray, w: np.ndarray, repeat: int) -> dict[str, float]:
    """Best times of numpy's `acc += t @ w` loop, its batched matmul + sum, and the one
    (n*128 x 128) @ (128 x 128) GEMM that batched form amounts to."""
    n = len(tiles)
    buf = np.empty_like(tiles)

    def loop() -> np.ndarray:
        acc = np.zeros(w.shape, np.float32)
        for i in range(n):
            acc += tiles[i] @ w
        return acc

    def batched() -> np.ndarray:
        return np.matmul(tiles, w, out=buf).sum(axis=0)

    flat = tiles.reshape(-1, tiles.shape[-1])
    out2 = np.empty((flat.shape[0], w.shape[1]), np.float32)

    def gemm() -> np.ndarray:
        return np.matmul(flat, w, out=out2).reshape(n, -1, w.shape[1]).sum(axis=0)

    return {
        "loop": best_time(loop, repeat),
        "batched": best_time(batched, repeat),
        "gemm": best_time(gemm, repeat),
    }


def grid_data(n: int):
    rng = np.random.default_rng(1)
    tiles = rng.standard_normal((n, 128, 128), dtype=np.float32)
    w = rng.standard_normal((128, 128), dtype=np.float32)
    return tiles, w


def numpy_child(n: int, repeat: int) -> None:
    """Run in a child with VX_BENCH_BLAS_THREADS set: numpy's times as JSON on stdout."""
    import ml_dtypes

    tiles, w = grid_data(n)
    widened = [x.astype(ml_dtypes.bfloat16).astype(np.float32) for x in (tiles, w)]
    print(json.dumps({"f32": numpy_times(tiles, w, repeat), "bf16": numpy_times(*widened, repeat)}))


def grid_bench(n: int, repeat: int) -> None:
    import ml_dtypes

    tiles, w = grid_data(n)
    flops = 2.0 * 128 * 128 * 128 * n
    env = dict(os.environ, VX_BENCH_BLAS_THREADS="2")
    child = subprocess.run(
        [sys.executable, __file__, "--numpy-child", str(n), "--repeat", str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    np2 = json.loads(child.stdout)
    cores = len(os.sched_getaffinity(0))
    print(f"\nstream_grid: {n} tiles of 128x128, w 128x128, f32 accumulator; {cores} cores")
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min)")
    rows = []
    for elem in ("f32", "bf16"):
        kernel = grid_kernel(elem)
        if elem == "bf16":
            t_in, w_in = tiles.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)
            ref = t_in.astype(np.float32).sum(axis=0) @ w_in.astype(np.float32)
        else:
            t_in, w_in = tiles, w
            ref = tiles.sum(axis=0) @ w
        # Alternate the two launches so that load from other jobs hits both alike.
        t1, t2 = interleaved(
            [
                lambda k=kernel, a=t_in, b=w_in: k.launch(a, b, instances=1),
                lambda k=kernel, a=t_in, b=w_in: k.launch(a, b, instances=2),
            ],
            repeat,
        )
        got = kernel.launch(t_in, w_in, instances=2).sum(axis=0)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-2 * np.abs(ref).max())
        best_np = min(np2[elem].values())
        what = "f32" if elem == "f32" else "f32 on the bf16-widened data"
        rows += [
            (f"vx {elem}, 1 instance", f"{flops / t1 / 1e9:8.1f} GFLOP/s", f"{t1 * 1e3:8.2f} ms"),
            (
                f"vx {elem}, 2 instances",
                f"{flops / t2 / 1e9:8.1f} GFLOP/s",
                f"{t2 * 1e3:8.2f} ms",
            ),
            *(
                (
                    f"numpy {form} (2 threads, {what})",
                    f"{flops / t / 1e9:8.1f} GFLOP/s",
                    f"{t * 1e3:8.2f} ms",
                )
                for form, t in np2[elem].items()
            ),
            (f"vx {elem}: 2 instances / 1", f"{t1 / t2:8.2f} x", "goal >= 1.7x"),
            (f"vx {elem} 2 instances / best numpy", f"{best_np / t2:8.2f} x", "goal >= 1.0x"),
        ]
    width = max(len(r[0]) for r in rows)
    for name, a, b in rows:
        print(f"  {name:<{width}}  {a:>18}  {b}")
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")


def cpu_model() -> str:
    """lscpu's model name (what PERFORMANCE.md names the host by), else LLVM's CPU name."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return host_target().cpu
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line]
    return f"{names[0] if names else '?'} (LLVM: {host_target().cpu})"


def gemm_kernel(tmp: str, vector_path: bool, elem: str = "bf16"):
    """kernels/gemm.vx built for this host (`elem` f32: its inputs made f32); `vector_path`:
    its AMX sites (if any) told by VX_CPU_VARIANT to run the vector path (the artifact
    asks when it is loaded)."""
    text = (ROOT / "kernels" / "gemm.vx").read_text().replace("Tensor<bf16,", f"Tensor<{elem},")
    source = api.Source("kernels/gemm.vx", text.encode())
    result = api.build(api.analyze([source]), "cpu")
    assert result.ok, result.diagnostics
    before = os.environ.pop("VX_CPU_VARIANT", None)
    if vector_path:
        os.environ["VX_CPU_VARIANT"] = "avx512"
    try:
        return runtime.load_outputs(result.outputs, tmp).gemm
    finally:
        os.environ.pop("VX_CPU_VARIANT", None)
        if before is not None:
            os.environ["VX_CPU_VARIANT"] = before


def gemm_any_kernel(tmp: str):
    """kernels/gemm_any.vx (edge views: any shape) built for this host."""
    path = ROOT / "kernels" / "gemm_any.vx"
    result = api.build(api.analyze([api.Source("kernels/gemm_any.vx", path.read_bytes())]), "cpu")
    assert result.ok, result.diagnostics
    return runtime.load_outputs(result.outputs, tmp).gemm_any


def _square_inputs(size: int) -> tuple:
    """A and B of one square size: bf16, their f32 widening, and the bf16 pair on jax."""
    import jax
    import ml_dtypes

    rng = np.random.default_rng(size)
    a = rng.standard_normal((size, size), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size), dtype=np.float32).astype(ml_dtypes.bfloat16)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    return a, b, a32, b32, jax.device_put(a), jax.device_put(b)


def ragged_size(size: int, kernel, dot, repeat: int) -> None:
    """gemm_any at a prime size (no whole tile at the edges) against numpy and XLA:CPU."""
    m = n = k = size
    a, b, a32, b32, ja, jb = _square_inputs(size)
    c = np.zeros((m, n), np.float32)
    grid = ((m + 127) // 128) * ((n + 127) // 128)
    fns = {
        "vx bf16, gemm_any": lambda: kernel.launch(m, n, k, a, b, c, threads=2, instances=grid),
        "numpy f32 (widened)": lambda: a32 @ b32,
        "XLA:CPU bf16 -> f32": lambda: dot(ja, jb).block_until_ready(),
    }
    times = dict(zip(fns, interleaved(list(fns.values()), repeat), strict=True))
    np.testing.assert_allclose(c, a32 @ b32, rtol=1e-3, atol=1e-3 * np.sqrt(k))
    print(f"{size}^3 (ragged):")
    for name, t in times.items():
        print(f"  {name:<24} {t * 1e3:9.2f} ms  {2.0 * m * n * k / t / 1e9:8.1f} GFLOP/s")


def widening_gemm_kernel(tmp: str):
    """kernels/gemm.vx for this host without AVX512_BF16 and AMX: bf16 widened to f32 into
    the FMA micro-kernel (which bf16 path wins depends on the microarchitecture, issue 34)."""
    from vxc.backends.cpu import HostTarget

    source = api.Source("kernels/gemm.vx", (ROOT / "kernels" / "gemm.vx").read_bytes())
    result = api.build(api.analyze([source]), "cpu", emit="vx-mlir:after=fold-transpose")
    assert result.ok, result.diagnostics
    (mlir,) = result.outputs.values()
    host = host_target()
    dropped = {"+avx512bf16", "+amx-tile", "+amx-bf16"}
    features = ",".join(f for f in host.features.split(",") if f not in dropped)
    target = HostTarget(host.triple, host.cpu, features)
    outputs = compile_module(parse_module(mlir.decode()), "gemm", target=target)
    return runtime.load_outputs(outputs, tmp).gemm


def _variant(kernel) -> str:
    """The matmul path the kernel runs here: the object's own answer where it has AMX."""
    vector = [v for v in kernel.variants if v != "amx"]
    if kernel.amx == 1:
        return "amx"
    why = {0: " (AMX refused by the OS)", -1: " (AMX off: VX_CPU_VARIANT)"}.get(kernel.amx, "")
    return ",".join(vector) + why


def gemm_child(sizes: list[int], repeat: int) -> None:
    """Run in a child pinned to 2 cores with 2 BLAS threads (`gemm_bench`): print the table."""
    import jax
    import jax.numpy as jnp

    tmp = tempfile.mkdtemp(prefix="vx-bench-gemm-")
    kernels = {"vx bf16": gemm_kernel(tmp + "/native", vector_path=False)}
    if kernels["vx bf16"].amx == 1:  # the same source on the vector path, for comparison
        kernels["vx bf16, vector path"] = gemm_kernel(tmp + "/vector", vector_path=True)
    kernels["vx bf16, widening + FMA"] = widening_gemm_kernel(tmp + "/widening")
    kernels["vx f32 (widened data)"] = gemm_kernel(tmp + "/f32", vector_path=False, elem="f32")
    # kernels/gemm_any.vx: every tile an `edge` view (any m, n, k >= 1), here at whole tiles
    kernels["vx bf16, gemm_any"] = gemm_any_kernel(tmp + "/any")
    dot = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
    print(f"\nbf16 gemm, f32 out; host {cpu_model()}, {len(os.sched_getaffinity(0))} cores used")
    print(f"numpy {np.__version__}, jax {jax.__version__}; min of {repeat} interleaved runs")
    for name, k in kernels.items():
        print(f"  {name}: variants {list(k.variants)}, runs {_variant(k)}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min)")
    for size in sizes:
        if size % 128:  # only gemm_any takes it
            ragged_size(size, kernels["vx bf16, gemm_any"], dot, repeat)
        else:
            gemm_size(size, kernels, dot, repeat)
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")


def gemm_size(size: int, kernels: dict, dot, repeat: int) -> None:
    """One square size: every contender interleaved, checked against numpy, then printed."""
    m = n = k = size
    a, b, a32, b32, ja, jb = _square_inputs(size)
    outs = {name: np.zeros((m, n), np.float32) for name in kernels}
    grid = (m // 128) * (n // 128)
    inputs = {"bf16": (a, b), "f32": (a32, b32)}
    fns = {
        name: (
            lambda kern=kern, c=outs[name], x=inputs[kern.params[3]["dtype"]]: kern.launch(
                m, n, k, *x, c, threads=2, instances=grid
            )
        )
        for name, kern in kernels.items()
    }
    fns["numpy f32 (widened)"] = lambda: a32 @ b32
    fns["XLA:CPU bf16 -> f32"] = lambda: dot(ja, jb).block_until_ready()
    times = dict(zip(fns, interleaved(list(fns.values()), repeat), strict=True))
    want = a32 @ b32
    for name in kernels:
        np.testing.assert_allclose(outs[name], want, rtol=1e-3, atol=1e-3 * np.sqrt(k))
    flops = 2.0 * m * n * k
    print(f"{size}^3:")
    for name, t in times.items():
        print(f"  {name:<24} {t * 1e3:9.2f} ms  {flops / t / 1e9:8.1f} GFLOP/s")
    vx = times["vx bf16"]
    print(f"  vx bf16 / XLA:CPU     {times['XLA:CPU bf16 -> f32'] / vx:6.2f} x  (goal >= 1.0x)")
    print(f"  vx bf16 / numpy f32   {times['numpy f32 (widened)'] / vx:6.2f} x  (goal >= 1.3x)")
    f32 = times["numpy f32 (widened)"] / times["vx f32 (widened data)"]
    print(f"  vx f32 / numpy f32    {f32:6.2f} x  (goal >= 1.1x)")


def two_core_child(flag: str, sizes: list[int], repeat: int) -> None:
    """Run this script's `flag` child on 2 cores, with 2 BLAS, XLA and vx threads: OpenBLAS
    and XLA size their pools at import."""
    env = dict(os.environ, VX_BENCH_BLAS_THREADS="2", VX_NUM_THREADS="2")
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "")
        + " --xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=2"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, __file__, flag, ",".join(map(str, sizes))]
    subprocess.run([*cmd, "--repeat", str(repeat)], env=env, check=True)


def gemm_bench(sizes: list[int], repeat: int) -> None:
    """The gemm table from a child on 2 cores."""
    two_core_child("--gemm-child", sizes, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--grid-tiles", type=int, default=512)
    ap.add_argument("--gemm-sizes", default="1024,2048", help="square gemm sizes, comma-separated")
    ap.add_argument("--epilogue-sizes", default="1024,2048", help="gemm_epilogue sizes (fused)")
    ap.add_argument("--only", choices=("stream", "grid", "gemm", "fused"), default=None)
    ap.add_argument("--numpy-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--gemm-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--fused-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fused_child is not None:  # cpu_fused.py: softmax, gemm_epilogue, attention
        from cpu_fused import fused_child

        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
        fused_child(args.repeat, [int(s) for s in args.fused_child.split(",")])
        return
    if args.numpy_child is not None:
        numpy_child(args.numpy_child, args.repeat)
        return
    if args.gemm_child is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])  # 2 threads on 2 cores
        gemm_child([int(s) for s in args.gemm_child.split(",")], args.repeat)
        return
    if args.only in (None, "stream"):
        stream_bench(args)
    if args.only in (None, "grid"):
        grid_bench(args.grid_tiles, args.repeat)
    if args.only in (None, "gemm"):
        gemm_bench([int(s) for s in args.gemm_sizes.split(",")], args.repeat)
    if args.only in (None, "fused"):
        sizes = [int(s) for s in args.epilogue_sizes.split(",")]
        two_core_child("--fused-child", sizes, args.repeat)


def stream_bench(args) -> None:
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
