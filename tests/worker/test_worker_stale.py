"""A warm worker never builds a stale program (issue 25): its memory cache is keyed by
everything that determines an analysis (the .vxhir digest, the compiler, each source's
path and bytes, the machine model), so after the source, `--src` or `--machine`
changes it builds what a cold one-shot run of the same action builds, byte for byte;
and target and options, which no cached value depends on, change outputs the same way
warm and cold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from workerclient import ROOT, WorkerClient

STREAM = Path(ROOT) / "kernels" / "stream.vx"
MACHINE = "Memory HBM { capacity: 16 GB, speed: 3 }\n"  # E0205 when a build reads it


@pytest.fixture
def execroot(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "stream.vx").write_bytes(STREAM.read_bytes())
    other = STREAM.read_text().replace("fn stream(", "fn other_stream(")
    (tmp_path / "k" / "other.vx").write_text(other)
    (tmp_path / "k" / "m.vx").write_text(MACHINE)
    (tmp_path / "out").mkdir()
    return tmp_path


@pytest.fixture
def warm(execroot):
    """A worker that checked k/stream.vx and built it once: its cache holds both."""
    w = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    assert _call(w, execroot, ["hir", "--out", "out/stream.vxhir", "--src", "k/stream.vx"])[0] == 0
    assert _call(w, execroot, _build("out/warm0"))[0] == 0
    yield w
    if w.proc.poll() is None:
        w.close()


def _build(
    out_dir, *extra, src="k/stream.vx", hir="out/stream.vxhir", target="cpu", emit="vx-mlir"
):
    return ["build", "--hir", hir, "--src", src, "--target", target, "--out-dir", out_dir,
            "--emit", emit, *extra]  # fmt: skip


def _call(w: WorkerClient, root: Path, args: list[str]) -> tuple[int, str]:
    r = w.call(args)  # lists every file of the execroot as an input, as Bazel would
    return r.exit_code, r.output


def _cold(root: Path, args: list[str]) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "compiler"))
    p = subprocess.run(
        [sys.executable, "-m", "vxc.worker", *args],
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return p.returncode, p.stderr


def _files(d: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())} if d.is_dir() else {}


def same_as_cold(w: WorkerClient, root: Path, args_for, n: int) -> dict[str, bytes]:
    """Runs args_for(out_dir) warm and cold; both give the same exit code and files."""
    code, output = _call(w, root, args_for(f"out/warm{n}"))
    cold_code, cold_output = _cold(root, args_for(f"out/cold{n}"))
    assert code == cold_code, (output, cold_output)
    warm_files = _files(root / "out" / f"warm{n}")
    assert warm_files == _files(root / "out" / f"cold{n}")
    return warm_files


def test_edited_source_with_the_old_vxhir(warm, execroot):
    src = execroot / "k" / "stream.vx"
    src.write_text(src.read_text().replace("fn stream(", "fn edited_stream("))
    files = same_as_cold(warm, execroot, _build, 1)
    assert b"edited_stream" in files["stream.cpu.mlir"]


def test_other_src_with_the_old_vxhir(warm, execroot):
    files = same_as_cold(warm, execroot, lambda d: _build(d, src="k/other.vx"), 1)
    assert b"other_stream" in files["other.cpu.mlir"]


def test_added_machine_with_the_old_vxhir(warm, execroot):
    files = same_as_cold(warm, execroot, lambda d: _build(d, "--machine", "k/m.vx"), 1)
    assert files == {}  # the model is an error (E0205) warm and cold
    code, output = _call(warm, execroot, _build("out/warm2", "--machine", "k/m.vx"))
    assert code == 1 and "error[E0205]" in output and "k/m.vx" in output


def test_new_vxhir_after_an_edit(warm, execroot):
    src = execroot / "k" / "stream.vx"
    src.write_text(src.read_text().replace("fn stream(", "fn rechecked("))
    hir = ["hir", "--out", "out/stream.vxhir", "--src", "k/stream.vx"]
    assert _call(warm, execroot, hir)[0] == 0
    files = same_as_cold(warm, execroot, _build, 1)
    assert b"rechecked" in files["stream.cpu.mlir"]


def test_targets_and_options_from_one_cached_analysis(warm, execroot):
    variants = [
        lambda d: _build(d, target="tpu"),
        lambda d: _build(d, target="b200"),
        lambda d: _build(d, emit="artifact"),
        lambda d: _build(d, "--cpu", "x86-64-v2", emit="artifact"),
        lambda d: _build(d, "--cpu", "x86-64-v3", emit="target-ir"),
    ]
    seen = [same_as_cold(warm, execroot, v, n) for n, v in enumerate(variants, 1)]
    assert len({tuple(sorted(f.items())) for f in seen}) == len(seen)  # each its own output


def test_a_vxhir_of_the_model_as_a_source_is_not_the_model_as_machine(execroot):
    """`--src m.vx` and `--machine m.vx` are different programs: a .vxhir of the one is
    stale for the other (their keys once digested the same files in the same order)."""
    (execroot / "k" / "s.vx").write_text(
        "Memory SCRATCH { within: Memory::HBM, capacity: 64 KB }\n"
    )
    w = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    hir = ["hir", "--out", "out/two.vxhir", "--src", "k/stream.vx", "--src", "k/s.vx"]
    assert _call(w, execroot, hir)[0] == 0
    w.close()
    fresh = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    try:
        r = fresh.call(_build("out/m", "--machine", "k/s.vx", hir="out/two.vxhir"), verbosity=1)
    finally:
        fresh.close()
    assert r.exit_code == 0, r.output
    assert "hir=recomputed" in r.output, r.output
