"""The CLI contract of TOOLCHAIN.md: exit codes, the human and JSON forms, `explain`,
`python -m vxc` and the console script. Every run is a subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from clirun import KERNELS, assert_no_crash, run_vxc

from vxc import cli
from vxc.diagnostics.codes import CODES

JSON_KEYS = ["code", "severity", "message", "file", "line", "column", "notes", "help"]

DROPPED = """\
fn f(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let t = transfer_async(tiles[0], Memory::VMEM);
}
"""

RELAXED_ONLY = """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near],
  transfer Memory::Far -> Memory::Near : 3 relaxed
}
fn idle() -> void on Topology::TensorCore {
}
"""


def test_check_clean_program_exits_0_and_prints_nothing():
    r = run_vxc("check", str(KERNELS / "seed.vx"))
    assert (r.rc, r.out, r.err) == (0, "", "")


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_seed_passes_the_target_independent_check_for_every_target(target):
    """`--no-lower`: the seed is a valid program everywhere (the accelerators' refusal of
    its extern call is a lowering diagnostic, tests/cli/test_check_lowers.py)."""
    r = run_vxc("check", "--target", target, "--no-lower", str(KERNELS / "seed.vx"))
    assert (r.rc, r.err) == (0, "")


def test_errors_exit_1_with_rustc_style_output(write):
    path = write("dropped.vx", DROPPED)
    r = run_vxc("check", "dropped.vx", cwd=path.parent)
    assert r.rc == 1 and r.out == ""
    assert r.err == (
        "error[E6011]: transfer token for 't' is dropped without `wait`; the DMA may not "
        "have completed\n"
        "  --> dropped.vx:2:7\n"
        "  |\n"
        "2 |   let t = transfer_async(tiles[0], Memory::VMEM);\n"
        "  |       ^\n"
        "  note: it is dropped at the end of its scope (line 3)\n"
        "  help: bind the result of `wait(t)` before the token goes out of scope\n"
        "\n"
        "1 error(s), 0 warning(s)\n"
    )


def test_warnings_alone_exit_0(write):
    path = write("relaxed.vx", RELAXED_ONLY)
    r = run_vxc("check", str(path))
    assert r.rc == 0
    assert r.err.startswith("warning[W1027]: transfer edge `Far -> Near` is relaxed")
    assert r.err.endswith("0 error(s), 1 warning(s)\n")


def test_json_format_one_object_per_line_with_exact_keys(write):
    a = write("dropped.vx", DROPPED)
    b = write("relaxed.vx", RELAXED_ONLY)
    r = run_vxc("check", "--error-format", "json", str(a), str(b))
    assert r.rc == 1 and r.out == ""
    objs = [json.loads(line) for line in r.err.splitlines()]
    assert len(objs) == 2
    for o in objs:
        assert list(o) == JSON_KEYS
        assert o["severity"] in ("error", "warning", "note")
        assert isinstance(o["line"], int) and o["line"] >= 1
        assert isinstance(o["column"], int) and o["column"] >= 1
        assert isinstance(o["notes"], list) and all(isinstance(n, str) for n in o["notes"])
        assert o["help"] is None or isinstance(o["help"], str)
    e, w = sorted(objs, key=lambda o: o["code"])
    assert (e["code"], e["severity"], e["file"], e["line"], e["column"]) == (
        "E6011",
        "error",
        str(a),
        2,
        7,
    )
    assert e["notes"] == ["it is dropped at the end of its scope (line 3)"]
    assert e["help"] == "bind the result of `wait(t)` before the token goes out of scope"
    assert (w["code"], w["severity"], w["file"], w["line"], w["column"]) == (
        "W1027",
        "warning",
        str(b),
        6,
        3,
    )
    assert w["help"] is None


def test_json_format_clean_program_prints_nothing():
    r = run_vxc("check", "--error-format", "json", str(KERNELS / "seed.vx"))
    assert (r.rc, r.out, r.err) == (0, "", "")


def test_default_target_is_cpu(write):
    # 1 MB fits the cpu model's 2 MB VMEM and not b200's 228 KB: the default must be cpu.
    src = """\
