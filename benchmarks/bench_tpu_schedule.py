"""libtpu's final schedule of each vxc TPU kernel beside its Pallas twin (no TPU needed).

    .venv/bin/python benchmarks/bench_tpu_schedule.py [--topo v5e,v6e] [--tiles 8]

Each kernel and twin is compiled ahead of time by the same libtpu for one chip of the
topology, in its own process (libtpu reads `LIBTPU_INIT_ARGS` once per process), with
`--xla_jf_dump_to=DIR --xla_jf_dump_llo_text=true`. The final LLO bundles of the kernel
are read from the dump: a bundle's nesting (`>` marks) tells the loop it sits in, so
- steady state = bundles in the innermost loop body (one tile, or one grid step),
- fixed cost = bundles outside every loop (set-up, the last tile's drain, exit checks).
Fewer is better; both are static counts of the schedule, not cycles.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = re.compile(r"\s*(?:0x[0-9a-f]+|\d+)\s+\w*\s*:\s*(>*)\s*\{")


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # kernels/<name>.vx
    instances: int
    dtype: str
    twins: tuple[str, ...]  # functions of pallas_twins


CASES = {
    "stream": Case("stream (f32)", "kernels/stream.vx", 0, "float32",
                   ("stream_blockspec", "stream_manual")),
    "stream_grid": Case("stream_grid, 2 instances (bf16)", "kernels/stream_grid.vx", 2,
                        "bfloat16", ("stream_grid_2d",)),
}  # fmt: skip

TWIN_NAMES = {
    "stream_blockspec": "Pallas grid + BlockSpec",
    "stream_manual": "Pallas manual DMA, two slots",
    "stream_grid_2d": "Pallas 2-D grid",
}


def compile_one(case: Case, impl: str, topo: str, tiles: int) -> None:
    """In the child process: compile `impl` ("vxc" or a twin) for one chip of `topo`."""
    sys.path.insert(0, str(ROOT / "compiler"))
    from vxc.backends.tpu.aot import topology

    if impl == "vxc":
        from vxc import api
        from vxc.backends.tpu import mosaic_kernels
        from vxc.backends.tpu.aot import compile_export
        from vxc.backends.tpu.export import export_kernel
        from vxc.ir.from_hir import lower_program

        src = api.Source(case.source, (ROOT / case.source).read_bytes())
        checked = api.check_target(api.analyze([src]), "tpu")
        (kernel,) = mosaic_kernels(lower_program(checked), case.instances)
        compile_export(export_kernel(kernel), kernel, topo, tiles)
        return
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import pallas_twins

    fn = getattr(pallas_twins, impl)
    if case.instances:
        fn = functools.partial(fn, instances=case.instances)
    dev = topology(topo).devices[0]
    sh = jax.sharding.SingleDeviceSharding(dev)
    dt = jnp.dtype(case.dtype)
    specs = [
        jax.ShapeDtypeStruct((tiles, 128, 128), dt, sharding=sh),
        jax.ShapeDtypeStruct((128, 128), dt, sharding=sh),
    ]
    jax.jit(fn).trace(*specs).lower().compile()


def schedule(dump: Path) -> dict[str, int]:
    """Steady-state and fixed bundles of the kernel's final LLO schedule in `dump`."""
    files = [
        f
        for f in dump.glob("*-final_bundles.txt")
        if "schedule-analysis" not in f.name and "<" not in f.name and "-TLP-" not in f.name
    ]
    if not files:
        raise SystemExit(f"no kernel schedule in {dump}: {sorted(p.name for p in dump.iterdir())}")
    depth: Counter[int] = Counter()
    for line in max(files, key=lambda f: f.stat().st_size).read_text().splitlines():
        m = BUNDLE.match(line)
        if m:
            depth[len(m.group(1))] += 1
    inner = max(depth)
    return {"steady": depth[inner] if inner else 0, "fixed": depth[0], "total": sum(depth.values())}


def measure(case_key: str, impl: str, topo: str, tiles: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TPU_SKIP_MDS_QUERY="1",
                   LIBTPU_INIT_ARGS=f"--xla_jf_dump_to={d} --xla_jf_dump_llo_text=true")  # fmt: skip
        cmd = [sys.executable, __file__, "--one", case_key, impl, topo, str(tiles)]
        subprocess.run(cmd, env=env, check=True, timeout=600)
        return schedule(Path(d))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topo", default="v5e,v6e")
    ap.add_argument("--tiles", type=int, default=8)
    ap.add_argument("--one", nargs=4, metavar=("CASE", "IMPL", "TOPO", "TILES"), help="child")
    args = ap.parse_args()
    if args.one:
        key, impl, topo, tiles = args.one
        compile_one(CASES[key], impl, topo, int(tiles))
        return
    topos = args.topo.split(",")
    print(f"libtpu final schedule, {args.tiles} tiles of 128x128: steady-state bundles per")
    print("tile (innermost loop body) / fixed bundles (outside every loop)\n")
    print("| kernel | " + " | ".join(topos) + " |")
    print("|---|" + "---|" * len(topos))
    for key, case in CASES.items():
        for impl in ("vxc", *case.twins):
            cells = []
            for topo in topos:
                s = measure(key, impl, topo, args.tiles)
                cells.append(f"{s['steady']} / {s['fixed']}")
            label = f"vxc `{key}`" if impl == "vxc" else TWIN_NAMES[impl]
            print(f"| {label}, {case.name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
