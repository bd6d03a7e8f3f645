"""libtpu's final schedule of each vxc TPU kernel beside its Pallas twin (no TPU needed).

    .venv/bin/python benchmarks/bench_tpu_schedule.py [--topo v5e,v6e] [--tiles 8]

Each kernel and twin is compiled ahead of time by the same libtpu for one chip of the
topology, in its own process (libtpu reads `LIBTPU_INIT_ARGS` once per process), with
`--xla_jf_dump_to=DIR --xla_jf_dump_llo_text=true`. The final LLO bundles of the kernel
are read from the dump: a bundle's nesting (`>` marks) tells the loop it sits in, so
- steady state = bundles in the innermost loop body (one tile, one grid step, or for
  gemm one K step of one 128 x 128 tile of C),
- fixed cost = the bundles one call of n tiles (gemm: p tiles of C x n K steps) executes
  beyond that many steady states: set-up,
  per-instance prologue and epilogue, exit work. Executed bundles are the bundles at each
  loop depth times that loop's trip count, which each implementation's structure gives
  (`TRIPS`: vxc's stream peels its last tile out of the loop, so its loop runs n - 1
  times; a Pallas grid runs its n steps plus the two steps of its pipeline's ramp, as
  the loop's exit test in the LLO says, which is checked).
- Both count what executes (`--static` gives the older static figures): an empty
  bundle (a branch's delay slot, a stall) belongs to the loop of the bundle before it,
  and a region that a conditional branch inside the innermost loop skips (`REGIONS`:
  Pallas's pipeline work skipped on its ramp steps, the `pl.when(k == 0)` zero-fill
  and the `pl.when(k == last)` epilogue) counts as many times as it runs, so the
  steady state is what a step in the middle of the K loop executes and a once-per-tile
  zero-fill or epilogue is fixed cost on both sides.
Fewer is better; both are counts of the schedule, not cycles (a DMA wait's bundle may
stall).
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
    precision: str = "f32"  # vxc's --tpu-matmul-precision; the twins use the same


# f32 matmuls are compared at both precisions, like with like: vxc's default (exact to
# f32 rounding) against Pallas's `precision=HIGHEST`, and the one-pass form against
# Pallas's default.
CASES = {
    "stream": Case("stream (f32, exact)", "kernels/stream.vx", 0, "float32",
                   ("stream_blockspec", "stream_manual")),
    "stream-bf16pass": Case("stream (f32, one bf16 pass)", "kernels/stream.vx", 0, "float32",
                            ("stream_blockspec", "stream_manual"), "bf16"),
    "stream_grid": Case("stream_grid, 2 instances (bf16)", "kernels/stream_grid.vx", 2,
                        "bfloat16", ("stream_grid_2d",)),
    # C = A @ B with m = n = 256 (4 instances, 2 x 2 tiles of C) and k = 128 x tiles.
    "gemm": Case("gemm (bf16, 256 x 256 x 128n)", "kernels/gemm.vx", 0, "bfloat16",
                 ("gemm_blockspec",)),
    "gemm_epilogue": Case("gemm_epilogue (bf16, 256 x 256 x 128n)", "kernels/gemm_epilogue.vx",
                          0, "bfloat16", ("gemm_epilogue_blockspec",)),
    "gemm_3stage": Case("gemm_3stage (bf16, 256 x 256 x 128n)", "kernels/gemm_3stage.vx", 0,
                        "bfloat16", ()),
}  # fmt: skip
GEMM_MN = 256  # m = n of the gemm cases; p = (m / 128) * (n / 128) instances

# Trip counts of each loop depth for n tiles and p instances, per implementation.
TRIPS = {
    ("stream", "vxc"): lambda n, p: (n - 1,),
    ("stream", "stream_blockspec"): lambda n, p: (n + 2,),  # the grid and its ramp
    ("stream_grid", "vxc"): lambda n, p: (p, n - p),  # p instances, n/p - 1 tiles each
    ("stream_grid", "stream_grid_2d"): lambda n, p: (n + 2,),  # the 2-D grid is one loop
    # n K steps per tile of C: p instances, each runs its K loop n - 1 times (tile 0 is
    # issued before it), 3-stage n - 2 times; Pallas's grid is p x n steps and the two
    # of its pipeline's ramp (the first only starts DMAs, the last only waits for the
    # last write-back), as the loop's exit test in the LLO says.
    ("gemm", "vxc"): lambda n, p: (p, p * (n - 1)),
    ("gemm_3stage", "vxc"): lambda n, p: (p, p * (n - 2)),
    ("gemm", "gemm_blockspec"): lambda n, p: (p * n + 2,),
    ("gemm_epilogue", "vxc"): lambda n, p: (p, p * (n - 1)),
    ("gemm_epilogue", "gemm_epilogue_blockspec"): lambda n, p: (p * n + 2,),
}
# How many times each region skipped by a conditional branch in the innermost loop body
# runs per call, in the order of the branches: the Pallas grid's pipeline work (every
# real step), its `pl.when(k == 0)` zero-fill (once per tile of C, per instance), its
# `pl.when(k == last)` epilogue (likewise). vxc's loops have no such branch.
# Each: (runs, whether a step in the middle of the loop runs it).
REGIONS = {
    ("stream", "stream_blockspec"): lambda n, p: ((n, True), (1, False)),
    ("gemm", "gemm_blockspec"): lambda n, p: ((p * n, True), (p, False)),
    ("gemm_epilogue", "gemm_epilogue_blockspec"): lambda n, p: (
        (p * n, True), (p, False), (p, False)),
    ("stream_grid", "stream_grid_2d"): lambda n, p: ((n, True), (p, False)),
}  # fmt: skip
# Pallas grids: one loop from 0 whose exit test states the trip count, which is checked.
GRIDS = {"stream_blockspec", "stream_grid_2d", "gemm_blockspec", "gemm_epilogue_blockspec"}
BRANCH_DELAY = 4  # bundles after a `sbr.rel` that run whether it is taken (v5e, v6e)
EXIT_TEST = re.compile(r"scmp\.ge\.s32\.totalorder %s\w+, (\d+) /\* loop exit test")
BRANCH = re.compile(r"sbr\.rel \(!?%p\w+\) target = \$region(\d+)")
REGION_START = re.compile(r"Start(?:/End empty)? region (\d+)")
TRIPS_DEFAULT = lambda n, p: (n,)  # noqa: E731 - a Pallas grid or fori_loop over the tiles

TWIN_NAMES = {
    "stream_blockspec": "Pallas grid + BlockSpec",
    "stream_manual": "Pallas manual DMA, two slots",
    "stream_grid_2d": "Pallas 2-D grid",
    "gemm_blockspec": "Pallas 3-D grid + BlockSpec",
    "gemm_epilogue_blockspec": "Pallas 3-D grid + BlockSpec, epilogue at the last K step",
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
        module = lower_program(checked.analysis.program, checked.plan)
        (kernel,) = mosaic_kernels(module, case.instances, case.precision)
        sizes = {"m": GEMM_MN, "n": GEMM_MN, "k": 128 * tiles} if "m" in kernel.symbols else tiles
        compile_export(export_kernel(kernel), kernel, topo, sizes)
        return
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import pallas_twins

    fn = getattr(pallas_twins, impl)
    if case.instances:
        fn = functools.partial(fn, instances=case.instances)
    if case.dtype == "float32" and case.precision == "f32":
        fn = functools.partial(fn, precision=jax.lax.Precision.HIGHEST)
    dev = topology(topo).devices[0]
    sh = jax.sharding.SingleDeviceSharding(dev)
    dt = jnp.dtype(case.dtype)
    specs = [
        jax.ShapeDtypeStruct((tiles, 128, 128), dt, sharding=sh),
        jax.ShapeDtypeStruct((128, 128), dt, sharding=sh),
    ]
    if impl.startswith("gemm"):
        specs = [
            jax.ShapeDtypeStruct((GEMM_MN, 128 * tiles), dt, sharding=sh),
            jax.ShapeDtypeStruct((128 * tiles, GEMM_MN), dt, sharding=sh),
        ]
    if impl.startswith("gemm_epilogue"):  # and the bias row
        specs.append(jax.ShapeDtypeStruct((1, GEMM_MN), jnp.float32, sharding=sh))
    jax.jit(fn).trace(*specs).lower().compile()


def schedule(
    dump: Path,
    trips: tuple[int, ...],
    units: int,
    regions: tuple[tuple[int, bool], ...] = (),
    static: bool = False,
    grid: bool = False,
) -> dict[str, int]:
    """Steady-state and fixed bundles of the kernel's final LLO schedule in `dump`."""
    files = [
        f
        for f in dump.glob("*-final_bundles.txt")
        if "schedule-analysis" not in f.name and "<" not in f.name and "-TLP-" not in f.name
    ]
    # The kernel's own (an aliased `&mut` operand also gets an XLA copy, which for a
    # small kernel can be the larger file).
    files = [f for f in files if "tpu_custom_call" in f.name] or files
    if not files:
        raise SystemExit(f"no kernel schedule in {dump}: {sorted(p.name for p in dump.iterdir())}")
    text = max(files, key=lambda f: f.stat().st_size).read_text().splitlines()
    bundles: list[tuple[int, str]] = []  # (loop depth, text) per bundle
    for line in text:
        m = BUNDLE.match(line)
        if m:
            empty = not static and re.search(r"\{\s*\}", line) and not m.group(1)
            bundles.append((bundles[-1][0] if empty and bundles else len(m.group(1)), line))
    depth = Counter(d for d, _ in bundles)
    inner = max(depth)
    if len(trips) != inner:
        raise SystemExit(f"{dump}: loops nest {inner} deep, the trip table says {len(trips)}")
    executed = depth[0] + sum(depth[d + 1] * t for d, t in enumerate(trips))
    steady = depth[inner]
    if static:
        return {"steady": steady, "fixed": executed - units * steady, "executed": executed}
    exits = [int(m.group(1)) for _, line in bundles if (m := EXIT_TEST.search(line))]
    if grid and exits != [trips[-1]]:  # a Pallas grid: one loop from 0, its bound static
        raise SystemExit(f"{dump}: the grid loop exits at {exits}, the table says {trips}")
    # Regions that conditional forward branches of the innermost loop skip: bundles
    # from the branch's delay slots' end to its target.
    start = {}
    for k, (_, line) in enumerate(bundles):
        for r in REGION_START.findall(line):
            start.setdefault(r, k)
    ranges = []
    for k, (d, line) in enumerate(bundles):
        m = BRANCH.search(line)
        if m and d == inner and start.get(m.group(1), -1) > k:
            ranges.append(range(k + 1 + BRANCH_DELAY, start[m.group(1)]))
    if len(ranges) != len(regions):
        raise SystemExit(
            f"{dump}: {len(ranges)} skipped regions in the loop body, the "
            f"region table says {len(regions)}"
        )
    # Each bundle of the innermost body runs as often as the innermost region holding it
    # (regions nest: the zero-fill lies inside the pipeline's work), or every trip; the
    # steady state is what a step in the middle of the loop runs.
    executed -= steady * trips[-1]
    steady = 0
    for k, (d, _) in enumerate(bundles):
        if d != inner:
            continue
        runs, middle = trips[-1], True
        for rng, (r, mid) in zip(ranges, regions, strict=True):
            if k in rng:
                runs, middle = min(runs, r), middle and mid
        executed += runs
        steady += middle
    return {"steady": steady, "fixed": executed - units * steady, "executed": executed}


