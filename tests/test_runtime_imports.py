"""@vx//:runtime (BUILD.bazel) ships vxc.runtime, the few vxc modules it imports and numpy:
loading and calling a cpu artifact must import exactly those vxc modules and none of the
heavy packages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys
from vxc import runtime
import numpy as np
k = runtime.load(sys.argv[1])
x = np.ones((128, 128), np.float32)
assert np.allclose(k.matmul(x, x), x @ x)
print(" ".join(sorted(m for m in sys.modules if m == "vxc" or m.startswith("vxc."))))
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _slim_sources() -> set[str]:
    build = (ROOT / "BUILD.bazel").read_text()
    block = re.search(r'py_library\(\s*name = "runtime",(.*?)\n\)', build, re.S).group(1)
    srcs = re.findall(r'"compiler/(vxc/[^"]+)\.py"', block)
    return {s.replace("/__init__", "").replace("/", ".") for s in srcs}


def test_loading_a_cpu_kernel_imports_only_the_slim_runtime(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "vxc",
            "build",
            str(ROOT / "examples/hello/matmul.vx"),
            "--target",
            "cpu",
            "-o",
            str(tmp_path),
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    p = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    vxc_modules, top = (set(line.split()) for line in p.stdout.splitlines())
    # Exactly the library's files: one missing fails a py_test in Bazel, one more is weight.
    assert vxc_modules == _slim_sources()
    assert {"vxc", "vxc.runtime"} <= vxc_modules
    assert not top & {"jax", "jaxlib", "libtpu", "lark", "llvmlite", "z3", "google", "ml_dtypes"}
