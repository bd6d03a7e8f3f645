"""The GPU check's rungs for the kernels of TARGETS.md "Kernels" that joined last
(tools/gpu_check.py: attention beside gemm_epilogue and softmax), and how a kernel the
build refuses for the GPUs is reported, tested without a GPU:

- the attention ladder's shapes meet the kernel's `where` clause and cover one
  instance, two, the K/V ring's parity wrap and a 3 x 7 grid, causal and not;
- the device script's own attention rung (its inputs, float64 numpy reference,
  tolerance, NaN poisoning and first-bad-row report) run against kernels/attention.vx
  built for the cpu: the same kernel semantics the GPU run checks (the cpu runtime
  launches the real compiled kernel; an adapter gives it the device kernel's `run`);
- that reference against JAX's `jax.nn.dot_product_attention`, an independent one;
- tools/gpu_build.py records a coded refusal and builds the other kernels, and the
  device script names every kernel not built for its GPU first and in its JSON log;
- where attention builds for h100, the runtime's packing of its bool and f32 scalars
  and one rung through the fake CUDA layer (tests/backends/nvidia/fakecuda.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests" / "backends" / "nvidia")]

import gpu_build  # noqa: E402
import gpu_check  # noqa: E402

# A kernel every NVIDIA target refuses (E6010: two 128 KiB f32 tiles live at once, above
# the 225 KiB of shared memory) and the cpu builds: a refusal that no backend work lifts.
REFUSED = """\
fn big(x: &Tensor<f32, [512, 128]>, o: &mut Tensor<f32, [512, 128]>) -> void
    on Topology::TensorCore
    where instances() == 1 {
  let a = transfer(x[0 .. 256, 0 .. 128], Memory::VMEM);
  let b = transfer(x[256 .. 512, 0 .. 128], Memory::VMEM);
  transfer(a + b, o[0 .. 256, 0 .. 128]);
  transfer(a - b, o[256 .. 512, 0 .. 128]);
}
"""


class CpuAttention:
    """kernels/attention.vx built for the cpu, with the device kernel's `run`: the rung
    poisons the in-place output with NaN, launches, reads the output argument back.
    `wrong(launch, instances, args)` launches as a broken kernel would."""

    meta = {"name": gpu_check.ATTENTION}

    def __init__(self, kernel, wrong=None) -> None:
        self.kernel, self.wrong = kernel, wrong

    def run(self, instances, *args, poison=False, timeout=None):
        args = list(args)
        if poison:
            args[gpu_check.TILE_CHECKS[gpu_check.ATTENTION].out][...] = np.nan
        if self.wrong is None:
            self.kernel.launch(*args, instances=instances)
        else:
            self.wrong(self.kernel.launch, instances, args)
        return []  # o is written in place, as on the GPU


@pytest.fixture(scope="module")
def cpu_attention(tmp_path_factory):
    src = api.Source("kernels/attention.vx", (ROOT / "kernels" / "attention.vx").read_bytes())
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    art = runtime.load_outputs(result.outputs, tmp_path_factory.mktemp("att"))
    return getattr(art, gpu_check.ATTENTION)


def test_the_attention_ladder_meets_the_where_clause_and_covers_the_ring():
    tc = gpu_check.TILE_CHECKS[gpu_check.ATTENTION]
    for h, s, _ in (*tc.ladder, *tc.full):
        # kernels/attention.vx's `where`: s % 128 == 0, s >= 128, h >= 1, n == h * s
        assert s % 128 == 0 and s >= 128 and h >= 1
    hs = [(h, s) for h, s, _ in tc.ladder]
    assert [c for _, _, c in tc.ladder] == [False, True] * len(gpu_check.ATTENTION_HS)
    instances = [tc.instances((h, s)) for h, s in hs]
    kv_tiles = [s // gpu_check.ATTENTION_KEYS for _, s in hs]  # K/V tiles, two slots
    assert instances[:2] == [1, 1] and 2 in instances  # one instance, then two
    assert 10 in kv_tiles  # each slot's barrier parity wraps five times
    assert (3, 7) in [(h, s // 128) for h, s in hs]  # a 3 x 7 grid of instances
    assert [tuple(f[:2]) for f in tc.full] == [(8, 2048)] * 2  # TARGETS.md's largest
    assert instances == sorted(instances)  # small first: a failure shows at its smallest


def test_the_attention_rungs_pass_on_the_cpu_build(cpu_attention):
    tc = gpu_check.TILE_CHECKS[gpu_check.ATTENTION]
    log: list = []
    rng = np.random.default_rng(0)
    assert gpu_check.check_tile_kernel(CpuAttention(cpu_attention), tc.ladder, rng, 10.0, log)
    assert [tuple(r["shape"]) for r in log] == list(tc.ladder)
    assert all(r["ok"] and r["first_bad"] is None for r in log)
    assert [r["instances"] for r in log] == [tc.instances(s) for s in tc.ladder]


def _not_causal(launch, instances, args):
    args[3] = not args[3]  # a kernel that reads the flag inverted
    launch(*args, instances=instances)


def _second_store_lost(launch, instances, args):
    o = args[8]
    args[8] = np.full_like(o, np.nan)
    launch(*args, instances=instances)
    o[:128] = args[8][:128]  # instance 1's rows never reach o: still NaN from the poison


@pytest.mark.parametrize(
    ("wrong", "shape", "row", "instance"),
    [(_not_causal, (1, 128, True), 0, 0), (_second_store_lost, (1, 256, False), 128, 1)],
    ids=["causal-flag-ignored", "a-store-lost"],
)
def test_a_wrong_attention_is_reported_with_its_first_bad_row(
    cpu_attention, wrong, shape, row, instance
):
    log: list = []
    rng = np.random.default_rng(0)
    kernel = CpuAttention(cpu_attention, wrong)
    assert not gpu_check.check_tile_kernel(kernel, [shape], rng, 10.0, log)
    bad = log[0]["first_bad"]
    assert (bad["row"], bad["instance"]) == (row, instance), bad
    assert bad["wrong"] > 0 and not log[0]["ok"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_attention_reference_is_jaxs_dot_product_attention(causal):
    import jax

    h, s = 2, 256
    args = gpu_check.attention_inputs(h, s, causal, np.random.default_rng(1))
    _, _, _, _, scale, q, k, v = args[:8]
    # [batch, sequence, heads, dim]: one batch, the heads side by side
    q4, k4, v4 = (
        t.astype(np.float32).reshape(h, s, 128).transpose(1, 0, 2)[None] for t in (q, k, v)
    )
    want = jax.nn.dot_product_attention(q4, k4, v4, scale=float(scale), is_causal=causal)
    want = np.asarray(want)[0].transpose(1, 0, 2).reshape(h * s, 128)
    np.testing.assert_allclose(gpu_check.attention_reference(args), want, atol=2e-5)


def test_the_build_records_a_refusal_and_builds_the_others(tmp_path):
    big = tmp_path / "big.vx"
    big.write_text(REFUSED)
    index = gpu_build.build(tmp_path / "gpu", [big, ROOT / "kernels" / "softmax.vx"])
    refused = {e["target"]: e["refused"] for e in index["artifacts"] if e["source"] == "big"}
    assert set(refused) == {"h100", "b200"}
    for why in refused.values():
        assert why.startswith("big.vx:5:") and ": E6010: working set of `VMEM`" in why
    built = {e["target"]: e["manifest"] for e in index["artifacts"] if e["source"] == "softmax"}
    assert set(built) == {"h100", "b200"}
    assert all((tmp_path / "gpu" / m).exists() for m in built.values())
    on_disk = json.loads((tmp_path / "gpu" / "index.json").read_text())
    assert on_disk == json.loads(json.dumps(index))


def test_the_device_check_names_every_kernel_not_built(tmp_path, capsys):
    import fakecuda

    from vxc.backends.nvidia import runtime as cuda

    big = tmp_path / "big.vx"
    big.write_text(REFUSED)
    gpu_build.build(tmp_path / "gpu", [big, ROOT / "kernels" / "softmax.vx"])
    cuda.use_driver(fakecuda.FakeDriver(capability=(9, 0)))
    try:
        rc = gpu_check.main(["--artifacts", str(tmp_path / "gpu"), "--out", str(tmp_path),
                             "--small", "--only", "none", "--no-sanitizer"])  # fmt: skip
    finally:
        cuda.use_driver(None)
    out = capsys.readouterr().out.splitlines()
    log = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 0 and log["target"] == "h100"
    assert [e["source"] for e in log["not_built"]] == ["big"]  # h100's only, not b200's
    assert "E6010" in log["not_built"][0]["refused"]
    assert out[0].startswith("gpu_check: NOT BUILT big for h100: big.vx:5:")
    assert "1 not built (above)" in out[-1]


def _attention_for(target: str, tmp: Path):
    """kernels/attention.vx's NVIDIA artifact, or a skip naming the coded refusal."""
    src = api.Source("kernels/attention.vx", (ROOT / "kernels" / "attention.vx").read_bytes())
    result = api.build(api.analyze([src]), target)
    if not result.ok:
        pytest.skip(f"attention does not build for {target}: {result.diagnostics[0].code}")
    for name, data in result.outputs.items():
        (tmp / name).write_bytes(data)
    return tmp / f"attention.{target}.json"


