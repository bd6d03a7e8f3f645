"""The b200 / h100 interpreter `Way` (vxc.backends.Runner): the fatbin's PTX in vxc's
simulator of one CTA per instance on numpy arrays anywhere (`ptxsim.py`, with
`interpret=True`; small shapes: it runs thread by thread). On a GPU the kernel runs
through cuda-python (`runtime.CudaArtifact`, the `vxc.backends.Loaded` way). Both bind
the instance count at launch (one CTA each)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vxc.backends import RunnableKernel, check_instances, one_result


@dataclass(frozen=True)
class Simulator:
    def call(self, kernel: RunnableKernel, named: dict[str, Any]) -> Any:
        return one_result([r[0] for r in simulate(kernel, kernel.ordered(named), 1)])

    def launch(
        self, kernel: RunnableKernel, named: dict[str, Any], instances: int, threads: int
    ) -> Any:
        check_instances(kernel.name, instances)
        return one_result(simulate(kernel, kernel.ordered(named), instances))


SIMULATOR = Simulator()


def simulate(kernel: RunnableKernel, arrays: list[Any], instances: int) -> list[np.ndarray]:
    """`instances` CTAs in the PTX simulator: results stacked over the instances; a status
    the kernel sets is a `LaunchError`, as the cpu launcher reports it."""
    from vxc.backends.nvidia import ptxsim, toolchain
    from vxc.runtime import LaunchError

    arrays = [np.asarray(a) for a in arrays]
    fatbin = (kernel.manifest_path.parent / kernel.manifest["fatbin"]).read_bytes()
    try:
        return ptxsim.run_kernel(toolchain.extract_ptx(fatbin), kernel.spec, arrays, instances)
    except ptxsim.StatusError as e:
        code = {v: k for k, v in kernel.spec["status"].items()}.get(e.status, "status")
        where = " and ".join(kernel.spec["requires"])
        raise LaunchError(kernel.name, e.status, code, f" (where {where})") from None
