"""Causal against full attention at head dimension 64 (benchmarks/attention64.vx) on the
cpu, in one run: the causal kernel's key loop stops at each query tile's diagonal, so at
s = 2048 it does (16 * 17 / 2) / 16^2 = 53 % of the full kernel's key tiles
(issue 32: its time must be at most 0.6x the full one's).

    .venv/bin/python benchmarks/bench_causal.py [--h 4] [--s 2048] [--repeat 15] [--shipped]

`--shipped` times kernels/attention.vx at D = 64 instead (one entry, `causal` a bool:
its causal loop stops at the diagonal the same way).

The median wall time of a launch of each, alternated launch by launch so the host's load
moves both; the outputs are checked against numpy first. Figures go to
docs/PERFORMANCE.md with the host they came from (`lscpu`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import test_causal_attention64 as ref  # noqa: E402

import vxc  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--h", type=int, default=4)
    p.add_argument("--s", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--shipped", action="store_true", help="kernels/attention.vx at D = 64")
    a = p.parse_args()
    h, s = a.h, a.s
    if a.shipped:
        shipped = vxc.compile(ROOT / "kernels" / "attention.vx", target="cpu", consts={"D": 64})
        kernels = {"causal": shipped, "full": shipped}
    else:
        src = ref.SOURCE.read_text()
        kernels = {e: vxc.compile(src, target="cpu", kernel=e) for e in ("causal", "full")}
    q, k, v = ref.inputs(h, s)
    outs = {e: np.zeros((h * s, 64), np.float32) for e in kernels}

    def launch(e: str) -> None:
        args = (h, s, h * s) + ((e == "causal",) if a.shipped else ()) + (np.float32(0.125),)
        kernels[e].launch(*args, q, k, v, outs[e], instances=h * (s // 128))

    times: dict[str, list[float]] = {e: [] for e in kernels}
    for e in kernels:  # warm-up and the accuracy check
        launch(e)
        want = ref.reference(q, k, v, h, s, 0.125, e == "causal")
        np.testing.assert_allclose(outs[e], want, rtol=2e-2, atol=2e-2)
    for _ in range(a.repeat):
        for e in kernels:
            t0 = time.perf_counter()
            launch(e)
            times[e].append(time.perf_counter() - t0)
    med = {e: statistics.median(t) * 1e3 for e, t in times.items()}
    print(
        json.dumps(
            {
                "kernel": "kernels/attention.vx, D = 64" if a.shipped else "attention64.vx",
                "h": h,
                "s": s,
                "causal_ms": med["causal"],
                "full_ms": med["full"],
                "ratio": med["causal"] / med["full"],
            }
        )
    )


if __name__ == "__main__":
    main()
