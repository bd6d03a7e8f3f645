"""Outputs as a set (issue 10): a build's outputs appear together or not at all, mode
0644 from the CLI and the worker alike, and what a killed build left behind is finished
or removed by the next build into the same folder (vxc.outputs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clirun import KERNELS, ROOT, assert_no_crash, run_vxc

from vxc import outputs

FILES = {"k.cpu.o": b"object", "k.cpu.h": b"header", "k.cpu.json": b"{}", "k.cpu.so": b"lib"}


def listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def test_write_set_writes_all_files_mode_0644(tmp_path):
    old = os.umask(0o077)  # a strict umask does not make outputs private
    try:
        written = outputs.write_set(str(tmp_path), FILES)
    finally:
        os.umask(old)
    assert sorted(written) == sorted(str(tmp_path / n) for n in FILES)
    assert listing(tmp_path) == sorted(FILES)
    for n, data in FILES.items():
        assert (tmp_path / n).read_bytes() == data
        assert (tmp_path / n).stat().st_mode & 0o777 == 0o644


def _kill_mid_set(out: Path, after: str | None) -> int:
    """Run write_set in a child that SIGKILLs itself after publishing `after` (or while
    staging, when `after` is None); returns the child's exit status."""
    code = f"""
import os, signal, sys
sys.path.insert(0, {str(ROOT / "compiler")!r})
from vxc import outputs
files = {{"k.cpu.o": b"new-o", "k.cpu.h": b"new-h", "k.cpu.json": b"new-j", "k.cpu.so": b"new-s"}}
def between(name):
    if name == {after!r}:
        os.kill(os.getpid(), signal.SIGKILL)
if {after!r} is None:
    real = outputs._write_file
    def dying(path, data):
        real(path, data)
        if path.endswith("k.cpu.h"):
            os.kill(os.getpid(), signal.SIGKILL)
    outputs._write_file = dying
outputs.write_set({str(out)!r}, files, _between=between)
"""
    return subprocess.run([sys.executable, "-c", code], check=False).returncode


def test_killed_while_staging_leaves_old_outputs_and_next_build_cleans_up(tmp_path):
    outputs.write_set(str(tmp_path), FILES)
    assert _kill_mid_set(tmp_path, None) == -signal.SIGKILL
    # The killed set published nothing: the old set is intact, a staging folder is left.
    leftovers = [n for n in listing(tmp_path) if n.startswith(outputs.SET_PREFIX)]
    assert len(leftovers) == 1
    assert {n: (tmp_path / n).read_bytes() for n in FILES} == FILES
    # The next build into the folder removes it.
    assert outputs.recover(str(tmp_path)) == [f"removed {leftovers[0]}"]
    assert listing(tmp_path) == sorted(FILES)


def test_killed_while_publishing_is_rolled_forward_as_a_whole_set(tmp_path):
    outputs.write_set(str(tmp_path), FILES)
    assert _kill_mid_set(tmp_path, "k.cpu.h") == -signal.SIGKILL
    # Mid-publish: some new files are in place, the rest are committed in staging ...
    new = {n: (tmp_path / n).read_bytes() for n in FILES}
    assert sorted(v.startswith(b"new-") for v in new.values()) == [False, False, True, True]
    # ... and recovery (which every write runs first) publishes the rest of that set.
    done = outputs.recover(str(tmp_path))
    assert len(done) == 1 and done[0].startswith("rolled forward")
    assert listing(tmp_path) == sorted(FILES)
    assert all((tmp_path / n).read_bytes().startswith(b"new-") for n in FILES)


def test_a_folder_in_the_way_changes_nothing(tmp_path):
    outputs.write_set(str(tmp_path), FILES)
    os.unlink(tmp_path / "k.cpu.so")
    (tmp_path / "k.cpu.so").mkdir()
    with pytest.raises(outputs.OutputError, match="k.cpu.so.*it is a folder"):
        outputs.write_set(str(tmp_path), {n: b"changed" for n in FILES})
    assert {n: (tmp_path / n).read_bytes() for n in FILES if n != "k.cpu.so"} == {
        n: d for n, d in FILES.items() if n != "k.cpu.so"
    }
    assert listing(tmp_path) == sorted(FILES)  # no staging folder left


