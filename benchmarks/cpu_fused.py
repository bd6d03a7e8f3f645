"""Fused tile trees on the CPU (issue 31; `bench_cpu.py --only fused` runs this in a child
pinned to 2 cores): each kernel built in this process fused (what the backend emits) and
unfused (every tile op its own loop through a buffer: the lowering before fusion, the
anchor), the softmaxes also without row buffers; interleaved with XLA:CPU, min of N,
wall and CPU time.

Goals (docs/PERFORMANCE.md, "Fused tile trees"): softmax.vx [8192, 1024] f32 >= 1.2x
`jax.nn.softmax`; gemm_epilogue.vx within 1.05x of gemm.vx at the same shape;
attention.vx no slower than unfused. The natural softmax (benchmarks/softmax_natural.vx,
one [128, 256] block an instance) is timed against `jax.nn.softmax` on the same shape.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
from bench_kernels import Timed, timed

from vxc import api, runtime
from vxc.backends.cpu import fusion, lower

ROOT = Path(__file__).resolve().parents[1]


# How each variant finds trees: as the backend does, none (each tile op lowered by its own
# rule: the lowering before fusion), or without row buffers (a value needed in two passes
# over a row, softmax's `e`, recomputed in each).
ANALYZE = fusion.analyze  # the backend's (`_finding` swaps the module's attribute)
FOUND = {
    "fused": ANALYZE,
    "unfused": lambda func: fusion.Fusion(),
    "recompute": lambda func: ANALYZE(func, row_buffers=False),
}


@contextlib.contextmanager
def _finding(variant: str):
    backend = lower.fusion.analyze
    lower.fusion.analyze = FOUND[variant]
    try:
        yield
    finally:
        lower.fusion.analyze = backend


def _build(path: Path, out: Path, variant: str, entry: str):
    source = api.Source(str(path.relative_to(ROOT)), path.read_bytes())
    with _finding(variant):
        result = api.build(api.analyze([source]), "cpu")
    assert result.ok, api.render(result.diagnostics, [source])
    return getattr(runtime.load_outputs(result.outputs, out / variant), entry)


def both(path: str, out: Path, entry: str, variants=("fused", "unfused")) -> tuple:
    """The kernel `entry` of `path`, built as each variant."""
    return tuple(_build(ROOT / path, out / entry, v, entry) for v in variants)


def _row(name: str, t: Timed, key: str) -> str:
    return f"  {name:<34} {t.wall[key] * 1e3:9.2f} ms  (CPU {t.cpu[key] * 1e3:8.2f} ms)"


def _report(title: str, t: Timed, ratios: list[tuple[str, str, str, str]]) -> None:
    """The times, then each `(label, numerator, denominator, goal)` ratio of wall times."""
    print(title)
    for key in t.wall:
        print(_row(key, t, key))
    for label, num, den, goal in ratios:
        print(f"  {label:<34} {t.wall[num] / t.wall[den]:6.2f} x  {goal}")


def softmax(out: Path, repeat: int) -> None:
    cases = [
        ("kernels/softmax.vx", 8192, 1024, lambda k, x, y, m: k.launch(m, 1024, x, y, instances=m // 8)),
        ("benchmarks/softmax_natural.vx", 32768, 256, lambda k, x, y, m: k.launch(m, x, y, instances=m // 128)),
    ]  # fmt: skip
    for path, m, n, launch in cases:
        kernels = both(path, out / Path(path).stem, "softmax", tuple(FOUND))
        one_softmax(path, kernels, (m, n), launch, repeat)


def one_softmax(path: str, kernels: tuple, shape: tuple[int, int], launch, repeat: int) -> None:
    import jax
    import jax.numpy as jnp

    sm = jax.jit(lambda a: jax.nn.softmax(a, axis=1))
    (fused, unfused, recompute), m = kernels, shape[0]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ys = [np.empty_like(x) for _ in range(3)]
    xj = jnp.asarray(x)
    t = timed(
        {
            "vx fused": lambda: launch(fused, x, ys[0], m),
            "vx unfused": lambda: launch(unfused, x, ys[1], m),
            "vx fused, no row buffer": lambda: launch(recompute, x, ys[2], m),
            "XLA:CPU jax.nn.softmax": lambda: sm(xj).block_until_ready(),
        },
        repeat,
    )
    e = np.exp(x - x.max(1, keepdims=True))
    err = max(float(np.abs(y - e / e.sum(1, keepdims=True)).max()) for y in ys)
    _report(
        f"{path} {list(shape)} f32 (max error {err:.1e})",
        t,
        [
            ("XLA:CPU / vx fused", "XLA:CPU jax.nn.softmax", "vx fused", "(goal >= 1.2x)"),
            ("unfused / fused", "vx unfused", "vx fused", ""),
            ("no row buffer / fused", "vx fused, no row buffer", "vx fused", ""),
        ],
    )


def epilogue(out: Path, repeat: int, sizes: list[int]) -> None:
    kernels = both("kernels/gemm_epilogue.vx", out, "gemm_epilogue")
    (gemm, _) = both("kernels/gemm.vx", out, "gemm")
    for s in sizes:
        one_epilogue(gemm, kernels, s, repeat)


def one_epilogue(gemm, kernels: tuple, s: int, repeat: int) -> None:
    fused, unfused = kernels
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((s, s)).astype(ml_dtypes.bfloat16) for _ in range(2))
    bias = rng.standard_normal((1, s)).astype(np.float32)
    c32 = np.empty((s, s), np.float32)
    c16 = [np.empty((s, s), ml_dtypes.bfloat16) for _ in range(2)]
    n = (s // 128) ** 2
    t = timed(
        {
            "gemm.vx": lambda: gemm.launch(s, s, s, a, b, c32, instances=n),
            "gemm_epilogue.vx fused": lambda: fused.launch(s, s, s, a, b, bias, c16[0], instances=n),
            "gemm_epilogue.vx unfused": lambda: unfused.launch(s, s, s, a, b, bias, c16[1], instances=n),
        },
        repeat,
    )  # fmt: skip
    assert (c16[0].view(np.uint16) == c16[1].view(np.uint16)).all()  # the same bits
    _report(
        f"gemm_epilogue {s}^3 (relu(A@B + bias), bf16 out) against gemm.vx (f32 out)",
        t,
        [
            ("fused / gemm", "gemm_epilogue.vx fused", "gemm.vx", "(goal <= 1.05x)"),
            ("unfused / gemm", "gemm_epilogue.vx unfused", "gemm.vx", ""),
        ],
    )


def attention(out: Path, repeat: int, h: int = 8, s: int = 2048, d: int = 128) -> None:
    kernels = both("kernels/attention.vx", out, "attention__128")
    rng = np.random.default_rng(0)
    qkv = [rng.standard_normal((h * s, d)).astype(ml_dtypes.bfloat16) for _ in range(3)]
    for causal in (False, True):
        one_attention(kernels, qkv, (h, s, d), causal, repeat)


def one_attention(kernels: tuple, qkv: list, hsd: tuple, causal: bool, repeat: int) -> None:
    (fused, unfused), (h, s, d) = kernels, hsd
    n, scale = h * s, np.float32(d**-0.5)
    outs = [np.empty((n, d), np.float32) for _ in range(2)]
    t = timed(
        {
            "attention.vx fused": lambda: fused.launch(h, s, n, causal, scale, *qkv, outs[0], instances=n // 128),
            "attention.vx unfused": lambda: unfused.launch(h, s, n, causal, scale, *qkv, outs[1], instances=n // 128),
        },
        repeat,
    )  # fmt: skip
    err = float(np.abs(outs[0] - outs[1]).max())
    _report(
        f"attention s={s} h={h} d={d} {'causal' if causal else 'full'} "
        f"(|fused - unfused| <= {err:.1e})",
        t,
        [("unfused / fused", "attention.vx unfused", "attention.vx fused", "(goal >= 1.0x)")],
    )


def fused_child(repeat: int, sizes: list[int]) -> None:
    print(f"fused tile trees; {len(os.sched_getaffinity(0))} cores, min of {repeat} interleaved")
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min)")
    with tempfile.TemporaryDirectory() as tmp:
        softmax(Path(tmp), repeat)
        epilogue(Path(tmp), repeat, sizes)
        attention(Path(tmp), max(5, repeat // 2))
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")
