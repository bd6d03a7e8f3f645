"""Pausing Python's cyclic garbage collector where it only costs time.

The collector rescans every young object each few hundred allocations, and the objects
vxc makes while it parses, checks or lowers live on (the AST, the HIR, the modules and
classes it imports): a pass frees next to nothing. The parser pauses it while parsing
(a 1 MB source parsed 2.5x slower with it on); the CLI's one-shot commands pause it
for their whole run (issue 36: 25-35 ms of a cold `vxc check kernels/seed.vx`, half the
wall time of a 10 000-line check, with the same peak memory, on Zen 4)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off inside the block; on again after it if it was on before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
