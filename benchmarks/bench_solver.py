"""Seam solver benchmark: marginal cost per obligation with one shared z3 solver.

    .venv/bin/python benchmarks/bench_solver.py [--obligations 1000] [--repeat 5]

Goal (issue 3, docs/PERFORMANCE.md "Seam solver"): median marginal solver cost per
obligation <= 0.5 ms on a program with 1 000 obligations (the original Rust compiler
reported ~1.8 ms). Figures come from the Solver's own stats (`Checked.solver.stats`:
one timing per `counterexample` call, push/add/check/pop included). Also reports the
seed's check time. Not a timed test: it prints figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from bench_check import machine  # noqa: E402

from vxc import api  # noqa: E402

SEED = ROOT / "kernels" / "seed.vx"
ON = "on Topology::TensorCore"
PER_FN = 10  # obligations per generated function: 5 bounds (QF_LIA) + 5 value contracts (QF_BV)


def generated_program(obligations: int) -> str:
    """An accepted program with exactly `obligations` solver obligations: calls that must
    prove a callee's `where n <= 512` from the caller's `where 0 <= m, m <= 100` (QF_LIA), and
    consumers' `assert(buf == 0)` on freshly zeroed tiles (QF_BV value contracts)."""
    out = [f"fn g(n: i64) -> void {ON} where n <= 512 {{\n}}\n"]
    for f in range(obligations // PER_FN):
        body = []
        for j in range(PER_FN // 2):
            body.append(f"  g(m * 4 + {j});")
            body.append(f"  let z{j} = Tensor<f32>([8, 8]);")
            body.append(f"  assert(z{j} == 0);")
        # `0 <= m`: integers wrap, so `m <= 100` alone does not bound `m * 4` (docs/DESIGN.md)
        head = f"fn f{f}(m: i64) -> void {ON} where 0 <= m, m <= 100 {{\n"
        out.append(head + "\n".join(body) + "\n}\n")
    return "".join(out)


def run(obligations: int, repeat: int) -> dict[str, float]:
    src = [api.Source("generated.vx", generated_program(obligations).encode())]
    analysis = api.analyze(src)
    assert analysis.ok
    api.check_target(analysis, "tpu")  # warm: models parsed, z3 loaded
    totals, solver_s, per = [], [], []
    stats = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        checked = api.check_target(analysis, "tpu")
        totals.append(time.perf_counter() - t0)
        assert checked.ok, [(d.code, d.span.line, d.message) for d in checked.diagnostics[:5]]
        stats = checked.solver.stats
        # plus one query per function with `where` clauses: that they can hold (E0403)
        assert stats.obligations == obligations + obligations // PER_FN + 1, stats.obligations
        solver_s.append(stats.seconds)
        per.extend(stats.per_obligation)
    first = stats.per_obligation[:100]
    last = stats.per_obligation[-100:]
    return {
        "obligations": obligations,
        "median per obligation ms": statistics.median(per) * 1e3,
        "mean per obligation ms": statistics.fmean(per) * 1e3,
        "p90 per obligation ms": statistics.quantiles(per, n=10)[-1] * 1e3,
        "median of first 100 ms": statistics.median(first) * 1e3,
        "median of last 100 ms": statistics.median(last) * 1e3,
        "solver total ms": statistics.median(solver_s) * 1e3,
        "check_target total ms": statistics.median(totals) * 1e3,
    }


def seed(repeat: int) -> dict[str, float]:
    src = [api.Source("seed.vx", SEED.read_bytes())]
    api.check(src, "tpu")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        checked = api.check(src, "tpu")
        times.append(time.perf_counter() - t0)
        assert checked.ok
    return {
        "seed check (api.check, tpu) ms": statistics.median(times) * 1e3,
        "seed solver obligations": checked.solver.stats.obligations,
        "seed solver ms": checked.solver.stats.seconds * 1e3,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--obligations", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    big = run(args.obligations, args.repeat)
    half = run(args.obligations // 2, args.repeat)
    marginal = (big["solver total ms"] - half["solver total ms"]) / (
        big["obligations"] - half["obligations"]
    )
    marginal_total = (big["check_target total ms"] - half["check_target total ms"]) / (
        big["obligations"] - half["obligations"]
    )
    for name, figures in (("program", big), ("half-size program", half)):
        print(f"\n{name}: {figures['obligations']} obligations (goal: median <= 0.5 ms)")
        for k, v in figures.items():
            if k != "obligations":
                print(f"  {k:36s} {v:10.3f}")
    print(f"\nmarginal solver ms per obligation ({half['obligations']} -> {big['obligations']})")
    print(f"  {'solver time':36s} {marginal:10.3f}")
    print(f"  {'whole check_target time':36s} {marginal_total:10.3f}")
    print()
    for k, v in seed(50).items():
        print(f"  {k:36s} {v:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
