"""Integration tests that run real Bazel (the one on PATH, or $VX_BAZEL) on a
scratch workspace consuming this repository as @vx (WORKSPACE mode).

Marked slow: about 1-2 minutes with a warm cache, 3-4 minutes cold on 2 cores.
"""

from __future__ import annotations

import filecmp
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from bazelrun import BAD_VX, ROOT, Workspace, bazel_binary

pytestmark = pytest.mark.slow

TARGETS = ("cpu", "tpu", "b200", "h100")


@pytest.fixture(scope="module")
def ws():
    bazel = bazel_binary()
    if bazel is None:
        pytest.skip("no bazel on PATH (install with ./bazelw or apt-get install bazel-bootstrap)")
    w = Workspace(bazel)
    w.write()
    yield w
    w.shutdown()


def _stats_since(ws, before: int) -> list[dict[str, str]]:
    return ws.worker_stats()[before:]


def test_build_each_config(ws):
    for t in TARGETS:
        p = ws.run("build", "//k:stream_ir", f"--config={t}")
        out = ws.dir / "bazel-bin" / "k" / f"stream_ir.{t}" / f"stream.{t}.mlir"
        assert out.is_file(), p.stderr[-3000:]
        assert "module" in out.read_text()
    cpu = ws.run("build", "//k:stream", "--config=cpu")
    art = ws.dir / "bazel-bin" / "k" / "stream.cpu"
    assert sorted(p.name for p in art.iterdir()) == [
        "stream.cpu.h",
        "stream.cpu.json",
        "stream.cpu.o",
        "stream.cpu.so",
    ], cpu.stderr[-2000:]
    # Targets whose backend produces an artifact build it; the others fail with the
    # compiler's plain message, never a crash.
    for t in TARGETS[1:]:
        p = ws.run("build", "//k:stream", f"--config={t}", check=False)
        d = ws.dir / "bazel-bin" / "k" / f"stream.{t}"
        if p.returncode == 0:
            assert d.is_dir() and all(f".{t}." in f.name for f in d.iterdir())
        else:
            assert f"the `{t}` backend is not built yet" in p.stderr, p.stderr[-3000:]
            assert "internal compiler error" not in p.stderr


def test_kernel_with_library_deps(ws):
    ws.run("build", "//k:uses_helpers", "--config=cpu")
    names = sorted(f.name for f in (ws.dir / "bazel-bin" / "k" / "uses_helpers.cpu").iterdir())
    assert names[0] == "uses_helpers.cpu.h", names  # named after the kernel's own source
    # Another config: the library is analysed in the HIR configuration too.
    p = ws.run("build", "//k:uses_helpers", "--config=b200", check=False)
    assert p.returncode == 0 or "the `b200` backend is not built yet" in p.stderr, p.stderr[-3000:]


def test_bad_target_value_fails_analysis_clearly(ws):
    p = ws.run("build", "//k:stream", "--@vx//vx_rules:target=gpu", check=False)
    assert p.returncode != 0
    assert 'invalid value "gpu" for --@vx//vx_rules:target' in p.stderr
    assert "cpu, tpu, b200, h100" in p.stderr


def test_split_build_puts_each_target_in_its_own_directory(ws):
    ws.run("build", "//k:stream_ir_all")
    # Ask Bazel which directories this target's configured outputs are, rather than
    # guessing from mtimes: `--config=<t>` builds of the same kernel (earlier tests)
    # leave files in the top-level configuration's directory, and an action-cache hit
    # does not rewrite a file, so "the newest hit" can name a stale directory.
    listed = ws.run(
        "cquery",
        "//k:stream_ir_all",
        "--output=starlark",
        "--starlark:expr=' '.join([f.path for f in target.files.to_list()])",
    ).stdout.split()
    dirs = {}
    for rel in listed:
        m = re.search(r"/bin/k/stream_ir\.(\w+)$", rel)
        assert m, listed
        dirs[m.group(1)] = ws.dir / rel
    assert sorted(dirs) == sorted(TARGETS), listed
    for t, d in dirs.items():
        assert (d / f"stream.{t}.mlir").is_file(), (t, sorted(p.name for p in d.iterdir()))
    config_dirs = {d.parents[2].name for d in dirs.values()}
    assert len(config_dirs) == len(TARGETS), config_dirs


def test_bazel_test_passes_and_writes_test_xml(ws):
    p = ws.run("test", "//k:stream_test", "--config=cpu")
    assert "1 test passes" in p.stdout + p.stderr
    xml = ws.dir / "bazel-testlogs" / "k" / "stream_test" / "test.xml"
    assert xml.is_file()
    text = xml.read_text()
    assert "<testsuite" in text and 'failures="0"' in text
    assert re.search(r'tests="(\d+)"', text).group(1) != "0"


