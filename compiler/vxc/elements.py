"""The element (scalar) types, defined once.

Each row names a Vx scalar type as the language spells it, its vx-IR (MLIR) spelling,
its size and its C type. The type checker (hir/types.py), the HIR -> vx lowering, the
IR helpers (ir/types.py) and the CPU backend's C ABI (backends/cpu/abi.py) all derive
their maps from this table; nothing here imports jaxlib.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Element:
    name: str  # Vx spelling (`u8`, `bool`)
    mlir: str  # vx IR spelling (`ui8`, `i1`)
    bytes: int
    c_type: str  # how the C ABI passes one (bool travels as a byte)
    kind: str  # "int" | "uint" | "float" | "bool"


ELEMENTS: tuple[Element, ...] = (
    Element("i8", "i8", 1, "int8_t", "int"),
    Element("i16", "i16", 2, "int16_t", "int"),
    Element("i32", "i32", 4, "int32_t", "int"),
    Element("i64", "i64", 8, "int64_t", "int"),
    Element("u8", "ui8", 1, "uint8_t", "uint"),
    Element("u16", "ui16", 2, "uint16_t", "uint"),
    Element("u32", "ui32", 4, "uint32_t", "uint"),
    Element("u64", "ui64", 8, "uint64_t", "uint"),
    Element("f16", "f16", 2, "uint16_t", "float"),
    Element("bf16", "bf16", 2, "uint16_t", "float"),
    Element("f32", "f32", 4, "float", "float"),
    Element("f64", "f64", 8, "double", "float"),
    Element("bool", "i1", 1, "uint8_t", "bool"),
)

BY_NAME: dict[str, Element] = {e.name: e for e in ELEMENTS}
BY_MLIR: dict[str, Element] = {e.mlir: e for e in ELEMENTS}
