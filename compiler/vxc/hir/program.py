"""The checked program: typed, resolved function instances (a helper once per tuple of
its arguments' spaces and const-generic values), each with its own HIR tree (hir/nodes.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.diagnostics import Span
from vxc.frontend import ast as A
from vxc.hir import nodes as H
from vxc.hir.types import Type


@dataclass
class Var:
    vid: int
    name: str
    ty: Type
    mutable: bool
    span: Span  # where it is bound (E6011 points here)
    kind: str  # "let" | "param" | "for"


@dataclass
class Function:
    name: str  # instance name: `scale<128>` for a const-generic instance
    decl: H.FnDecl  # this instance's own HIR tree (const parameters substituted)
    params: list[Var]
    ret: Type
    topology: str | None
    home: str  # memory space of its arguments
    vars: dict[int, Var] = field(default_factory=dict)
    ok: bool = True  # typechecked without errors (later passes skip failed bodies)
    generic_of: str | None = None

    @property
    def is_extern(self) -> bool:
        return self.decl.body is None


@dataclass
class Program:
    functions: dict[str, Function]
    decls: list[A.Node]  # Memory/Topology declarations from the sources, in order


@dataclass
class CheckedHir:
    """What the .vxhir cache holds: the program and the diagnostics of the front half."""

    program: Program | None
    diagnostics: list
    machine_decls: list[A.Node]


def called_functions(functions: dict[str, Function]) -> set[str]:
    """Names of the function instances some other function calls: helpers. The others
    with a body are kernel entries (the IR's `vx.launch`, a row of `vxc report`)."""
    return {
        c.callee
        for fn in functions.values()
        for c in H.walk_calls(fn.decl.body)
        if c.callee != fn.name
    }
