"""What a new user reads first: `vxc --version`, the subcommands' --help (every option
explained, with its default), and the README / tools/setup.sh lines about the test
suite, the download and the CPU level, checked against what the code does."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from clirun import ROOT, run_vxc

from vxc import api, cli
from vxc.targets import EMITS, TARGET_NAMES


def _unwrapped(help_text: str) -> str:
    """argparse wraps at the terminal width, also after a hyphen (`target-` / `ir`)."""
    return " ".join(re.sub(r"-\n\s+", "-", help_text).split())


def test_version_names_the_package_and_the_compiler_digest():
    r = run_vxc("--version")
    assert (r.rc, r.err) == (0, "")
    assert r.out.splitlines()[0] == f"vxc {api.compiler_version()}"


def test_version_names_the_checkout_commit():
    """The second line is the commit of the checkout the compiler runs from (issue 36: the
    digest alone is not the commit), `-dirty` when the compiler's files differ from it."""
    import subprocess

    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if not head:
        pytest.skip("the suite does not run from a git checkout")
    line = run_vxc("--version").out.splitlines()[1]
    assert line in (f"commit {head}", f"commit {head}-dirty"), line


def test_version_without_a_checkout_says_so(tmp_path):
    """A copy of the package outside any checkout (as Bazel provisions it) says why it
    names no commit, instead of naming a wrong one."""
    import shutil
    import subprocess

    shutil.copytree(ROOT / "compiler" / "vxc", tmp_path / "vxc")
    code = "from vxc.api import source_commit; print(source_commit())"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), GIT_CEILING_DIRECTORIES=str(tmp_path))
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert (p.returncode, p.stdout.strip()) == (0, "unknown (not run from a git checkout)")


def test_check_help_explains_target_and_its_default():
    r = run_vxc("check", "--help")
    assert r.rc == 0
    text = _unwrapped(r.out)
    assert "(default: cpu)" in text and "(default: human)" in text
    for t in TARGET_NAMES:
        assert f"{t}, " in text  # each target with what it is
    assert "exit 0 (no errors), 1 (errors) or 2 (bad usage)" in text


def test_build_help_explains_every_emit_choice():
    r = run_vxc("build", "--help")
    assert r.rc == 0
    text = _unwrapped(r.out)
    for emit in EMITS:
        assert f"{emit}: " in text, emit
    assert "(default: artifact)" in text
    assert "Bazel's vx_kernel builds x86-64-v3" in text


def test_readme_quickstart_says_which_test_command_is_the_full_suite():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("```", 2)[1]
    lines = [ln for ln in quick.splitlines() if ln.strip()]
    assert lines[1].startswith("./tools/test.sh ") and "full suite" in lines[1]
    assert lines[2].startswith('./tools/test.sh -m "not slow"') and "quick" in lines[2]
    # test.sh passes its arguments to pytest, last (after -n and --dist), so the quick
    # form is what it says.
    (run,) = [ln for ln in (ROOT / "tools" / "test.sh").read_text().splitlines()
              if "-m pytest -q " in ln]  # fmt: skip
    assert run.endswith(' "$@"'), run


def test_readme_says_the_cli_and_bazel_cpu_levels_and_both_are_true():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "(`--cpu native`" in readme and "portable `x86-64-v3` level" in readme
    build = next(a for a in cli._parser()._subparsers._group_actions[0].choices["build"]._actions
                 if "--cpu" in a.option_strings)  # fmt: skip
    assert build.default == "native"
    bazel = (ROOT / "vx_rules" / "BUILD.bazel").read_text()
    assert re.search(r'name = "cpu",[^)]*build_setting_default = "x86-64-v3"', bazel, re.S)


def test_setup_says_how_much_it_downloads_before_installing():
    script = (ROOT / "tools" / "setup.sh").read_text()
    notice = script.index("about 2 GB")
    assert notice < script.index("pip install")
    # The figure is true: this suite runs in the .venv that setup.sh made (within 2x).
    if Path(sys.prefix).name == ".venv" and (Path(sys.prefix) / ".vx-stamp").exists():
        size = sum(
            os.lstat(os.path.join(d, f)).st_size
            for d, _, files in os.walk(sys.prefix)
            for f in files
        )
        assert 1 << 30 <= size <= 4 << 30, size