def test_the_attention_scalars_are_packed_as_the_kernel_reads_them(tmp_path):
    from vxc.backends.nvidia import runtime as cuda

    meta = json.loads(_attention_for("h100", tmp_path).read_text())["kernels"][0]
    args = gpu_check.attention_inputs(1, 256, True, np.random.default_rng(0))
    plan = {p.name: p for p in cuda.plan_launch(meta, args, 2)}
    by_arg = {p["arg"]: plan[p["name"]] for p in meta["params"] if p.get("arg")}
    assert by_arg["causal"].value == 1  # a bool: 0 or 1 in its 64-bit slot
    assert by_arg["scale"].value == int(np.float32(128**-0.5).view(np.uint32))  # f32 bits
    assert (by_arg["h"].value, by_arg["s"].value, by_arg["n"].value) == (1, 256, 256)
    assert by_arg["q"].tensor_map.dims == (128, 256)


def test_an_attention_rung_runs_on_the_fake_cuda_layer(tmp_path):
    import fakecuda

    from vxc.backends.nvidia import runtime as cuda

    manifest = _attention_for("h100", tmp_path)
    cuda.use_driver(fakecuda.FakeDriver(capability=(9, 0)))
    try:
        kernel = getattr(cuda.load(manifest), gpu_check.ATTENTION)
        log: list = []
        rng = np.random.default_rng(0)
        shapes = [(1, 128, False), (1, 128, True)]
        assert gpu_check.check_tile_kernel(kernel, shapes, rng, 600.0, log), log
        cuda.use_driver(fakecuda.FakeDriver(capability=(9, 0), hang=True))
        kernel = getattr(cuda.load(manifest), gpu_check.ATTENTION)
        args = gpu_check.attention_inputs(1, 128, True, rng)
        with pytest.raises(cuda.Hang, match=rf"HANG {gpu_check.ATTENTION} instances=1 "):
            kernel.run(1, *args, timeout=0.2)
    finally:
        cuda.use_driver(None)


