"""`vxc check --target T` reports what `vxc build --target T` refuses (TOOLCHAIN.md's CLI
contract, issue 36): the check runs the target's lowering to its first refusal, so a clean
check builds; `--no-lower` keeps the target-independent check."""

from __future__ import annotations

import json

import pytest
from clirun import KERNELS, ROOT, assert_no_crash, run_vxc

from vxc import api

TARGETS = ("cpu", "tpu", "b200", "h100")
SEED = KERNELS / "seed.vx"


def _json_errors(err: str) -> list[dict]:
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [d for d in lines if d["severity"] == "error"]


@pytest.mark.parametrize("target", ["tpu", "b200", "h100"])
def test_the_seed_is_refused_by_check_at_its_line(target):
    """seed.vx calls an extern device function (`matmul_acc`), which no accelerator links:
    E7002 at the call, from the check itself, not only at build time."""
    r = run_vxc("check", str(SEED), "--target", target, "--error-format", "json")
    assert_no_crash(r)
    assert r.rc == 1, r.err
    [d] = _json_errors(r.err)
    assert (d["code"], d["line"]) == ("E7002", 10), d
    built = run_vxc("build", str(SEED), "--target", target, "--emit", "target-ir")
    assert built.rc == 1 and "E7002" in built.err


def test_no_lower_keeps_the_target_independent_check():
    r = run_vxc("check", str(SEED), "--target", "tpu", "--no-lower")
    assert (r.rc, r.err) == (0, ""), r.err
    assert run_vxc("check", str(SEED), "--target", "cpu").rc == 0  # the CPU links externs


def test_help_names_no_lower():
    assert "--no-lower" in run_vxc("check", "--help").out


def _corpus() -> list:
    files = [
        *sorted(KERNELS.glob("*.vx")),
        *sorted((ROOT / "tests" / "golden" / "cases").glob("*.vx")),
        *sorted((ROOT / "tests" / "fuzz" / "seeds").glob("*.vx")),
    ]
    return [pytest.param(f, id=f.relative_to(ROOT).as_posix()) for f in files]


@pytest.mark.slow
@pytest.mark.parametrize("path", _corpus())
def test_a_clean_check_builds_on_every_target(path):
    """Over the project's own programs: whatever `check(lower=True)` accepts for a target,
    the artifact build for that target accepts too, and whatever the build refuses the
    check reports with the same codes (check ≡ build)."""
    source = api.Source(path.relative_to(ROOT).as_posix(), path.read_bytes())
    analysis = api.analyze([source])
    for target in TARGETS:
        checked = api.check([source], target, lower=True)
        built = api.build(analysis, target, "artifact", cpu="x86-64-v3")
        check_codes = {d.code for d in checked.diagnostics if d.severity == "error"}
        build_codes = {d.code for d in built.diagnostics if d.severity == "error"}
        assert check_codes == build_codes, (target, check_codes, build_codes)
        assert checked.ok == built.ok
        if built.ok:
            assert built.outputs, target
