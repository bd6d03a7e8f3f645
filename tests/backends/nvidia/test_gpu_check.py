"""The GPU check's device side, run here end to end against the fake CUDA layer
(fakecuda.py: the real fatbins, the runtime's real parameter buffers, kernels executed by
the PTX simulator), and what must hold on a bare device: the runtime imports without
jaxlib, lark or z3; a launch that never finishes is a HANG line, not silence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fakecuda
import pytest

from vxc.backends.nvidia import runtime

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))

import gpu_check  # noqa: E402


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """Every kernel built for h100 and b200 by tools/gpu_build.py, as for the device."""
    import gpu_build

    out = tmp_path_factory.mktemp("gpu")
    gpu_build.build(out)
    return out


@pytest.fixture
def fake(request):
    drivers = []

    def install(**kw):
        d = fakecuda.FakeDriver(**kw)
        runtime.use_driver(d)
        drivers.append(d)
        return d

    yield install
    runtime.use_driver(None)


def test_the_runtime_imports_without_jaxlib_lark_or_z3():
    # The device image has numpy, ml_dtypes and cuda-python, not this repo's environment.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('jax', 'jaxlib', 'lark', 'z3', 'llvmlite'):\n"
        "            raise ImportError('not on the device: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import vxc.backends.nvidia.runtime as r\n"
        "sys.argv = ['gpu_check', '--help']\n"
        "sys.path.insert(0, 'tools')\n"
        "import gpu_check\n"
        "print(r.WATCHDOG_S)\n"
    )
    env = {"PYTHONPATH": str(ROOT / "compiler"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60, check=False)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "10.0"


def test_gpu_build_writes_an_index_of_every_artifact(artifacts):
    index = json.loads((artifacts / "index.json").read_text())
    built = {(e["source"], e["target"]) for e in index["artifacts"] if "manifest" in e}
    for k in ("stream", "stream_grid", "stream_triple", "stream_blocking", "stream_grid_blocking",
              "gemm", "gemm_3stage", "gemm_epilogue", "softmax"):  # fmt: skip
        assert {(k, "h100"), (k, "b200")} <= built
    for e in index["artifacts"]:
        if "manifest" in e:
            assert (artifacts / e["manifest"]).exists()


def test_the_device_check_runs_end_to_end_on_the_fake_layer(artifacts, fake, tmp_path):
    d = fake(capability=(9, 0))
    rc = gpu_check.main(["--artifacts", str(artifacts), "--out", str(tmp_path), "--small",
                         "--only", "stream_grid", "--no-sanitizer", "--no-baselines"])  # fmt: skip
    log = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 0 and log["status"] == 0, log
    assert log["target"] == "h100"
    runs = [r for r in log["runs"] if r["kernel"] == "stream_grid"]
    assert [(r["instances"], r["tiles"]) for r in runs] == [(1, 1), (1, 2), (1, 5), (3, 21)]
    assert all(r["ok"] for r in runs)
    # Argument packing: the launch read the tensor maps the runtime encoded (tiles: a Vec
    # of bf16 128x128 tiles, boxes of 64 x 128 under the 128-byte swizzle; the stacked
    # result: one unswizzled 128x128 box per instance) and the Vec length.
    tiles_maps = [c for c in d.tensor_map_calls if c["dtype"] == 9 and c["dims"][1] > 128]
    assert tiles_maps[-1]["dims"] == [128, 21 * 128]
    assert tiles_maps[-1]["strides"] == [256] and tiles_maps[-1]["box"] == [64, 128]
    assert tiles_maps[-1]["swizzle"] == 3
    result_maps = [c for c in d.tensor_map_calls if c["dtype"] == 7]
    assert result_maps[-1]["dims"] == [128, 3 * 128] and result_maps[-1]["box"] == [128, 128]
    assert d.launches[-1]["grid"] == (3, 1, 1) and d.launches[-1]["params"]["tiles_len"] == 21


def test_a_wrong_kernel_is_reported_with_its_first_bad_element(artifacts, fake, tmp_path):
    # The second box of each tile loaded from the first box's columns (ptxsim's mutation).
    fake(capability=(10, 0), ptx_filter=lambda ptx: ptx.replace("[%rd1, {64,", "[%rd1, {0,"))
    rc = gpu_check.main(["--artifacts", str(artifacts), "--out", str(tmp_path), "--small",
                         "--only", "stream_grid", "--no-sanitizer", "--no-baselines"])  # fmt: skip
    log = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 1 and log["target"] == "b200"
    bad = log["runs"][0]["first_bad"]
    assert set(bad) == {"instance", "row", "col", "got", "want", "wrong"}
    assert bad["instance"] == 0 and bad["wrong"] > 0


def test_the_watchdog_names_a_launch_that_never_finishes(artifacts, fake):
    fake(capability=(9, 0), hang=True)
    art = runtime.load(artifacts / "h100" / "stream.h100.json")
    args = gpu_check.make_inputs(art.stream.meta, 2, __import__("numpy").random.default_rng(0))
    with pytest.raises(runtime.Hang, match=r"HANG stream instances=1 .*not finished after 0.2 s"):
        art.stream.run(1, *args, timeout=0.2)


def test_a_deadlocked_kernel_is_a_hang_too(artifacts, fake):
    # Without the expect_tx arrival the TMA barrier never completes: every thread spins.
    fake(capability=(9, 0), ptx_filter=lambda p: p.replace("mbarrier.arrive.expect_tx", "//"))
    art = runtime.load(artifacts / "h100" / "stream.h100.json")
    args = gpu_check.make_inputs(art.stream.meta, 1, __import__("numpy").random.default_rng(0))
    with pytest.raises(runtime.Hang):
        art.stream.run(1, *args, timeout=0.2)


def test_the_device_script_hang_exit_is_a_line_and_status_3(artifacts, tmp_path):
    # The whole script as the device runs it (a child process, unbuffered), with the fake
    # layer hanging every launch: one HANG line on stdout, exit 3, the JSON log written.
    code = (
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT / 'tests/backends/nvidia')!r}, {str(ROOT / 'tools')!r}]\n"
        "import fakecuda, gpu_check\n"
        "from vxc.backends.nvidia import runtime\n"
        "runtime.use_driver(fakecuda.FakeDriver(capability=(9, 0), hang=True))\n"
        f"sys.exit(gpu_check.main(['--artifacts', {str(artifacts)!r}, '--out', {str(tmp_path)!r},"
        " '--small', '--only', 'stream', '--timeout', '0.3']))\n"
    )
    env = {"PYTHONPATH": str(ROOT / "compiler"), "PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300, check=False)  # fmt: skip
    assert p.returncode == 3, p.stdout + p.stderr
    assert "gpu_check: HANG stream instances=1" in p.stdout
    assert json.loads((tmp_path / "gpu_check.json").read_text())["status"] == 3


def _gemm_args(m: int, n: int, k: int):
    import numpy as np

    return gpu_check.gemm_inputs(m, n, k, np.random.default_rng(1))


def _gemm_in_place(art, name: str, shape: tuple[int, int, int], instances: int):
    """Run GEMM kernel `name` of `art` on poisoned output; C must be numpy's A @ B."""
    import numpy as np

    m, n, k, a, b, c = _gemm_args(*shape)
    assert getattr(art, name).run(instances, m, n, k, a, b, c, poison=True) == []
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))
    return m, n, k, a, b


