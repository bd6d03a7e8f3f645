"""The target plan: every per-target fact about a program, computed once.

`plan_target` runs placement (plan/placement.py) over each function instance
that has a checked body: routes (over the topology the code runs on, a `spawn`'s
included), hops, scratchpad allocations and the attributes of every vx op, keyed
by HIR node. The seam checker asks the plan which hops a transfer crosses, the
HIR -> vx lowering (ir/from_hir.py) copies the op attributes from it, and the
backends read those attributes off the ops: no later stage routes or allocates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.diagnostics import DiagnosticSink
from vxc.hir import nodes as H
from vxc.hir.program import Function
from vxc.machines.model import Machine
from vxc.plan.placement import FnPlacement, NodePlacement, check_placement


@dataclass
class TargetPlan:
    """One target's plan: function instance name -> its placement."""

    target: str
    machine: Machine
    functions: dict[str, FnPlacement] = field(default_factory=dict)

    def node(self, fn: str, node: H.Expr) -> NodePlacement | None:
        """What `node` (a transfer, new tensor or call of instance `fn`) does here."""
        placed = self.functions.get(fn)
        return placed.nodes.get(node.nid) if placed is not None else None


def plan_target(
    target: str, functions: dict[str, Function], machine: Machine, sink: DiagnosticSink
) -> TargetPlan:
    plan = TargetPlan(target, machine)
    for name, fn in functions.items():
        if fn.has_code:
            plan.functions[name] = check_placement(fn, machine, functions, sink)
    return plan