def test_a_sanitizer_finding_fails_the_check(tmp_path, monkeypatch, capsys):
    # compute-sanitizer does not run here (no GPU): a stand-in on PATH that records its
    # command line and reports a memcheck finding (exit 9, --error-exitcode) checks what
    # the device script asks of it and that a finding is not a pass.
    import fakecuda

    from vxc.backends.nvidia import runtime as cuda

    exe = tmp_path / "bin" / "compute-sanitizer"
    exe.parent.mkdir()
    exe.write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path}/argv\n[ "$2" = memcheck ] && exit 9\nexit 0\n'
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    gpu_build.build(tmp_path / "gpu", [ROOT / "kernels" / "softmax.vx"])
    cuda.use_driver(fakecuda.FakeDriver(capability=(9, 0)))
    try:
        rc = gpu_check.main(["--artifacts", str(tmp_path / "gpu"), "--out", str(tmp_path),
                             "--small", "--only", "none"])  # fmt: skip
    finally:
        cuda.use_driver(None)
    log = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 1 and log["status"] == 1
    assert log["sanitizer"]["memcheck"]["ok"] is False and log["sanitizer"]["synccheck"]["ok"]
    calls = (tmp_path / "argv").read_text().splitlines()
    assert [c.split()[:2] for c in calls] == [["--tool", "memcheck"], ["--tool", "synccheck"]]
    for c in calls:  # a small ladder of every sanitized kernel, not the sanitizer again
        words = c.split()
        assert "--small" in words and "--no-sanitizer" in words
        assert [words[i + 1] for i, w in enumerate(words) if w == "--only"] == list(
            gpu_check.SANITIZED
        )
    assert "compute-sanitizer memcheck: rc 9" in capsys.readouterr().out


