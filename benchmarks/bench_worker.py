"""Benchmark: the VxCompile persistent worker against standalone (one process per
action) on a generated workspace of many kernels, with real Bazel.

    .venv/bin/python benchmarks/bench_worker.py [--kernels 200] [--targets cpu,tpu,b200]
        [--emit vx-mlir] [--jobs 2] [--dir ~/.cache/vx-bazel/bench]

For each kernel k_i (the stream kernel under a new function name and tile type),
the workspace has vx_kernel(k_i) and vx_multi_kernel(k_i_all) over the targets, so a
full build runs one HIR action per kernel and one build action per kernel and target.
Measured, each after `bazel clean` + `bazel shutdown` (no workers, empty action
cache) and a `--nobuild` pass (loading and analysis), so the times are the execution
phase, worker start-up included:
  1. full build, worker strategy (Bazel's default for VxCompile);
  2. full build, --strategy=VxCompile=local (standalone: one python per action);
  3. incremental: append a comment to one kernel and rebuild (worker), counting the
     VxCompile actions that ran (expected: 1 HIR + 1 per target).
Prints a Markdown table for docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def kernel_source(i: int) -> str:
    src = (ROOT / "kernels" / "stream.vx").read_text()
    return src.replace("fn stream(", f"fn stream_{i:03d}(", 1) + f"\n// generated kernel {i}\n"


SNAPSHOT = [
    "compiler/vxc",
    "vx_rules",
    "tests/bazel/vx_tests",
    "BUILD.bazel",
    "WORKSPACE",
    "WORKSPACE.bzlmod",
    "MODULE.bazel",
    "requirements.lock",
    ".bazelignore",
]


def snapshot(dest: Path) -> Path:
    """A copy of the rules and the compiler, so that edits to the working tree while
    the benchmark runs (the compiler is a tool input of every action) do not turn the
    incremental build into a full one."""
    shutil.rmtree(dest, ignore_errors=True)
    for rel in SNAPSHOT:
        src, dst = ROOT / rel, dest / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return dest


def write_workspace(ws: Path, n: int, targets: list[str], emit: str) -> None:
    if ws.exists():
        shutil.rmtree(ws / "k", ignore_errors=True)
    (ws / "k").mkdir(parents=True, exist_ok=True)
    vx = snapshot(ws.parent / "vx_snapshot")
    (ws / "WORKSPACE").write_text(
        'workspace(name = "bench")\n'
        f'local_repository(name = "vx", path = "{vx}")\n'
        'load("@vx//vx_rules:repositories.bzl", "vx_register_toolchains", '
        '"vx_rules_dependencies")\n'
        "vx_rules_dependencies()\nvx_register_toolchains()\n"
    )
    (ws / ".bazelrc").write_text("build --nosandbox_debug\n")
    lines = ['load("@vx//vx_rules:defs.bzl", "vx_kernel", "vx_multi_kernel")', ""]
    for i in range(n):
        name = f"k{i:03d}"
        (ws / "k" / f"{name}.vx").write_text(kernel_source(i))
        lines.append(f'vx_kernel(name = "{name}", srcs = ["{name}.vx"], emit = "{emit}")')
        lines.append(
            f'vx_multi_kernel(name = "{name}_all", kernel = ":{name}", targets = {targets!r})'
        )
    (ws / "k" / "BUILD.bazel").write_text("\n".join(lines).replace("'", '"') + "\n")


PROCS = re.compile(r"INFO: (\d+) processes?: (.*)")


class Bazel:
    def __init__(self, ws: Path, jobs: int):
        self.ws = ws
        self.jobs = jobs
        self.root = ws.parent / "root"

    def __call__(self, *args: str) -> tuple[float, str]:
        cmd = [
            os.environ.get("VX_BAZEL", "bazel"),
            f"--output_user_root={self.root}",
            "--max_idle_secs=300",
            *args,
        ]
        if args[0] == "build":
            cmd[4:4] = [f"--jobs={self.jobs}", "--color=no", "--curses=no"]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=self.ws, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-4000:]}")
        return dt, p.stderr + p.stdout

    def cold(self, *flags: str) -> None:
        """Empty output tree and action cache, no server and no workers; then loading
        and analysis (--nobuild), so the timed build that follows is execution."""
        self("clean")
        self("shutdown")
        self("build", "--nobuild", "//k:all", *flags)


STAT = re.compile(r"vxc-worker: .*\bmode=(\w+)\b.*\btotal_ms=([\d.]+)")


def worker_seconds(bz: Bazel) -> tuple[int, float]:
    """Requests the workers served and the seconds they spent inside them."""
    _, out = bz("info", "output_base")
    base = Path([ln for ln in out.splitlines() if ln.startswith("/")][-1])
    n, total = 0, 0.0
    for log in (base / "bazel-workers").glob("*VxCompile*.log"):
        for m in STAT.finditer(log.read_text(errors="replace")):
            n += 1
            total += float(m.group(2)) / 1000
    return n, total


def processes(log: str) -> str:
    m = PROCS.findall(log)
    return m[-1][1] if m else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kernels", type=int, default=200)
    ap.add_argument("--targets", default="cpu,tpu,b200")
    ap.add_argument("--emit", default="vx-mlir", choices=["vx-mlir", "target-ir", "artifact"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dir", default=str(Path.home() / ".cache" / "vx-bazel" / "bench"))
    ap.add_argument("--skip-standalone", action="store_true")
    a = ap.parse_args()
    targets = a.targets.split(",")
    ws = Path(a.dir) / "ws"
    write_workspace(ws, a.kernels, targets, a.emit)
    bz = Bazel(ws, a.jobs)
    pattern = "//k:all"
    n_actions = a.kernels * (1 + len(targets))
    bz("build", "//k:k000_all")  # fetch @vx_python, load packages once (not timed)

    bz.cold()
    t_worker, log_w = bz("build", pattern)
    served, inside = worker_seconds(bz)
    rows = [("full build, persistent worker", t_worker, processes(log_w))]

    touched = ws / "k" / "k007.vx"
    touched.write_text(touched.read_text() + "// touched\n")
    t_inc, log_i = bz("build", pattern)
    rows.append(("incremental: one kernel edited (worker)", t_inc, processes(log_i)))

    if not a.skip_standalone:
        bz.cold("--strategy=VxCompile=local")
        t_local, log_l = bz("build", pattern, "--strategy=VxCompile=local")
        rows.append(("full build, standalone (one process per action)", t_local, processes(log_l)))
    bz("shutdown")

    print(
        f"\n{a.kernels} kernels x {len(targets)} targets ({','.join(targets)}), "
        f"emit={a.emit}, --jobs={a.jobs}: {n_actions} VxCompile actions in a full build\n"
    )
    print("| build | wall time | Bazel's process count |")
    print("|---|---:|---|")
    for name, t, procs in rows:
        print(f"| {name} | {t:.1f} s | {procs} |")
    print(
        f"\nfull build with workers: {served} requests, {inside:.1f} s inside the workers "
        f"(sum over both), {t_worker:.1f} s wall"
    )
    if not a.skip_standalone:
        print(f"worker speed-up on the full build: {t_local / t_worker:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
