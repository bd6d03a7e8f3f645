"""Validation of a built b200 / h100 artifact on a machine without a GPU (what
`vx_test --config=b200|h100` runs on Bazel's output, and the tests on the CLI's):

- the manifest parses and names a fatbin with the cubin and the PTX for the arch;
- the PTX inside the fatbin assembles again with `ptxas -v` for the arch, without
  spills, within 255 registers, and the manifest's shared memory is within the
  per-CTA limit;
- `cuobjdump -sass` holds the TMA load (UTMALDG) and the mbarrier wait (SYNCS) of a
  kernel with TMA loads, and the architecture's MMA (HGMMA on sm_90a, UTCHMMA on
  sm_100a) of a kernel with matmul_acc, and never the other architecture's MMA.

`check_artifact` returns the problems found (an empty list is a pass).
"""

from __future__ import annotations

from pathlib import Path

from vxc.backends.nvidia import toolchain
from vxc.backends.nvidia.manifest import Manifest
from vxc.targets import NVIDIA_ARCHES, TARGETS


def check_artifact(directory: str | Path, target: str) -> list[str]:
    d = Path(directory)
    rec = TARGETS[target].arch
    arch = rec.sm
    others = [a.mma_sass for a in NVIDIA_ARCHES.values() if a.mma_sass != rec.mma_sass]
    manifests = sorted(d.glob(f"*.{target}.json"))
    if not manifests:
        return [f"no {target} manifest in {d}"]
    problems: list[str] = []
    for path in manifests:
        m = Manifest.from_bytes(path.read_bytes())
        if (m.target, m.arch) != (target, arch):
            problems.append(f"{path.name}: manifest is for {m.target}/{m.arch}")
            continue
        fatbin = (d / m.fatbin).read_bytes()
        images = toolchain.list_images(fatbin)
        for kind in ("cubin", "ptx"):
            if f"{arch}.{kind}" not in images:
                problems.append(f"{m.fatbin}: no {kind} image for {arch}:\n{images}")
        ptx = toolchain.extract_ptx(fatbin)
        try:
            _, reports = toolchain.ptxas(ptx, arch, [k["name"] for k in m.kernels])
        except toolchain.ToolchainError as e:
            problems.append(f"{m.fatbin}: {e}")
            continue
        sass = toolchain.sass(fatbin)
        expect = ["SYNCS", "UTMALDG"] if "cp.async.bulk.tensor.2d.shared" in ptx else []
        if rec.mma_ptx in ptx:
            expect.append(rec.mma_sass)
        problems += [f"{m.fatbin}: no {x} in the SASS" for x in expect if x not in sass]
        problems += [f"{m.fatbin}: {x} in {arch} SASS" for x in others if x in sass]
        for k in m.kernels:
            r = reports[k["name"]]
            if r.registers != k["registers"]:
                problems.append(
                    f"{k['name']}: {r.registers} registers, manifest says {k['registers']}"
                )
            if k["dynamic_smem"] > rec.smem_limit:
                problems.append(
                    f"{k['name']}: {k['dynamic_smem']} B of shared memory > {rec.smem_limit}"
                )
    return problems
