"""b200 / h100: a model, not a measurement (this machine has no GPU; the table says so).

Each survivor is built (`api.build`: PTX, ptxas, the fatbin and its manifest), and its
manifest gives what ptxas allocated: registers per thread, the block's threads and the
dynamic shared memory per CTA. From them, CTAs resident per SM = the least of what the
shared memory (`smem_limit`), the register file (REGS_PER_SM), the threads
(THREADS_PER_SM) and the CTA slots (CTAS_PER_SM) allow. The plan's cost report (vxc
report: bytes across each edge and FLOPs of the launch at the tuning shapes) gives the
roofline bound max(FLOPs / peak, bytes / bandwidth) of the machine model, which assumes
the work spread over every SM. The model: the busiest SM runs ceil(instances / SMs) CTAs
at its share of that bound, slowed by the share of WARPS_TO_HIDE warps the resident CTAs
give it (occupancy: fewer warps hide less latency). Microseconds, 3 significant digits;
exact (same inputs, same table); ties go to the first candidate in the space's order. Not
modelled: latency hiding beyond occupancy, the MMA's issue rate, bank conflicts.
"""

from __future__ import annotations

import json
import math

from vxc import api
from vxc.report import ReportError, kernel_reports
from vxc.targets import TARGETS
from vxc.tune import Method, Request, Score, Survivor, package_version

REGS_PER_SM = 65536  # 32-bit registers per SM, sm_90 and sm_100
THREADS_PER_SM = 2048
CTAS_PER_SM = 32
# Resident warps per SM the model takes to hide memory and pipeline latency (two per SM
# sub-partition); fewer run at that share of the roofline. An assumption, not a figure
# measured here.
WARPS_TO_HIDE = 8


def _resources(survivor: Survivor, target: str) -> dict | str:
    """The kernel's manifest entry (ptxas's registers, block, shared memory), or why not."""
    from vxc.ir.from_hir import symbol  # the instance's name in artifacts: `rows__128`

    built = api.build(survivor.checked.analysis, target, "artifact")
    if not built.ok:
        first = next(d for d in built.diagnostics if d.severity == "error")
        return f"the build failed: {first.code} {first.message}"
    manifest = next(v for k, v in built.outputs.items() if k.endswith(f".{target}.json"))
    kernels = json.loads(manifest)["kernels"]
    return next(k for k in kernels if k["name"] == symbol(survivor.launch.kernel))


def _occupancy(k: dict, target: str) -> int:
    threads = math.prod(k["block"])
    by_smem = TARGETS[target].arch.smem_limit // max(k.get("dynamic_smem", 0), 1)
    by_regs = REGS_PER_SM // max(k["registers"] * threads, 1)
    return max(0, min(by_smem, by_regs, THREADS_PER_SM // threads, CTAS_PER_SM))


def _bound_s(survivor: Survivor) -> float | None:

    launch = survivor.launch
    checked = survivor.checked
    reports = kernel_reports(
        checked.plan, checked.analysis.program.functions, launch.sizes, launch.instances
    )
    return next(r.seconds for r in reports if r.kernel == launch.kernel)


def _one(request: Request, survivor: Survivor) -> Score | str:
    k = _resources(survivor, request.target)
    if isinstance(k, str):
        return k
    per_sm = _occupancy(k, request.target)
    if per_sm < 1:
        return "no CTA fits on an SM (registers or shared memory)"
    try:
        bound = _bound_s(survivor)
    except ReportError as e:
        return f"the cost report cannot count it: {e}"
    if bound is None:
        return "the machine model declares no peak or no bandwidth: no roofline bound"
    sms = TARGETS[request.target].arch.sms
    instances = max(survivor.launch.instances, 1)
    per_sm_ctas = math.ceil(instances / sms)  # the busiest SM's share of the launch
    resident = min(per_sm, per_sm_ctas) * math.ceil(math.prod(k["block"]) / 32)
    hidden = min(1.0, resident / WARPS_TO_HIDE)
    modelled = per_sm_ctas * bound * sms / instances / hidden
    detail = {
        "registers": k["registers"],
        "threads": math.prod(k["block"]),
        "dynamic_smem": k.get("dynamic_smem", 0),
        "ctas_per_sm": per_sm,
        "resident_warps": resident,
        "roofline_us": _sig3(bound * 1e6),
    }
    return Score(_sig3(modelled * 1e6), detail)


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


def score(request: Request, survivors: list[Survivor]) -> list[Score | str]:
    return [_one(request, s) for s in survivors]


def inputs(request: Request) -> dict:
    return {
        "model": "occupancy x roofline (vxc/tune/nvidia.py)",
        "sm": request.arch,
        "ptxas": package_version("nvidia-cuda-nvcc"),
    }


METHOD = Method(
    "model_us",
    "a model, not a measurement: the roofline bound of the plan's bytes and FLOPs at the "
    "tuning shapes for the busiest SM's CTAs, over the share of 8 warps its resident CTAs "
    "give it (CTAs per SM from ptxas's registers and the shared memory); ties go to the "
    "first candidate in the space's order",
    score,
    inputs,
)
