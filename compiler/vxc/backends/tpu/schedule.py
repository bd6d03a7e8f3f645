"""Reading libtpu's final schedule of a kernel (its LLO dump): no TPU needed.

libtpu dumps its final bundles when `LIBTPU_INIT_ARGS` asks (`dump_env`); it reads that
variable once per process, so each kernel whose schedule is read is compiled in a process
of its own. benchmarks/bench_tpu_schedule.py sets vxc's kernels beside their Pallas twins
with these readers, and `vxc tune --target tpu` scores candidates with `executed`.

A bundle's `>` marks name the region of its first op, not where it runs (a branch's
delay slots and empty bundles carry none), so loops are read from the branches: a branch
back to the bundle that starts its target region closes a loop; the DELAY bundles after a
branch run on both paths (measured: 4 on v5e and v6e); a forward branch skips [its delay
slots' end, target).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DELAY = 4
ADDR = re.compile(r"\s*(0x[0-9a-f]+|\d+)\s+\w*\s*:")
BRANCH = re.compile(r"sbr\.rel (\(([^)]*)\) )?target = \$region(\d+)")
START = re.compile(r"Start(?:/End empty)? region (\d+)")
EXIT_TEST = re.compile(r"scmp\.ge\.s32\.totalorder %s\w+, (\d+) /\* loop exit test")
# The dump's files that are not the kernel's own schedule: the analyses, XLA's program
# set-up and top-level program, and the copy XLA adds for an aliased `&mut` operand.
NOT_KERNEL = re.compile(r"schedule-analysis|<|-TLP-|-copy\.")


class ScheduleError(ValueError):
    """A dump without the schedule asked for, or a schedule this reading cannot count."""


def dump_env(base: dict[str, str], directory: str | Path) -> dict[str, str]:
    """The environment of a process whose libtpu dumps its LLO into `directory` (compile
    only: no TPU is queried)."""
    return dict(
        base,
        TF_CPP_MIN_LOG_LEVEL="2",
        TPU_SKIP_MDS_QUERY="1",
        LIBTPU_INIT_ARGS=f"--xla_jf_dump_to={directory} --xla_jf_dump_llo_text=true",
    )


def kernel_llo(dump: Path) -> str:
    """The kernel's final bundles: the largest final schedule that is not XLA's own."""
    files = [f for f in dump.glob("*-final_bundles.txt") if not NOT_KERNEL.search(f.name)]
    if not files:
        names = sorted(p.name for p in dump.iterdir()) if dump.is_dir() else []
        raise ScheduleError(f"no kernel schedule in {dump}: {names[:20]}")
    return max(files, key=lambda f: f.stat().st_size).read_text()


@dataclass(frozen=True)
class Flow:
    bundles: int
    loops: tuple[tuple[int, int], ...]  # [first, last] bundle of each loop, outermost first
    skips: tuple[tuple[int, int, str], ...]  # [first, last] a forward branch skips, predicate
    exits: tuple[tuple[int, int], ...]  # (bundle, bound) of each static loop exit test


def control_flow(text: str) -> Flow:
    addrs, starts, branches, exits = [], {}, [], []
    for line in text.splitlines():
        m = ADDR.match(line)
        if not m:
            continue
        at = len(addrs)
        addrs.append(int(m.group(1), 0))
        for r in START.findall(line):
            starts.setdefault(int(r), at)
        branches += [(at, b.group(2) or "", int(b.group(3))) for b in BRANCH.finditer(line)]
        exits += [(at, int(e.group(1))) for e in EXIT_TEST.finditer(line)]
    loops, skips = [], []
    for at, pred, region in branches:
        to = starts.get(region, len(addrs))  # the exit region starts no bundle
        if to <= at:
            loops.append((to, at + DELAY))
        else:
            skips.append((at + DELAY + 1, to - 1, pred))
    loops.sort(key=lambda r: (r[0], -r[1]))
    return Flow(len(addrs), tuple(loops), tuple(skips), tuple(exits))


def depth_of(flow: Flow, at: int) -> int:
    return sum(1 for a, b in flow.loops if a <= at <= b)


def innermost(flow: Flow, at: int) -> int | None:
    """The index of the innermost loop holding bundle `at`, or None outside every loop."""
    inside = [i for i, (a, b) in enumerate(flow.loops) if a <= at <= b]
    return max(inside, key=lambda i: flow.loops[i][0]) if inside else None


@dataclass(frozen=True)
class Executed:
    """What one call of a kernel executes, in bundles (fewer is better; a count of the
    schedule, not cycles: a DMA wait's bundle may stall)."""

    executed: int  # every bundle times the runs of the loops holding it
    steady: int  # bundles in one iteration of the innermost loop that runs most
    fixed: int  # executed beyond that loop's iterations x steady
    trips: tuple[int, ...]  # each loop's iterations per entry, outermost first


def executed(text: str) -> Executed:
    """The executed bundles of a schedule whose every loop has a static exit test (the
    shapes were static when libtpu compiled it: `vxc tune` compiles at its tuning shapes).

    A loop counts up from 0 by 1 to its exit test's bound, as libtpu emits the loops of
    a Mosaic `scf.for` with static bounds; a region a forward branch skips is counted as
    run every time (an upper bound: which way a data-dependent branch goes is not in the
    schedule). A loop without a static exit test is a ScheduleError naming it."""
    flow = control_flow(text)
    trips = []
    for i, (a, b) in enumerate(flow.loops):
        own = [n for at, n in flow.exits if a <= at <= b and innermost(flow, at) == i]
        if len(own) != 1:
            raise ScheduleError(
                f"the loop at bundles {a:#x}..{b:#x} has {len(own)} static exit tests, not one: "
                "its trip count is not in the schedule"
            )
        trips.append(own[0])
    runs = [1] * flow.bundles
    for at in range(flow.bundles):
        for i, (a, b) in enumerate(flow.loops):
            if a <= at <= b:
                runs[at] *= trips[i]
    total = sum(runs)
    if not flow.loops:
        return Executed(total, 0, total, ())
    # The innermost loops (none nested in them); the steady state is the one run most.
    inner = [i for i in range(len(flow.loops)) if not _holds_loop(flow, i)]
    best = max(inner, key=lambda i: (runs[flow.loops[i][0]], -i))
    a, b = flow.loops[best]
    steady = b - a + 1
    return Executed(total, steady, total - steady * runs[a], tuple(trips))


def _holds_loop(flow: Flow, i: int) -> bool:
    a, b = flow.loops[i]
    return any(j != i and a <= c and d <= b for j, (c, d) in enumerate(flow.loops))
