"""Benchmark mode: `python -m tests.fuzz --count N [--seed S] [--timeout 5]`.

Runs N inputs from `vxfuzz.inputs(seed)` in a child process, one at a time. A hang is
an input under 10 KB that takes more than --timeout (5) seconds of CPU time, the
compiler's own and its tools' (the linker); CPU time, not wall time, so a machine
shared with other jobs does not count its own load as hangs. An input that does not
finish within --wall-limit (120) seconds of wall time (a deadlock, a sleep) is a hang
too: the child is killed and restarted after it. The child warms up (imports, a first
build) before it takes inputs, so a restart is not charged to an input. Prints counts
per stage, internal errors and hangs, and the rate. Failing inputs are saved under
--save (default /tmp/vxfuzz-failures) for reproduction.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HANG_LIMIT_BYTES = 10_000


def _child(seed: int, start: int, count: int, conn, build: bool) -> None:
    import itertools

    sys.setrecursionlimit(10_000)
    import vxfuzz

    vxfuzz.run_input(vxfuzz.load_corpus()[0], build)  # warm up: imports, a first build
    conn.send(("ready",))
    stream = itertools.islice(vxfuzz.inputs(seed), start, start + count)
    for i, (how, data) in enumerate(stream, start):
        conn.send(("start", i, how, data))
        t0, c0 = time.perf_counter(), _cpu()
        out = vxfuzz.run_input(data, build)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        conn.send(("done", i, sorted(out.stages), out.error, wall, cpu))
    conn.send(("end",))


def _cpu() -> float:
    import resource

    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run(
    seed: int,
    count: int,
    timeout: float,
    save: Path,
    build: bool,
    progress: int,
    wall_limit: float = 120.0,
) -> dict:
    ctx = mp.get_context("fork")
    stages: Counter = Counter()
    errors: list[tuple[int, str, str]] = []
    hangs: list[tuple[int, float, int]] = []
    slow_big = 0
    done = 0
    worst = {"cpu": 0.0, "wall": 0.0}
    t_start = time.perf_counter()
    i = 0
    while i < count:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(seed, i, count - i, child, build), daemon=True)
        proc.start()
        child.close()
        current = None
        while True:
            if not parent.poll(wall_limit if current else 600):
                if current is None:
                    raise RuntimeError("fuzz child did not start")
                idx, how, data = current
                hangs.append((idx, wall_limit, len(data)))
                _save(save, "hang", idx, how, data, f"no answer after {wall_limit} s (wall)")
                proc.kill()
                proc.join()
                i = idx + 1
                done += 1
                break
            try:
                msg = parent.recv()
            except EOFError:  # the child died (a segfault, an abort): an internal error
                if current is None:
                    raise RuntimeError("fuzz child died before its first input") from None
                idx, how, data = current
                proc.join()
                err = f"child died with exit code {proc.exitcode}"
                errors.append((idx, how, err))
                _save(save, "crash", idx, how, data, err)
                i = idx + 1
                done += 1
                break
            if msg[0] == "ready":
                continue
            if msg[0] == "start":
                current = msg[1:]
            elif msg[0] == "done":
                idx, st, err, wall, seconds = msg[1:]
                if len(current[2]) < HANG_LIMIT_BYTES:
                    worst["cpu"] = max(worst["cpu"], seconds)
                    worst["wall"] = max(worst["wall"], wall)
                _, how, data = current
                done += 1
                stages.update(st)
                stages["inputs"] += 1
                if err:
                    errors.append((idx, how, err))
                    _save(save, "error", idx, how, data, err)
                if seconds > timeout:
                    if len(data) < HANG_LIMIT_BYTES:
                        hangs.append((idx, seconds, len(data)))
                        _save(save, "hang", idx, how, data, f"{seconds:.1f} s CPU")
                    else:
                        slow_big += 1
                current = None
                if progress and done % progress == 0:
                    _print_progress(done, stages, errors, hangs, t_start)
            else:
                proc.join()
                i = count
                break
    elapsed = time.perf_counter() - t_start
    return {
        "count": done,
        "seconds": elapsed,
        "rate": done / elapsed if elapsed else 0.0,
        "stages": dict(stages),
        "errors": errors,
        "hangs": hangs,
        "slow_over_10kb": slow_big,
        "worst_cpu_s": worst["cpu"],
        "worst_wall_s": worst["wall"],
    }


def _print_progress(done, stages, errors, hangs, t0) -> None:
    rate = done / (time.perf_counter() - t0)
    st = " ".join(
        f"{s}={stages.get(s, 0)}" for s in ("parsed", "analysed", "checked_clean", "built")
    )
    print(
        f"[{done}] {rate:.1f}/s {st} internal_errors={len(errors)} hangs={len(hangs)}",
        flush=True,
    )


def _save(save: Path, kind: str, idx: int, how: str, data: bytes, why: str) -> None:
    save.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()[:12]
    (save / f"{kind}-{idx}-{digest}.vx").write_bytes(data)
    (save / f"{kind}-{idx}-{digest}.txt").write_text(f"{how}\n{why}\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=5.0, help="CPU seconds per input (hang)")
    p.add_argument("--wall-limit", type=float, default=120.0, help="wall seconds per input")
    p.add_argument("--save", type=Path, default=Path("/tmp/vxfuzz-failures"))
    p.add_argument("--no-build", action="store_true", help="stop after the checks")
    p.add_argument("--progress", type=int, default=1000, help="print a line every N inputs")
    a = p.parse_args(argv)
    r = run(a.seed, a.count, a.timeout, a.save, not a.no_build, a.progress, a.wall_limit)
    st = r["stages"]
    print(
        f"inputs={r['count']} seed={a.seed} seconds={r['seconds']:.0f} rate={r['rate']:.1f}/s\n"
        + "".join(
            f"  {s}: {st.get(s, 0)}\n" for s in ("parsed", "analysed", "checked_clean", "built")
        )
        + f"internal_errors={len(r['errors'])} hangs={len(r['hangs'])} "
        f"(timeout {a.timeout:g} s CPU, inputs < {HANG_LIMIT_BYTES} bytes) "
        f"slow_inputs_over_10kb={r['slow_over_10kb']}\n"
        f"slowest input under 10 KB: {r['worst_cpu_s']:.2f} s CPU, {r['worst_wall_s']:.2f} s wall"
    )
    extra = sorted(k for k in st if ":" in k)
    if extra:
        print("per target: " + " ".join(f"{k}={st[k]}" for k in extra))
    kinds = Counter(e[2].split(" (at ")[0][:120] for e in r["errors"])
    for k, n in kinds.most_common(30):
        print(f"  {n:6d}  {k}")
    if os.environ.get("VXFUZZ_SHOW_HANGS"):
        print(r["hangs"])
    return 1 if r["errors"] or r["hangs"] else 0


if __name__ == "__main__":
    sys.exit(main())
