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
from vxc.backends.nvidia.lower import ARCH, MAX_DYNAMIC_SMEM
from vxc.backends.nvidia.manifest import Manifest

OTHER_MMA = {"sm_90a": "UTCHMMA", "sm_100a": "HGMMA"}
MMA_PTX = {"sm_90a": "wgmma.mma_async", "sm_100a": "tcgen05.mma"}


def check_artifact(directory: str | Path, target: str) -> list[str]:
    d = Path(directory)
    arch = ARCH[target]
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
        if MMA_PTX[arch] in ptx:
            expect.append(toolchain.EXPECTED_SASS[arch][2])
        problems += [f"{m.fatbin}: no {x} in the SASS" for x in expect if x not in sass]
        if OTHER_MMA[arch] in sass:
            problems.append(f"{m.fatbin}: {OTHER_MMA[arch]} in {arch} SASS")
        for k in m.kernels:
            r = reports[k["name"]]
            if r.registers != k["registers"]:
                problems.append(
                    f"{k['name']}: {r.registers} registers, manifest says {k['registers']}"
                )
            if k["dynamic_smem"] > MAX_DYNAMIC_SMEM:
                problems.append(
                    f"{k['name']}: {k['dynamic_smem']} B of shared memory > {MAX_DYNAMIC_SMEM}"
                )
    return problems
