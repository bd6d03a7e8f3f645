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

softmax and attention (`TILE_SHAPES`) are read from the LLO's control flow instead
(`control_flow`, `tile_plan`): steady state per [8, 1024] row block (softmax) or per 128
keys of one query tile (attention), loops from the branches, the regions that branches
skip counted as each implementation's structure says (docs/PERFORMANCE.md, "softmax and
attention against Pallas").
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

from vxc.backends.tpu.schedule import (
    BRANCH,
    DELAY,
    EXIT_TEST,
    START,
    control_flow,
    dump_env,
    innermost,
    kernel_llo,
)

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
    # The tile-arithmetic kernels (TILE_SHAPES; `instances` 1: a grid of one per tile).
    "softmax": Case("softmax (f32, [8n, 1024])", "kernels/softmax.vx", 0, "float32",
                    ("softmax_blockspec",)),
    "attention": Case("attention (bf16, s = 128n, full)", "kernels/attention.vx", 1,
                      "bfloat16", ("flash", "flash_512")),
    "attention-causal": Case("attention (bf16, s = 128n, causal)", "kernels/attention.vx", 1,
                             "bfloat16", ("flash_causal", "flash_causal_512")),
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
TRIPS_DEFAULT = lambda n, p: (n,)  # noqa: E731 - a Pallas grid or fori_loop over the tiles

TWIN_NAMES = {
    "stream_blockspec": "Pallas grid + BlockSpec",
    "stream_manual": "Pallas manual DMA, two slots",
    "stream_grid_2d": "Pallas 2-D grid",
    "gemm_blockspec": "Pallas 3-D grid + BlockSpec",
    "gemm_epilogue_blockspec": "Pallas 3-D grid + BlockSpec, epilogue at the last K step",
    "softmax_blockspec": "Pallas grid + BlockSpec, whole [8, n] row block a step",
    "flash": "Pallas flash attention (jax), blocks 128 / 128 / 128 (its defaults)",
    "flash_causal": "Pallas flash attention (jax), blocks 128 / 128 / 128 (its defaults)",
    "flash_512": "Pallas flash attention (jax), block_k_major 512",
    "flash_causal_512": "Pallas flash attention (jax), block_k_major 512",
}


def vxc_kernel(source: str, instances: int, precision: str = "f32"):
    """The Mosaic kernel vxc builds from `source` for a grid of `instances` (0: the
    kernel's own)."""
    from vxc import api
    from vxc.backends.tpu import mosaic_kernels

    src = api.Source(source, (ROOT / source).read_bytes())
    checked = api.check_target(api.analyze([src]), "tpu")
    module = api.backend_module(checked)
    (kernel,) = mosaic_kernels(module, instances, precision)
    return kernel


def compile_one(case: Case, impl: str, topo: str, tiles: int) -> None:
    """In the child process: compile `impl` ("vxc" or a twin) for one chip of `topo`."""
    sys.path.insert(0, str(ROOT / "compiler"))
    from vxc.backends.tpu.aot import topology

    if case.source in TILE_SHAPES:  # softmax, attention: their own shapes and twins
        compile_tile_kernel(case, impl, topo, tiles)
        return
    if impl == "vxc":
        from vxc.backends.tpu.aot import compile_export
        from vxc.backends.tpu.export import export_kernel

        kernel = vxc_kernel(case.source, case.instances, case.precision)
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
        for r in START.findall(line):
            start.setdefault(r, k)
    ranges = []
    for k, (d, line) in enumerate(bundles):
        m = BRANCH.search(line)  # conditional (a predicate), forward, in the body
        if m and m.group(2) and d == inner and start.get(m.group(3), -1) > k:
            ranges.append(range(k + 1 + DELAY, start[m.group(3)]))
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
        env = dump_env(os.environ, d)
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
            how = measure_tile if case.source in TILE_SHAPES else measure
            for topo in topos:
                if how is measure:
                    s = measure(key, impl, topo, args.tiles, args.static)
                else:
                    s = how(key, impl, topo, args.tiles)
                cells.append(f"{s['steady']:g} / {s['fixed']:g}")
            label = f"vxc `{case.source[8:-3]}`" if impl == "vxc" else TWIN_NAMES[impl]
            print(f"| {label}, {case.name} | " + " | ".join(cells) + " |", flush=True)


