"""Kernels over whole tensors on the CPU: kernels/gemm.vx (bf16 in, f32 out, one instance
per 128 x 128 tile of C) on every core against numpy, and the check time of gemm.vx;
the tile-arithmetic kernels (LANGUAGE.md 4.3): gemm_epilogue.vx against gemm.vx,
softmax.vx against numpy, attention.vx against JAX's XLA:CPU and a numpy reference.

    .venv/bin/python benchmarks/bench_kernels.py [--sizes 1024 2048] [--repeat 5]
    .venv/bin/python benchmarks/bench_kernels.py --only tiles   # the tile kernels alone

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
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # XLA:CPU is the reference (no libtpu probing)
for _var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # compare with OpenBLAS's best kernel
    os.environ.pop(_var, None)

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc import api, runtime  # noqa: E402

GEMM = ROOT / "kernels" / "gemm.vx"


def build(text: bytes, out: Path, name: str = "kernels/gemm.vx"):
    source = api.Source(name, text)
    result = api.build(api.analyze([source]), "cpu")
    assert result.ok, api.render(result.diagnostics, [source])
    return runtime.load_outputs(result.outputs, out)


def best(fn, repeat: int) -> float:
    return interleaved({"fn": fn}, repeat)["fn"]


@dataclass
class Timed:
    """Best of each contender: wall time, and the process's CPU time (every thread's), which
    the other sessions' load does not inflate (a vx launch's threads end with it; numpy's
    OpenBLAS threads spin, so its CPU time is not comparable)."""

    wall: dict[str, float]
    cpu: dict[str, float]


def timed(fns: dict[str, Callable[[], object]], repeat: int) -> Timed:
    """Each of `fns` run in turn `repeat` times (after one warm-up each): on a shared
    machine a burst of load then slows every contender, not only the one that ran in it,
    so the same-run ratios hold better than with each measured in a block."""
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return Timed({n: min(t) for n, t in wall.items()}, {n: min(t) for n, t in cpu.items()})


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    return timed(fns, repeat).wall


def gemm_bench(sizes: list[int], repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = build(GEMM.read_bytes(), Path(tmp) / "bf16")
        f32 = build(GEMM.read_bytes().replace(b"bf16", b"f32"), Path(tmp) / "f32")
        for s in sizes:
            one_size(bf16, f32, s, repeat)
        gemm_breakdown(sizes[0], repeat, Path(tmp))


def one_size(bf16, f32, s: int, repeat: int) -> None:
    """One size: the bf16 kernel, the same kernel on f32 tiles, numpy on the widened data."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    c = np.empty((s, s), np.float32)
    n = (s // 128) ** 2
    flops = 2.0 * s**3
    c32 = np.empty((s, s), np.float32)
    t = timed(
        {
            "bf16": lambda: bf16.gemm.launch(s, s, s, a, b, c, instances=n),
            "f32": lambda: f32.gemm.launch(s, s, s, af, bf, c32, instances=n),
            "np": lambda: af @ bf,
        },
        repeat,
    )
    err = float(np.abs(c - af.astype(np.float64) @ bf.astype(np.float64)).max())
    t_bf16 = t.wall["bf16"]
    g = {k: flops / v / 1e9 for k, v in t.wall.items()}
    print(
        f"gemm {s}^3 ({n} instances, {CORES} cores): bf16 {t_bf16 * 1e3:.1f} ms "
        f"{g['bf16']:.1f} GFLOP/s | f32 kernel {g['f32']:.1f} GFLOP/s | numpy f32 "
        f"{CORES} threads {g['np']:.1f} GFLOP/s | bf16/numpy {g['bf16'] / g['np']:.2f}x "
        f"(goal 1.2) | bf16/f32 {g['bf16'] / g['f32']:.2f}x (goal 1.6; in CPU time "
        f"{t.cpu['f32'] / t.cpu['bf16']:.2f}x) | max error vs f64 {err:.2e}"
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


def kernel(name: str, out: Path, entry: str | None = None):
    """kernels/NAME.vx's kernel `entry` (by default NAME; attention.vx's generic entry
    builds as `attention__128`, its default head dimension)."""
    path = ROOT / "kernels" / f"{name}.vx"
    return getattr(build(path.read_bytes(), out / name, f"kernels/{name}.vx"), entry or name)


def epilogue_bench(sizes: list[int], repeat: int, tmp: Path) -> None:
    """relu(A @ B + bias) with a bf16 output against gemm.vx alone (goal: within 10 %)."""
    gemm, epi = kernel("gemm", tmp), kernel("gemm_epilogue", tmp)
    for s in sizes:
        one_epilogue(gemm, epi, s, repeat)


def one_epilogue(gemm, epi, s: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal((1, s)).astype(np.float32)
    c32, c16 = np.empty((s, s), np.float32), np.empty((s, s), ml_dtypes.bfloat16)
    n = (s // 128) ** 2
    t = timed(
        {
            "gemm": lambda: gemm.launch(s, s, s, a, b, c32, instances=n),
            "epi": lambda: epi.launch(s, s, s, a, b, bias, c16, instances=n),
        },
        repeat,
    )
    t_g, t_e = t.wall["gemm"], t.wall["epi"]
    print(
        f"gemm_epilogue {s}^3: {t_e * 1e3:.1f} ms | gemm {t_g * 1e3:.1f} ms | "
        f"epilogue/gemm {t_e / t_g:.2f}x (goal <= 1.10; in CPU time "
        f"{t.cpu['epi'] / t.cpu['gemm']:.2f}x)"
    )


def softmax_bench(repeat: int, tmp: Path, m: int = 8192, n: int = 1024) -> None:
    sm = kernel("softmax", tmp)
    x = np.random.default_rng(0).standard_normal((m, n)).astype(np.float32)
    y = np.empty_like(x)

    def ref():
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    t_k = best(lambda: sm.launch(m, n, x, y, instances=m // 8), repeat)
    t_np = best(ref, repeat)
    err = float(np.abs(y - ref()).max())
    print(
        f"softmax [{m}, {n}] f32: softmax.vx {t_k * 1e3:.1f} ms | numpy {t_np * 1e3:.1f} ms | "
        f"numpy/vx {t_np / t_k:.2f}x (goal >= 1.0) | max error {err:.1e}"
    )


def attention_bench(repeat: int, tmp: Path, s: int = 2048, h: int = 8) -> None:
    """Seq 2048, 8 heads, head dim 128, bf16 in, f32 out; causal and not."""
    att = kernel("attention", tmp, ATTENTION_ENTRY)
    rng = np.random.default_rng(0)
    qkv = [rng.standard_normal((h * s, 128)).astype(ml_dtypes.bfloat16) for _ in range(3)]
    for causal in (False, True):
        one_attention(att, qkv, h, s, causal, repeat)


def one_attention(att, qkv: list, h: int, s: int, causal: bool, repeat: int) -> None:
    import jax
    import jax.numpy as jnp

    q, k, v = qkv
    n, d = h * s, 128
    o = np.empty((n, d), np.float32)
    scale = np.float32(d**-0.5)
    qj, kj, vj = (jnp.asarray(t.reshape(h, s, d).transpose(1, 0, 2)[None]) for t in qkv)
    qf, kf, vf = (t.astype(np.float32).reshape(h, s, d) for t in qkv)
    t_k = best(lambda: att.launch(h, s, n, causal, scale, q, k, v, o, instances=n // 128), repeat)
    f = jax.jit(lambda a, b, c: jax.nn.dot_product_attention(a, b, c, is_causal=causal))
    t_j = best(lambda: f(qj, kj, vj).block_until_ready(), repeat)

    def numpy_ref():
        sc = qf @ kf.transpose(0, 2, 1) * scale
        if causal:
            sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ vf

    t_np = best(numpy_ref, repeat)
    err = float(np.abs(o.reshape(h, s, d) - numpy_ref()).max())
    print(
        f"attention s={s} h={h} d={d} {'causal' if causal else 'full'}: attention.vx "
        f"{t_k * 1e3:.1f} ms | XLA:CPU {t_j * 1e3:.1f} ms ({t_j / t_k:.2f}x, goal >= 1.0) | "
        f"numpy {t_np * 1e3:.1f} ms ({t_np / t_k:.2f}x) | max error {err:.1e}"
    )


# Where a kernel's time goes: the kernel with one part taken out (the results are wrong;
# only the time is read). The difference to the whole kernel is that part's cost.
# attention.vx has a key loop for each value of `causal`: each edit is made in both.
ATTENTION_ENTRY = "attention__128"
ATTENTION_WITHOUT = {
    "exp": [("st = exp(st - mn);", "st = (st - mn);")] * 2,
    "matmuls": [
        ("matmul_acc(&mut sc, &qt, &transpose(kt));", ""),
        ("matmul_acc(&mut acc, &cast::<bf16>(st), &vt);", ""),
    ]
    * 2,
}
GEMM_WITHOUT = {"matmul_acc": [("matmul_acc(&mut acc, &at, &bt);", "")] * 2}


def breakdown(
    name: str, text: str, without: dict, args: tuple, repeat: int, tmp: Path, entry: str = ""
) -> str:
    """`whole X ms; part Y ms (share), ...; the rest Z ms (share)`, the variants interleaved.
    `args`: the instance count, then the kernel's arguments."""
    runs = {}
    for part, edits in [("whole kernel", []), *without.items()]:
        variant = text
        for old, new in edits:
            assert old in variant, old
            variant = variant.replace(old, new, 1)
        out = tmp / f"{name}_without_{part.replace(' ', '_')}"
        fn = getattr(build(variant.encode(), out, f"kernels/{name}.vx"), entry or name)
        runs[part] = lambda fn=fn: fn.launch(*args[1:], instances=args[0])
    times = interleaved(runs, repeat)
    whole = times.pop("whole kernel")
    shares = "".join(
        f"{part} {(whole - t) * 1e3:.1f} ms ({(whole - t) / whole:.0%}); "
        for part, t in times.items()
    )
    rest = whole - sum(whole - t for t in times.values())
    return f"whole {whole * 1e3:.1f} ms; {shares}the rest {rest * 1e3:.1f} ms ({rest / whole:.0%})"


def gemm_breakdown(s: int, repeat: int, tmp: Path) -> None:
    """bf16 gemm.vx with and without its matmuls: the rest is the view copies and the store."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16) for _ in range(2))
    args = ((s // 128) ** 2, s, s, s, a, b, np.empty((s, s), np.float32))
    line = breakdown("gemm", GEMM.read_text(), GEMM_WITHOUT, args, repeat, tmp)
    print(f"gemm {s}^3 bf16, where the time goes: {line} (the view copies and the store)")


def attention_breakdown(repeat: int, tmp: Path, s: int = 2048, h: int = 8) -> None:
    text = (ROOT / "kernels" / "attention.vx").read_text()
    rng = np.random.default_rng(0)
    n = h * s
    q, k, v = (rng.standard_normal((n, 128)).astype(ml_dtypes.bfloat16) for _ in range(3))
    o = np.empty((n, 128), np.float32)
    args = (n // 128, h, s, n, False, np.float32(1 / 128**0.5), q, k, v, o)
    line = breakdown("attention", text, ATTENTION_WITHOUT, args, repeat, tmp, ATTENTION_ENTRY)
    print(f"attention s={s} h={h} full, where the time goes: {line} (copies, the other tile ops)")


def tiles_bench(sizes: list[int], repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        epilogue_bench(sizes, repeat, Path(tmp))
        softmax_bench(repeat, Path(tmp))
        attention_bench(repeat, Path(tmp))
        attention_breakdown(repeat, Path(tmp))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", choices=["gemm", "tiles"], help="one group of benchmarks")
    args = ap.parse_args()
    print(f"machine: {CORES} cores in the affinity mask, load {os.getloadavg()[0]:.2f}")
    if args.only != "tiles":
        check_bench(20)
        gemm_bench(args.sizes, args.repeat)
    if args.only != "gemm":
        tiles_bench(args.sizes, args.repeat)


if __name__ == "__main__":
    main()
