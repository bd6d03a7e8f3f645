"""Benchmark: a second clone served by a shared remote cache, and remote execution
on BuildGrid, against a local (persistent worker) build of the same kernels.

    .venv/bin/python benchmarks/bench_remote.py [--config cpu] [--runs 2] [--no-rex]

Uses the same machinery as tests/bazel/test_remote_cache.py and
test_remote_execution.py (copies of this repository under
~/.cache/vx-bazel/itest/remote, Debian's nginx as the HTTP cache, BuildGrid + the
test-fixture bot). Every build starts from an empty output_user_root and is timed
after a `--nobuild` pass (server start, fetch, loading, analysis), so each figure is
the execution phase of `bazel build //kernels/... --config=CONFIG`:

  local        clone A, persistent workers, no remote flags
  fill         clone A, persistent workers, --remote_cache (executes and uploads)
  second clone clone B (another path, another HOME), --remote_cache: hits, downloads
  remote       --remote_executor (BuildGrid), cold CAS: uploads every input once
  remote warm  the same after a clean, --noremote_accept_cached: inputs already in
               CAS, every action executed again by the bot

Prints a Markdown table for docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "bazel"))

from bazelrun import bazel_binary  # noqa: E402
from remote import (  # noqa: E402
    REMOTE,
    Clone,
    HttpCache,
    copy_repository,
    free_port,
    start_bot,
    stop,
    wait_for_port,
)


def timed(clone: Clone, config: str, *flags: str):
    clone.fresh()
    clone.run("build", f"--config={config}", "--nobuild", *flags, "//kernels/...")
    return clone.build(config, ["//kernels/..."], *flags)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="cpu")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--no-rex", action="store_true", help="skip remote execution")
    a = ap.parse_args()
    bazel = bazel_binary()
    if not bazel:
        sys.exit("no bazel")
    rows: dict[str, list[str]] = {}

    def add(name, r, note=""):
        rows.setdefault(name, []).append(
            f"{r.wall_s:.1f} s ({r.hits}/{r.vxcompile} hits{note})"
            if "hits" in name or "second" in name
            else f"{r.wall_s:.1f} s{note}"
        )

    a_path = copy_repository(REMOTE / "bench" / "a" / "vx")
    b_path = copy_repository(REMOTE / "bench" / "b" / "other" / "checkout")
    ca = Clone(a_path, Path.home(), REMOTE / "bench" / "a" / "root", bazel)
    cb = Clone(b_path, REMOTE / "b" / "home", REMOTE / "bench" / "b" / "root", bazel)
    loads = []
    for _ in range(a.runs):
        loads.append(os.getloadavg()[0])
        add("local build (worker)", timed(ca, a.config))
        cache = HttpCache(REMOTE / "bench" / "http-cache")
        try:
            flags = (f"--remote_cache={cache.url}",)
            add("clone A, --remote_cache (executes, uploads)", timed(ca, a.config, *flags))
            add("second clone, another HOME, --remote_cache", timed(cb, a.config, *flags))
        finally:
            cache.stop()
        ca.shutdown()
        cb.shutdown()
    if not a.no_rex:
        state = REMOTE / "bench" / "buildgrid"
        subprocess.run(["rm", "-rf", str(state)], check=True)
        port = free_port()
        server = subprocess.Popen(
            [str(ROOT / "tools" / "buildgrid.sh"), "serve", str(state), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        bots = []
        try:
            wait_for_port(port, server, timeout=300)
            bots = [
                start_bot(port, REMOTE / "bench" / "bot", REMOTE / "bench" / f"bot{i}.log")
                for i in range(1)  # one bot: see test_remote_execution.py
            ]
            rex = (f"--remote_executor=grpc://127.0.0.1:{port}", "--remote_instance_name=main")
            for i in range(a.runs):
                loads.append(os.getloadavg()[0])
                if i == 0:
                    add("remote execution, cold CAS", timed(ca, a.config, *rex))
                add(
                    "remote execution, warm CAS (--noremote_accept_cached)",
                    timed(ca, a.config, *rex, "--noremote_accept_cached"),
                )
            ca.shutdown()
        finally:
            for bot in bots:
                stop(bot)
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
    print(
        f"\n`bazel build //kernels/... --config={a.config}`, execution phase; "
        f"{platform.machine()}, {os.cpu_count()} cores, load average at start of runs: "
        + ", ".join(f"{x:.1f}" for x in loads)
        + "\n"
    )
    n = max(len(v) for v in rows.values())
    print("| build | " + " | ".join(f"run {i + 1}" for i in range(n)) + " |")
    print("|---|" + "---:|" * n)
    for k, v in rows.items():
        print(f"| {k} | " + " | ".join(v + [""] * (n - len(v))) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
