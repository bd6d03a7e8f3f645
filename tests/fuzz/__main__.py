"""Benchmark mode: `python -m tests.fuzz --count N [--seed S] [--timeout 5] [--mode M] [--jobs J]`.

`--mode compile` (the default, the record's mode) runs N inputs from
`vxfuzz.inputs(seed)` — program mutants, generated programs and `--machine` mutants —
through analyse, check and a build of every target that checked clean (check ≡
build); `--mode worker` sends N mutated requests to the real persistent worker
(worker_mode.py); `--mode lsp` sends N mutated messages to the real language server
(lsp_mode.py); `--mode all` runs the three, N each. `--strict-refusals` counts an
uncoded backend refusal after a clean check as a finding (see vxfuzz.py).

Compile mode runs its inputs in a child process, one at a time. A hang is
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


def _child(seed: int, start: int, count: int, conn, build: bool, strict: bool) -> None:
    import itertools

    sys.setrecursionlimit(10_000)
    import vxfuzz

    vxfuzz.run_input(vxfuzz.load_corpus()[0], build)  # warm up: imports, a first build
    conn.send(("ready",))
    stream = itertools.islice(vxfuzz.inputs(seed), start, start + count)
    for i, case in enumerate(stream, start):
        conn.send(("start", i, case.how, case.data, case.machine))
        t0, c0 = time.perf_counter(), vxfuzz.cpu_seconds()
        out = vxfuzz.run_input(case.data, build, case.machine, strict)
        wall, cpu = time.perf_counter() - t0, vxfuzz.cpu_seconds() - c0
        conn.send(("done", i, sorted(out.stages), out.error, wall, cpu, out.refusals))
    conn.send(("end",))


def run(
    seed: int,
    count: int,
    timeout: float,
    save: Path,
    build: bool,
    progress: int,
    wall_limit: float = 120.0,
    strict: bool = False,
    start: int = 0,
    recycle: int = 0,
) -> dict:
    """Inputs `start` .. `start + count` of the seed's stream, each in a child process
    that runs `recycle` inputs (0: all) and is replaced, so that what a long run keeps
    (caches, a leak) cannot end it; the inputs and their order do not change."""
    ctx = mp.get_context("fork")
    stages: Counter = Counter()
    refusals: Counter = Counter()
    errors: list[tuple[int, str, str]] = []
    hangs: list[tuple[int, float, int]] = []
    slow_big = 0
    done = 0
    worst = {"cpu": 0.0, "wall": 0.0}
    t_start = time.perf_counter()
    i, end = start, start + count
    while i < end:
        chunk = min(end - i, recycle or end - i)
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(seed, i, chunk, child, build, strict), daemon=True)
        proc.start()
        child.close()
        current = None
        while True:
            if not parent.poll(wall_limit if current else 600):
                if current is None:
                    raise RuntimeError("fuzz child did not start")
                idx, how, data, machine = current
                hangs.append((idx, wall_limit, len(data)))
                why = f"no answer after {wall_limit} s (wall)"
                _save(save, "hang", idx, how, data, why, machine)
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
                idx, how, data, machine = current
                proc.join()
                err = f"child died with exit code {proc.exitcode}"
                errors.append((idx, how, err))
                _save(save, "crash", idx, how, data, err, machine)
                i = idx + 1
                done += 1
                break
            if msg[0] == "ready":
                continue
            if msg[0] == "start":
                current = msg[1:]
            elif msg[0] == "done":
                idx, st, err, wall, seconds, refused = msg[1:]
                if len(current[2]) < HANG_LIMIT_BYTES:
                    if seconds > worst["cpu"]:  # kept to read: the next hang's likeliest kind
                        worst["cpu"], worst["input"] = seconds, current
                    worst["wall"] = max(worst["wall"], wall)
                _, how, data, machine = current
                done += 1
                stages.update(st)
                stages["inputs"] += 1
                for r in refused:  # the first input of each kind of refusal, to read
                    if r not in refusals:
                        _save(save, "refusal", idx, how, data, r, machine)
                refusals.update(refused)
                if err:
                    errors.append((idx, how, err))
                    kind = "mismatch" if err.startswith("check≢build") else "error"
                    _save(save, kind, idx, how, data, err, machine)
                if seconds > timeout:
                    if len(data) < HANG_LIMIT_BYTES:
                        hangs.append((idx, seconds, len(data)))
                        _save(save, "hang", idx, how, data, f"{seconds:.1f} s CPU", machine)
                    else:
                        slow_big += 1
                current = None
                if progress and done % progress == 0:
                    _print_progress(done, stages, errors, hangs, t_start)
            else:  # "end": the child ran its chunk
                proc.join()
                i += chunk
                break
    elapsed = time.perf_counter() - t_start
    if "input" in worst:
        idx, how, data, machine = worst["input"]
        _save(save, "slowest", idx, how, data, f"{worst['cpu']:.2f} s CPU", machine)
    return {
        "count": done,
        "seconds": elapsed,
        "rate": done / elapsed if elapsed else 0.0,
        "stages": dict(stages),
        "refusals": dict(refusals),
        "errors": errors,
        "hangs": hangs,
        "slow_over_10kb": slow_big,
        "worst_cpu_s": worst["cpu"],
        "worst_wall_s": worst["wall"],
    }


def _shard(queue, k: int, kwargs: dict) -> None:
    sys.stdout = _Prefixed(sys.stdout, f"shard {k}: ")
    queue.put((k, run(**kwargs)))


class _Prefixed:
    """A shard's progress lines, told apart in the shared output."""

    def __init__(self, out, prefix: str) -> None:
        self.out, self.prefix = out, prefix

    def write(self, text: str) -> int:
        lines = text.splitlines(True)
        return self.out.write("".join(self.prefix + x if x.strip() else x for x in lines))

    def flush(self) -> None:
        self.out.flush()


