"""The worker tells the user's mistakes from its own bugs (issue 10): a missing input,
a missing @flagfile, an output path that is a folder, a NUL in a path, junk arguments
are each one plain line naming the path or argument (exit 2), never "internal compiler
error" and a traceback; and an answer quotes a huge request by a bounded excerpt."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from workerclient import ROOT, WorkerClient, inputs

STREAM = Path(ROOT) / "kernels" / "stream.vx"


@pytest.fixture(scope="module")
def execroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("execroot")
    (root / "k").mkdir()
    shutil.copy(STREAM, root / "k" / "stream.vx")
    (root / "out").mkdir()
    return root


@pytest.fixture(scope="module")
def worker(execroot):
    w = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    yield w
    if w.proc.poll() is None:
        w.close()


def plain_error(r, *needles: str) -> None:
    assert r.exit_code == 2, r.output
    assert "internal compiler error" not in r.output, r.output[:3000]
    assert "Traceback" not in r.output and "bug in vxc" not in r.output, r.output[:3000]
    for n in needles:
        assert n in r.output, r.output[:3000]


HIR = ["hir", "--out", "out/stream.vxhir", "--src", "k/stream.vx"]


def build(out_dir="out/cpu", hir="out/stream.vxhir", src="k/stream.vx"):
    return ["build", "--hir", hir, "--src", src, "--target", "cpu", "--out-dir", out_dir]


def test_missing_input_names_the_path(worker, execroot):
    # Listed (a file deleted after Bazel listed it), then not even listed.
    args = ["hir", "--out", "out/x.vxhir", "--src", "k/nope.vx"]
    r = worker.call(args, inputs=inputs(execroot, ["k/nope.vx"]))
    plain_error(r, "cannot read source `k/nope.vx`", "No such file or directory")
    plain_error(worker.call(args), "cannot read source `k/nope.vx`", "not an input")


def test_missing_machine_model_and_hir_name_the_path(worker):
    r = worker.call([*HIR, "--machine", "k/model.vx"])
    plain_error(r, "cannot read machine model `k/model.vx`")
    r = worker.call(build(hir="out/absent.vxhir"))
    plain_error(r, "cannot read HIR cache `out/absent.vxhir`")


def test_missing_flagfile_names_the_path(worker):
    r = worker.call(["@k/args.params"])
    plain_error(r, "cannot read flagfile `k/args.params`")


def test_output_path_that_is_a_folder(worker, execroot):
    (execroot / "out" / "dir.vxhir").mkdir()
    r = worker.call(["hir", "--out", "out/dir.vxhir", "--src", "k/stream.vx"])
    plain_error(r, "out/dir.vxhir", "it is a folder")
    assert worker.call(HIR).exit_code == 0
    (execroot / "out" / "cpu1").mkdir()
    (execroot / "out" / "cpu1" / "stream.cpu.h").mkdir()  # one output of the set
    r = worker.call(build(out_dir="out/cpu1"))
    plain_error(r, "stream.cpu.h", "it is a folder")
    # Nothing of the set appeared (the check runs before any output is renamed).
    assert sorted(os.listdir(execroot / "out" / "cpu1")) == ["stream.cpu.h"]


def test_output_folder_that_is_a_file(worker, execroot):
    assert worker.call(HIR).exit_code == 0
    (execroot / "out" / "afile").write_text("x")
    r = worker.call(build(out_dir="out/afile"))
    plain_error(r, "out/afile")


def test_nul_in_paths(worker):
    plain_error(worker.call(["hir", "--out", "out/a.vxhir", "--src", "k/a\0b.vx"]), "k/a")
    plain_error(worker.call(["@k/a\0b"]), "cannot read flagfile")
    assert worker.call(HIR).exit_code == 0
    plain_error(worker.call(build(out_dir="out/x\0y")), "out/x")


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["hir"],
        ["build", "--target"],
        ["hir", "--out", "o", "--src", "s", "--bogus", "1"],
        ["\x00\x01\x02"],
        ["@@literal"],
    ],
    ids=["empty", "unknown-mode", "no-flags", "dangling", "unknown-flag", "binary", "at-at"],
)
def test_junk_arguments(worker, args):
    plain_error(worker.call(args), "bad arguments")


def test_huge_request_gets_a_bounded_answer(worker):
    name = "k/" + "x" * 52_000_000 + ".vx"  # 52 MB: the answer was 105 MB
    r = worker.call(["hir", "--out", "out/h.vxhir", "--src", name])
    plain_error(r, "cannot read source `k/xxxx", "more characters")
    assert len(r.output) < 2000
    r = worker.call(["frobnicate", "y" * 10_000_000] + ["z"] * 100_000)
    plain_error(r, "bad arguments")
    assert len(r.output) < 5000


def test_worker_still_serves_after_every_user_error(worker, execroot):
    assert worker.call(HIR).exit_code == 0
    assert worker.call(build(out_dir="out/final")).exit_code == 0
    names = sorted(os.listdir(execroot / "out" / "final"))
    assert names == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o", "stream.cpu.so"]
    for n in names:
        assert (execroot / "out" / "final" / n).stat().st_mode & 0o777 == 0o644


def test_bug_report_bounds_a_huge_exception_message():
    from vxc.worker.server import bug_report

    try:
        raise RuntimeError("m" * 10_000_000)
    except RuntimeError as e:
        text = bug_report(e)
    assert "internal compiler error: RuntimeError" in text
    assert len(text) < 10_000


@pytest.mark.parametrize(
    "name,src,code",
    [
        # 27+ nested `&` passed `vxc check`, then failed the .vxhir encoder in Bazel's HIR action
        ("deep.vx", "fn f(x: " + "&" * 150 + "Tensor<f32, [4, 4]>) -> void { }\n", 0),
        ("sum.vx", "fn f() -> i64 { return 1" + " + 1" * 150 + "; }\n", 0),
        # a size over 64 bits passed check, then failed the encoder ("Value out of range")
        ("size.vx", "Memory S { within: Memory::HBM, capacity: 9223372036854775807 KB }\n", 1),
    ],
)
def test_hir_action_on_former_encoder_crashes(worker, execroot, name, src, code):
    (execroot / "k" / name).write_text(src)
    r = worker.call(["hir", "--out", f"out/{name}hir", "--src", f"k/{name}"])
    assert r.exit_code == code, r.output
    assert "internal compiler error" not in r.output
    if code == 0:
        r = worker.call(build(out_dir=f"out/{name}.cpu", hir=f"out/{name}hir", src=f"k/{name}"))
        assert r.exit_code == 0, r.output
        assert len(os.listdir(execroot / "out" / f"{name}.cpu")) == 4


def test_huge_target_name_is_quoted_by_an_excerpt(worker):
    assert worker.call(HIR).exit_code == 0
    args = build()
    args[args.index("cpu")] = "t" * 5_000_000
    r = worker.call(args)
    plain_error(r, "unknown target", "more characters")
    assert len(r.output) < 5000
