"""`vxc tune` (issue 33): choose a kernel's const values for one target, and say why.

The candidates are the product of the const parameters' candidate sets (`--space BK=64,128`;
every other const keeps its default). Each is checked in full by the call `vxc check`
makes (`api.check(..., lower=True)`: bounds, races, working sets, the backend's
refusals); a rejected one is recorded with its error codes and first message. The others
are scored with the target's own signal (`SCORERS`: cpu.py, tpu.py, nvidia.py), lower is
better, and the best is the table's entry for the target (vxc/tuning.py writes it). Ties
go to the first candidate in the space's order (each set in the order given, the first
parameter varying slowest), so the same scores give the same table.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from vxc import api
from vxc.targets import TARGETS
from vxc.tune.launch import Launch, LaunchError, launch_of


@dataclass(frozen=True)
class Request:
    source: api.Source
    target: str
    arch: str  # cpu: the --cpu level; tpu: the topology; b200/h100: the sm
    shapes: dict[str, float]
    space: dict[str, tuple[int, ...]]
    runs: int  # cpu: timed rounds


@dataclass(frozen=True)
class Survivor:
    """A candidate the checker accepted, with its launch at the tuning shapes."""

    consts: dict[str, int]
    checked: api.Checked
    launch: Launch


@dataclass(frozen=True)
class Score:
    value: float  # in the scorer's unit; lower is better
    detail: dict = field(default_factory=dict)  # the figures it came from


@dataclass(frozen=True)
class Method:
    unit: str
    text: str  # what was measured or modelled, and how ties and rounding go
    score: Callable[[Request, list[Survivor]], list[Score | str]]  # str: why unscored
    inputs: Callable[[Request], dict]  # what else the scores depend on (tool versions, runs)


def _scorers() -> dict[str, Method]:
    from vxc.tune import cpu, nvidia, tpu

    return {"cpu": cpu.METHOD, "tpu": tpu.METHOD, "nvidia": nvidia.METHOD}


def method_of(target: str) -> Method:
    return _scorers()[TARGETS[target].family]


@dataclass
class Outcome:
    consts: dict[str, int]
    status: str  # "rejected" | "unscored" | "scored"
    why: str = ""  # a rejection's first message, or why it has no score
    codes: list[str] = field(default_factory=list)
    score: Score | None = None
    launch: Launch | None = None  # a checked candidate's tuning launch

    def to_json(self) -> dict:
        out: dict = {"consts": self.consts, "status": self.status}
        if self.codes:
            out["codes"] = self.codes
        if self.why:
            out["why"] = self.why
        if self.launch is not None:
            out["launch"] = {"instances": self.launch.instances, "sizes": self.launch.sizes}
        if self.score is not None:
            out["score"] = self.score.value
            out["detail"] = self.score.detail
        return out


class TuneFailed(ValueError):
    """No candidate could be chosen; the outcomes say why each fell."""

    def __init__(self, message: str, outcomes: list[Outcome]):
        super().__init__(message)
        self.outcomes = outcomes


def package_version(name: str) -> str:
    """An installed distribution's version (a tool the scores depend on), for the table."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def candidates(space: dict[str, tuple[int, ...]]) -> list[dict[str, int]]:
    names = list(space)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*space.values())]


def check_candidate(request: Request, consts: dict[str, int]) -> Outcome | Survivor:
    checked = api.check([request.source], request.target, consts=consts, lower=True)
    errors = [d for d in checked.diagnostics if d.severity == "error"]
    if errors:
        codes = sorted({d.code for d in errors})
        return Outcome(consts, "rejected", errors[0].message, codes)
    try:
        return Survivor(consts, checked, launch_of(checked, request.shapes))
    except LaunchError as e:  # checked clean, but not callable at the tuning shapes
        return Outcome(consts, "unscored", str(e))


def run(request: Request) -> tuple[Outcome, list[Outcome]]:
    """The chosen candidate and every candidate's outcome, in the space's order."""
    if not request.space:
        raise LaunchError("nothing to tune: give the candidates with --space NAME=V1,V2,...")
    outcomes: list[Outcome] = []
    survivors: list[tuple[int, Survivor]] = []
    for consts in candidates(request.space):
        got = check_candidate(request, consts)
        if isinstance(got, Survivor):
            survivors.append((len(outcomes), got))
            outcomes.append(Outcome(consts, "scored", launch=got.launch))
        else:
            outcomes.append(got)
    if survivors:
        scores = method_of(request.target).score(request, [s for _, s in survivors])
        for (at, _), score in zip(survivors, scores, strict=True):
            if isinstance(score, str):
                outcomes[at].status, outcomes[at].why = "unscored", score
            else:
                outcomes[at].score = score
    scored = [o for o in outcomes if o.score is not None]
    if not scored:
        raise TuneFailed(f"no candidate of {len(outcomes)} could be scored", outcomes)
    best = min(scored, key=lambda o: o.score.value)  # the first of equals: the space's order
    return best, outcomes


def entry(request: Request, best: Outcome, outcomes: list[Outcome]) -> dict:
    """The table's entry for the target (vxc/tuning.py reads its `consts`)."""
    method = method_of(request.target)
    return {
        "arch": request.arch,
        "consts": best.consts,
        "score": {"value": best.score.value, "unit": method.unit, "method": method.text},
        "candidates": [o.to_json() for o in outcomes],
        "space": {k: list(v) for k, v in request.space.items()},
        "shapes": request.shapes,
        "inputs": {
            "source_sha256": hashlib.sha256(request.source.data).hexdigest(),
            "compiler": api.compiler_version(),
            **method.inputs(request),
        },
    }
