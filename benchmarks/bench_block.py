"""A transformer encoder block (benchmarks/transformer/block.py) with the vxc kernels called
from the framework, against the same block in the framework's own ops, in one run.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/bench_block.py [--s 512 --d 256] [--repeat 30]

Per case, the median wall time of a call (after a warm-up that compiles): JAX, the block
under one `jax.jit` with the kernels through `to_jax()`, and `jax.jit` of the pure-JAX
block (XLA:CPU's own dots, softmax and layer norms); PyTorch, the block with the kernels
through `to_torch()` under `torch.compile(fullgraph=True)`, and the torch-ops block under
`torch.compile`. The rounds alternate the two sides, so the host's load moves both. The
outputs are compared first (bf16 rounding). Figures go to docs/PERFORMANCE.md with the
host they came from (`lscpu`).
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "transformer"))
import block  # noqa: E402


def _median_pair(f: Callable, g: Callable, repeat: int) -> tuple[float, float]:
    """Medians in seconds of f() and g(), alternated call by call."""
    tf, tg = [], []
    for _ in range(repeat):
        for fn, out in ((f, tf), (g, tg)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(tf), statistics.median(tg)


def bench_jax(s: int, d: int, repeat: int) -> dict:
    import jax

    w, x = block.weights(d), block.inputs(s, d)
    vx = jax.jit(block.jax_block(block.kernels("jax", s, d), w))
    ref = jax.jit(block.jax_reference(w))
    x = jax.device_put(x)
    a, b = np.asarray(vx(x)), np.asarray(ref(x))
    err = float(np.abs(a - b).max() / np.abs(b).max())
    t_vx, t_ref = _median_pair(
        lambda: vx(x).block_until_ready(), lambda: ref(x).block_until_ready(), repeat
    )
    return {"framework": "jax", "vx_ms": t_vx * 1e3, "ref_ms": t_ref * 1e3, "rel_err": err}


def bench_torch(s: int, d: int, repeat: int) -> dict:
    import torch

    w, x = block.weights(d), block.inputs(s, d)
    tw = block.torch_weights(w)
    vx = torch.compile(block.torch_block(block.kernels("torch", s, d), tw), fullgraph=True)
    ref = torch.compile(block.torch_reference(tw))
    xt = torch.from_numpy(x)
    with torch.no_grad():
        a, b = vx(xt), ref(xt)
        err = float((a - b).abs().max() / b.abs().max())
        t_vx, t_ref = _median_pair(lambda: vx(xt), lambda: ref(xt), repeat)
    return {"framework": "torch", "vx_ms": t_vx * 1e3, "ref_ms": t_ref * 1e3, "rel_err": err}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--s", type=int, default=512, help="sequence length (a multiple of 128)")
    p.add_argument("--d", type=int, default=256, help="model width (heads of 128)")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--only", choices=("jax", "torch"))
    a = p.parse_args()
    for name, fn in (("jax", bench_jax), ("torch", bench_torch)):
        if a.only in (None, name):
            r = {"s": a.s, "d": a.d, **fn(a.s, a.d, a.repeat)}
            r["speedup"] = r["ref_ms"] / r["vx_ms"]
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}))


if __name__ == "__main__":
    main()