def test_a_gemm_writes_its_output_argument_in_place(artifacts, fake):
    # The runtime's CUDA path: whole-tensor maps encoded from the arrays (A and B under the
    # 128-byte swizzle in 64-column boxes, C unswizzled), the scalars, and C copied back
    # into the caller's array (the kernel returns nothing).
    import numpy as np

    d = fake(capability=(10, 0))
    art = runtime.load(artifacts / "b200" / "gemm.b200.json")
    m, n, k, a, b = _gemm_in_place(art, "gemm", (128, 256, 256), 2)
    maps = [{x: call[x] for x in ("dtype", "dims", "strides", "box", "swizzle")}
            for call in d.tensor_map_calls]  # fmt: skip
    assert maps == [
        {"dtype": 9, "dims": [256, 128], "strides": [512], "box": [64, 128], "swizzle": 3},
        {"dtype": 9, "dims": [256, 256], "strides": [512], "box": [64, 128], "swizzle": 3},
        {"dtype": 7, "dims": [256, 128], "strides": [1024], "box": [128, 128], "swizzle": 0},
    ]
    params = d.launches[-1]["params"]
    assert (params["m"], params["n"], params["k"]) == (128, 256, 256)
    with pytest.raises(ValueError, match="c is an output: pass a writable, C-contiguous array"):
        art.gemm.run(2, m, n, k, a, b, np.zeros((256, 128), np.float32).T)


