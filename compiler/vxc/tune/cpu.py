"""cpu: the measured run time of each candidate on the tuning shapes.

Each survivor is built by `vxc.compile` (the artifact `vxc build` writes, for the `--arch`
CPU level, default native) and called on the same seeded random inputs. After one warm-up
call each (a build or call that fails is the candidate's reason for no score), the
candidates run in turn, `runs` rounds of one call each (interleaved, so a slow spell of
a shared machine falls on all of them), on one thread; a candidate's
score is its fastest call in microseconds, rounded to 3 significant digits. Scores within
TIE of the best are a tie, and a tie goes to the first candidate in the space's order: a
measured choice repeats across runs of the tuner where the machine does, never exactly.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

from vxc.errors import CompileError
from vxc.tune import Method, Request, Score, Survivor

TIE = 0.02  # relative: measured times closer than this are not told apart
SEED = 0


def _inputs(kernel: Any, survivor: Survivor) -> dict[str, Any]:
    """Seeded random arrays and the scalars for one call (shape parameters inferred)."""
    import numpy as np

    from vxc.runtime import numpy_dtype

    rng = np.random.default_rng(SEED)
    launch = survivor.launch
    named: dict[str, Any] = {}
    for p in kernel.spec["params"]:  # the cpu manifest's, as its runtime binds them
        name = p["name"]
        if p["kind"] == "tensor":
            dims = p.get("dims") or [""] * len(p["shape"])  # a static shape names none
            shape = [launch.sizes[d] if d else s for s, d in zip(p["shape"], dims, strict=True)]
            dtype = numpy_dtype(p["dtype"], name)
            if p["const"]:
                named[name] = rng.standard_normal(shape).astype(dtype)
            else:
                named[name] = np.zeros(shape, dtype)
        elif p["kind"] == "scalar" and name not in kernel.shape_params():
            named[name] = _scalar(p["dtype"], name, launch)
    return named


def _scalar(dtype: str, name: str, launch) -> Any:
    if name in launch.sizes:
        return launch.sizes[name]
    if dtype == "i1":
        return bool(launch.scalars.get(name, 0))
    return launch.scalars.get(name, 1.0)


def _call(request: Request, s: Survivor) -> Callable[[], Any] | str:
    """One call of the survivor's built kernel on its inputs, run once (a build or a run
    that fails is why it has no score, said in one line)."""
    import vxc
    from vxc.runtime import ArgumentError, KernelError

    try:
        kernel = vxc.compile(
            request.source.data.decode(),
            "cpu",
            s.consts,
            filename=request.source.path,
            tune=False,
            cpu=request.arch,
        )
        args = _inputs(kernel, s)

        def call() -> Any:
            return kernel.launch(instances=s.launch.instances, threads=1, **args)

        call()  # the warm-up: the loader, page faults, caches
    except CompileError as e:
        first = next(d for d in e.diagnostics if d.severity == "error")
        return f"the build failed: {first.code} {first.message}"
    except (ArgumentError, KernelError) as e:
        return f"the call at the tuning shapes failed: {e}"
    return call


def score(request: Request, survivors: list[Survivor]) -> list[Score | str]:
    calls = [_call(request, s) for s in survivors]
    best = [float("inf")] * len(calls)
    for _ in range(request.runs):
        for i, call in enumerate(calls):
            if not isinstance(call, str):
                t0 = time.perf_counter()
                call()
                best[i] = min(best[i], time.perf_counter() - t0)
    us = [b * 1e6 for b in best]
    fastest = min((u for u, c in zip(us, calls, strict=True) if not isinstance(c, str)),
                  default=0.0)  # fmt: skip
    return [
        c if isinstance(c, str) else Score(_ties(u, fastest), {"measured_us": _sig3(u)})
        for u, c in zip(us, calls, strict=True)
    ]


def _ties(us: float, fastest: float) -> float:
    """The rounded score; one within TIE of the fastest scores as the fastest."""
    return _sig3(fastest if us <= fastest * (1 + TIE) else us)


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


def inputs(request: Request) -> dict:
    return {"runs": request.runs, "host": platform.machine(), "cores": os.cpu_count()}


METHOD = Method(
    "us",
    "measured: the fastest of `runs` interleaved calls on one thread at the tuning shapes, "
    f"in microseconds to 3 significant digits; within {TIE:.0%} of the fastest is a tie, "
    "won by the first candidate in the space's order",
    score,
    inputs,
)
