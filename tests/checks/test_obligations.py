"""The lazy-z3 gate (checks/obligations.py) never hides a diagnostic: for every golden
case, kernel and fuzz reproducer, on every target, a function the gate lets skip the
seam checker gets no diagnostic from it when it runs anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

from vxc import api
from vxc.checks.obligations import needs_proof
from vxc.checks.seams import check_seams
from vxc.checks.solver import Solver
from vxc.diagnostics import DiagnosticSink

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    [*ROOT.glob("kernels/*.vx"), *ROOT.glob("tests/golden/cases/*.vx"),
     *ROOT.glob("tests/fuzz/**/*.vx")]
)  # fmt: skip


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_skipped_functions_have_nothing_to_prove(path):
    analysis = api.analyze([api.Source(path.name, path.read_bytes())])
    if not analysis.checkable:
        return
    fns = analysis.program.functions
    for target in ("cpu", "tpu", "b200", "h100"):
        checked = api.check_target(analysis, target)
        for name, placed in checked.plan.functions.items():
            if needs_proof(fns[name], placed, fns):
                continue
            sink = DiagnosticSink()
            check_seams(fns[name], checked.machine, fns, placed, Solver(), sink)
            assert sink.items == [], (target, name, [d.message for d in sink.items])