fn f(t: &Tensor<f32, [512, 512]>) -> void on Topology::TensorCore {
  let v = transfer(t, Memory::VMEM);
}
"""
    path = write("big_tile.vx", src)
    assert run_vxc("check", str(path)).rc == 0
    assert run_vxc("check", "--target", "cpu", str(path)).rc == 0
    r = run_vxc("check", "--target", "b200", str(path))
    assert r.rc == 1 and "error[E6009]" in r.err


def test_diagnostics_name_the_file_they_are_in(write):
    ok = write("ok.vx", "fn g() {}\n")
    bad = write("bad.vx", "fn h() {\n  let x = y;\n}\n")
    r = run_vxc("check", str(ok), str(bad))
    assert r.rc == 1
    assert f"  --> {bad}:2:11\n" in r.err and "error[E0101]: cannot find `y` in this scope" in r.err


def test_machine_file_adds_spaces(write):
    machine = write(
        "m.vx",
        "Memory Scratch { within: Memory::HBM, capacity: 64 KB }\n"
        "Topology Tiny { memory: Memory::Scratch, visible: [Memory::Scratch],\n"
        "  transfer Memory::HBM -> Memory::Scratch : 1 }\n",
    )
    fits = "fn f(t: &Tensor<f32, [128, 128]>) -> void on Topology::Tiny {\n"
    fits += "  let v = transfer(t, Memory::Scratch);\n}\n"
    prog = write("p.vx", fits)
    r = run_vxc("check", str(prog))  # Tiny is unknown without the machine file
    assert r.rc == 1 and r.err.startswith("error[E6002]: `Topology::Tiny` is not declared")
    assert run_vxc("check", "--machine", str(machine), str(prog)).rc == 0  # 64 KiB fits
    big = write("q.vx", fits.replace("[128, 128]", "[128, 129]"))
    r = run_vxc("check", "--machine", str(machine), str(big))
    assert r.rc == 1 and r.err.startswith("error[E6009]: `Tensor<f32, [128, 129]>` is 66048 B")


def test_machine_file_with_a_syntax_error_names_the_machine_file(write):
    machine = write("m.vx", "Memory Broken { capacity: }\n")
    prog = write("p.vx", "fn f() {}\n")
    r = run_vxc("check", "--machine", str(machine), str(prog))
    assert r.rc == 1
    assert r.err.startswith("error[E0002]: unexpected `}`\n") and f"--> {machine}:1:27" in r.err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["check", "does-not-exist.vx"], "vxc: error: cannot read `does-not-exist.vx`: "),
        (["check", "--machine", "nope.vx", "SEED"], "vxc: error: cannot read `nope.vx`: "),
        (["check", "--target", "gpu", "SEED"], "invalid choice: 'gpu'"),
        (["check", "--error-format", "xml", "SEED"], "invalid choice: 'xml'"),
        (["check"], "the following arguments are required: FILE.vx"),
        ([], "the following arguments are required: command"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["explain", "E9999"], "vxc: error: unknown code `E9999`"),
        (["explain"], "the following arguments are required: code"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(args, needle):
    args = [str(KERNELS / "seed.vx") if a == "SEED" else a for a in args]
    r = run_vxc(*args)
    assert r.rc == 2
    assert needle in r.err
    assert_no_crash(r)


def test_missing_file_message_says_why():
    r = run_vxc("check", "does-not-exist.vx")
    assert r.err.strip() == (
        "vxc: error: cannot read `does-not-exist.vx`: No such file or directory"
    )


def test_a_directory_is_not_a_source(tmp_path):
    r = run_vxc("check", str(tmp_path))
    assert r.rc == 2 and f"vxc: error: cannot read `{tmp_path}`" in r.err
    assert_no_crash(r)


@pytest.mark.parametrize("code", ["E6011", "e6004", "W1029"])
def test_explain_subprocess(code):
    r = run_vxc("explain", code)
    c = CODES[code.upper()]
    assert r.rc == 0 and r.err == ""
    assert r.out == f"{c.code} ({c.severity}): {c.title}\n\n{c.explanation}\n"


@pytest.mark.parametrize("code", sorted(CODES))
def test_explain_every_code_in_process(code, capsys):
    assert cli.main(["explain", code]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{code} ({CODES[code].severity}): {CODES[code].title}"
    assert CODES[code].explanation in out


def test_console_script_and_module_agree():
    script = Path(sys.executable).parent / "vxc"
    if not script.exists():
        pytest.fail(f"the console script is not installed next to {sys.executable}")
    a = run_vxc("explain", "E6011", module=False)
    b = run_vxc("explain", "E6011", module=True)
    assert a.rc == b.rc == 0 and a.out == b.out != ""
    r = run_vxc("check", str(KERNELS / "seed.vx"), module=False)
    assert (r.rc, r.err) == (0, "")


def test_internal_failure_prints_a_bug_report_and_exits_2(monkeypatch, capsys):
    from vxc import api

    def boom(*args, **kwargs):
        raise RuntimeError("simulated failure inside the checker")

    monkeypatch.setattr(api, "check", boom)
    rc = cli.main(["check", str(KERNELS / "seed.vx")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("vxc: internal compiler error (this is a bug in vxc")
    assert "RuntimeError: simulated failure inside the checker" in err
    assert "Traceback" not in err
