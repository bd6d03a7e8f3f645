"""Semantic types. A tensor's placement (its memory space) is part of its type."""

from __future__ import annotations

from dataclasses import dataclass

from vxc.elements import ELEMENTS

# From the one element table (vxc/elements.py).
SCALARS = {e.name: e.bytes for e in ELEMENTS}
INTS = {e.name for e in ELEMENTS if e.kind in ("int", "uint")}
FLOATS = {e.name for e in ELEMENTS if e.kind == "float"}


@dataclass(frozen=True)
class Type:
    """Base of all semantic types; each subclass defines `show()` (the user-facing spelling)."""

    @property
    def movable(self) -> bool:
        """Move-only (tensors, vectors, tokens); everything else is copied."""
        return False


@dataclass(frozen=True)
class Scalar(Type):
    name: str

    def show(self) -> str:
        return self.name


@dataclass(frozen=True)
class Void(Type):
    def show(self) -> str:
        return "void"


@dataclass(frozen=True)
class SpaceT(Type):
    """The type of `Memory::X` and `Topology::X` paths (only valid as intrinsic arguments)."""

    kind: str

    def show(self) -> str:
        return self.kind


@dataclass(frozen=True)
class TensorT(Type):
    elem: str
    dims: tuple[int | str, ...]
    space: str

    def show(self) -> str:
        dims = ", ".join(str(d) for d in self.dims)
        return f"Tensor<{self.elem}, [{dims}]> @ {self.space}"

    @property
    def movable(self) -> bool:
        return True

    @property
    def static_bytes(self) -> int | None:
        if any(isinstance(d, str) for d in self.dims):
            return None
        n = SCALARS[self.elem]
        for d in self.dims:
            n *= d
        return n

    def shape_matches(self, other: Type) -> bool:
        return isinstance(other, TensorT) and self.elem == other.elem and self.dims == other.dims


@dataclass(frozen=True)
class VecT(Type):
    elem: Type
    space: str

    def show(self) -> str:
        return f"Vec<{_strip(self.elem)}> @ {self.space}"

    @property
    def movable(self) -> bool:
        return True


@dataclass(frozen=True)
class RefT(Type):
    mutable: bool
    inner: Type

    def show(self) -> str:
        return ("&mut " if self.mutable else "&") + self.inner.show()


@dataclass(frozen=True)
class TokenT(Type):
    """Receipt of an asynchronous transfer of `inner` (already placed in `space`); a store's
    token (`transfer_async(t, out[view])`) carries `void`: waiting it yields nothing."""

    inner: TensorT | Void
    space: str

    def show(self) -> str:
        return f"Token<{_strip(self.inner)}, Memory::{self.space}>"

    @property
    def movable(self) -> bool:
        return True


def _strip(t: Type) -> str:
    """A tensor type without its placement, as written inside Vec<> and Token<>."""
    if isinstance(t, TensorT):
        return f"Tensor<{t.elem}, [{', '.join(str(d) for d in t.dims)}]>"
    return t.show()


I64 = Scalar("i64")
I32 = Scalar("i32")
F32 = Scalar("f32")
BOOL = Scalar("bool")
VOID = Void()


def is_store_token(t: Type | None) -> bool:
    """The token of a store into an output (`Token<void, Memory::HBM>`)."""
    return isinstance(t, TokenT) and isinstance(t.inner, Void)


def deref(t: Type) -> Type:
    return t.inner if isinstance(t, RefT) else t


def int_range(name: str) -> tuple[int, int]:
    """The values of an integer type: `i8` is -128 ..= 127, `u8` is 0 ..= 255."""
    bits = 8 * SCALARS[name]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if name[0] == "i" else (0, (1 << bits) - 1)


def is_int(t: Type) -> bool:
    return isinstance(t, Scalar) and t.name in INTS


def is_float(t: Type) -> bool:
    return isinstance(t, Scalar) and t.name in FLOATS
