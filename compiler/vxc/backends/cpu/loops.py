"""Counted loops with loop-carried values for llvmlite builders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir as ll

I64 = ll.IntType(64)

Body = Callable[[ll.Value, list[ll.Value]], Sequence[ll.Value]]


def counted_loop(
    b: ll.IRBuilder,
    lo: ll.Value,
    hi: ll.Value,
    step: ll.Value,
    body: Body,
    carried: Sequence[ll.Value] = (),
    name: str = "loop",
) -> list[ll.Value]:
    """for (iv = lo; iv < hi; iv += step) carried = body(iv, carried); signed compare.

    Returns the carried values after the loop; the builder ends in the exit block.
    """
    pre = b.block
    header = b.append_basic_block(f"{name}.head")
    entry = b.append_basic_block(f"{name}.body")
    exit_ = b.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lo.type, name=f"{name}.iv")
    phis = [b.phi(v.type) for v in carried]
    b.cbranch(b.icmp_signed("<", iv, hi), entry, exit_)
    b.position_at_end(entry)
    updated = list(body(iv, list(phis)))
    nxt = b.add(iv, step, flags=["nsw"])
    latch = b.block
    b.branch(header)
    iv.add_incoming(lo, pre)
    iv.add_incoming(nxt, latch)
    for phi, init, new in zip(phis, carried, updated, strict=True):
        phi.add_incoming(init, pre)
        phi.add_incoming(new, latch)
    b.position_at_end(exit_)
    return list(phis)


@dataclass
class Mem:
    """A lowered tensor: data pointer plus one i64 per dimension."""

    ptr: ll.Value
    dims: list[ll.Value]
