"""What a framework's call of a cpu kernel checks before it runs, shared by `to_jax()` and
`to_torch()`: the arguments bound to the kernel's parameters without its shape
parameters, each array's dtype, rank and static dimensions, each shape parameter read from
the arrays (and checked against every array that names it), and the `where` clauses the
shapes decide, with the instance count a clause `instances() == E` gives.

A framework supplies `_array`: its own array type checked with `_check_array`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vxc.frameworks import handler, where
from vxc.frameworks.handler import Layout
from vxc.runtime import ArgumentError, LaunchError, _dtype
from vxc.status import STATUS


def validate(kernel: Any, instances: int | None, threads: int, how: str) -> tuple[Layout, Any]:
    """The kernel's layout and the parsed `E` of its `instances() == E` (None: not given
    by the shapes), after the options are checked; `how` is the caller's name."""
    if kernel.target != "cpu":
        raise NotImplementedError(
            f"{how}() calls cpu kernels; a {kernel.target} kernel is not supported yet "
            "(docs/FRAMEWORKS.md)"
        )
    lay = handler.layout(kernel.spec)
    if not lay.mutable and not lay.results:
        raise ValueError(f"{kernel.name}: has no `&mut` tensor and no result: nothing to return")
    for what, v, low in (("instances", instances, 1), ("threads", threads, 0)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
            raise ValueError(f"{kernel.name}: {what} must be an integer >= {low}, got {v!r}")
    grid = where.instances_expr(list(kernel.spec.get("requires", [])), set(lay.shape_params))
    if instances is None and grid is None:
        raise TypeError(
            f"{kernel.name}: its `where` clause does not give instances() from the shapes "
            f"(no `instances() == E` over shape parameters); pass {how}(instances=N)"
        )
    return lay, grid


@dataclass
class Bound:
    """One call's arguments: arrays and scalars by parameter, shape parameters given."""

    values: dict[str, Any] = field(default_factory=dict)
    shapes: dict[str, int] = field(default_factory=dict)


@dataclass(eq=False)  # hashed by identity: jax.jit keys its cache by the function
class FrameworkCall:
    """A cpu kernel called from a framework (see the module docstring)."""

    name: str
    layout: Layout
    requires: list[str]
    instances: int | None
    threads: int
    grid: Any  # the parsed `E` of `instances() == E`, or None

    def _array(self, p: dict, value: Any) -> Any:
        raise NotImplementedError  # each framework's own array type

    def _bind(self, args: tuple, kwargs: dict, check: bool = True) -> Bound:
        """The arguments by parameter; `check`: each array through `_array` now."""
        names = [p["name"] for p in self.layout.operands]
        if len(args) > len(names):
            raise TypeError(f"{self!r} takes {len(names)} arguments, got {len(args)}")
        bound = Bound(dict(zip(names, args, strict=False)))
        for k, v in kwargs.items():
            if k in self.layout.shape_params:
                bound.shapes[k] = int(v)
            elif k not in names:
                raise TypeError(f"{self!r}: no parameter '{k}'")
            elif k in bound.values:
                raise TypeError(f"{self!r}: '{k}' given twice")
            else:
                bound.values[k] = v
        mutable = {p["name"] for p in self.layout.mutable}
        missing = [n for n in names if n not in bound.values and n not in mutable]
        if missing:
            raise TypeError(f"{self!r}: missing {missing}")
        for p in self.layout.params:
            if check and p["kind"] == "tensor" and p["name"] in bound.values:
                bound.values[p["name"]] = self._array(p, bound.values[p["name"]])
        return bound

    def _check_array(self, p: dict, shape: tuple, dtype: np.dtype | None) -> None:
        """`p`'s dtype (no casts: a wrong one is the caller's to fix, as in
        `Kernel.launch`; None: checked by the caller), rank and static dimensions."""
        who = f"{self.name}: argument '{p['name']}'"
        want = _dtype(p["dtype"], who)
        if dtype is not None and dtype != want:
            raise ArgumentError(f"{who} must have dtype {want}, got {dtype}")
        static = p["shape"]
        dims = p.get("dims") or [""] * len(static)
        shown = ", ".join(
            n or ("?" if d is None else str(d)) for n, d in zip(dims, static, strict=True)
        )
        if len(shape) != len(static) or any(
            d is not None and d != s for d, s in zip(static, shape, strict=True)
        ):
            raise ArgumentError(f"{who} must have shape ({shown}), got {tuple(shape)}")

    def _sizes(self, bound: Bound) -> dict[str, int]:
        """Each shape parameter's value, from the first array that names it; another
        array or a given value that disagrees is an ArgumentError naming both."""
        sizes: dict[str, int] = {}
        seen: dict[str, str] = {}
        for p in self.layout.params:
            a = bound.values.get(p["name"])
            if p["kind"] != "tensor" or a is None:
                continue
            for i, name in enumerate(p.get("dims", [])):
                if not name:
                    continue
                size = int(a.shape[i])
                here = f"argument '{p['name']}' dimension {i} (shape {tuple(a.shape)})"
                if name in sizes and sizes[name] != size:
                    raise ArgumentError(
                        f"{self.name}: shape parameter '{name}' is {sizes[name]} from "
                        f"{seen[name]} but {size} from {here}"
                    )
                sizes.setdefault(name, size)
                seen.setdefault(name, here)
        for name, given in bound.shapes.items():
            if name in sizes and sizes[name] != given:
                raise ArgumentError(
                    f"{self.name}: shape parameter '{name}' = {given} was given, but "
                    f"{seen[name]} makes it {sizes[name]}"
                )
            sizes.setdefault(name, given)
        missing = [s for s in self.layout.shape_params if s not in sizes]
        if missing:
            raise ArgumentError(
                f"{self.name}: shape parameter(s) {missing} are named only by `&mut` "
                "arguments left out: pass the array or the size by keyword"
            )
        return sizes

    def _count(self, sizes: dict[str, int], instances: int | None = None) -> int | None:
        """The instance count (`instances`, else the call's option, else the one the
        `where` clause gives), after the `where` clauses the shapes decide hold."""
        n = instances if instances is not None else self.instances
        if n is None and self.grid is not None:
            n = where.value(self.grid, sizes)
        # None: a grid the call does not know (a tpu export computes its own)
        bad = where.broken(self.requires, {**sizes, **({} if n is None else {where.INSTANCES: n})})
        if (n is not None and n < 1) or bad:
            values = ", ".join(f"{k} = {v}" for k, v in sizes.items())
            why = " and ".join(bad) if bad else "instances() >= 1"
            raise LaunchError(
                self.name,
                STATUS["VX_ERR_WHERE"],
                "VX_ERR_WHERE",
                f" (before the call: {why} is false for {values}, instances() = {n})",
            )
        return n

    def _shape(self, p: dict, sizes: dict[str, int]) -> tuple[int, ...]:
        dims = p.get("dims") or [""] * len(p["shape"])
        return tuple(
            d if d is not None else sizes[n] for d, n in zip(p["shape"], dims, strict=True)
        )
