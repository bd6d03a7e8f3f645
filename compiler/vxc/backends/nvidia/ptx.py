"""A small typed PTX builder: registers, labels, parameters and instructions as objects.

The lowering never concatenates PTX text; it calls `Kernel.ins(opcode, *operands)`
with typed operands (`Reg`, `Imm`, `Addr`, `Vec`, `Sym`, `Label`) and the kernel
prints itself once. Registers are declared per class, numbered in creation order,
so the text is deterministic. An instruction family that only one architecture has
(`wgmma.*` on sm_90a, `tcgen05.*` on sm_100a) is refused for the other one here,
before ptxas sees it (`PtxError`): the per-arch parts cannot leak across.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

PTX_VERSION = "8.7"

# Register classes: PTX type -> (register prefix, declaration type).
_CLASSES = {
    "pred": ("%p", ".pred"),
    "b16": ("%h", ".b16"),
    "b32": ("%r", ".b32"),
    "b64": ("%rd", ".b64"),
    "f32": ("%f", ".f32"),
}

# Instruction families that exist on one architecture only.
ARCH_ONLY = {
    "wgmma.": "sm_90a",
    "tcgen05.": "sm_100a",
}


class PtxError(ValueError):
    """An instruction the target architecture does not have, or a malformed operand."""


@dataclass(frozen=True)
class Reg:
    name: str
    cls: str  # key of _CLASSES

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Imm:
    value: int | float

    def __str__(self) -> str:
        if isinstance(self.value, float):
            # PTX hex float (0f...): exact and locale-free.
            bits = struct.unpack("<I", struct.pack("<f", self.value))[0]
            return f"0f{bits:08X}"
        return str(self.value)


@dataclass(frozen=True)
class Sym:
    """A named symbol: a kernel parameter or the shared-memory array."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Label:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Addr:
    """`[base+offset]` or, with coords, `[base, {c0, c1}]` (a tensor-map address)."""

    base: Reg | Sym
    offset: int = 0
    coords: tuple[Reg | Imm, ...] = ()

    def __str__(self) -> str:
        if self.coords:
            return f"[{self.base}, {{{', '.join(str(c) for c in self.coords)}}}]"
        if self.offset:
            return f"[{self.base}+{self.offset}]"
        return f"[{self.base}]"


@dataclass(frozen=True)
class Vec:
    items: tuple[Reg | Imm, ...]

    def __str__(self) -> str:
        return "{" + ", ".join(str(r) for r in self.items) + "}"


class Sink:
    """The `_` operand (a discarded result)."""

    def __str__(self) -> str:
        return "_"


SINK = Sink()
Operand = Reg | Imm | Sym | Label | Addr | Vec | Sink


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "u64" | "tensormap"

    def decl(self) -> str:
        if self.kind == "tensormap":
            # A CUtensorMap passed by value (__grid_constant__): 128 bytes, 64-aligned.
            return f".param .align 64 .b8 {self.name}[128]"
        return f".param .{self.kind} {self.name}"


@dataclass(frozen=True)
class _Ins:
    opcode: str
    operands: tuple[Operand, ...]
    pred: Reg | None
    negate: bool

    def text(self) -> str:
        guard = f"@{'!' if self.negate else ''}{self.pred} " if self.pred is not None else ""
        ops = ", ".join(str(o) for o in self.operands)
        return f"\t{guard}{self.opcode}{' ' + ops if ops else ''};"


@dataclass(frozen=True)
class _Place:
    label: Label

    def text(self) -> str:
        return f"{self.label}:"


@dataclass(frozen=True)
class _Comment:
    text_: str

    def text(self) -> str:
        return f"\t// {self.text_}"


