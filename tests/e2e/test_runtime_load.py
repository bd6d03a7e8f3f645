"""`vxc.runtime.load` takes any target's manifest (or the directory holding it) and says
plainly what it loaded, or why it cannot run here: cpu runs here, tpu loads anywhere and
runs on a TPU, b200/h100 need their GPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime
from vxc.backends.nvidia.runtime import CudaArtifact, gpu_status
from vxc.backends.tpu.runtime import TpuArtifact
from vxc.errors import NotRunnableHere

ROOT = Path(__file__).resolve().parents[2]
STREAM = ROOT / "kernels" / "stream.vx"


def _outputs(target: str) -> dict[str, bytes]:
    src = api.Source(str(STREAM), STREAM.read_bytes())
    result = api.build(api.analyze([src]), target)
    assert result.ok, api.render(result.diagnostics, [src])
    return result.outputs


@pytest.fixture(scope="module")
def tpu_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tpu")
    for name, data in _outputs("tpu").items():
        (d / name).write_bytes(data)
    return d


def test_a_tpu_manifest_loads_and_says_where_it_runs(tpu_dir):
    art = runtime.load(tpu_dir)  # the directory, as a Bazel $(rootpath) names it
    assert isinstance(art, TpuArtifact)
    kernel = art.stream
    assert [p["name"] for p in kernel.params] == ["tiles", "w"]
    exp = kernel.exported  # the jax.export a jax.jit caller embeds
    assert exp.platforms == ("tpu",) and exp.out_avals[0].shape == (128, 128)
    tiles = np.ones((2, 128, 128), np.float32)
    w = np.ones((128, 128), np.float32)
    import jax

    if jax.devices()[0].platform == "tpu":
        pytest.skip("this machine has a TPU")
    with pytest.raises(NotRunnableHere) as e:
        kernel(tiles, w)
    msg = str(e.value)
    assert msg.startswith("no TPU here") and "tpu_custom_call" in msg and "\n" not in msg
    with pytest.raises(ValueError, match="built for a plain call; rebuild with --tpu-instances 4"):
        kernel.launch(tiles, w, instances=4)


def test_load_outputs_takes_a_tpu_build(tpu_dir, tmp_path):
    outputs = {p.name: p.read_bytes() for p in tpu_dir.iterdir()}
    assert isinstance(runtime.load_outputs(outputs, tmp_path), TpuArtifact)


def test_an_h100_directory_loads_with_the_cuda_runtime(tmp_path):
    for name, data in _outputs("h100").items():
        (tmp_path / name).write_bytes(data)
    ok, why = gpu_status()
    if ok:
        art = runtime.load(tmp_path)  # a Hopper GPU: tools/gpu_check.sh runs it
        assert isinstance(art, CudaArtifact) and "stream" in art.kernels
        return
    with pytest.raises(NotRunnableHere) as e:
        runtime.load(tmp_path)
    assert str(e.value).startswith("no NVIDIA GPU") and "\n" not in str(e.value)


def test_a_directory_with_two_manifests_names_them(tpu_dir, tmp_path):
    for p in tpu_dir.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    for name, data in _outputs("cpu").items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(FileNotFoundError) as e:
        runtime.load(tmp_path)
    assert "found stream.cpu.json, stream.tpu.json; load one of them by name" in str(e.value)
    assert isinstance(runtime.load(tmp_path / "stream.cpu.json"), runtime.Artifact)


def test_not_a_manifest_says_so(tmp_path):
    bad = tmp_path / "x.cpu.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(runtime.ArgumentError, match="is not a vx artifact manifest"):
        runtime.load(bad)
    bad.write_text("not json")
    with pytest.raises(runtime.ArgumentError, match="format None"):
        runtime.load(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="found none"):
        runtime.load(tmp_path / "empty")


def test_externs_are_for_cpu_artifacts(tpu_dir):
    with pytest.raises(runtime.ArgumentError, match="cpu artifacts only"):
        runtime.load(tpu_dir, externs=["lib.so"])