def key_is_gemm(case_key: str) -> bool:
    return case_key.startswith("gemm")


def measure(case_key: str, impl: str, topo: str, tiles: int, static=False) -> dict[str, int]:
    case = CASES[case_key]
    instances = (GEMM_MN // 128) ** 2 if key_is_gemm(case_key) else max(1, case.instances)
    loops = TRIPS.get((case.source[8:-3], impl), TRIPS_DEFAULT)(tiles, instances)
    regions = REGIONS.get((case.source[8:-3], impl), lambda n, p: ())(tiles, instances)
    if static and impl in GRIDS:  # the older count: a grid's n steps, no ramp
        loops = (*loops[:-1], loops[-1] - 2)
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TPU_SKIP_MDS_QUERY="1",
                   LIBTPU_INIT_ARGS=f"--xla_jf_dump_to={d} --xla_jf_dump_llo_text=true")  # fmt: skip
        cmd = [sys.executable, __file__, "--one", case_key, impl, topo, str(tiles)]
        subprocess.run(cmd, env=env, check=True, timeout=600)
        # Steady-state units per call: tiles (a stream), K steps of every tile of C (gemm).
        units = tiles * instances if key_is_gemm(case_key) else tiles
        grid = impl in GRIDS
        return schedule(Path(d), loops, units, regions, static, grid)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topo", default="v5e,v6e")
    ap.add_argument("--tiles", type=int, default=8)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated CASES keys")
    ap.add_argument(
        "--static",
        action="store_true",
        help="count each bundle once per trip of its loop, branches ignored "
        "(the figures before the executed count)",
    )
    ap.add_argument("--one", nargs=4, metavar=("CASE", "IMPL", "TOPO", "TILES"), help="child")
    args = ap.parse_args()
    if args.one:
        key, impl, topo, tiles = args.one
        compile_one(CASES[key], impl, topo, int(tiles))
        return
    topos = args.topo.split(",")
    print(f"libtpu final schedule, {args.tiles} tiles of 128x128: steady-state bundles per")
    print("tile (innermost loop body) / fixed bundles per call (executed beyond n x steady)\n")
    print("| kernel | " + " | ".join(topos) + " |")
    print("|---|" + "---|" * len(topos))
    for key in args.cases.split(","):
        case = CASES[key]
        for impl in ("vxc", *case.twins):
            cells = []
            for topo in topos:
                s = measure(key, impl, topo, args.tiles, args.static)
                cells.append(f"{s['steady']} / {s['fixed']}")
            label = f"vxc `{case.source[8:-3]}`" if impl == "vxc" else TWIN_NAMES[impl]
            print(f"| {label}, {case.name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
