"""`Kernel.to_jax()` against `Kernel.launch` and XLA:CPU's own ops, per call, on one host.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/bench_to_jax.py [--repeat 200]

For each case: the median wall time of `Kernel.launch` on numpy arrays (ctypes, its
argument checks, a fresh output), of `jax.jit(kernel.to_jax())` on jax.Arrays (XLA's
dispatch and the FFI custom call into the same C entry) and of `jax.jit` of the pure-JAX
expression. A tiny softmax shows the call overhead, a 512^3 gemm the kernel itself.
Figures go to docs/FRAMEWORKS.md with the host they came from.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import vxc  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _median_us(f: Callable[[], object], repeat: int) -> float:
    f()  # compile, warm caches
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def _case(kernel: vxc.Kernel, instances: int, pure: Callable, arrays: list, repeat: int) -> dict:
    f = jax.jit(kernel.to_jax())
    g = jax.jit(pure)
    host = [np.asarray(a) for a in arrays]
    out = np.zeros(jax.eval_shape(pure, *arrays).shape, jax.eval_shape(pure, *arrays).dtype)
    return {
        "launch_us": _median_us(lambda: kernel.launch(*host, out, instances=instances), repeat),
        "to_jax_us": _median_us(lambda: jax.block_until_ready(f(*arrays)), repeat),
        "pure_jax_us": _median_us(lambda: jax.block_until_ready(g(*arrays)), repeat),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    x = jax.random.normal(jax.random.key(0), (8, 128), jnp.float32)
    a = jax.random.normal(jax.random.key(1), (512, 512), jnp.bfloat16)
    b = jax.random.normal(jax.random.key(2), (512, 512), jnp.bfloat16)
    softmax = vxc.compile(KERNELS / "softmax.vx")
    gemm = vxc.compile(KERNELS / "gemm.vx")
    report = {
        "cores": len(os.sched_getaffinity(0)),
        "softmax_8x128": _case(softmax, 1, lambda x: jax.nn.softmax(x, axis=1), [x], args.repeat),
        "gemm_512": _case(
            gemm,
            16,
            lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32),
            [a, b],
            max(args.repeat // 10, 5),
        ),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