# --- The tile-arithmetic kernels (softmax.vx, attention.vx) -------------------------------
#
# Their shapes come from `tiles` (T): softmax x [8T, 1024] f32, T row blocks of 8 rows
# (8 column tiles each); attention one head of s = 128T queries and keys, hd = 128,
# bf16 in, T query tiles (vxc: T instances, `--tpu-instances T`, since the grid
# `h * (s / 128)` is over SMEM scalars no shape gives).
SOFTMAX_N = 1024
ATTN_BLOCK_Q = 128


def tile_shapes(source: str, tiles: int) -> dict[str, int]:
    if source == "kernels/softmax.vx":
        return {"m": 8 * tiles, "n": SOFTMAX_N}
    return {"n": ATTN_BLOCK_Q * tiles}


TILE_SHAPES = {"kernels/softmax.vx", "kernels/attention.vx"}


def compile_tile_kernel(case: Case, impl: str, topo: str, tiles: int) -> None:
    """In the child: compile softmax / attention (`impl`: "vxc" or a twin of TWIN_ARGS)."""
    import jax
    import jax.numpy as jnp

    from vxc.backends.tpu.aot import topology

    sizes = tile_shapes(case.source, tiles)
    if impl == "vxc":
        from vxc.backends.tpu.aot import compile_export
        from vxc.backends.tpu.export import export_kernel

        kernel = vxc_kernel(case.source, case.instances and tiles)
        compile_export(export_kernel(kernel), kernel, topo, sizes)
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import pallas_twins

    sh = jax.sharding.SingleDeviceSharding(topology(topo).devices[0])
    twin, kwargs = TWIN_ARGS[impl]
    fn = functools.partial(getattr(pallas_twins, twin), **kwargs)
    if case.source == "kernels/softmax.vx":
        specs = [jax.ShapeDtypeStruct((sizes["m"], sizes["n"]), jnp.float32, sharding=sh)]
    else:  # [batch, heads, s, 128]
        specs = [jax.ShapeDtypeStruct((1, 1, sizes["n"], 128), jnp.bfloat16, sharding=sh)] * 3
    jax.jit(fn).trace(*specs).lower().compile()


# Twins of the tile kernels: pallas_twins function and its static arguments.
TWIN_ARGS = {
    "softmax_blockspec": ("softmax_blockspec", {}),
    "flash": ("flash_attention", {"causal": False, "scale": 0.125}),
    "flash_causal": ("flash_attention", {"causal": True, "scale": 0.125}),
    "flash_512": ("flash_attention", {"causal": False, "scale": 0.125, "block_k_major": 512}),
    "flash_causal_512": ("flash_attention", {"causal": True, "scale": 0.125,
                                             "block_k_major": 512}),
}  # fmt: skip


# The final LLO's control flow, for the tile kernels: vxc/backends/tpu/schedule.py reads
# it (loops from the branches; the regions forward branches skip).


@dataclass(frozen=True)
class Plan:
    """How one implementation of a tile kernel runs for T tiles (see tile_plan)."""

    trips: tuple[int, ...]  # iterations of each loop over the call, outermost first
    skips: tuple[str, ...]  # role of each forward branch's region, in address order
    taken: dict[str, int]  # times each role's branch skips its region in the call
    steady_skips: frozenset[str]  # roles a steady step skips
    unit_loop: int  # the loop one of whose iterations is a steady step
    per_step: float  # steady units (row blocks; 128-key steps) in one such iteration
    units: int  # steady units in the call


