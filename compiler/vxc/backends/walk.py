"""The one walk over a vx function body that every backend's rules plug into.

A backend subclasses `Walk` with its rule table (op name -> rule, as Pallas keeps
`lowering_rules[prim]`) and its refusal table (op name -> `RefusalEntry`). The walk
owns what every backend used to write again: the dispatch loop, the terminators
(`scf.yield` ends a block and hands its operands to the region's rule; `func.return`
is a rule and ends the block), and the location scope: a refusal raised while an op
is lowered (by its rule or any helper the rule calls) is placed at that op's source
span unless it already names a place, and `op_scope` lets a backend give the ops it
emits the vx op's location (the tpu backend does). An op with neither a rule nor a
refusal entry is refused as E7001; a test checks that every op of `OPS` has one or
the other on every backend.

A rule is called as `rule(ctx, op)` with a `RuleContext` (Pallas's narrow
`LoweringRuleContext`): it reaches only the members of the lowering that the backend
lists in `rule_surface` (value access, its emitter, the helpers rules share), not the
planning and driving internals; using anything else is an AttributeError that names
the member, so widening what rules may touch is a visible edit of one tuple.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import ClassVar

from jaxlib.mlir import ir

from vxc.backends import RefusalEntry
from vxc.errors import Refusal
from vxc.ir.loc import inlined_notes, span_of

Rule = Callable[["RuleContext", ir.Operation], None]


class RuleContext:
    """What a rule sees of the lowering: the members named by its `rule_surface`."""

    __slots__ = ("_lowering", "_surface")

    def __init__(self, lowering: Walk, surface: frozenset[str]):
        object.__setattr__(self, "_lowering", lowering)
        object.__setattr__(self, "_surface", surface)

    def __getattr__(self, name: str):
        if name in self._surface:
            return getattr(self._lowering, name)
        raise AttributeError(
            f"a {type(self._lowering).__module__} rule may not use `{name}`: it is not in "
            f"the rule surface of {type(self._lowering).__name__} (rule_surface)"
        )

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a rule may not set `{name}` on the lowering")


class Walk:
    rules: ClassVar[Mapping[str, Rule]] = {}
    refusals: ClassVar[Mapping[str, RefusalEntry]] = {}
    # How the refusal of an op without a rule reads (`{name}`: the op's name).
    no_rule: ClassVar[str] = "`{name}` has no lowering on this target"
    # The members of the lowering a rule may use (see RuleContext).
    rule_surface: ClassVar[frozenset[str]] = frozenset({"lower_block"})

    @cached_property
    def rule_context(self) -> RuleContext:
        return RuleContext(self, self.rule_surface | {"lower_block"})

    def lower_block(self, block: ir.Block) -> list[ir.Value] | None:
        """Lower `block`'s ops in order. Returns the operands of its `scf.yield` (the
        enclosing region's rule binds them), None when it ended in a `func.return`
        (whose rule ran), [] when it has no terminator of either kind."""
        for op in block.operations:
            op = op.operation
            if op.name == "scf.yield":
                return list(op.operands)
            self.lower_op(op)
            if op.name == "func.return":
                return None
        return []

    def lower_op(self, op: ir.Operation) -> None:
        try:
            rule = self.rule_for(op)
            with self.op_scope(op):
                rule(self.rule_context, op)
        except Refusal as e:
            raise e.at(span_of(op), inlined_notes(op)) from None

    def rule_for(self, op: ir.Operation) -> Rule:
        """The rule of `op`, or its refusal (raised)."""
        rule = self.rules.get(op.name)
        if rule is not None:
            return rule
        entry = self.refusals.get(op.name)
        if entry is not None:
            raise Refusal(entry.code, entry.text(op))
        fallback = self.fallback(op)
        if fallback is not None:
            return fallback
        raise Refusal("E7001", self.no_rule.format(name=op.name))

    def fallback(self, op: ir.Operation) -> Rule | None:
        """A rule for ops the table does not name (the cpu backend's `arith.*`)."""
        return None

    def op_scope(self, op: ir.Operation) -> contextlib.AbstractContextManager:
        """Entered around `op`'s rule: by default nothing."""
        return contextlib.nullcontext()


def refuse(code: str, op: ir.Operation | None, message: str, help: str | None = None) -> Refusal:
    """A refusal of `op` (placed at its source span when it has one)."""
    return Refusal(code, message, span_of(op), help, inlined_notes(op))
