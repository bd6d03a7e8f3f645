"""Issue 25: the runtime does not trust a manifest the library does not vouch for. The
object records a digest of each kernel's manifest entry (and the status table) at build
time; `vxc.runtime.load` compares it before any call, so an edited shape, dtype, symbol
or `where` list, or a library from another build, is a clear error naming the files,
never a kernel called with buffers of the wrong size."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime

KERNEL = b"""
fn copy(x: &Tensor<f32, [16, 16]>) -> Tensor<f32, [16, 16]> on Topology::TensorCore {
  let t = transfer(x, Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""
SMALL = KERNEL.replace(b"[16, 16]", b"[4, 4]")


def _build(text: bytes, out: Path) -> Path:
    src = api.Source("copy.vx", text)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    out.mkdir(parents=True, exist_ok=True)
    for name, data in result.outputs.items():
        (out / name).write_bytes(data)
    return out / "copy.cpu.json"


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _shape(doc):
    doc["kernels"][0]["params"][0]["shape"] = [64, 64]


def _dtype(doc):
    doc["kernels"][0]["params"][0]["dtype"] = "f64"


def _requires(doc):
    doc["kernels"][0]["requires"] = ["true"]


def _status(doc):
    doc["status"]["VX_OK"] = 9


def _result(doc):
    doc["kernels"][0]["results"][0]["shape"] = [1, 1]


@pytest.mark.parametrize("change", [_shape, _dtype, _requires, _status, _result])
def test_an_edited_manifest_is_refused(tmp_path, change):
    manifest = _build(KERNEL, tmp_path)
    runtime.load(manifest).copy(np.ones((16, 16), np.float32))  # untouched: loads and runs
    _edit(manifest, change)
    with pytest.raises(runtime.ArtifactError, match=r"copy\.cpu\.json.*copy\.cpu\.so") as e:
        runtime.load(manifest)
    assert "kernel 'copy'" in str(e.value)


def test_a_library_from_another_build_is_refused(tmp_path):
    manifest = _build(KERNEL, tmp_path / "big")
    other = _build(SMALL, tmp_path / "small")
    shutil.copy(other.with_suffix(".so"), manifest.with_suffix(".so"))
    with pytest.raises(runtime.ArtifactError, match="does not match"):
        runtime.load(manifest)


@pytest.mark.parametrize("name", ["../copy.cpu.so", "/tmp/copy.cpu.so", "sub/copy.cpu.so"])
def test_the_library_is_a_file_beside_the_manifest(tmp_path, name):
    manifest = _build(KERNEL, tmp_path)
    _edit(manifest, lambda doc: doc["files"].update(shared_library=name))
    with pytest.raises(runtime.ArtifactError, match="beside the manifest"):
        runtime.load(manifest)


@pytest.mark.parametrize(
    "change",
    [
        lambda doc: doc["kernels"][0].pop("params"),
        lambda doc: doc.update(kernels={"copy": 1}),
        lambda doc: doc["kernels"][0].update(symbol="no_such_symbol"),
        lambda doc: doc.update(status=[]),
    ],
)
def test_a_malformed_manifest_is_a_clear_error(tmp_path, change):
    manifest = _build(KERNEL, tmp_path)
    _edit(manifest, change)
    with pytest.raises(runtime.ArtifactError, match=r"copy\.cpu\.json"):
        runtime.load(manifest)
