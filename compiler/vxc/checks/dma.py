"""Transfers against the target's DMA limits (E6012), before any backend runs.

A target whose table entry has `dma` (vxc/targets.py; the NVIDIA targets' TMA) moves
every tile between the two spaces named there in boxes: each tile dimension must be
at most `box_max` elements and a tile row (its innermost dimension) a multiple of
`row_multiple` bytes. A transfer whose tile breaks either limit is E6012 at the
transfer, naming the value and the limit.
"""

from __future__ import annotations

from vxc.diagnostics import DiagnosticSink
from vxc.elements import BY_NAME
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function
from vxc.plan.placement import FnPlacement
from vxc.targets import DmaLimits


def check_dma(fn: Function, placement: FnPlacement, dma: DmaLimits, sink: DiagnosticSink) -> None:
    for stmt in H.walk_stmts(fn.decl.body):
        for top in (x for x in vars(stmt).values() if isinstance(x, H.Expr)):
            for e in H.walk_expr(top):
                if isinstance(e, H.Transfer):
                    _transfer(e, placement, dma, sink)


def _transfer(e: H.Transfer, placement: FnPlacement, dma: DmaLimits, sink: DiagnosticSink) -> None:
    t = T.deref(e.src.ty) if e.src.ty is not None else None
    if isinstance(t, T.TokenT):
        t = t.inner
    if not isinstance(t, T.TensorT) or not t.dims:
        return
    node = placement.nodes.get(e.nid)
    hops = [h for h in (node.hops if node else []) if {h.src, h.dst} == set(dma.spaces)]
    if not hops or any(d.code == "E6009" and d.span == e.span for d in sink.items):
        return  # no DMA hop, or the tile does not fit at all (E6009 says so)
    shape = f"Tensor<{t.elem}, [{', '.join(str(d) for d in t.dims)}]>"
    route = f"{hops[0].src} -> {hops[0].dst}"
    for i, d in enumerate(t.dims):
        if isinstance(d, int) and d > dma.box_max:
            # One diagnostic per transfer: the first limit it breaks.
            sink.emit(
                "E6012",
                f"dimension {i} of `{shape}` is {d} elements; one {dma.engine} copy "
                f"({route}) moves at most {dma.box_max} per dimension",
                e.span,
                help=f"split the tile so each dimension is at most {dma.box_max}",
            )
            return
    inner = t.dims[-1]
    eb = BY_NAME[t.elem].bytes if t.elem in BY_NAME else None
    if isinstance(inner, int) and eb is not None and (inner * eb) % dma.row_multiple:
        sink.emit(
            "E6012",
            f"a row of `{shape}` is {inner * eb} bytes; a {dma.engine} copy ({route}) moves "
            f"rows that are a multiple of {dma.row_multiple} bytes",
            e.span,
            help=f"pad the innermost dimension to a multiple of {dma.row_multiple // eb} elements",
        )
