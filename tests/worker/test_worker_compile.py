"""The VxCompile handler with the real compiler, over the worker protocol and
one-shot: hir/build requests, the in-memory and artifact HIR caches, stale and corrupt
.vxhir files, program errors, and byte-identical worker/standalone outputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from workerclient import ROOT, WorkerClient

STREAM = Path(ROOT) / "kernels" / "stream.vx"
BAD = """\
fn bad(x: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let t = transfer_async(x, Memory::VMEM);
  return transfer(x, Memory::HBM);
}
"""


def _stats(output: str) -> dict[str, str]:
    line = [ln for ln in output.splitlines() if ln.startswith("vxc-worker: ")][-1]
    return dict(kv.split("=", 1) for kv in line[len("vxc-worker: ") :].split())


@pytest.fixture
def execroot(tmp_path):
    (tmp_path / "k").mkdir()
    shutil.copy(STREAM, tmp_path / "k" / "stream.vx")
    (tmp_path / "k" / "bad.vx").write_text(BAD)
    (tmp_path / "out").mkdir()
    return tmp_path


@pytest.fixture
def worker(execroot):
    w = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    yield w
    if w.proc.poll() is None:
        w.close()


def _hir(out="out/stream.vxhir", src="k/stream.vx"):
    return ["hir", "--out", out, "--src", src]


def _build(target, out_dir, hir="out/stream.vxhir", src="k/stream.vx", emit="artifact"):
    return [
        "build",
        "--hir",
        hir,
        "--src",
        src,
        "--target",
        target,
        "--out-dir",
        out_dir,
        "--emit",
        emit,
    ]


def test_hir_then_builds_reuse_the_checked_hir(worker, execroot):
    r = worker.call(_hir(), verbosity=10)
    assert r.exit_code == 0, r.output
    assert _stats(r.output)["hir"] == "checked"
    r = worker.call(_build("cpu", "out/stream.cpu"), verbosity=10)
    assert r.exit_code == 0, r.output
    s = _stats(r.output)
    assert (s["hir"], s["checked_sources"], s["target"]) == ("memory", "0", "cpu")
    assert sorted(os.listdir(execroot / "out" / "stream.cpu")) == [
        "stream.cpu.h",
        "stream.cpu.json",
        "stream.cpu.o",
        "stream.cpu.so",
    ]
    for t in ("tpu", "b200", "h100"):
        r = worker.call(_build(t, f"out/mlir.{t}", emit="vx-mlir"), verbosity=10)
        assert r.exit_code == 0 and _stats(r.output)["hir"] == "memory", r.output
        assert (execroot / "out" / f"mlir.{t}" / f"stream.{t}.mlir").is_file()
    # The same sources again: the in-memory cache answers, nothing is checked.
    r = worker.call(_hir(out="out/again.vxhir"), verbosity=10)
    assert _stats(r.output)["hir"] == "memory"
    assert (execroot / "out" / "again.vxhir").read_bytes() == (
        execroot / "out" / "stream.vxhir"
    ).read_bytes()


def test_hir_artifact_from_another_process_is_used(execroot):
    one = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    assert one.call(_hir()).exit_code == 0
    one.close()
    two = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)
    r = two.call(_build("cpu", "out/c"), verbosity=1)
    two.close()
    assert r.exit_code == 0 and _stats(r.output)["hir"] == "artifact", r.output


@pytest.mark.parametrize("mangle", ["truncate", "flip", "other-sources"])
def test_corrupt_or_stale_hir_is_recomputed(worker, execroot, mangle):
    assert worker.call(_hir()).exit_code == 0
    hir = execroot / "out" / "stream.vxhir"
    data = hir.read_bytes()
    fresh = WorkerClient(["-m", "vxc.worker"], cwd=str(execroot), lists=execroot)  # no memory cache
    try:
        if mangle == "truncate":
            hir.write_bytes(data[: len(data) // 2])
        elif mangle == "flip":
            hir.write_bytes(data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
        else:
            src = execroot / "k" / "stream.vx"
            src.write_text(src.read_text() + "\n// edited after the .vxhir was written\n")
        r = fresh.call(_build("cpu", "out/c"), verbosity=1)
        assert r.exit_code == 0, r.output
        s = _stats(r.output)
        assert s["hir"] == "recomputed" and s["checked_sources"] == "1", r.output
    finally:
        fresh.close()


def test_program_error_is_exit_1_with_rustc_style_output(worker):
    r = worker.call(_hir(out="out/bad.vxhir", src="k/bad.vx"))
    assert r.exit_code == 1
    assert "error[E6011]: transfer token for 't' is dropped without `wait`" in r.output
    assert "  --> k/bad.vx:2:7" in r.output
    assert worker.call(_hir()).exit_code == 0  # and it keeps serving


def test_unsupported_backend_is_a_plain_exit_2(worker):
    assert worker.call(_hir()).exit_code == 0
    r = worker.call(_build("tpu", "out/t"))
    if r.exit_code == 0:
        pytest.skip("the tpu backend produces artifacts now")
    assert r.exit_code == 2 and "vxc: error:" in r.output and "Traceback" not in r.output


def test_a_backend_refusal_is_a_coded_diagnostic_exit_1(worker, execroot):
    """The seed's extern call cannot be built for tpu: the worker answers with the same
    rustc-style E7002 at the call's line as the CLI, exit 1, and keeps serving."""
    shutil.copy(Path(ROOT) / "kernels" / "seed.vx", execroot / "k" / "seed.vx")
    assert worker.call(_hir(out="out/seed.vxhir", src="k/seed.vx")).exit_code == 0
    r = worker.call(_build("tpu", "out/t", hir="out/seed.vxhir", src="k/seed.vx"))
    assert r.exit_code == 1, r.output
    assert "error[E7002]: tpu backend: call to `matmul_acc`" in r.output
    assert "  --> k/seed.vx:10:5" in r.output and "Traceback" not in r.output
    assert worker.call(_hir()).exit_code == 0


