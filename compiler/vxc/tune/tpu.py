"""tpu: libtpu's compiled schedule of each candidate at the tuning shapes (no TPU needed).

Each survivor's Mosaic kernel is compiled ahead of time by libtpu for one chip of the
`--arch` topology (default v5e), at the tuning shapes, in a process of its own (libtpu
reads `LIBTPU_INIT_ARGS` once per process), with its final LLO dumped. The score is the
bundles one call executes (vxc/backends/tpu/schedule.py `executed`: every bundle times
the trips of the loops holding it, from their static exit tests; regions a forward
branch skips counted as run); the detail keeps the steady state (one iteration of the
innermost loop that runs most) and the fixed cost beyond it, as bench_tpu_schedule.py
reports them. A count of the schedule, not cycles; exact, so the same inputs give the
same table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from vxc.tune import Method, Request, Score, Survivor, package_version

CHILD_TIMEOUT_S = 600
TOPOLOGY_DEFAULT = "v5e"


def _symbol(size: str) -> str:
    """The export's dimension variable of a size: `tiles.len()` -> `tiles_len`."""
    return size[: -len(".len()")] + "_len" if size.endswith(".len()") else size


def _child_spec(request: Request, survivor: Survivor, directory: str) -> dict:
    path = Path(directory) / "source.vx"
    path.write_bytes(request.source.data)
    launch = survivor.launch
    return {
        "path": request.source.path,
        "file": str(path),
        "consts": survivor.consts,
        "topology": request.arch,
        "sizes": {_symbol(k): v for k, v in launch.sizes.items()},
        "instances": launch.instances if launch.instances > 1 else 0,
    }


def _one(request: Request, survivor: Survivor) -> Score | str:
    from vxc.backends.tpu.schedule import ScheduleError, dump_env, executed, kernel_llo

    with tempfile.TemporaryDirectory(prefix="vxc-tune-") as d:
        dump = Path(d) / "dump"
        spec = json.dumps(_child_spec(request, survivor, d))
        try:
            p = subprocess.run(
                [sys.executable, "-m", "vxc.tune.tpu", spec],
                env=dump_env(os.environ, dump),
                capture_output=True,
                text=True,
                timeout=CHILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"libtpu took more than {CHILD_TIMEOUT_S} s to compile it"
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
            return f"libtpu did not compile it for {request.arch}: {last[:300]}"
        try:
            s = executed(kernel_llo(dump))
        except ScheduleError as e:
            return f"its schedule cannot be counted: {e}"
    return Score(float(s.executed), {"steady": s.steady, "fixed": s.fixed, "trips": list(s.trips)})


def score(request: Request, survivors: list[Survivor]) -> list[Score | str]:
    return [_one(request, s) for s in survivors]


def inputs(request: Request) -> dict:
    return {"libtpu": package_version("libtpu"), "topology": request.arch}


METHOD = Method(
    "bundles",
    "libtpu's final schedule at the tuning shapes: bundles one call executes (each bundle "
    "times its loops' static trip counts; a region a forward branch skips counted as run); "
    "ties go to the first candidate in the space's order",
    score,
    inputs,
)


def _compile_in_child(spec: dict) -> None:
    """In the child: build the candidate's Mosaic kernel and compile it with libtpu."""
    from vxc import api
    from vxc.backends.tpu import mosaic_kernels
    from vxc.backends.tpu.aot import compile_export
    from vxc.backends.tpu.export import export_kernel

    src = api.Source(spec["path"], Path(spec["file"]).read_bytes())
    checked = api.check_target(api.analyze([src], consts=spec["consts"]), "tpu")
    (kernel,) = mosaic_kernels(api.backend_module(checked), spec["instances"])
    missing = [s for s in kernel.symbols if s not in spec["sizes"]]
    if missing:
        raise SystemExit(f"no tuning size for the export's dimension variables {missing}")
    sizes = {s: spec["sizes"][s] for s in kernel.symbols}
    compile_export(export_kernel(kernel), kernel, spec["topology"], sizes)


if __name__ == "__main__":
    _compile_in_child(json.loads(sys.argv[1]))
