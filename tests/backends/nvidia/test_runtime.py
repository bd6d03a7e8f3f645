"""The CUDA runtime: on this machine (no NVIDIA GPU or driver) loading an artifact says
so in one line. On a machine with a Hopper GPU, tools/gpu_check.sh runs the kernels
against numpy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vxc import api, runtime
from vxc.backends.nvidia.runtime import NoGpu, gpu_status

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def h100_artifact(tmp_path_factory) -> Path:
    src = ROOT / "kernels" / "stream_grid.vx"
    result = api.build(api.analyze([api.Source(str(src), src.read_bytes())]), "h100")
    d = tmp_path_factory.mktemp("h100")
    for name, data in result.outputs.items():
        (d / name).write_bytes(data)
    return d / "stream_grid.h100.json"


def test_no_gpu_is_one_line(h100_artifact):
    ok, why = gpu_status()
    if ok:
        pytest.skip(f"this machine has a GPU ({why}); tools/gpu_check.sh covers it")
    for path in (h100_artifact, h100_artifact.with_suffix(".fatbin")):
        with pytest.raises(NoGpu) as e:
            runtime.load(path)
        msg = str(e.value)
        assert msg.startswith("no NVIDIA GPU") and "\n" not in msg


def test_no_gpu_from_a_fresh_process_without_a_traceback(h100_artifact):
    if gpu_status()[0]:
        pytest.skip("this machine has a GPU")
    code = (
        "import sys, vxc.runtime as r\n"
        "try:\n    r.load(sys.argv[1])\n"
        "except Exception as e:\n"
        "    print(type(e).__name__ + ': ' + str(e)); sys.exit(3)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(h100_artifact)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 3, p.stderr
    (line,) = p.stdout.splitlines()
    assert line.startswith("NoGpu: no NVIDIA GPU")


def test_launch_parameters_follow_the_manifest(h100_artifact):
    import json

    import ml_dtypes
    import numpy as np

    from vxc.backends.nvidia.runtime import plan_launch

    (k,) = json.loads(h100_artifact.read_text())["kernels"]
    tiles = np.zeros((10, 128, 128), ml_dtypes.bfloat16)
    w = np.zeros((128, 128), ml_dtypes.bfloat16)
    plan = plan_launch(k, [tiles, w], 4)
    # w, a bf16 B operand, comes by TMA too (MN-major: two 64-column boxes of 128 K-rows).
    assert [p.kind for p in plan] == ["tensormap", "u64", "tensormap", "tensormap", "status"]
    tmap, length, wmap, out, _ = plan
    assert (tmap.tensor_map.dims, tmap.tensor_map.strides) == ((128, 1280), (256,))
    assert (tmap.tensor_map.box, tmap.tensor_map.swizzle) == ((64, 128), "128B")
    assert (wmap.tensor_map.dims, wmap.tensor_map.box) == ((128, 128), (64, 128))
    assert length.value == 10
    assert out.array.shape == (4, 128, 128) and out.tensor_map.dims == (128, 512)
    with pytest.raises(ValueError, match="tiles must be bf16, got float32"):
        plan_launch(k, [tiles.astype(np.float32), w], 1)
    with pytest.raises(ValueError, match=r"tiles has shape \(10, 64, 128\)"):
        plan_launch(k, [np.zeros((10, 64, 128), ml_dtypes.bfloat16), w], 1)
    with pytest.raises(ValueError, match="takes 2 arguments"):
        plan_launch(k, [tiles], 1)
    with pytest.raises(ValueError, match="instances must be >= 1"):
        plan_launch(k, [tiles, w], 0)
