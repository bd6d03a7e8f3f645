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