def test_worker_pid_survives_three_builds_with_edits(ws):
    src = ws.pkg / "stream.vx"
    original = src.read_bytes()
    pids = []
    try:
        for i in range(3):
            src.write_bytes(original + f"\n// edit {i} {time.time()}\n".encode())
            before = len(ws.worker_stats())
            ws.run("build", "//k:stream", "--config=cpu")
            rows = _stats_since(ws, before)
            hir = [r for r in rows if r["mode"] == "hir"]
            assert hir and hir[-1]["hir"] == "checked", rows  # the edit was checked
            pids.append({r["pid"] for r in rows})
    finally:
        src.write_bytes(original)
    assert pids[0] & pids[1] & pids[2], pids


def test_switching_config_checks_no_source_again(ws):
    ws.run("build", "//k:stream_ir", "--config=cpu")
    for t in ("tpu", "b200", "h100", "cpu"):
        before = len(ws.worker_stats())
        ws.run("build", "//k:stream_ir", f"--config={t}")
        rows = _stats_since(ws, before)
        assert all(r["mode"] == "build" for r in rows), rows  # the .vxhir action was cached
        assert all(r["checked_sources"] == "0" for r in rows), rows
        assert all(r["hir"] in ("memory", "artifact") for r in rows), rows


def test_program_error_fails_with_rustc_style_diagnostic(ws):
    (ws.pkg / "bad.vx").write_text(BAD_VX)
    p = ws.run("build", "//k:bad", check=False)
    assert p.returncode != 0
    assert "error[E6011]: transfer token for 't' is dropped without `wait`" in p.stderr
    assert "  --> k/bad.vx:2:7" in p.stderr
    assert "internal compiler error" not in p.stderr


def test_worker_and_standalone_outputs_are_byte_identical(ws, tmp_path):
    ws.run("build", "//k:stream", "//k:stream_ir", "--config=cpu")
    bin_dir = ws.dir / "bazel-bin" / "k"
    hir = _hir_file(ws)
    worker_copy = tmp_path / "worker"
    worker_copy.mkdir()
    for d in ("stream.cpu", "stream_ir.cpu"):
        for f in (bin_dir / d).iterdir():
            (worker_copy / f.name).write_bytes(f.read_bytes())
    (worker_copy / "stream.vxhir").write_bytes(hir.read_bytes())
    # The same actions re-executed one-shot, each in a sandbox that holds only its
    # declared inputs (so this also proves the inputs are complete).
    ws.run("clean")
    ws.run("build", "//k:stream", "//k:stream_ir", "--config=cpu", "--strategy=VxCompile=sandboxed")
    names = sorted(p.name for p in worker_copy.iterdir())
    for name in names:
        if name == "stream.vxhir":
            other = _hir_file(ws)
        else:
            d = "stream_ir.cpu" if name.endswith(".mlir") else "stream.cpu"
            other = bin_dir / d / name
        assert filecmp.cmp(worker_copy / name, other, shallow=False), name


def _hir_file(ws) -> Path:
    hits = list((ws.dir / "bazel-out").glob("*-ST-*/bin/k/stream.vxhir"))
    assert len(hits) == 1, hits
    return hits[0]


def test_main_repository_bazel_test_passes(ws):
    """`bazel test //...` of this repository (WORKSPACE mode), run on a copy of its
    files (tracked and untracked, not ignored) with its own output root: the
    developer's bazel-* links, which point into another output base, would otherwise
    be walked by //..., and the developer's server is left alone."""
    copy = ws.output_user_root.parent / "main-copy"
    shutil.rmtree(copy, ignore_errors=True)
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / rel)
    main = Workspace(ws.bazel)
    main.dir = copy
    main.output_user_root = ws.output_user_root.parent / "root-main"
    try:
        p = main.run("test", "//...")
        assert "//kernels:stream_test" in p.stdout + p.stderr
        # C and Python callers link and load the kernel through ordinary deps.
        # So do the callers of kernels with outputs (gemm, a generic entry built with consts).
        for t in (
            "stream_test",
            "stream_cc_test",
            "stream_py_test",
            "gemm_cc_test",
            "rows_py_test",
        ):
            assert (copy / "bazel-testlogs" / "kernels" / t / "test.xml").is_file(), t
    finally:
        main.shutdown()


def test_a_kernel_for_some_targets_is_skipped_under_the_others(ws):
    """vx_kernel(targets = ["cpu"]) is target_compatible_with: `bazel build //k/...` under
    --config=b200 is green (the kernel skipped, not failed); named directly it is refused
    as incompatible; under --config=cpu it builds."""
    p = ws.run("build", "//k/...", "--config=b200")
    assert not (ws.dir / "bazel-bin" / "k" / "wide.b200").exists(), p.stderr[-3000:]
    p = ws.run("build", "//k:wide", "--config=b200", check=False)
    assert p.returncode != 0 and "is incompatible and cannot be built" in p.stderr, p.stderr[-3000:]
    assert "E6009" not in p.stderr  # never compiled
    ws.run("build", "//k:wide", "--config=cpu")
    assert (ws.dir / "bazel-bin" / "k" / "wide.cpu" / "wide.cpu.so").is_file()


