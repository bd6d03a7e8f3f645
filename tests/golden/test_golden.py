"""Golden tests: each `cases/NAME.vx` is checked with `vxc check --target T NAME.vx` (run
from `cases/`, so the output names the file as the user typed it) and its stderr must
equal `cases/NAME.expected` byte for byte; the exit status must be 1 exactly when the
expected output has an error. The target is `cpu` unless the first line says
`// target: T`, or `// targets: T1 T2 ...` (each of them must give that same output).
Check cases run with `--no-lower`: they hold the target-independent checks' output, the
same on every target (tests/cli/test_check_lowers.py holds `vxc check`'s lowering, over
these same cases). A backend refusal (E70xx) shows at build time: a first line `// build:
T1 T2 ...` runs `vxc build --target T --emit target-ir -o DIR NAME.vx` instead (the backend
lowers the program; no artifact is packaged), with the same rules for its stderr and exit
status. A line `// flags: ARGS` among the leading comments adds ARGS to the command line
(`// flags: --const N=128`).

Naming: `CODE_what.vx` is a rejected form that emits CODE; `CODE_ok_what.vx` is the
accepted form, which must not emit it. Every code of the code table needs both.

Regenerate after an intended change of the diagnostics, then review the diff:

    VX_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/golden
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from vxc import cli
from vxc.diagnostics.codes import CODES

CASES = Path(__file__).resolve().parent / "cases"
UPDATE = os.environ.get("VX_UPDATE_GOLDEN") == "1"
TARGET = re.compile(rb"^// (?:targets?|build): (\w+(?: \w+)*)")
BUILD = b"// build: "
FLAGS = re.compile(rb"^// flags: (.*)$", re.M)
SOURCES = sorted(CASES.glob("*.vx"))


def targets_of(path: Path) -> list[str]:
    m = TARGET.match(path.read_bytes())
    return m.group(1).decode().split() if m else ["cpu"]


def flags_of(path: Path) -> list[str]:
    head = path.read_bytes().split(b"\n\n", 1)[0]  # the leading comment block
    m = FLAGS.search(head)
    return m.group(1).decode().split() if m else []


def run_check(
    path: Path, monkeypatch, capsys, target: str | None = None, out_dir: Path | None = None
) -> tuple[int, str]:
    monkeypatch.chdir(CASES)
    capsys.readouterr()
    target = target or targets_of(path)[0]
    if path.read_bytes().startswith(BUILD):
        assert out_dir is not None, f"{path.name} is a build case"
        argv = ["build", "--target", target, "--emit", "target-ir", "-o", str(out_dir)]
    else:
        argv = ["check", "--target", target, "--no-lower"]
    rc = cli.main([*argv, *flags_of(path), path.name])
    out = capsys.readouterr()
    assert out.out == "", f"`vxc {argv[0]}` writes diagnostics to stderr only"
    err = "".join(x for x in out.err.splitlines(True) if not x.startswith("wrote "))
    return rc, err


CASES_ON = [(p, t) for p in SOURCES for t in targets_of(p)]


@pytest.mark.parametrize(
    ("path", "target"),
    CASES_ON,
    ids=[p.stem + (f"[{t}]" if len(targets_of(p)) > 1 else "") for p, t in CASES_ON],
)
def test_golden(path: Path, target: str, monkeypatch, capsys, tmp_path):
    rc, err = run_check(path, monkeypatch, capsys, target, tmp_path)
    expected_path = path.with_suffix(".expected")
    if UPDATE and target == targets_of(path)[0]:
        expected_path.write_text(err)
    assert expected_path.exists(), f"no {expected_path.name}; run with VX_UPDATE_GOLDEN=1"
    expected = expected_path.read_text()
    assert err == expected, f"--target {target}"
    has_error = re.search(r"^error\[", expected, re.M) is not None
    assert rc == (1 if has_error else 0)


def emitted_codes(path: Path) -> set[str]:
    text = path.with_suffix(".expected").read_text()
    return set(re.findall(r"^(?:error|warning)\[([EW]\d{4})\]", text, re.M))


def test_case_names_follow_the_convention():
    for path in SOURCES:
        code = path.stem.split("_", 1)[0]
        assert code in CODES, f"{path.name}: `{code}` is not in the code table"
        codes = emitted_codes(path)
        if path.stem.startswith(f"{code}_ok"):
            assert code not in codes, f"{path.name} is an accepted form but emits {code}"
        else:
            assert code in codes, f"{path.name} is a rejected form but does not emit {code}"


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_has_a_rejected_and_an_accepted_golden(code):
    rejected = [
        p for p in SOURCES if p.stem.startswith(code + "_") and not p.stem.startswith(code + "_ok")
    ]
    accepted = [p for p in SOURCES if p.stem.startswith(code + "_ok")]
    assert rejected, f"no golden case emits {code}: add tests/golden/cases/{code}_<what>.vx"
    assert accepted, f"no accepted golden for {code}: add tests/golden/cases/{code}_ok_<what>.vx"


def test_no_stray_expected_files():
    stems = {p.stem for p in SOURCES}
    stray = [p.name for p in CASES.glob("*.expected") if p.stem not in stems]
    assert stray == []


@pytest.mark.parametrize("code", sorted(c for c in CODES if CODES[c].example))
def test_code_examples_are_rejected_golden_cases(code):
    """docs/CODES.md shows `Code.example`: a golden case that emits that code."""
    path = CASES / f"{CODES[code].example}.vx"
    assert path.exists(), f"{code}: example {path.name} is not a golden case"
    assert code in emitted_codes(path)
