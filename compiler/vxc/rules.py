"""Rule tables: the one way the lowerings register a function per key (as Pallas keeps
`lowering_rules[prim] = rule`). HIR -> vx registers by node class, the backends and the
TPU interpreter by op name; the backends' tables plug into one walk
(vxc/backends/walk.py), which also consults each backend's refusal table."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def registrar(table: dict) -> Callable[..., Callable[[F], F]]:
    """`rule = registrar(RULES)`; then `@rule("vx.wait", ...)` stores the function under
    each key and returns it unchanged."""

    def rule(*keys: Hashable) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for k in keys:
                table[k] = fn
            return fn

        return register

    return rule
