"""Runs real Bazel on a scratch workspace that consumes this repository as @vx.

The workspace and Bazel's output_user_root live under a fixed cache directory
(``$VX_BAZEL_TEST_DIR``, default ``~/.cache/vx-bazel/itest``) so that later runs
reuse the Bazel server's output base, the fetched @vx_python and the action cache;
the workspace's files are rewritten at the start of each session.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("VX_BAZEL_TEST_DIR", Path.home() / ".cache" / "vx-bazel" / "itest"))
JOBS = os.environ.get("VX_BAZEL_JOBS", "2")

STATS = re.compile(r"vxc-worker: (pid=\d+ .*)")

_BUILD = """\
load("@vx//vx_rules:defs.bzl", "vx_kernel", "vx_library", "vx_multi_kernel", "vx_test")

vx_kernel(name = "stream", srcs = ["stream.vx"])

vx_kernel(name = "stream_ir", srcs = ["stream.vx"], emit = "vx-mlir")

vx_multi_kernel(name = "stream_ir_all", kernel = ":stream_ir")

vx_test(
    name = "stream_test",
    size = "small",
    kernel = ":stream",
    srcs = ["@vx//tests/bazel/vx_tests:stream_checks.py"],
)

vx_kernel(name = "bad", srcs = ["bad.vx"], tags = ["manual"])

vx_library(name = "helpers", srcs = ["helpers.vx"])

# A kernel for the cpu only (256 KiB tiles: E6009 in an SM's shared memory).
vx_kernel(name = "wide", srcs = ["wide.vx"], targets = ["cpu"])

vx_kernel(name = "stream_report", srcs = ["stream.vx"], emit = "report")

# vx_register_toolchains() without python = True: this runs on the workspace's own
# Python toolchain, not on @vx_python's interpreter.
py_test(name = "which_python", size = "small", srcs = ["which_python.py"])

vx_kernel(name = "uses_helpers", srcs = ["uses_helpers.vx"], deps = [":helpers"])

# rows.tune.json beside rows.vx: its cpu entry gives BK = 128 (LANGUAGE.md 3).
vx_kernel(name = "rows_tuned", srcs = ["rows.vx"], emit = "vx-mlir")

vx_kernel(name = "rows_untuned", srcs = ["rows.vx"], emit = "vx-mlir", tune = None)
"""

ROWS_VX = """\
fn rows<const BK: i64 = 64>(x: &Tensor<f32, [8, 2 * BK]>, o: &mut Tensor<f32, [8, 2 * BK]>)
    -> void on Topology::TensorCore where instances() == 1 {
  let t = transfer(x, Memory::VMEM);
  transfer(t - t.sum(1), o[0 .. 8, 0 .. 2 * BK]);
}
"""


def rows_table() -> str:
    """The tuning table of ROWS_VX: BK = 128 on the cpu, no entry for the other targets."""
    digest = hashlib.sha256(ROWS_VX.encode()).hexdigest()
    doc = {"format": 1, "source_sha256": digest, "targets": {"cpu": {"consts": {"BK": 128}}}}
    return json.dumps(doc)


HELPERS_VX = """\
fn acc_into(acc: &mut Tensor<f32, [128, 128]>, x: &Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>) on Topology::TensorCore {
  matmul_acc(acc, x, w);
}
"""

USES_HELPERS_VX = """\
fn uses_helpers(x: &Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  acc_into(&mut acc, &xv, &wv);
  return transfer(acc, Memory::HBM);
}
"""

WIDE_VX = """\
fn wide(x: &Tensor<f32, [256, 256]>) -> Tensor<f32, [256, 256]> on Topology::TensorCore {
  let xv = transfer(x, Memory::VMEM);
  return transfer(xv, Memory::HBM);
}
"""

WHICH_PYTHON_PY = """\
import sys
assert "vx_python" not in sys.executable, sys.executable
print("python:", sys.executable)
"""

BAD_VX = """\
fn bad(x: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let t = transfer_async(x, Memory::VMEM);
  return transfer(x, Memory::HBM);
}
"""


def bazel_binary() -> str | None:
    """$VX_BAZEL or bazel on PATH; as root on Debian without one, installs Debian's
    bazel-bootstrap (tools/bazel_install.sh), as ./bazelw does for a new user."""
    found = os.environ.get("VX_BAZEL") or shutil.which("bazel")
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    p = subprocess.run(
        [str(ROOT / "tools" / "bazel_install.sh")], capture_output=True, text=True, timeout=900
    )
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


class Workspace:
    def __init__(self, bazel: str):
        self.bazel = bazel
        self.dir = CACHE / "ws"
        self.output_user_root = CACHE / "root"
        self.pkg = self.dir / "k"

    def write(self) -> None:
        self.pkg.mkdir(parents=True, exist_ok=True)
        (self.dir / "WORKSPACE").write_text(
            'workspace(name = "itest")\n'
            f'local_repository(name = "vx", path = "{ROOT}")\n'
            'load("@vx//vx_rules:repositories.bzl", "vx_register_toolchains", '
            '"vx_rules_dependencies")\n'
            "vx_rules_dependencies()\nvx_register_toolchains()\n"
        )
        # The configs come from the rules' own file, as a consuming workspace takes them.
        (self.dir / ".bazelrc").write_text(
            f"import {ROOT}/vx_rules/vx.bazelrc\nbuild --nosandbox_debug\n"
        )
        (self.pkg / "BUILD.bazel").write_text(_BUILD)
        (self.pkg / "stream.vx").write_bytes((ROOT / "kernels" / "stream.vx").read_bytes())
        (self.pkg / "bad.vx").write_text(BAD_VX)
        (self.pkg / "wide.vx").write_text(WIDE_VX)
        (self.pkg / "which_python.py").write_text(WHICH_PYTHON_PY)
        (self.pkg / "helpers.vx").write_text(HELPERS_VX)
        (self.pkg / "uses_helpers.vx").write_text(USES_HELPERS_VX)
        (self.pkg / "rows.vx").write_text(ROWS_VX)
        (self.pkg / "rows.tune.json").write_text(rows_table())

    def run(
        self, *args: str, check: bool = True, timeout: int = 900
    ) -> subprocess.CompletedProcess:
        cmd = [
            self.bazel,
            f"--output_user_root={self.output_user_root}",
            "--max_idle_secs=600",
            *args[:1],
            *(
                [f"--jobs={JOBS}", "--color=no", "--curses=no"]
                if args[0] in ("build", "test", "run")
                else []
            ),
            *args[1:],
        ]
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        p = subprocess.run(
            cmd, cwd=self.dir, capture_output=True, text=True, timeout=timeout, env=env
        )
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}\n{p.stderr[-6000:]}")
        return p

    def output_base(self) -> Path:
        return Path(self.run("info", "output_base").stdout.strip())

    def worker_stats(self) -> list[dict[str, str]]:
        """Every stats line the VxCompile workers of this output base logged, in order
        of the log files' names and then of lines."""
        rows = []
        logs = sorted(
            (self.output_base() / "bazel-workers").glob("*VxCompile*.log"),
            key=lambda p: p.stat().st_mtime,
        )
        for log in logs:
            for line in log.read_text(errors="replace").splitlines():
                m = STATS.search(line)
                if m:
                    rows.append(dict(kv.split("=", 1) for kv in m.group(1).split()))
        return rows

    def shutdown(self) -> None:
        self.run("shutdown", check=False, timeout=120)