def test_emit_report_writes_the_table_and_the_roofline(ws):
    ws.run("build", "//k:stream_report", "--config=b200")
    d = ws.dir / "bazel-bin" / "k" / "stream_report.b200"
    assert sorted(p.name for p in d.iterdir()) == [
        "stream.b200.report.txt",
        "stream.b200.roofline.svg",
    ]
    assert "memory-bound" in (d / "stream.b200.report.txt").read_text()


def test_default_registration_leaves_the_python_toolchain_alone(ws):
    """vx_register_toolchains() registers the compiler only: a plain py_test runs on the
    workspace's Python toolchain, not on @vx_python's interpreter (opt-in: python = True)."""
    p = ws.run("test", "//k:which_python", "--test_output=all")
    assert "python: " in p.stdout and "vx_python" not in p.stdout.split("python: ")[1].split()[0]


def test_examples_workspace_consumes_the_rules_in_workspace_mode(ws):
    """examples/ (a second workspace, @vx from local_repository) under Bazel 4.2.3;
    tools/bzlmod_smoke.sh runs the same workspace under Bazel 7 with bzlmod."""
    ex = Workspace(ws.bazel)
    ex.dir = ROOT / "examples"
    ex.output_user_root = ws.output_user_root.parent / "root-examples"
    try:
        p = ex.run("test", "//...", "--symlink_prefix=/", "--test_output=all")
        out = p.stdout + p.stderr
        # `(cached) PASSED`: this workspace's output root outlives a run on one machine,
        # and a test whose inputs did not change (the C test links a byte-identical
        # object) keeps its earlier pass.
        tests = ("matmul_test", "matmul_cc_test", "matmul_py_test", "matmul_wide_py_test")
        for t in tests:
            assert re.search(rf"//hello:{t} +(\(cached\) )?PASSED", out), out[-3000:]
        assert "4 tests pass" in out
        # The slim runtime's runfiles (the test asserts < 50 MB itself and prints them).
        testlogs = Path(ex.run("info", "bazel-testlogs").stdout.strip())
        log = (testlogs / "hello" / "matmul_wide_py_test" / "test.log").read_text()
        size = re.search(r"runfiles: \d+ paths, \d+ files, (\d+) B", log)
        assert size and int(size.group(1)) < 50 << 20, log[-2000:]
        # A cpu-only kernel (:matmul_wide, targets = ["cpu"]) does not fail //... for b200.
        ex.run("build", "//...", "--symlink_prefix=/", "--config=b200")
    finally:
        ex.shutdown()


def test_the_shared_library_is_linked_by_the_cpp_toolchain(ws):
    """The cpu artifact's .so comes from the C++ toolchain's dynamic-library link action
    (an absolute tool path, no PATH in its environment), not from `cc` on PATH inside
    VxCompile; the compile action is told so (--link none)."""
    ws.write()  # the workspace as the fixture made it (earlier tests edit its sources)
    p = ws.run("aquery", "mnemonic('VxLinkShared', //k:stream)", "--config=cpu")
    link = p.stdout.partition("Mnemonic: VxLinkShared")[2]
    assert link, p.stdout[-3000:] + p.stderr[-3000:]
    cmd = re.search(r"Command Line: \(exec (\S+)", link)
    assert cmd and cmd.group(1).startswith("/"), link
    assert "-shared" in link and "-Wl,-soname,stream.cpu.so" in link
    assert "stream.cpu.o" in link and not re.search(r"\bPATH=", link)
    ws.run("build", "//k:stream", "--config=cpu")
    params = list((ws.dir / "bazel-bin" / "k" / "_stream.cpu").glob("*.params"))
    assert params and "--link\nnone" in params[0].read_text()


def test_vx_kernel_reads_the_tuning_table_beside_its_source(ws):
    """LANGUAGE.md 3: the table's entry for the configured target gives the const values
    (BK = 128 on the cpu: [8, 256] tiles); a target without an entry takes the default
    (BK = 64); `tune = None` reads no table."""

    def mlir(name: str, target: str) -> str:
        ws.run("build", f"//k:{name}", f"--config={target}")
        return (ws.dir / "bazel-bin" / "k" / f"{name}.{target}" / f"rows.{target}.mlir").read_text()

    assert "8x256xf32" in mlir("rows_tuned", "cpu")
    assert "8x128xf32" in mlir("rows_tuned", "tpu")
    assert "8x128xf32" in mlir("rows_untuned", "cpu")