# The one artifact whose kernels the check cannot judge: the seed's language tour, whose
# `stream` computes nothing to compare and `stream_last` returns a tile it only moved.
NOT_JUDGED = {"seed_vx"}


def test_the_device_check_judges_every_kernel_it_is_given(tmp_path):
    # Every kernel gpu_build builds for the GPUs (kernels/*.vx and the blocking stream
    # twin) has a numpy reference in the device script, or is one it says it skips.
    srcs = gpu_build.sources()
    assert {"attention", "gemm", "gemm_epilogue", "softmax", "stream"} <= {p.stem for p in srcs}
    for src in srcs:
        if src.stem in NOT_JUDGED:
            continue
        names = _kernel_names(src)
        assert names, src
        for name in names:
            assert gpu_check.kind_of(name, src.stem) is not None, (src.name, name)


def _kernel_names(src: Path) -> list[str]:
    """The kernels (`on Topology::...` functions taking no tile values: the launchable
    ones) a source declares, from the cpu build's manifest (the NVIDIA build of a kernel
    may still be refused)."""
    result = api.build(api.analyze([api.Source(src.name, src.read_bytes())]), "cpu")
    assert result.ok, src
    manifest = next(v for k, v in result.outputs.items() if k.endswith(".json"))
    return [k["name"] for k in json.loads(manifest)["kernels"]]


@pytest.mark.parametrize(("target", "cap"), [("h100", (9, 0)), ("b200", (10, 0))])
def test_gemm_asyncs_first_rung_on_the_fake_cuda_layer(tmp_path, target, cap):
    # gemm_async (gemm with a store token) was built for the GPUs and never run by the
    # check: its first GEMM rung through the device script, the fatbin run by ptxsim.
    import fakecuda

    from vxc.backends.nvidia import runtime as cuda

    gpu_build.build(tmp_path, [ROOT / "kernels" / "gemm_async.vx"])
    cuda.use_driver(fakecuda.FakeDriver(capability=cap))
    try:
        kernel = cuda.load(tmp_path / target / f"gemm_async.{target}.json").gemm_async
        log: list = []
        shape = gpu_check.GEMM_LADDER[0]
        assert gpu_check.check_gemm(kernel, [shape], np.random.default_rng(0), 60.0, log), log
    finally:
        cuda.use_driver(None)
    assert log[0]["ok"] and (log[0]["m"], log[0]["n"], log[0]["k"]) == shape


