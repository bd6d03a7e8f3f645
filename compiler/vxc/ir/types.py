"""Type helpers for the vx IR contract.

A tensor placed in Vx space X is `memref<d0xd1xE, "X">`; a `Vec` of such tiles
is `memref<?xd0xd1xE, "X">`; a token is `!vx.token<memref<...>>` (opaque type
wrapping the placed tensor type it will yield).
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir

from vxc.elements import ELEMENTS

DYNAMIC = ir.ShapedType.get_dynamic_size()

# Bytes per element, by IR spelling (from the one element table, vxc/elements.py).
ELEMENT_BYTES = {e.mlir: e.bytes for e in ELEMENTS}


def memref_type(shape: Sequence[int | None], element: str, space: str) -> ir.MemRefType:
    """`memref<shape x element, "space">`; None in `shape` is a dynamic dimension."""
    dims = "x".join("?" if d is None else str(d) for d in shape)
    prefix = f"{dims}x" if dims else ""
    return ir.MemRefType(ir.Type.parse(f'memref<{prefix}{element}, "{space}">'))


def token_type(inner: ir.Type) -> ir.Type:
    """`!vx.token<inner>`: the receipt of an async transfer yielding `inner`."""
    return ir.Type.parse(f"!vx.token<{inner}>")


def is_token(t: ir.Type) -> bool:
    return (
        isinstance(t, ir.OpaqueType)
        and t.dialect_namespace == "vx"
        and t.data.startswith("token<")
        and t.data.endswith(">")
    )


def token_inner(t: ir.Type) -> ir.Type | None:
    """The placed memref type a token yields, or None if `t` is not a well-formed token."""
    if not is_token(t):
        return None
    try:
        inner = ir.Type.parse(t.data[len("token<") : -1], context=t.context)
    except Exception:  # noqa: BLE001 - any parse failure means a malformed token
        return None
    return ir.MemRefType(inner) if isinstance(inner, ir.MemRefType) else None


def as_memref(t: ir.Type) -> ir.MemRefType | None:
    return t if isinstance(t, ir.MemRefType) else None


def space_of(t: ir.Type) -> str | None:
    """The Vx memory space name of a memref type (its string memory space), else None."""
    if not isinstance(t, ir.MemRefType):
        return None
    ms = t.memory_space
    if ms is None or not isinstance(ms, ir.StringAttr):
        return None
    return ms.value


def element_name(t: ir.Type) -> str:
    return str(t)


def element_bytes(t: ir.Type) -> int | None:
    return ELEMENT_BYTES.get(str(t))


def static_bytes(t: ir.MemRefType) -> int | None:
    """Size in bytes of a statically shaped memref, None if any dim is dynamic."""
    eb = element_bytes(t.element_type)
    if eb is None or not t.has_static_shape:
        return None
    n = eb
    for d in t.shape:
        n *= d
    return n


def describe(t: ir.Type) -> str:
    return str(t)


def placed(t: ir.Type) -> ir.MemRefType | None:
    """The placed tensor type of a tensor or a token (what the token yields), else None."""
    inner = token_inner(t) if is_token(t) else t
    return inner if isinstance(inner, ir.MemRefType) else None


# -- functions: what every backend reads of a `func.func` -------------------------------


def sym_name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def arg_name(func: ir.Operation, i: int) -> str:
    """The Vx name of argument `i` (its `vx.name` argument attribute), else `arg{i}`."""
    if "arg_attrs" in func.attributes:
        attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
        if i < len(attrs):
            d = ir.DictAttr(attrs[i])
            if "vx.name" in d:
                return ir.StringAttr(d["vx.name"]).value
    return f"arg{i}"


def arg_dims(func: ir.Operation, i: int) -> tuple[str, ...]:
    """Per dimension of tensor argument `i`, the shape parameter naming its size ("" for
    none): its `vx.dims` argument attribute (LANGUAGE.md section 3), else ()."""
    if "arg_attrs" in func.attributes:
        attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
        if i < len(attrs):
            d = ir.DictAttr(attrs[i])
            if "vx.dims" in d:
                return tuple(ir.StringAttr(a).value for a in ir.ArrayAttr(d["vx.dims"]))
    return ()


def arg_is_mut(func: ir.Operation, i: int) -> bool:
    """Whether argument `i` is declared `&mut` (its `vx.mut` argument attribute)."""
    if "arg_attrs" in func.attributes:
        attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
        return i < len(attrs) and "vx.mut" in ir.DictAttr(attrs[i])
    return False


def is_private(func: ir.Operation) -> bool:
    """A helper: private visibility (kernel entries are public)."""
    vis = func.attributes["sym_visibility"] if "sym_visibility" in func.attributes else None
    return vis is not None and ir.StringAttr(vis).value == "private"


def has_body(func: ir.Operation) -> bool:
    """A definition (an `extern fn` is a declaration without one)."""
    return len(func.regions[0].blocks) > 0
