"""Helpers of the TPU backend tests (a module name unique in the suite: conftest modules
of other test folders must not shadow it)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

ROOT = Path(__file__).resolve().parents[3]
# Every kernel of the repository that has a TPU artifact (seed.vx calls an extern fn:
# tested for its diagnostic instead).
KERNELS = sorted(
    p for p in [*ROOT.glob("kernels/*.vx"), *ROOT.glob("examples/**/*.vx")] if p.name != "seed.vx"
)


def build(path: Path, emit: str = "artifact", tpu_aot: str = "none"):
    from vxc import api

    src = api.Source(str(path.relative_to(ROOT)), path.read_bytes())
    return api.build(api.analyze([src]), "tpu", emit, tpu_aot=tpu_aot)


class Built:
    def __init__(self, path: Path):
        from vxc import api
        from vxc.backends.tpu import mosaic_kernels
        from vxc.ir.from_hir import lower_program

        self.path = path
        result = build(path)
        assert result.ok, result.diagnostics
        self.outputs = result.outputs
        src = api.Source(str(path.relative_to(ROOT)), path.read_bytes())
        checked = api.check_target(api.analyze([src]), "tpu")
        (self.kernel,) = mosaic_kernels(lower_program(checked))
        stem = path.stem
        self.mosaic = self.outputs[f"{stem}.tpu.mosaic.mlir"].decode()
        self.export = self.outputs[f"{stem}.tpu.jax_export"]