@pytest.mark.slow  # about 40 s: stream's whole ladder in the simulator first
def test_the_log_is_kept_current_for_a_run_killed_by_its_timeout(tmp_path):
    # gpu_check.sh's `timeout 290` kills the script without a word: the JSON log is
    # rewritten after every kernel, so what ran before the kill comes back in $OUT. Here
    # `stream` passes, then `stream_grid` deadlocks (its expect_tx arrival removed) under
    # a watchdog longer than the test, and the child is killed while it waits.
    import subprocess
    import time

    gpu_build.build(
        tmp_path / "gpu", [ROOT / "kernels" / "stream.vx", ROOT / "kernels" / "stream_grid.vx"]
    )
    code = (
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT / 'tests/backends/nvidia')!r}, {str(ROOT / 'tools')!r}]\n"
        "import fakecuda, gpu_check\n"
        "from vxc.backends.nvidia import runtime\n"
        "def hang_grid(ptx):\n"
        "    return ptx.replace('mbarrier.arrive.expect_tx', '//') if 'stream_grid' in ptx else ptx\n"
        "runtime.use_driver(fakecuda.FakeDriver(capability=(9, 0), ptx_filter=hang_grid))\n"
        f"gpu_check.main(['--artifacts', {str(tmp_path / 'gpu')!r}, '--out', {str(tmp_path)!r},"
        " '--small', '--only', 'stream', '--only', 'stream_grid', '--timeout', '600'])\n"
    )
    env = {"PYTHONPATH": str(ROOT / "compiler"), "PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)  # fmt: skip
    log_path = tmp_path / "gpu_check.json"
    try:
        deadline = time.monotonic() + 240
        while not log_path.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.5)
        time.sleep(2)  # stream_grid's first rung is now waiting on its barrier
        assert child.poll() is None, child.stdout.read()
    finally:
        child.kill()
        child.wait()
    log = json.loads(log_path.read_text())
    assert log["status"] == "running"
    assert {r["kernel"] for r in log["runs"]} == {"stream"} and all(r["ok"] for r in log["runs"])


# A kernel with an f32 scalar parameter (attention's `scale` has the same kind) that
# builds for both GPUs today: y = x * a, exact in f32 arithmetic.
SCALED = """\
fn scaled(m: i64, a: f32, x: &Tensor<f32, [m, 128]>, y: &mut Tensor<f32, [m, 128]>) -> void
    on Topology::TensorCore
    where m % 8 == 0, instances() == m / 8 {
  let r = instance() * 8;
  let t = transfer(x[r .. r + 8, 0 .. 128], Memory::VMEM);
  transfer(t * a, y[r .. r + 8, 0 .. 128]);
}
"""


@pytest.mark.parametrize(("target", "cap"), [("h100", (9, 0)), ("b200", (10, 0))])
def test_an_f32_scalar_reaches_the_kernel_as_its_bits(tmp_path, target, cap):
    # The runtime packs an f32 scalar into its 64-bit parameter slot as the f32's bit
    # pattern; the fake layer reads the slot back at the PTX entry's offset and ptxsim
    # multiplies by it: y must be numpy's f32 product, exactly.
    import fakecuda

    from vxc.backends.nvidia import runtime as cuda

    (tmp_path / "scaled.vx").write_text(SCALED)
    gpu_build.build(tmp_path / "gpu", [tmp_path / "scaled.vx"])
    d = fakecuda.FakeDriver(capability=cap)
    cuda.use_driver(d)
    try:
        kernel = cuda.load(tmp_path / "gpu" / target / f"scaled.{target}.json").scaled
        x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
        y = np.zeros_like(x)
        a = np.float32(0.1)  # not a dyadic: a slip in its bits changes every product
        kernel.run(2, 16, a, x, y, poison=True)
    finally:
        cuda.use_driver(None)
    assert d.launches[-1]["params"]["a"] == int(a.view(np.uint32))
    np.testing.assert_array_equal(y, x * a)