def test_bad_arguments_and_missing_files_keep_the_worker_alive(worker):
    r = worker.call(["build", "--target", "cpu"])
    assert r.exit_code == 2 and "bad arguments" in r.output
    r = worker.call(_hir(src="k/missing.vx"))
    assert r.exit_code == 2 and "cannot read source `k/missing.vx`" in r.output
    assert "internal compiler error" not in r.output
    assert worker.call(_hir()).exit_code == 0


def test_worker_and_one_shot_outputs_are_byte_identical(worker, execroot, tmp_path):
    assert worker.call(_hir()).exit_code == 0
    assert worker.call(_build("cpu", "out/w")).exit_code == 0
    (execroot / "args").write_text("\n".join(_build("cpu", "out/s", hir="out/s.vxhir")) + "\n")
    (execroot / "hargs").write_text("\n".join(_hir(out="out/s.vxhir")) + "\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "compiler"))
    for flagfile in ("@hargs", "@args"):
        p = subprocess.run(
            [sys.executable, "-m", "vxc.worker", flagfile],
            cwd=execroot,
            env=env,
            capture_output=True,
            text=True,
        )
        assert p.returncode == 0, p.stderr
    out = execroot / "out"
    assert (out / "s.vxhir").read_bytes() == (out / "stream.vxhir").read_bytes()
    names = sorted(os.listdir(out / "w"))
    assert names == sorted(os.listdir(out / "s"))
    for n in names:
        assert (out / "w" / n).read_bytes() == (out / "s" / n).read_bytes(), n


def test_one_shot_program_error_exit_status(execroot):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "compiler"))
    p = subprocess.run(
        [sys.executable, "-m", "vxc.worker", *_hir(src="k/bad.vx")],
        cwd=execroot,
        env=env,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 1 and "error[E6011]" in p.stderr


def test_worker_reexecutes_when_compiler_sources_change(tmp_path, execroot):
    pkg = tmp_path / "compiler_copy"
    shutil.copytree(
        os.path.join(ROOT, "compiler", "vxc"),
        pkg / "vxc",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    w = WorkerClient(
        ["-m", "vxc.worker"], cwd=str(execroot), env={"PYTHONPATH": str(pkg)}, lists=execroot
    )
    try:
        first = w.call(_hir(), verbosity=1)
        assert first.exit_code == 0, first.output
        marker = pkg / "vxc" / "worker" / "action.py"
        marker.write_text(marker.read_text() + "\n# edited while the worker runs\n")
        second = w.call(_hir(out="out/second.vxhir"), verbosity=1)
        assert second.exit_code == 0, second.output
        # Same process id (exec), fresh code: its memory cache is empty again.
        assert _stats(second.output)["pid"] == _stats(first.output)["pid"] == str(w.proc.pid)
        assert _stats(second.output)["hir"] == "checked"
        assert w.call(_hir(out="out/third.vxhir"), verbosity=1).exit_code == 0
    finally:
        w.close()
    assert "compiler sources changed; restarting the worker" in w.stderr_text()


def test_machine_file_diagnostic_shows_its_source_line(worker, execroot):
    """The worker renders diagnostics as the CLI does: the --machine file's line too."""
    (execroot / "k" / "m.vx").write_text("Memory HBM { capacity: 16 GB, speed: 3 }\n")
    hir = _hir() + ["--machine", "k/m.vx"]
    assert worker.call(hir).exit_code == 0
    r = worker.call(_build("cpu", "out/m") + ["--machine", "k/m.vx"])
    assert r.exit_code == 1
    assert "error[E0205]: unknown Memory facet `speed`" in r.output
    assert "  --> k/m.vx:1:31" in r.output
    assert "1 | Memory HBM { capacity: 16 GB, speed: 3 }" in r.output
    cli = subprocess.run(
        [sys.executable, "-m", "vxc", "check", "k/stream.vx", "--machine", "k/m.vx"],
        cwd=execroot, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert cli.stderr in r.output  # the same rendering, word for word


SCALE = """\
fn scale<const N: i64>(x: &Tensor<f32, [N, 128]>) -> Tensor<f32, [N, 128]>
    on Topology::TensorCore {
  let t = transfer(x, Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""


def test_const_instantiates_a_generic_entry_in_both_requests(worker, execroot):
    """`--const` (vx_kernel's consts) is the CLI's flag, from the one flag table: the hir
    request instantiates the entry and the build's HIR key includes the values, so a .vxhir
    of another instantiation is stale, never silently reused."""
    (execroot / "k" / "scale.vx").write_text(SCALE)
    hir = _hir("out/scale.vxhir", "k/scale.vx")
    r = worker.call(hir)
    assert r.exit_code == 1 and "E0109" in r.output  # no instantiation: a diagnostic
    r = worker.call([*hir, "--const", "N=64"])
    assert r.exit_code == 0, r.output
    build = _build("cpu", "out/scale.cpu", "out/scale.vxhir", "k/scale.vx", "vx-mlir")
    r = worker.call([*build, "--const", "N=64"], verbosity=10)
    assert r.exit_code == 0, r.output
    assert _stats(r.output)["hir"] == "memory"
    assert "@scale__64" in (execroot / "out" / "scale.cpu" / "scale.cpu.mlir").read_text()
    r = worker.call([*build, "--const", "N=32"], verbosity=10)
    assert r.exit_code == 0, r.output
    assert _stats(r.output)["hir"] == "recomputed"  # the .vxhir is N=64's
    assert "@scale__32" in (execroot / "out" / "scale.cpu" / "scale.cpu.mlir").read_text()
    r = worker.call([*build, "--const", "N"])
    assert r.exit_code == 2 and "--const takes NAME=INTEGER, found `N`" in r.output


ROWS = """\
fn rows<const BK: i64 = 64>(x: &Tensor<f32, [8, 2 * BK]>, o: &mut Tensor<f32, [8, 2 * BK]>)
    -> void on Topology::TensorCore where instances() == 1 {
  let t = transfer(x, Memory::VMEM);
  transfer(t - t.sum(1), o[0 .. 8, 0 .. 2 * BK]);
}
"""


def _table(source: bytes, targets: dict) -> str:
    import hashlib
    import json

    digest = hashlib.sha256(source).hexdigest()
    return json.dumps({"format": 1, "source_sha256": digest, "targets": targets})


def test_a_tuning_table_gives_its_target_the_values(worker, execroot):
    """`--tune` (vx_kernel passes the table beside the source): the table's entry for the
    build's target comes after `--const` and before the default; a target without an entry
    builds from the shared HIR; a stale table warns (W1041) and is read as written; a
    malformed one is exit 2 naming it, and the worker keeps serving."""
    (execroot / "k" / "rows.vx").write_text(ROWS)
    table = execroot / "k" / "rows.tune.json"
    table.write_text(_table(ROWS.encode(), {"cpu": {"consts": {"BK": 128}}}))
    assert worker.call(_hir("out/rows.vxhir", "k/rows.vx")).exit_code == 0
    tune = ["--tune", "k/rows.tune.json"]

    def build(target: str, *extra: str):
        args = _build(target, f"out/rows.{target}", "out/rows.vxhir", "k/rows.vx", "vx-mlir")
        r = worker.call([*args, *tune, *extra], verbosity=10)
        mlir = execroot / "out" / f"rows.{target}" / f"rows.{target}.mlir"
        return r, mlir.read_text() if r.exit_code == 0 else ""

    r, text = build("cpu")
    assert r.exit_code == 0 and _stats(r.output)["hir"] == "tuned", r.output
    assert "8x256xf32" in text and "8x128xf32" not in text  # BK = 128 from the table
    r, text = build("tpu")  # no tpu entry: the default, from the shared HIR
    assert r.exit_code == 0 and _stats(r.output)["hir"] == "memory", r.output
    assert "8x128xf32" in text and "8x256xf32" not in text
    r, text = build("cpu", "--const", "BK=32")  # --const comes first
    assert r.exit_code == 0 and "8x64xf32" in text, r.output
    table.write_text(_table(b"other bytes", {"cpu": {"consts": {"BK": 128}}}))
    r, text = build("cpu")
    assert r.exit_code == 0 and "W1041" in r.output and "8x256xf32" in text, r.output
    table.write_text("{not json")
    r, _ = build("cpu")
    assert r.exit_code == 2 and "rows.tune.json" in r.output, r.output
    assert worker.call(_hir("out/rows2.vxhir", "k/rows.vx")).exit_code == 0