def run_sharded(jobs: int, start: int, count: int, **kwargs) -> dict:
    """`run` over `jobs` processes, each on its own contiguous part of inputs `start` ..
    `start + count` (the same inputs, in the same children, as one process would run:
    a run's findings do not depend on `jobs`), merged into one result. For a machine
    with cores to spare: the record's 100 000 inputs take one core two hours."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    bounds = [start + count * k // jobs for k in range(jobs + 1)]
    procs = []
    for k in range(jobs):
        part = dict(kwargs, start=bounds[k], count=bounds[k + 1] - bounds[k])
        procs.append(ctx.Process(target=_shard, args=(queue, k, part)))
        procs[-1].start()
    t0 = time.perf_counter()
    results = dict(queue.get() for _ in procs)
    for proc in procs:
        proc.join()
    return _merged([results[k] for k in range(jobs)], time.perf_counter() - t0)


def _merged(parts: list[dict], seconds: float) -> dict:
    done = sum(r["count"] for r in parts)
    total = {"count": done, "seconds": seconds, "rate": done / seconds if seconds else 0.0}
    for key in ("stages", "refusals"):
        total[key] = dict(sum((Counter(r[key]) for r in parts), Counter()))
    for key in ("errors", "hangs"):
        total[key] = [x for r in parts for x in r[key]]
    total["slow_over_10kb"] = sum(r["slow_over_10kb"] for r in parts)
    for key in ("worst_cpu_s", "worst_wall_s"):
        total[key] = max(r[key] for r in parts)
    return total


def _print_progress(done, stages, errors, hangs, t0) -> None:
    rate = done / (time.perf_counter() - t0)
    mismatches = sum(e[2].startswith("check≢build") for e in errors)
    st = " ".join(
        f"{s}={stages.get(s, 0)}" for s in ("parsed", "analysed", "checked_clean", "built")
    )
    print(
        f"[{done}] {rate:.1f}/s {st} internal_errors={len(errors) - mismatches} "
        f"check_build_mismatches={mismatches} hangs={len(hangs)}",
        flush=True,
    )


def _save(
    save: Path, kind: str, idx: int, how: str, data: bytes, why: str, machine: bytes | None
) -> None:
    """The input (and its --machine model) and why, to reproduce with
    `vxc build --target T [--machine M.machine.vx] X.vx`."""
    save.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data + (machine or b"")).hexdigest()[:12]
    (save / f"{kind}-{idx}-{digest}.vx").write_bytes(data)
    if machine is not None:
        (save / f"{kind}-{idx}-{digest}.machine.vx").write_bytes(machine)
    (save / f"{kind}-{idx}-{digest}.txt").write_text(f"{how}\n{why}\n")


def _report_compile(r: dict, a) -> int:
    st = r["stages"]
    mismatches = [e for e in r["errors"] if e[2].startswith("check≢build")]
    print(
        f"inputs={r['count']} seed={a.seed} seconds={r['seconds']:.0f} rate={r['rate']:.1f}/s\n"
        + "".join(
            f"  {s}: {st.get(s, 0)}\n" for s in ("parsed", "analysed", "checked_clean", "built")
        )
        + f"internal_errors={len(r['errors']) - len(mismatches)} "
        f"check_build_mismatches={len(mismatches)} hangs={len(r['hangs'])} "
        f"(timeout {a.timeout:g} s CPU, inputs < {HANG_LIMIT_BYTES} bytes) "
        f"slow_inputs_over_10kb={r['slow_over_10kb']}\n"
        f"slowest input under 10 KB: {r['worst_cpu_s']:.2f} s CPU, {r['worst_wall_s']:.2f} s wall"
    )
    extra = sorted(k for k in st if ":" in k)
    if extra:
        print("per target: " + " ".join(f"{k}={st[k]}" for k in extra))
    if r["refusals"]:
        print("uncoded refusals after a clean check (allowed until coded refusals exist):")
        for k, n in Counter(r["refusals"]).most_common(25):
            print(f"  {n:6d}  {k}")
    kinds = Counter(e[2].split(" (at ")[0][:160] for e in r["errors"])
    for k, n in kinds.most_common(30):
        print(f"  {n:6d}  {k}")
    if os.environ.get("VXFUZZ_SHOW_HANGS"):
        print(r["hangs"])
    return 1 if r["errors"] or r["hangs"] else 0


def _report_protocol(mode: str, r, save: Path) -> int:
    """The worker's or the language server's run: counts, rate, findings by kind (one
    example of each), all of them saved as JSON lines under --save."""
    import json

    n = r.requests if mode == "worker" else r.messages
    rate = n / r.seconds if r.seconds else 0.0
    print(
        f"{mode}: messages={n} seconds={r.seconds:.0f} rate={rate:.1f}/s findings={len(r.findings)}"
    )
    save.mkdir(parents=True, exist_ok=True)
    with open(save / f"{mode}-findings.jsonl", "w") as f:
        for x in r.findings:
            f.write(json.dumps(x.__dict__) + "\n")
    seen: dict[tuple[str, str], int] = Counter()
    examples = {}
    for x in r.findings:
        key = (x.kind, x.detail[:50])
        seen[key] += 1
        examples.setdefault(key, x)
    for key, count in seen.most_common(30):
        x = examples[key]
        print(f"  {count:5d}  {x.kind}: {x.detail[:200]!r}\n         after: {x.sent[:200]}")
    return 1 if r.findings else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=("compile", "worker", "lsp", "all"), default="compile")
    p.add_argument("--timeout", type=float, default=5.0, help="CPU seconds per input (hang)")
    p.add_argument("--wall-limit", type=float, default=120.0, help="wall seconds per input")
    p.add_argument("--deadline", type=float, default=30.0, help="worker/lsp: seconds per answer")
    p.add_argument("--save", type=Path, default=Path("/tmp/vxfuzz-failures"))
    p.add_argument("--no-build", action="store_true", help="stop after the checks")
    p.add_argument("--strict-refusals", action="store_true", help="an uncoded refusal fails")
    p.add_argument("--progress", type=int, default=1000, help="print a line every N inputs")
    p.add_argument("--start", type=int, default=0, help="compile: the stream's first input")
    p.add_argument("--recycle", type=int, default=0, help="compile: a fresh child every N inputs")
    p.add_argument(
        "--jobs", type=int, default=1, help="compile: processes, each on its own part of the inputs"
    )
    a = p.parse_args(argv)
    rc = 0
    if a.mode in ("compile", "all"):
        options = dict(seed=a.seed, timeout=a.timeout, save=a.save, build=not a.no_build,
                       progress=a.progress, wall_limit=a.wall_limit, strict=a.strict_refusals,
                       recycle=a.recycle)  # fmt: skip
        if a.jobs > 1:
            r = run_sharded(a.jobs, a.start, a.count, **options)
        else:
            r = run(count=a.count, start=a.start, **options)
        rc |= _report_compile(r, a)
    if a.mode in ("worker", "all"):
        import worker_mode

        rc |= _report_protocol("worker", worker_mode.run(a.seed, a.count, a.deadline), a.save)
    if a.mode in ("lsp", "all"):
        import lsp_mode

        rc |= _report_protocol("lsp", lsp_mode.run(a.seed, a.count, a.deadline), a.save)
    return rc


if __name__ == "__main__":
    sys.exit(main())