def tile_plan(case: Case, impl: str, tiles: int) -> Plan:
    """Trip counts and branch outcomes from each implementation's structure (T = tiles).

    Pallas's pipelined grid is one loop of steps + 2 iterations: the first only issues
    step 0's copies, the last only writes the last output block back; the compute region
    between is skipped in those two ("guard")."""
    t = tiles
    if case.source == "kernels/softmax.vx":  # unit: one [8, 1024] row block
        if impl == "vxc":  # grid loop (T), two column loops (8 per row block each)
            cols = SOFTMAX_N // 128
            return Plan((t, cols * t, cols * t), ("no_rows",), {"no_rows": 0}, frozenset(),
                        0, 1, t)  # fmt: skip
        return Plan((t + 2,), ("guard",), {"guard": 2}, frozenset(), 0, 1, t)
    causal = "causal" in impl or case.name.endswith("causal)")
    # unit: 128 keys of one query tile, computed (causal: the 128 x 128 blocks on or
    # below the diagonal, T(T + 1) / 2; the others' cost is fixed cost)
    units = t * (t + 1) // 2 if causal else t * t
    if impl == "vxc":  # grid loop (T instances), the K/V loop (s / bk steps each)
        bk = attention_block_k()
        steps = t * ATTN_BLOCK_Q // bk
        # `if j <= last_j(qi) || !causal`: skipped for the K/V tiles after the diagonal
        skipped = sum(1 for q in range(t) for j in range(steps) if j * bk > q * 128 + 127)
        return Plan((t, t * steps), ("no_kv", "compute"),
                    {"no_kv": 0, "compute": skipped if causal else 0}, frozenset(),
                    1, bk / 128, units)  # fmt: skip
    bkm = TWIN_ARGS[impl][1].get("block_k_major", 128)
    steps = t * t * 128 // bkm  # grid (1, 1, T, s / bkm)
    above = sum(
        1 for r in range(t) for c in range(t * 128 // bkm) if not (r + 1) * 128 - 1 > c * bkm
    )
    roles = ("guard", "init", "run", "store") if causal else ("guard", "init", "store")
    taken = {"guard": 2, "init": steps - t, "run": above, "store": steps - t}
    return Plan((steps + 2,), roles, taken, frozenset({"init", "store"}), 0, bkm / 128, units)


def attention_block_k() -> int:
    """Keys per K/V tile of kernels/attention.vx (its loop runs `s / bk` steps)."""
    m = re.search(r"for j in 0 \.\. s / (\d+)", (ROOT / "kernels/attention.vx").read_text())
    if not m:
        raise SystemExit("kernels/attention.vx: no `for j in 0 .. s / BK` K/V loop")
    return int(m.group(1))


def tile_schedule(text: str, plan: Plan) -> dict[str, float]:
    """Steady-state bundles per unit and fixed bundles per call, from the control flow."""
    flow = control_flow(text)
    if len(flow.loops) != len(plan.trips) or len(flow.skips) != len(plan.skips):
        raise SystemExit(f"LLO has {len(flow.loops)} loops and {len(flow.skips)} forward "
                         f"branches, the plan says {len(plan.trips)} and {len(plan.skips)}")  # fmt: skip

    def skipped_by(at: int) -> list[str]:
        return [
            role for (a, b, _), role in zip(flow.skips, plan.skips, strict=True) if a <= at <= b
        ]

    executed = steady = 0.0
    lo, hi = flow.loops[plan.unit_loop]
    for at in range(flow.bundles):
        loop = innermost(flow, at)
        runs = plan.trips[loop] if loop is not None else 1
        roles = skipped_by(at)
        executed += runs - sum(plan.taken[r] for r in roles)
        if lo <= at <= hi and not set(roles) & plan.steady_skips:
            steady += plan.trips[loop] / plan.trips[plan.unit_loop]
    steady /= plan.per_step
    return {"steady": steady, "fixed": executed - plan.units * steady, "executed": executed}


def measure_tile(case_key: str, impl: str, topo: str, tiles: int) -> dict[str, float]:
    case = CASES[case_key]
    with tempfile.TemporaryDirectory() as d:
        env = dump_env(os.environ, d)
        cmd = [sys.executable, __file__, "--one", case_key, impl, topo, str(tiles)]
        subprocess.run(cmd, env=env, check=True, timeout=600)
        return tile_schedule(kernel_llo(Path(d)), tile_plan(case, impl, tiles))


if __name__ == "__main__":
    main()