def test_gemm_any_runs_through_the_runtime_on_the_arrays_real_dims(artifacts, fake):
    # kernels/gemm_any.vx (edge views): the maps are encoded from the arrays' own shapes,
    # never rounded to the 128 x 128 tiles, so the TMA unit fills and clips the edges.
    d = fake(capability=(9, 0))
    art = runtime.load(artifacts / "h100" / "gemm_any.h100.json")
    _gemm_in_place(art, "gemm_any", (130, 8, 8), 2)
    dims = [(call["dims"], call["strides"]) for call in d.tensor_map_calls]
    assert dims == [([8, 130], [16]), ([8, 8], [16]), ([8, 130], [32])]
    assert d.copies_2d == []  # every row pitch a multiple of 16 bytes: uploaded as it is
    # n = 13: B's rows are 26 bytes and C's 52, which no tensor map's stride can be. The
    # launcher lays them out at 32 and 64 bytes (cuMemcpy2D both ways for C, the output)
    # and encodes the real dims with the padded strides.
    _gemm_in_place(art, "gemm_any", (130, 13, 8), 2)
    dims = [(call["dims"], call["strides"]) for call in d.tensor_map_calls[3:]]
    assert dims == [([8, 130], [16]), ([13, 8], [32]), ([13, 130], [64])]
    copies = [(c.srcPitch, c.dstPitch, c.WidthInBytes, c.Height) for c in d.copies_2d]
    assert copies == [(26, 32, 26, 8), (52, 64, 52, 130), (64, 52, 52, 130)]
    assert len(d.launches) == 2


@pytest.mark.slow
def test_the_device_check_runs_the_gemm_ladder_on_the_fake_layer(artifacts, fake, tmp_path):
    fake(capability=(10, 0))
    rc = gpu_check.main(["--artifacts", str(artifacts), "--out", str(tmp_path), "--small",
                         "--only", "gemm", "--no-sanitizer", "--no-baselines"])  # fmt: skip
    log = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 0 and log["status"] == 0, log
    runs = [(r["m"], r["n"], r["k"], r["instances"], r["ok"]) for r in log["runs"]]
    assert runs == [(128, 128, 256, 1, True), (128, 256, 640, 2, True), (384, 896, 384, 21, True)]


def test_a_wrong_gemm_is_reported_with_its_first_bad_row_and_col(artifacts, fake, tmp_path):
    # Every store at column 0: instance 1's tile overwrites instance 0's; its own stays NaN.
    fake(capability=(10, 0),
         ptx_filter=lambda p: __import__("re").sub(r"(bulk_group \[%rd\d+, \{)%r\d+", r"\g<1>0", p))  # fmt: skip
    art = runtime.load(artifacts / "b200" / "gemm.b200.json")
    m, n, k, a, b, c = _gemm_args(128, 256, 256)
    art.gemm.run(2, m, n, k, a, b, c, poison=True)
    bad = gpu_check.gemm_first_bad(c, a.astype("float32") @ b.astype("float32"))
    assert bad is not None and bad["wrong"] > 0 and bad["row"] == 0


@pytest.mark.parametrize(("target", "cap"), [("h100", (9, 0)), ("b200", (10, 0))])
@pytest.mark.parametrize(
    ("name", "shape"), [("softmax", (8, 256)), ("gemm_epilogue", (128, 128, 128))]
)
def test_the_tile_kernels_check_on_the_fake_layer(artifacts, fake, target, cap, name, shape):
    # One rung of each tile kernel's ladder through the device script's own check (the
    # runtime's packing of the f32 bias and the bf16 output, the fatbin run by ptxsim).
    fake(capability=cap)
    art = runtime.load(artifacts / target / f"{name}.{target}.json")
    log: list = []
    rng = __import__("numpy").random.default_rng(0)
    assert gpu_check.check_tile_kernel(getattr(art, name), [shape], rng, 10.0, log), log
    assert log[0]["ok"] and log[0]["first_bad"] is None


def test_a_wrong_softmax_is_reported_with_its_first_bad_row(artifacts, fake):
    # exp as 2^x (the log2(e) scale dropped): every row's values are off.
    fake(capability=(9, 0), ptx_filter=lambda p: p.replace("0f3FB8AA3B", "0f3F800000"))
    art = runtime.load(artifacts / "h100" / "softmax.h100.json")
    log: list = []
    rng = __import__("numpy").random.default_rng(0)
    assert not gpu_check.check_tile_kernel(art.softmax, [(8, 128)], rng, 10.0, log)
    bad = log[0]["first_bad"]
    assert bad["row"] == 0 and bad["instance"] == 0 and bad["wrong"] > 0


@pytest.mark.slow
def test_the_device_check_runs_the_tile_kernel_ladders_on_the_fake_layer(artifacts, fake, tmp_path):
    fake(capability=(9, 0))
    rc = gpu_check.main(["--artifacts", str(artifacts), "--out", str(tmp_path), "--small",
                         "--only", "softmax", "--only", "gemm_epilogue", "--no-sanitizer",
                         "--no-baselines"])  # fmt: skip
    log = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rc == 0 and log["status"] == 0, log
    shapes = [(r["kernel"], tuple(r["shape"])) for r in log["runs"]]
    assert ("softmax", (24, 1024)) in shapes and ("gemm_epilogue", (384, 896, 384)) in shapes
