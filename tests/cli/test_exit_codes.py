"""Issue 25: exit codes end to end, through the CLI as a user runs it. A backend refusal
(a valid program the target cannot be built for, issue 19's E70xx) is a diagnostic: exit
1, one JSON object per line with `--error-format json`, nothing written. An internal error
is exit 2 with a bug report. A clean build is exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from clirun import KERNELS, ROOT, assert_no_crash, run_vxc


@pytest.mark.parametrize(("target", "code"), [("tpu", "E7002"), ("b200", "E7002")])
def test_a_backend_refusal_is_exit_1_with_a_json_diagnostic(tmp_path, target, code):
    out = tmp_path / "out"
    seed = KERNELS / "seed.vx"
    r = run_vxc("check", "--target", target, "--no-lower", "--error-format", "json", str(seed))
    assert (r.rc, r.err) == (0, ""), r.err  # the program is valid: the checks accept it
    lowered = run_vxc("check", "--target", target, "--error-format", "json", str(seed))
    assert lowered.rc == 1 and json.loads(lowered.err.splitlines()[0])["code"] == code
    r = run_vxc("build", "--target", target, "--error-format", "json", str(seed), "-o", str(out))
    assert_no_crash(r)
    assert r.rc == 1, r.err
    (diag,) = [json.loads(line) for line in r.err.splitlines()]
    assert diag["code"] == code and diag["severity"] == "error"
    assert diag["file"] == str(seed) and diag["line"] == 10  # the extern call
    assert "internal compiler error" not in r.err
    assert not out.exists()


def test_a_clean_build_is_exit_0(tmp_path):
    r = run_vxc(
        "build", "--target", "cpu", "--error-format", "json", str(KERNELS / "stream.vx"),
        "-o", str(tmp_path),
    )  # fmt: skip
    assert r.rc == 0, r.err
    assert all(line.startswith("wrote ") for line in r.err.splitlines()), r.err  # no diagnostic
    assert (tmp_path / "stream.cpu.so").is_file()


# A real failure inside the backend (not a refusal): a bug has no reproducer in the
# source, so the child makes the CPU lowering raise, then runs the CLI's main.
CHILD = """
import sys
from vxc import cli
from vxc.backends.cpu import lower

def broken(self):
    raise KeyError("simulated bug in the cpu lowering")

lower.ModuleLowering.run = broken
sys.exit(cli.main(sys.argv[1:]))
"""


def test_an_internal_error_in_a_backend_is_exit_2_with_a_bug_report(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    args = ["build", "--target", "cpu", "--error-format", "json", str(KERNELS / "stream.vx")]
    p = subprocess.run(
        [sys.executable, "-c", CHILD, *args, "-o", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("vxc: internal compiler error"), p.stderr
    assert "simulated bug in the cpu lowering" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "out").exists()
