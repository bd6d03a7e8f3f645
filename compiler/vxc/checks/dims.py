"""Tensor dimensions against the target's index type (E0406), before any backend runs.

A target whose table entry has `index_bits` below 64 (vxc/targets.py; the TPU's 32-bit
scalar unit, which computes every index, shape and grid value) cannot hold a dimension
past its largest signed value: the TPU's export takes the shapes as int32. A tensor type
with such a literal dimension (a parameter's, a result's, a local's) is E0406 where the
type is written, at check time, so `vxc check` says what `vxc build` would refuse.
A dimension that a shape parameter gives is a value of the launch, checked then.
"""

from __future__ import annotations

from collections.abc import Iterable

from vxc.diagnostics import DiagnosticSink, Span
from vxc.hir import types as T
from vxc.hir.program import Function


def check_dims(
    functions: Iterable[Function], target: str, index_bits: int, sink: DiagnosticSink
) -> None:
    """Each written type once, however many instances of its function there are."""
    top = (1 << (index_bits - 1)) - 1
    typed: list[tuple[T.Type, Span]] = []
    for fn in functions:
        param_spans = {p.vid: p.type.span for p in fn.decl.params}
        for v in fn.vars.values():
            typed.append((v.ty, param_spans.get(v.vid, v.span)))
        if fn.decl.ret is not None:
            typed.append((fn.ret, fn.decl.ret.span))
    seen: set[tuple] = set()
    for ty, span in typed:
        t = _tensor(ty)
        big = next((d for d in t.dims if isinstance(d, int) and d > top), None) if t else None
        key = (span.file, span.line, span.column)
        if big is None or key in seen:
            continue
        seen.add(key)
        shape = f"Tensor<{t.elem}, [{', '.join(str(d) for d in t.dims)}]>"
        sink.emit(
            "E0406",
            f"`{shape}` has a dimension of {big}, past the {target} target's {index_bits}-bit "
            f"index type (at most {top})",
            span,
            notes=[f"{target} computes every index, shape and grid value in {index_bits} bits"],
            help="split the tensor into parts of at most that many elements per dimension "
            "(a `Vec` of them), or build for a target with 64-bit indices",
        )


def _tensor(ty: T.Type | None) -> T.TensorT | None:
    while True:
        ty = T.deref(ty) if ty is not None else None
        if isinstance(ty, T.VecT):
            ty = ty.elem
        elif isinstance(ty, T.TokenT):
            ty = ty.inner
        else:
            return ty if isinstance(ty, T.TensorT) else None
