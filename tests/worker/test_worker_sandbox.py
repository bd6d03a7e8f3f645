"""The worker stays in its sandbox (issue 25): every path a request names (`--src`,
`--machine`, `--hir`, `--out`, `--out-dir`, an `@flagfile`) resolves inside the
request's sandbox (`sandbox_dir`, absolute or relative to the worker's directory, or
the execroot, the worker's directory, without one), and an input is one of the
request's `inputs`. Anything else is a plain exit-2 answer that quotes nothing of the
file, and no output is written through a symbolic link out of the output tree.

Each request lists its inputs as Bazel does (exec paths relative to the execroot);
in a sandbox the inputs are symbolic links to the real files, as in Bazel's."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from workerclient import ROOT, WorkerClient, inputs

STREAM = Path(ROOT) / "kernels" / "stream.vx"
PASSWD = "/etc/passwd"
SECRET = "SECRET-LINE-1 the worker must never quote this\nSECRET-LINE-2 nor this\n"
UNLISTED = "UNLISTED-LINE: fn broken( {\n"  # a syntax error: read, it would be quoted


@dataclass
class Layout:
    """Where a worker runs (cwd), its requests' sandbox_dir, the sandbox root, and the
    folder outside the sandbox that no request may read or change."""

    cwd: Path
    sandbox_dir: str
    root: Path
    outside: Path

    def call(self, worker: WorkerClient, args: list[str], listed: list[str] | None = None):
        listed = ["k/stream.vx", "out/stream.vxhir"] if listed is None else listed
        return worker.call(args, sandbox_dir=self.sandbox_dir, inputs=inputs(self.root, listed))


def _populate(root: Path, real_sources: Path, outside: Path) -> None:
    (root / "k").mkdir(parents=True)
    (root / "out").mkdir()
    # Bazel's sandboxes (and its execroot) hold inputs as links to the real files.
    os.symlink(real_sources / "stream.vx", root / "k" / "stream.vx")
    (root / "k" / "unlisted.vx").write_text(UNLISTED)
    os.symlink(outside / "secret.txt", root / "k" / "link.vx")  # inside, pointing out
    os.symlink(outside / "dir", root / "out" / "escape")  # a planted output folder
    (root / "k" / "evil.params").write_text(f"hir\n--out\nout/e.vxhir\n--src\n{PASSWD}\n")


@pytest.fixture(scope="module", params=["execroot", "sandbox-absolute", "sandbox-relative"])
def layout(request, tmp_path_factory) -> Layout:
    base = tmp_path_factory.mktemp(request.param)
    outside = base / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    real = base / "workspace"
    real.mkdir()
    (real / "stream.vx").write_bytes(STREAM.read_bytes())
    cwd = base / "execroot"
    if request.param == "execroot":
        root, sandbox_dir = cwd, ""
    elif request.param == "sandbox-absolute":
        root = base / "sandboxes" / "7"
        sandbox_dir = str(root)
    else:  # Bazel's multiplex sandboxes: a folder relative to the worker's directory
        root, sandbox_dir = cwd / "__sandbox" / "3" / "_main", "__sandbox/3/_main"
    cwd.mkdir(exist_ok=True)
    _populate(root, real, outside)
    return Layout(cwd, sandbox_dir, root, outside)


@pytest.fixture(scope="module")
def worker(layout):
    w = WorkerClient(["-m", "vxc.worker"], cwd=str(layout.cwd))
    yield w
    if w.proc.poll() is None:
        w.close()


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if len(ln.strip()) >= 4]


def quotes_nothing(output: str, *files: str) -> None:
    for f in files:
        for line in _lines(Path(f).read_text(errors="replace")):
            assert line not in output, f"the answer quotes {f}: {output[:2000]}"
    assert "root:" not in output, output[:2000]


def refused(r, layout: Layout, *needles: str) -> None:
    assert r.exit_code == 2, r.output[:3000]
    assert "internal compiler error" not in r.output and "Traceback" not in r.output
    quotes_nothing(r.output, PASSWD, str(layout.outside / "secret.txt"))
    assert UNLISTED.strip() not in r.output
    for n in needles:
        assert n in r.output, r.output[:3000]


def tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


HIR = ["hir", "--out", "out/stream.vxhir", "--src", "k/stream.vx"]


def build(out_dir: str, hir: str = "out/stream.vxhir", src: str = "k/stream.vx") -> list[str]:
    return ["build", "--hir", hir, "--src", src, "--target", "cpu", "--out-dir", out_dir]


def test_listed_inputs_build_inside_the_sandbox(worker, layout):
    r = layout.call(worker, HIR, ["k/stream.vx"])
    assert r.exit_code == 0, r.output
    r = layout.call(worker, build("out/stream.cpu"))
    assert r.exit_code == 0, r.output
    assert len(os.listdir(layout.root / "out" / "stream.cpu")) == 4
    # An absolute path inside the sandbox names the same listed input.
    r = layout.call(worker, build("out/abs.cpu", src=str(layout.root / "k" / "stream.vx")))
    assert r.exit_code == 0, r.output


UP = "../" * 12


def _reads(layout: Layout) -> dict[str, tuple[list[str], str]]:
    """Requests that name a file they may not read -> (args, what the answer says)."""
    secret = str(layout.outside / "secret.txt")
    out = {}
    for name, path, why in [
        ("passwd", PASSWD, "outside the sandbox"),
        ("passwd-up", UP + "etc/passwd", "outside the sandbox"),
        ("secret", secret, "outside the sandbox"),
        ("dotdot", "k/../" + UP + secret.lstrip("/"), "outside the sandbox"),
        # `out/escape/..` is `outside/`, whatever normpath says
        ("abs-dotdot", f"{layout.root}/out/escape/../secret.txt", "outside the sandbox"),
        ("link-out", "k/link.vx", "not an input"),
        ("unlisted", "k/unlisted.vx", "not an input"),
    ]:
        out[f"src-{name}"] = (["hir", "--out", "out/x.vxhir", "--src", path], why)
        out[f"machine-{name}"] = ([*HIR[:-2], "--src", "k/stream.vx", "--machine", path], why)
        out[f"hir-{name}"] = (build("out/x", hir=path), why)
        out[f"flagfile-{name}"] = (["@" + path], why)
    out["listed-flagfile-naming-passwd"] = (["@k/evil.params"], "outside the sandbox")
    return out


READS = sorted(_reads(Layout(Path("."), "", Path("/r"), Path("/o"))))


@pytest.mark.parametrize("case", READS)
def test_reading_outside_the_inputs_is_refused_and_quotes_nothing(worker, layout, case):
    assert layout.call(worker, HIR, ["k/stream.vx"]).exit_code == 0
    args, why = _reads(layout)[case]
    listed = ["k/stream.vx", "out/stream.vxhir", "k/evil.params"]
    r = layout.call(worker, args, listed)
    refused(r, layout, why)
    assert tree(layout.outside) == ["dir", "secret.txt"]
    assert not (layout.root / "out" / "x.vxhir").exists()
    assert not (layout.root / "out" / "e.vxhir").exists()


def _writes(layout: Layout) -> dict[str, tuple[list[str], str]]:
    o = layout.outside
    return {
        "out-absolute": (["hir", "--out", str(o / "x.vxhir"), "--src", "k/stream.vx"], "outside"),
        "out-up": (["hir", "--out", UP + str(o / "x.vxhir"), "--src", "k/stream.vx"], "outside"),
        "out-through-link": (
            ["hir", "--out", "out/escape/x.vxhir", "--src", "k/stream.vx"],
            "symbolic link",
        ),
        "out-dir-absolute": (build(str(o / "cpu")), "outside"),
        "out-dir-up": (build(UP + str(o / "cpu")), "outside"),
        "out-dir-link": (build("out/escape"), "symbolic link"),
        "out-dir-below-link": (build("out/escape/deeper/cpu"), "symbolic link"),
    }


WRITES = sorted(_writes(Layout(Path("."), "", Path("/r"), Path("/o"))))


@pytest.mark.parametrize("case", WRITES)
def test_writing_outside_the_output_tree_is_refused(worker, layout, case):
    assert layout.call(worker, HIR, ["k/stream.vx"]).exit_code == 0
    args, why = _writes(layout)[case]
    r = layout.call(worker, args)
    refused(r, layout, why)
    assert tree(layout.outside) == ["dir", "secret.txt"]  # nothing written or created


def test_the_worker_still_serves_after_every_refusal(worker, layout):
    assert layout.call(worker, HIR, ["k/stream.vx"]).exit_code == 0
    r = layout.call(worker, build("out/final.cpu"))
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    "args",
    [
        ["hir", "--out", "out/x.vxhir", "--src", PASSWD],
        ["hir", "--out", "out/x.vxhir", "--src", "k/stream.vx", "--machine", UP + "etc/passwd"],
        ["@" + PASSWD],
    ],
    ids=["src", "machine", "flagfile"],
)
def test_one_shot_mode_stays_in_its_directory(tmp_path, args):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "stream.vx").write_bytes(STREAM.read_bytes())
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "compiler"))
    p = subprocess.run(
        [sys.executable, "-m", "vxc.worker", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "outside the sandbox" in p.stderr and "Traceback" not in p.stderr
    quotes_nothing(p.stderr, PASSWD)
    assert not (tmp_path / "out").exists()


def test_a_planted_staging_link_moves_nothing_out_of_its_folder(worker, layout, tmp_path):
    """Output-set recovery (vxc.outputs, which every write runs first) follows no link:
    a `.vxc-set-*` link to a committed-looking folder elsewhere gives up none of it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stream.cpu.h").write_text("taken from elsewhere")
    (elsewhere / "COMMIT").write_text("stream.cpu.h\n")
    out = layout.root / "out" / "planted.cpu"
    out.mkdir()
    os.symlink(elsewhere, out / ".vxc-set-999999-x")
    assert layout.call(worker, HIR, ["k/stream.vx"]).exit_code == 0
    r = layout.call(worker, build("out/planted.cpu"))
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(elsewhere)) == ["COMMIT", "stream.cpu.h"]
    assert (out / "stream.cpu.h").read_text() != "taken from elsewhere"