@dataclass
class Kernel:
    """One `.entry`: parameters, registers and the instruction list."""

    name: str
    arch: str  # "sm_90a" | "sm_100a"
    max_threads: int
    params: list[Param] = field(default_factory=list)
    body: list = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    # `.minnctapersm`: the CTAs per SM ptxas may assume (None: its own occupancy target,
    # which on sm_100a can hold a kernel to 80 registers and spill)
    min_ctas: int | None = None

    def param(self, name: str, kind: str) -> Sym:
        if any(p.name == name for p in self.params):
            raise PtxError(f"parameter {name} declared twice")
        self.params.append(Param(name, kind))
        return Sym(name)

    def reg(self, cls: str) -> Reg:
        prefix, _ = _CLASSES[cls]
        n = self.counts.get(cls, 0)
        self.counts[cls] = n + 1
        return Reg(f"{prefix}{n}", cls)

    def regs(self, cls: str, n: int) -> list[Reg]:
        return [self.reg(cls) for _ in range(n)]

    def label(self, hint: str) -> Label:
        n = self.labels.get(hint, 0)
        self.labels[hint] = n + 1
        return Label(f"$L_{hint}_{n}")

    def place(self, label: Label) -> None:
        self.body.append(_Place(label))

    def comment(self, text: str) -> None:
        self.body.append(_Comment(text.replace("\n", " ")))

    def ins(
        self, opcode: str, *operands: Operand, pred: Reg | None = None, negate: bool = False
    ) -> None:
        for prefix, arch in ARCH_ONLY.items():
            if opcode.startswith(prefix) and self.arch != arch:
                raise PtxError(
                    f"`{opcode}` is an {arch} instruction; this kernel targets {self.arch}"
                )
        for o in operands:
            if not isinstance(o, Operand):
                raise PtxError(f"`{opcode}`: operand {o!r} is not a PTX operand")
        if pred is not None and pred.cls != "pred":
            raise PtxError(f"`{opcode}`: guard {pred} is not a predicate")
        self.body.append(_Ins(opcode, tuple(operands), pred, negate))

    # -- conveniences over `ins` ---------------------------------------------------

    def mov(self, cls: str, value: Operand) -> Reg:
        r = self.reg(cls)
        self.ins(f"mov.{_bits(cls)}", r, value)
        return r

    def bra(self, label: Label, pred: Reg | None = None, negate: bool = False) -> None:
        self.ins("bra.uni" if pred is None else "bra", label, pred=pred, negate=negate)

    def setp(self, cmp: str, ty: str, a: Operand, b: Operand) -> Reg:
        p = self.reg("pred")
        self.ins(f"setp.{cmp}.{ty}", p, a, b)
        return p

    def text(self) -> str:
        lines = [f".visible .entry {self.name}("]
        lines.append(",\n".join(f"\t{p.decl()}" for p in self.params))
        lines.append(")")
        lines.append(f".maxntid {self.max_threads}, 1, 1")
        if self.min_ctas is not None:
            lines.append(f".minnctapersm {self.min_ctas}")
        lines.append("{")
        for cls, (prefix, decl) in _CLASSES.items():
            if self.counts.get(cls):
                lines.append(f"\t.reg {decl} {prefix}<{self.counts[cls]}>;")
        lines += [item.text() for item in self.body]
        lines.append("\tret;")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _bits(cls: str) -> str:
    return {"pred": "pred", "b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32"}[cls]


@dataclass
class Module:
    arch: str
    kernels: list[Kernel] = field(default_factory=list)
    shared_symbol: str = "vx_smem"

    def text(self) -> str:
        head = [
            "//",
            "// Generated by vxc (the Vx compiler); do not edit.",
            "//",
            f".version {PTX_VERSION}",
            f".target {self.arch}",
            ".address_size 64",
            "",
            # Dynamic shared memory; the kernels align their own base to 1024 bytes
            # (the 128-byte swizzle's atom) at run time.
            f".extern .shared .align 1024 .b8 {self.shared_symbol}[];",
            "",
        ]
        return "\n".join(head) + "\n".join(k.text() for k in self.kernels)