def test_a_concurrent_builds_staging_folder_is_left_alone(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        staging = tmp_path / f"{outputs.SET_PREFIX}{live.pid}-abcd"
        staging.mkdir()
        assert outputs.recover(str(tmp_path)) == []
        assert staging.is_dir()
    finally:
        live.kill()
        live.wait()
    assert outputs.recover(str(tmp_path)) == [f"removed {staging.name}"]


def test_legacy_temporary_files_are_removed(tmp_path):
    (tmp_path / ".vxc-abc123.tmp").write_bytes(b"half")
    (tmp_path / ".vx-tmp-xyz").write_bytes(b"half")
    outputs.write_set(str(tmp_path), {"a.cpu.h": b"h"})
    assert listing(tmp_path) == ["a.cpu.h"]


def test_cli_build_outputs_mode_0644_and_no_temporaries(tmp_path):
    r = run_vxc("build", str(KERNELS / "stream.vx"), "--target", "cpu", "-o", str(tmp_path))
    assert r.rc == 0, r.err
    names = listing(tmp_path)
    assert names == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o", "stream.cpu.so"]
    assert all((tmp_path / n).stat().st_mode & 0o777 == 0o644 for n in names)


def test_cli_output_that_is_a_folder_or_a_file_is_a_plain_error(tmp_path):
    (tmp_path / "stream.cpu.o").mkdir()
    r = run_vxc("build", str(KERNELS / "stream.vx"), "--target", "cpu", "-o", str(tmp_path))
    assert r.rc == 2 and "stream.cpu.o" in r.err and "it is a folder" in r.err, r.err
    assert_no_crash(r)
    assert listing(tmp_path) == ["stream.cpu.o"]
    (tmp_path / "file").write_text("x")
    r = run_vxc(
        "build", str(KERNELS / "stream.vx"), "--target", "cpu", "-o", str(tmp_path / "file")
    )
    assert r.rc == 2 and "file" in r.err, r.err
    assert_no_crash(r)


@pytest.mark.slow
def test_cli_build_killed_at_random_moments_never_leaves_a_partial_set(tmp_path):
    """SIGKILL a real `vxc build` at moments spread over its run; after each kill, the
    next build leaves exactly the four outputs, whole, and no temporary."""
    out = tmp_path / "out"
    args = [sys.executable, "-m", "vxc", "build", str(KERNELS / "stream.vx"), "--target", "cpu"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    t0 = time.perf_counter()
    subprocess.run([*args, "-o", str(out)], env=env, check=True, capture_output=True)
    full = time.perf_counter() - t0
    reference = {n: (out / n).read_bytes() for n in listing(out)}
    for i in range(6):
        p = subprocess.Popen([*args, "-o", str(out)], env=env, stderr=subprocess.DEVNULL)
        time.sleep(full * (0.5 + i * 0.12))
        p.send_signal(signal.SIGKILL)
        p.wait()
        present = [n for n in listing(out) if not n.startswith(".")]
        for n in present:
            assert (out / n).read_bytes() == reference[n]  # each file whole
        subprocess.run([*args, "-o", str(out)], env=env, check=True, capture_output=True)
        assert listing(out) == sorted(reference)
        assert {n: (out / n).read_bytes() for n in reference} == reference


def _plant(elsewhere: Path, names: dict[str, bytes]) -> dict[str, bytes]:
    """A folder outside OUT that looks like a committed staging folder."""
    elsewhere.mkdir()
    for n, data in names.items():
        (elsewhere / n).write_bytes(data)
    (elsewhere / outputs.COMMIT).write_text("".join(f"{n}\n" for n in names))
    return {n: (elsewhere / n).read_bytes() for n in sorted(os.listdir(elsewhere))}


def test_recovery_never_follows_a_planted_link_to_a_staging_folder(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    before = _plant(elsewhere, {"victim.txt": b"not yours", "stream.cpu.h": b"nor this"})
    link = out / f"{outputs.SET_PREFIX}999999-x"
    os.symlink(elsewhere, link)
    assert outputs.recover(str(out)) == []  # not a folder of ours: left alone
    r = run_vxc("build", str(KERNELS / "stream.vx"), "--target", "cpu", "-o", str(out))
    assert r.rc == 0, r.err
    assert_no_crash(r)
    assert {n: (elsewhere / n).read_bytes() for n in sorted(os.listdir(elsewhere))} == before
    assert not (out / "victim.txt").exists()
    assert (out / "stream.cpu.h").read_bytes() != b"nor this"
    assert link.is_symlink() and os.readlink(link) == str(elsewhere)


def test_recovery_publishes_no_link_from_a_staging_folder(tmp_path):
    """A staging folder of ours holds regular files and a regular COMMIT; a link in it
    (to COMMIT, or to an output) is never followed or moved into OUT."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    before = _plant(elsewhere, {"k.cpu.h": b"secret"})
    linked_commit = out / f"{outputs.SET_PREFIX}999998-a"
    linked_commit.mkdir()
    os.symlink(elsewhere / "k.cpu.h", linked_commit / "k.cpu.h")
    os.symlink(elsewhere / outputs.COMMIT, linked_commit / outputs.COMMIT)
    linked_file = out / f"{outputs.SET_PREFIX}999997-b"
    linked_file.mkdir()
    os.symlink(elsewhere / "k.cpu.h", linked_file / "k.cpu.h")
    (linked_file / "k.cpu.o").write_bytes(b"object")
    (linked_file / outputs.COMMIT).write_text("k.cpu.h\nk.cpu.o\n")
    done = outputs.recover(str(out))
    assert sorted(done) == [f"removed {linked_commit.name}", f"rolled forward {linked_file.name}"]
    assert listing(out) == ["k.cpu.o"]  # the regular file of the committed set, no link
    assert {n: (elsewhere / n).read_bytes() for n in sorted(os.listdir(elsewhere))} == before


@pytest.mark.parametrize("record", ["../escape\n", "/etc/passwd\n", "a/b\n", "\xff\xfe\n"])
def test_a_corrupt_commit_record_is_discarded_not_a_crash(tmp_path, record):
    out = tmp_path / "out"
    staging = out / f"{outputs.SET_PREFIX}999996-c"
    staging.mkdir(parents=True)
    (staging / outputs.COMMIT).write_bytes(record.encode("latin-1"))
    r = run_vxc("build", str(KERNELS / "stream.vx"), "--target", "cpu", "-o", str(out))
    assert r.rc == 0, r.err
    assert_no_crash(r)
    assert listing(out) == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o", "stream.cpu.so"]
