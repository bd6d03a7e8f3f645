"""TPU backend benchmark: vx -> serialized export time for the stream kernel, and libtpu's
ahead-of-time compile time beside it (no TPU needed).

    .venv/bin/python benchmarks/bench_tpu.py [--repeat 20]

Goal (docs/PERFORMANCE.md, "TPU backend"): warm vx -> serialized export <= 300 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

from vxc import api  # noqa: E402
from vxc.backends.tpu import mosaic_kernels  # noqa: E402
from vxc.backends.tpu.aot import compile_export, topology  # noqa: E402
from vxc.backends.tpu.export import export_kernel  # noqa: E402

KERNEL = ROOT / "kernels" / "stream.vx"


def build_from_source(tpu_aot: str = "none") -> dict[str, bytes]:
    """The whole pipeline in process: parse, check, vx, Mosaic, export, manifest."""
    source = api.Source("kernels/stream.vx", KERNEL.read_bytes())
    result = api.build(api.analyze([source]), "tpu", tpu_aot=tpu_aot)
    assert result.ok, result.diagnostics
    return result.outputs


def timed(fn, repeat: int) -> tuple[float, float]:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    t = time.perf_counter()
    first = build_from_source()
    cold = time.perf_counter() - t
    best, med = timed(build_from_source, args.repeat)
    assert build_from_source() == first  # deterministic

    source = api.Source("kernels/stream.vx", KERNEL.read_bytes())
    checked = api.check_target(api.analyze([source]), "tpu")
    module = api.backend_module(checked)
    lower_best, _ = timed(lambda: mosaic_kernels(module), args.repeat)
    (kernel,) = mosaic_kernels(module)
    export_best, _ = timed(lambda: export_kernel(kernel), args.repeat)
    blob = export_kernel(kernel)

    rows = [
        ("vx source -> serialized export, cold (first build in the process)", cold),
        ("vx source -> serialized export, warm, best", best),
        ("vx source -> serialized export, warm, median", med),
        ("  of which vx module -> verified Mosaic (lowering + verify + CSE)", lower_best),
        ("  of which Mosaic -> tpu_custom_call -> jax.export -> bytes", export_best),
    ]
    for topo in ("v5e", "v6e"):
        t = time.perf_counter()
        topology(topo)
        rows.append(
            (f"libtpu topology description {topo} (once per process)", time.perf_counter() - t)
        )
        for n in (4, 300):
            t = time.perf_counter()
            compile_export(blob, kernel, topo, n)
            first_c = time.perf_counter() - t
            warm_c, _ = timed(lambda topo=topo, n=n: compile_export(blob, kernel, topo, n), 5)
            rows.append((f"libtpu AOT compile {topo}, n={n}, first", first_c))
            rows.append((f"libtpu AOT compile {topo}, n={n}, warm best of 5", warm_c))
    width = max(len(r) for r, _ in rows)
    for r, v in rows:
        print(f"{r:<{width}}  {v * 1e3:8.1f} ms")
    print(
        f"export size: {len(blob)} bytes; goal: warm vx -> export <= 300 ms: "
        f"{'met' if best <= 0.3 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
