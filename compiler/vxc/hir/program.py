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
    # A kernel entry: a function with a body that no other function calls, launched as N
    # instances (LANGUAGE.md 4.1). Set once by the type checker; the IR and the checks read it.
    entry: bool = False

    @property
    def is_extern(self) -> bool:
        return self.decl.body is None

    @property
    def is_template(self) -> bool:
        """A const-generic function as written: only its instances are code."""
        return self.generic_of is None and bool(self.decl.const_params)

    @property
    def has_code(self) -> bool:
        """A function instance that is code: not an extern, typechecked, not a template
        (what the plan, ownership and the IR lower)."""
        return not self.is_extern and self.ok and not self.is_template


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
