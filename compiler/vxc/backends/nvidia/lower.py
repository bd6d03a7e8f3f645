"""vx module -> PTX kernels for sm_90a / sm_100a.

Lowering is a registry of rules keyed by op name (`RULES["vx.transfer"] = fn`) on the
shared walk (vxc/backends/walk.py); each rule reads its operands' lowered values and
emits through the typed PTX builder. What differs between sm_90a and sm_100a is read
from the target's `NvidiaArch` record, never from its name. A form the backend does
not lower is a coded refusal (`NvidiaError`, E70xx) at the op's span; any other
exception is a compiler bug and surfaces as one.

The kernel is one CTA per instance (`gridDim.x` = instances, `instance()` =
`blockIdx.x`) of 128 threads: one warpgroup, so wgmma has its issuing unit and the 4
warps cover TMEM's 128 lanes. The program runs in program order on every thread; one
elected thread (thread 0) issues the TMA copies and, on sm_100a, the tcgen05.mma;
every thread waits on the mbarriers. The Vx program already says what overlaps what
(a `transfer_async` is issued before the `wait` of the previous tile), so the
lowering keeps that order rather than re-deriving a producer/consumer split.

Shared memory (one dynamic allocation, its base rounded up to 1024 bytes at run
time): the allocator's rings at their offsets, then one 8-byte mbarrier per slot of
every ring a TMA writes (initialised once), one for the MMA (sm_100a), and the 4
bytes tcgen05.alloc writes the TMEM address to.

A token is the ring's issue counter at issue time: slot = count % slots, and the
phase parity of that slot's barrier is (count / slots) & 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from vxc.backends import RefusalEntry
from vxc.backends.nvidia import tiles, tma
from vxc.backends.nvidia.encoders import (
    MMA_TYPES,
    SWIZZLE_BYTES,
    TmaLimit,
    check_box,
    elem_bytes,
)
from vxc.backends.nvidia.mma import MMA, THREADS, Acc, Common, MmaError, Operand
from vxc.backends.nvidia.ptx import Addr, Imm, Kernel, Module, Reg, Sym
from vxc.backends.walk import Walk
from vxc.errors import Refusal
from vxc.ir import types as T
from vxc.ir.loc import inlined_notes, span_of
from vxc.ir.ops import MatmulAccOp, RequireOp, ZerosOp, ring_layout, view
from vxc.rules import registrar
from vxc.status import STATUS as CODES
from vxc.targets import NvidiaArch, Target

BARRIER_BYTES = 8
# The comment before each bar.sync of tile arithmetic (tests find the barrier by it).
BARRIER_NOTE = "tile barrier"
ALIGN = 1024  # the 128-byte swizzle repeats every 8 rows x 128 B

# The status word a kernel with `where` clauses writes (vxc/status.py's codes).
STATUS = {k: CODES[k] for k in ("VX_OK", "VX_ERR_WHERE")}


class NvidiaError(Refusal, ValueError):
    """A form the NVIDIA backends do not lower: a coded refusal saying what, at its span."""


def refuse(code: str, op: ir.Operation | None, message: str) -> NvidiaError:
    return NvidiaError(code, message, span_of(op), notes=inlined_notes(op))


# -- lowered values -------------------------------------------------------------------


@dataclass(frozen=True)
class Tile:
    """A shared-memory tile's static facts: its ring and layout."""

    ring: int
    rows: int
    cols: int
    dtype: str
    # "sw128": A operand (K-major); "sw128MN": a 16-bit B operand as TMA loads it (MN-major,
    # the MMA's transpose bit); "sw128T": a tf32 B operand, copied transposed (wgmma reads
    # tf32 K-major only); "rowmajor"
    layout: str
    offset: int
    slots: int
    slot_bytes: int

    @property
    def elem(self) -> int:
        return elem_bytes(self.dtype)

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.elem


# Element types of the tiles the backends move (their sizes: the element table).
# i1: bool tiles, one byte (0 or 1) an element in shared memory and through TMA (UINT8).
TILE_TYPES = frozenset({"f32", "bf16", "f16", "i32", "i1"})


@dataclass
class Scalar:
    reg: Reg


@dataclass
class Global:
    arg: int
    row: Reg | None  # first row of the 2-D view this tile starts at (None: row 0)


@dataclass
class EdgeFill:
    """What a load of an `edge` view with a fill other than zero does once it landed
    (LANGUAGE.md 4.2): the tensor map zero-fills the box past the tensor's end, so every
    element whose global coordinate is past it is set to `value` (a tiles.Const) by a
    select. `row`/`col`: the box's first element; the tensor's dims are kernel parameters."""

    arg: int
    row: Reg
    col: Reg
    value: tiles.Const


@dataclass
class View:
    """A region of a tensor argument (`vx.view`, or `vx.edge_view`, which may reach past
    the tensor's end: TMA zero-fills and clips there): its first row and column (32-bit,
    the TMA coordinates), no copy. `fill`: an edge view's fill other than zero."""

    arg: int
    row: Reg
    col: Reg
    fill: EdgeFill | None = None


@dataclass
class StoreToken:
    """A started TMA store (`vx.store_async`); its `vx.wait` waits for the bulk group."""

    index: int  # the output argument


@dataclass(frozen=True)
class Stored:
    """What `vx.wait` on a store token gives: the region, written."""

    index: int


@dataclass(frozen=True)
class VecArg:
    arg: int


@dataclass
class Smem:
    addr: Reg
    tile: Tile


@dataclass
class Token:
    count: Reg
    tile: Tile
    fill: EdgeFill | None = None  # applied at the wait (an edge view's non-zero fill)


@dataclass(frozen=True)
class Zero:
    tile: Tile


@dataclass(frozen=True)
class AccVal:
    acc: Acc = field(hash=False, compare=False)
    key: int = 0


@dataclass(frozen=True)
class Output:
    index: int


@dataclass
class Lazy:
    """A tile-arithmetic value not stored anywhere (tiles.py): an intermediate, or a
    result in the accumulator's space, computed where it is read. `reads` holds the
    version (FunctionLowering.versions) of each ring and accumulator it reads at
    creation: a write to one of them before the read is refused, never a stale value."""

    node: tiles.Node
    space: str
    reads: dict = field(default_factory=dict)


# -- the plan: what the whole function needs before the first instruction --------------


@dataclass
class TmaParam:
    """One tensor-map kernel parameter and what the runtime needs to encode it."""

    name: str
    sym: Sym
    source: str  # "arg" | "result"
    index: int  # argument or result number
    dtype: str
    tile: tuple[int, int]
    box: tuple[int, int]
    swizzle: str
    vec: bool
    whole: bool = False  # spans the whole argument as it is at launch (views, outputs)
    mut: bool = False  # a `&mut` argument the kernel stores into: copied back after

    def to_json(self, arg_names: list[str]) -> dict:
        d = {
            "name": self.name,
            "kind": "tensormap",
            "source": self.source,
            "index": self.index,
            "dtype": self.dtype,
            "tile": list(self.tile),
            "box": list(self.box),
            "swizzle": self.swizzle,
        }
        if self.source == "arg":
            d["arg"] = arg_names[self.index]
            d["arg_index"] = self.index
            d["vec"] = self.vec
            if self.whole:
                d["view"] = True
                d["mut"] = self.mut
        return d


def _dtype(m: ir.MemRefType) -> str:
    return str(m.element_type)


_REGION_OPS = ("vx.view", "vx.edge_view", "vx.store", "vx.store_async")
_VIEW_OPS = ("vx.view", "vx.edge_view")
# Ops whose tile operands every thread reads with ld.shared (tiles.py): a TMA load into
# such a ring waits at a bar.sync until each thread has read the slot's old tile.
_GENERIC_READERS = ("vx.binary", "vx.unary", "vx.reduce", "vx.cast", "vx.compare", "vx.select")
# A tensor map parameter's name: the argument's, then its layout's suffix.
_TMAP_SUFFIX = {"sw128": "", "sw128MN": "_mn", "rowmajor": "_rm"}


def _is_view(v: ir.Value) -> bool:
    return isinstance(v, ir.OpResult) and v.owner.name in ("vx.view", "vx.edge_view")


def _zero_fill(op: ir.Operation) -> bool:
    """An `edge` view whose fill is the constant zero (+0.0: its bits, which is what the
    tensor map's out-of-bounds fill writes; -0.0 is another value), or false."""
    fill = op.operands[1]
    if not (isinstance(fill, ir.OpResult) and fill.owner.name == "arith.constant"):
        return False
    value = fill.owner.attributes["value"]
    if isinstance(fill.type, ir.FloatType):
        return np.float64(ir.FloatAttr(value).value).tobytes() == bytes(8)
    return ir.IntegerAttr(value).value == 0


def _is_acc_vector(op: ir.Operation, arch: NvidiaArch) -> bool:
    """A VMEM -> ACC transfer of a tile other than a new one: a broadcast row or column
    (a bias) the epilogue reads, which gets a private shared-memory copy."""
    t = view(op)
    return (t.from_, t.space) == ("VMEM", arch.acc_space) and not (
        isinstance(op.operands[0], ir.OpResult) and op.operands[0].owner.name == "vx.zeros"
    )


def _tile_type(op: ir.Operation, t: ir.Type) -> ir.MemRefType:
    """`t` as a tile the backends move (2-D, static, an element type TMA copies), or a
    refusal naming `op`: every tile goes through here before its shape is read."""
    m = T.placed(t)
    if m is None or len(m.shape) != 2 or not m.has_static_shape:
        raise refuse("E7004", op, f"{op.name}: the NVIDIA backends move 2-D static tiles")
    if _dtype(m) not in TILE_TYPES:
        raise refuse("E7004", op, f"{op.name}: tiles of {_dtype(m)} are not supported")
    return m


class FunctionLowering(Walk):
    def __init__(
        self,
        func: ir.Operation,
        target: Target,
        kernel: Kernel,
        helpers: dict[str, ir.Operation] | None = None,
    ) -> None:
        self.func, self.k = func, kernel
        self.target = target.name  # for messages only: the arch record decides
        self.arch: NvidiaArch = target.arch
        self.helpers = helpers or {}
        self.name = T.sym_name(func)
        self.values: dict[ir.Value, object] = {}
        self.entry = func.regions[0].blocks[0]
        self.arg_names = [T.arg_name(func, i) for i in range(len(self.entry.arguments))]
        self.rings: dict[int, tuple[int, int, int]] = {}  # ring -> (offset, slots, slot_bytes)
        self.roles: dict[int, set[str]] = {}
        self.origin: dict[ir.Value, int] = {}
        self.tma_rings: list[int] = []
        self.tmaps: dict[tuple[str, int, str], TmaParam] = {}
        self.ptr_params: dict[int, Sym] = {}
        self.len_params: dict[int, Sym] = {}
        self.scalar_params: dict[int, Sym] = {}
        # Tensors an `edge` view with a non-zero fill reads: their dims are parameters
        # (the select compares each element's global coordinate with them).
        self.dim_params: dict[int, tuple[Sym, Sym] | None] = {}
        self.results: dict[ir.Value, int] = {}
        self.tmem_end = 0
        self.requires: list[str] = []  # the entry's `where` clauses (vx.require)
        self.counters: dict[int, Reg] = {}
        self.tmap_addr: dict[str, Reg] = {}
        self.store_groups: list[int] = []  # outputs of the TMA stores issued (the exit waits)
        # Private shared-memory buffers (after the tiles): reductions' f32 results and
        # broadcast vectors moved to the accumulator's space; op result -> (offset, bytes).
        self.private: dict[ir.Value, int] = {}
        self.private_bytes = 0
        self.versions: dict[tuple[str, int], int] = {}  # ("ring"|"acc", key) -> writes
        self.generic_read: set[int] = set()  # rings whose tiles the threads read (tiles.py)

    # -- planning ---------------------------------------------------------------------

    def collect(self, block: ir.Block, out: list[ir.Operation]) -> None:
        """The ops of `block` in program order (pre-order). Helpers were inlined before
        the backend (vxc/ir/passes/inline.py), so a call left is refused here, before planning."""
        for op in block.operations:
            op = op.operation
            out.append(op)
            if op.name == "func.call":
                raise refuse("E7002", op, _call_refusal(self, op))
            for region in op.regions:
                for b in region.blocks:
                    self.collect(b, out)

    def plan(self) -> None:
        ops: list[ir.Operation] = []
        self.collect(self.entry, ops)
        for op in ops:
            name = op.name
            lay = ring_layout(op) if name.startswith("vx.") else None
            if lay is not None:
                if lay.space == "VMEM" and lay.shared:
                    self.rings[lay.ring] = lay
                    for r in op.results:
                        self.origin[r] = lay.ring
                elif lay.space == "TMEM":
                    self.tmem_end = max(self.tmem_end, lay.end // 512)
            if name == "vx.wait" and op.operands[0] in self.origin:
                self.origin[op.results[0]] = self.origin[op.operands[0]]
            if name == "scf.for":
                body = op.regions[0].blocks[0]
                for i, init in enumerate(list(op.operands)[3:]):
                    if init in self.origin:
                        self.origin[body.arguments[i + 1]] = self.origin[init]
                        self.origin[op.results[i]] = self.origin[init]
            if name == "vx.require":
                self.requires.append(RequireOp(op).clause)
            if name == "vx.reduce" or (name == "vx.transfer" and _is_acc_vector(op, self.arch)):
                m = T.placed(op.results[0].type)
                elem = 4 if name == "vx.reduce" else elem_bytes(_dtype(m))
                self.private[op.results[0]] = self.private_bytes
                self.private_bytes += -(-m.shape[0] * m.shape[1] * elem // 16) * 16
            if name == "func.return" and op.parent.operation == self.func:
                for i, v in enumerate(op.operands):
                    self.results[v] = i
        for op in ops:
            if op.name == "vx.matmul_acc":
                b_role = "Bt" if "b" in MatmulAccOp(op).transpose else "B"
                for v, role in ((op.operands[1], "A"), (op.operands[2], b_role)):
                    # Bt: B read transposed (fold-transpose): the tile [N, K] is B^T,
                    # which the MMA reads K-major.
                    if v in self.origin:
                        self.roles.setdefault(self.origin[v], set()).add(role)
            if op.name in _GENERIC_READERS or (
                op.name == "vx.transfer" and _is_acc_vector(op, self.arch)
            ):
                self.generic_read.update(self.origin[v] for v in op.operands if v in self.origin)
            if op.name == "vx.edge_view" and not _zero_fill(op):
                # Every thread rewrites the landed tile's elements past the tensor's end:
                # the ring's next TMA load waits for them as for any generic reader.
                arg = self._root_arg(op.operands[0])
                if arg is not None:
                    self.dim_params[arg] = None
                for use in op.results[0].uses:
                    self.generic_read.update(
                        self.origin[r] for r in use.owner.results if r in self.origin
                    )
            if op.name == "vx.transfer" and op.operands[0] in self.origin:
                dst = view(op).space
                role = "store" if dst == "HBM" else "acc" if dst == self.arch.acc_space else "other"
                self.roles.setdefault(self.origin[op.operands[0]], set()).add(role)
        for ring, roles in sorted(self.roles.items()):
            mma = {"A", "B", "Bt"} & roles
            if ("B" in roles and roles & {"A", "Bt"}) or (mma and roles - mma - {"acc"}):
                raise refuse(
                    "E7005",
                    self.func,
                    f"{self.name}: a shared-memory ring (ring {ring}) is used as "
                    f"{' and '.join(sorted(roles))}; the NVIDIA backends give each ring one "
                    f"layout (A operand, B operand, or row-major)",
                )
        # Parameters, in argument order, then results.
        for op in ops:
            if op.name in ("vx.transfer", "vx.transfer_async"):
                self._plan_transfer(op)
            elif op.name in ("vx.store", "vx.store_async"):
                self._plan_store(op)
            if op.name in _REGION_OPS and ir.IntegerAttr(op.attributes["proved"]).value != 1:
                # The cpu checks such a region at run time; a TMA box outside its tensor
                # would be zero-filled or clipped without a word, so it is refused here.
                raise refuse(
                    "E7005",
                    op,
                    "a region the checker could not prove inside its tensor: the NVIDIA "
                    "backends take proved views and stores only (state the bounds in "
                    "`where`)",
                )
        for i, a in enumerate(self.entry.arguments):
            if isinstance(a.type, ir.MemRefType):
                m = ir.MemRefType(a.type)
                if T.space_of(m) != "HBM":
                    raise refuse(
                        "E7003",
                        self.func,
                        f"{self.name}: argument {self.arg_names[i]} is not in HBM",
                    )
                if len(m.shape) == 3 and m.shape[0] == T.DYNAMIC:
                    self.len_params[i] = None  # filled in declare()
                elif len(m.shape) != 2:
                    raise refuse(
                        "E7003",
                        self.func,
                        f"{self.name}: argument {self.arg_names[i]} has type {m}; the NVIDIA "
                        f"backends take 2-D tiles and Vecs of 2-D tiles",
                    )
            elif str(a.type) in ("i64", "index", "i32", "f32", "i1"):
                self.scalar_params[i] = None
            else:
                raise refuse(
                    "E7003",
                    self.func,
                    f"{self.name}: argument {self.arg_names[i]} of type {a.type} is not supported "
                    f"by the NVIDIA backends",
                )

    def layout(self, ring: int, dtype: str) -> str:
        roles = self.roles.get(ring, set())
        if roles & {"A", "Bt"}:  # K-major: an A operand, or a B operand's transpose
            return "sw128"
        if "B" in roles:
            return "sw128MN" if elem_bytes(dtype) == 2 else "sw128T"
        return "rowmajor"

    def tile(self, op: ir.Operation, t: ir.Type) -> Tile:
        m = _tile_type(op, t)
        lay = ring_layout(op)
        if lay is None or lay.ring not in self.rings:
            raise refuse("E7005", op, f"{op.name}: the tile has no shared-memory slot")
        lay = self.rings[lay.ring]
        return Tile(
            lay.ring, *m.shape, _dtype(m), self.layout(lay.ring, _dtype(m)), lay.offset,
            lay.slots, lay.slot_bytes,
        )  # fmt: skip

    def _root_arg(self, v: ir.Value) -> int | None:
        while isinstance(v, ir.OpResult) and v.owner.name in ("vx.element", *_VIEW_OPS):
            v = v.owner.operands[0]
        if isinstance(v, ir.BlockArgument) and v.owner == self.entry:
            return v.arg_number
        return None

    def _plan_transfer(self, op: ir.Operation) -> None:
        v = view(op)
        src, dst = v.from_, v.space
        if src == "HBM" and dst == "VMEM":
            tile = self.tile(op, op.results[0].type)
            arg = self._root_arg(op.operands[0])
            if arg is None:
                raise refuse("E7005", op, f"{op.name}: the source is not a kernel argument")
            viewed = _is_view(op.operands[0])
            if tile.layout == "sw128T":
                if op.name == "vx.transfer_async" or viewed:
                    raise refuse(
                        "E7005",
                        op,
                        f"the {tile.dtype} B operand of matmul_acc is loaded with "
                        f"`transfer_async` or from a view: wgmma reads tf32 operands K-major "
                        f"only and TMA cannot transpose, so a tf32 B tile is a whole argument "
                        f"loaded with a blocking `transfer`",
                    )
                self.ptr_params[arg] = None
                return
            self._tmap("arg", arg, tile, op, whole=viewed)
            if tile.ring not in self.tma_rings:
                self.tma_rings.append(tile.ring)
        elif src == "VMEM" and dst == "HBM":
            res = self.results.get(op.results[0])
            if res is None:
                raise refuse(
                    "E7003",
                    op,
                    "a transfer to HBM that is not the kernel's result: the NVIDIA "
                    "backends write HBM only through results",
                )
            m = _tile_type(op, op.results[0].type)
            tile = Tile(-1, *m.shape, _dtype(m), "rowmajor", 0, 1, 0)
            self._tmap("result", res, tile, op)

    def _plan_store(self, op: ir.Operation) -> None:
        """A store into an output argument: one row-major tensor map over the whole
        output, the tile's box at the view's coordinates."""
        _routed(op, ("VMEM", "HBM"), "a store", "store shared-memory tiles to HBM")
        arg = self._root_arg(op.operands[1])
        if arg is None:
            raise refuse("E7005", op, f"{op.name}: the output is not a kernel argument")
        m = _tile_type(op, op.operands[0].type)
        tile = Tile(-1, *m.shape, _dtype(m), "rowmajor", 0, 1, 0)
        self._tmap("arg", arg, tile, op, whole=True, mut=True)

    def _tmap(
        self,
        source: str,
        index: int,
        tile: Tile,
        op: ir.Operation,
        whole: bool = False,
        mut: bool = False,
    ) -> TmaParam:
        key = (source, index, tile.layout)
        if key in self.tmaps:
            p = self.tmaps[key]
            if p.tile != (tile.rows, tile.cols):
                raise refuse(
                    "E7008",
                    op,
                    f"{self.arg_names[index] if source == 'arg' else 'a result'} is moved in "
                    f"tiles of {p.tile[0]}x{p.tile[1]} and {tile.rows}x{tile.cols}: the NVIDIA "
                    f"backends give a tensor one TMA box per layout",
                )
            self.tmaps[key] = dataclasses.replace(p, whole=p.whole or whole, mut=p.mut or mut)
            return self.tmaps[key]
        if tile.layout in ("sw128", "sw128MN"):
            if (tile.cols * tile.elem) % SWIZZLE_BYTES:
                raise refuse(
                    "E7008",
                    op,
                    f"a matmul_acc operand row of {tile.cols * tile.elem} bytes: "
                    f"the 128-byte swizzle needs a multiple of 128",
                )
            box, swizzle = (SWIZZLE_BYTES // tile.elem, tile.rows), "128B"
        else:
            box, swizzle = (tile.cols, tile.rows), "none"
        try:
            check_box(tile.dtype, box, swizzle)
        except TmaLimit as e:
            raise refuse("E7008", op, f"{e}") from None
        stem = self.arg_names[index] if source == "arg" else f"result{index}"
        # One map per (tensor, layout): an argument read as both operands has two.
        name = f"{stem}_tmap" + ("" if source == "result" else _TMAP_SUFFIX[tile.layout])
        vec = source == "arg" and len(ir.MemRefType(self.entry.arguments[index].type).shape) == 3
        p = TmaParam(
            name, Sym(name), source, index, tile.dtype, (tile.rows, tile.cols), box, swizzle, vec,
            whole, mut,
        )  # fmt: skip
        self.tmaps[key] = p
        return p

    # -- declaration and prologue ----------------------------------------------------------

    def declare(self) -> list[dict]:
        """Kernel parameters in a stable order; returns their manifest entries."""
        k, entries = self.k, []
        for i in range(len(self.entry.arguments)):
            name = self.arg_names[i]
            for key in sorted(x for x in self.tmaps if x[0] == "arg" and x[1] == i):
                p = self.tmaps[key]
                k.param(p.name, "tensormap")
                entries.append(p.to_json(self.arg_names))
            if i in self.ptr_params:
                self.ptr_params[i] = k.param(f"{name}_ptr", "u64")
                m = ir.MemRefType(self.entry.arguments[i].type)
                entries.append(
                    {
                        "name": f"{name}_ptr",
                        "kind": "pointer",
                        "arg": name,
                        "arg_index": i,
                        "dtype": _dtype(m),
                        "shape": list(m.shape),
                    }
                )
            if i in self.len_params:
                self.len_params[i] = k.param(f"{name}_len", "u64")
                entries.append(
                    {
                        "name": f"{name}_len",
                        "kind": "u64",
                        "arg": name,
                        "arg_index": i,
                        "value": "len",
                    }
                )
            if i in self.dim_params:
                syms = []
                for axis in ("rows", "cols"):
                    syms.append(k.param(f"{name}_{axis}", "u64"))
                    entries.append(
                        {
                            "name": f"{name}_{axis}",
                            "kind": "u64",
                            "arg": name,
                            "arg_index": i,
                            "value": axis,
                        }
                    )
                self.dim_params[i] = (syms[0], syms[1])
            if i in self.scalar_params:
                # Every scalar travels in a u64 slot; an f32 as its bits in the low word.
                is_f32 = str(self.entry.arguments[i].type) == "f32"
                self.scalar_params[i] = k.param(name, "u64")
                entries.append(
                    {
                        "name": name,
                        "kind": "u64",
                        "arg": name,
                        "arg_index": i,
                        "value": "f32" if is_f32 else "scalar",
                    }
                )
        for key in sorted(x for x in self.tmaps if x[0] == "result"):
            p = self.tmaps[key]
            k.param(p.name, "tensormap")
            entries.append(p.to_json(self.arg_names))
        self.status_param = None
        if self.requires:
            self.status_param = k.param("vx_status", "u64")
            entries.append({"name": "vx_status", "kind": "status"})
        return entries

    def smem_layout(self) -> dict[str, int]:
        tiles_end = max((lay.end for lay in self.rings.values()), default=0)
        self.private_at = -(-tiles_end // 16) * 16
        cursor = self.private_at + self.private_bytes
        self.bar_index: dict[int, int] = {}
        nbar = 0
        for ring in self.tma_rings:
            self.bar_index[ring] = nbar
            nbar += self.rings[ring].slots
        # tcgen05.mma completes on an mbarrier and writes its TMEM address to shared memory.
        tmem = self.arch.uses_tmem
        self.mma_bar = nbar if tmem else None
        nbar += 1 if tmem else 0
        layout = {"tiles": tiles_end, "barriers": cursor, "barrier_count": nbar}
        if self.private_bytes:
            layout["private"] = self.private_at
        cursor += nbar * BARRIER_BYTES
        layout["tmem_slot"] = cursor if tmem else -1
        cursor += 4 if tmem else 0
        layout["bytes"] = cursor
        layout["dynamic_smem"] = cursor + ALIGN  # room to align the base at run time
        limit = self.arch.smem_limit
        if layout["dynamic_smem"] > limit:
            raise refuse(
                "E7008",
                self.func,
                f"{self.name}: needs {layout['dynamic_smem']} bytes of shared memory "
                f"(tiles {tiles_end}, private {self.private_bytes}, barriers, alignment); "
                f"the limit per CTA is {limit}",
            )
        if 2 * layout["dynamic_smem"] > limit:
            # One CTA per SM is all the shared memory allows: ptxas may use the registers
            # of the whole SM (up to 255 per thread) instead of spilling for an occupancy
            # that cannot happen.
            self.k.min_ctas = 1
        self.layout_info = layout
        return layout

    def prologue(self) -> None:
        k = self.k
        tid = k.reg("b32")
        k.ins("mov.u32", tid, Sym("%tid.x"))
        warp = k.reg("b32")
        k.ins("shr.u32", warp, tid, Imm(5))
        leader = k.setp("eq", "u32", tid, Imm(0))
        raw, base = k.reg("b32"), k.reg("b32")
        k.ins("mov.u32", raw, Sym("vx_smem"))
        k.ins("add.u32", base, raw, Imm(ALIGN - 1))
        k.ins("and.b32", base, base, Imm(-ALIGN & 0xFFFFFFFF))
        self.c = Common(tid, warp, leader, base)
        self.em = tiles.Emitter(k, tid, warp, THREADS)
        self.mma = MMA[self.arch.mma](k, self.c)
        for p in self.tmaps.values():
            self.tmap_addr[p.name] = tma.tensormap_address(k, p.sym)
        self.lens: dict[int, Reg] = {}
        for i, sym in self.len_params.items():
            r = k.reg("b64")
            k.ins("ld.param.u64", r, Addr(sym))
            self.lens[i] = r
        self.ptrs: dict[int, Reg] = {}
        for i, sym in self.ptr_params.items():
            r = k.reg("b64")
            k.ins("ld.param.u64", r, Addr(sym))
            k.ins("cvta.to.global.u64", r, r)
            self.ptrs[i] = r
        self.dims: dict[int, tuple[Reg, Reg]] = {}
        for i, syms in self.dim_params.items():
            regs = []
            for sym in syms:
                wide, r = k.reg("b64"), k.reg("b32")
                k.ins("ld.param.u64", wide, Addr(sym))
                k.ins("cvt.u32.u64", r, wide)  # < 2^31: the launcher checks (TMA's s32)
                regs.append(r)
            self.dims[i] = (regs[0], regs[1])
        self.scalars: dict[int, Reg] = {}
        for i, sym in self.scalar_params.items():
            r = k.reg("b64")
            k.ins("ld.param.u64", r, Addr(sym))
            if str(self.entry.arguments[i].type) in ("i32", "f32"):
                narrow = k.reg("b32")
                k.ins("cvt.u32.u64", narrow, r)
                r = narrow
            if str(self.entry.arguments[i].type) == "f32":
                f = k.reg("f32")
                k.ins("mov.b32", f, r)
                r = f
            if str(self.entry.arguments[i].type) == "i1":  # a bool: any nonzero word is true
                r = k.setp("ne", "u64", r, Imm(0))
            self.scalars[i] = r
        lay = self.layout_info
        self.bars = k.reg("b32")
        k.ins("add.u32", self.bars, base, Imm(lay["barriers"]))
        if lay["barrier_count"]:
            skip = k.label("bar_init")
            k.bra(skip, pred=leader, negate=True)
            for n in range(lay["barrier_count"]):
                tma.mbarrier_init(k, self.bars, n * BARRIER_BYTES)
            k.ins("fence.mbarrier_init.release.cluster")
            k.place(skip)
        k.ins("bar.sync", Imm(0))
        for ring in sorted(self.rings):
            self.counters[ring] = k.mov("b32", Imm(0))
        if self.arch.uses_tmem:
            mma_bar, slot = k.reg("b32"), k.reg("b32")
            k.ins("add.u32", mma_bar, self.bars, Imm(self.mma_bar * BARRIER_BYTES))
            k.ins("add.u32", slot, base, Imm(lay["tmem_slot"]))
            self.mma.setup(mma_bar, slot, self.tmem_end)
        self.instance = k.reg("b32")
        k.ins("mov.u32", self.instance, Sym("%ctaid.x"))
        self.exit = k.label("exit")
        if self.status_param is not None:
            self.status = k.reg("b64")
            k.ins("ld.param.u64", self.status, Addr(self.status_param))
            k.ins("cvta.to.global.u64", self.status, self.status)

    # -- driving ------------------------------------------------------------------------

    def run(self) -> dict:
        self.plan()
        params = self.declare()
        self.smem_layout()
        self.prologue()
        for i, a in enumerate(self.entry.arguments):
            if i in self.lens:
                self.values[a] = VecArg(i)
            elif i in self.scalars:
                self.values[a] = Scalar(self.scalars[i])
            else:
                self.values[a] = Global(i, None)
        self.lower_block(self.entry)
        self.k.place(self.exit)
        if self.store_groups:  # the outputs' global writes are done before the CTA ends
            tma.bulk_wait(self.k, self.c.leader, read=False, barrier=False)
        self.mma.teardown()
        lay = self.layout_info
        return {
            "name": self.name,
            "args": self.arg_names,
            "params": params,
            "block": [THREADS, 1, 1],
            "grid": ["instances", 1, 1],
            "dynamic_smem": lay["dynamic_smem"],
            "smem_layout": {k: v for k, v in lay.items() if k != "dynamic_smem"},
            "tmem_columns": self.mma.columns if self.arch.uses_tmem else 0,
            "results": self._result_entries(),
            "requires": self.requires,
            "status": STATUS if self.requires else {},
        }

    def _result_entries(self) -> list[dict]:
        out = []
        for key in sorted(x for x in self.tmaps if x[0] == "result"):
            p = self.tmaps[key]
            out.append({"index": p.index, "dtype": p.dtype, "shape": list(p.tile), "stacked": True})
        return out

    def region_values(self, block: ir.Block) -> list[object]:
        """Lower a region's block; the lowered values its `scf.yield` yields."""
        return [self.get(v) for v in self.lower_block(block) or []]

    def get(self, v: ir.Value) -> object:
        return self.values[v]

    def set(self, v: ir.Value, lowered: object) -> None:
        self.values[v] = lowered

    # -- helpers the rules share ---------------------------------------------------------

    def slot_address(self, tile: Tile, count: Reg) -> tuple[Reg, Reg | None]:
        """(shared address of the slot `count` selects, its slot index or None)."""
        k = self.k
        addr = k.reg("b32")
        if tile.slots == 1:
            k.ins("add.u32", addr, self.c.base, Imm(tile.offset))
            return addr, None
        slot = k.reg("b32")
        k.ins("rem.u32", slot, count, Imm(tile.slots))
        k.ins("mad.lo.u32", addr, slot, Imm(tile.slot_bytes), self.c.base)
        k.ins("add.u32", addr, addr, Imm(tile.offset))
        return addr, slot

    def barrier(self, tile: Tile, slot: Reg | None) -> Reg:
        k = self.k
        bar = k.reg("b32")
        first = self.bar_index[tile.ring] * BARRIER_BYTES
        if slot is None:
            k.ins("add.u32", bar, self.bars, Imm(first))
        else:
            k.ins("mad.lo.u32", bar, slot, Imm(BARRIER_BYTES), self.bars)
            k.ins("add.u32", bar, bar, Imm(first))
        return bar

    def next_count(self, ring: int) -> Reg:
        """This issue's counter value (a copy), and the ring's counter advanced."""
        self.bump(("ring", ring))
        k = self.k
        count = k.mov("b32", self.counters[ring])
        k.ins("add.u32", self.counters[ring], self.counters[ring], Imm(1))
        return count

    def issue_load(self, op: ir.Operation) -> Token:
        src = self.get(op.operands[0])
        if not isinstance(src, Global | View):
            raise refuse("E7005", op, f"{op.name}: the source is not an HBM tile")
        tile = self.tile(op, op.results[0].type)
        src_m = T.placed(op.operands[0].type)
        if tuple(src_m.shape) != (tile.rows, tile.cols):
            raise refuse("E7005", op, f"{op.name}: source and destination shapes differ")
        count = self.next_count(tile.ring)
        dst, slot = self.slot_address(tile, count)
        if tile.layout == "sw128T":
            if src.row is not None:
                raise refuse("E7005", op, "a B operand taken from a Vec element or a view")
            tma.transposed_copy(
                self.k,
                self.c.tid,
                THREADS,
                self.ptrs[src.arg],
                dst,
                tile.rows,
                tile.cols,
                tile.elem,
            )
            return Token(count, tile)
        p = self.tmaps[("arg", src.arg, tile.layout)]
        if tile.layout in ("sw128", "sw128MN"):
            # One box per 128 bytes of the row (the swizzle span), `rows` rows each: A as
            # K-blocks of M rows, B (MN-major) as N-blocks of K rows.
            per = SWIZZLE_BYTES // tile.elem
            boxes = [(j * tile.rows * SWIZZLE_BYTES, j * per, 0) for j in range(tile.cols // per)]
        else:
            boxes = [(0, 0, 0)]
        row = src.row if src.row is not None else self.k.mov("b32", Imm(0))
        col = src.col if isinstance(src, View) else None
        bar = self.barrier(tile, slot)
        if tile.ring in self.generic_read:  # the slot's old tile read by every thread
            self.k.ins("bar.sync", Imm(0))
        tma.tma_load(
            self.k, self.c.leader, bar, dst, self.tmap_addr[p.name], boxes, row, tile.nbytes, col
        )
        fill = src.fill if isinstance(src, View) else None
        if fill is not None and tile.layout != "rowmajor":
            raise refuse(
                "E7001",
                op,
                f"an `edge` view with a fill other than zero loaded as a matmul_acc operand "
                f"(its shared-memory layout is swizzled for the MMA): on {self.target} the "
                f"tensor map fills with zeros only; use the fill 0, or copy the tile first",
            )
        return Token(count, tile, fill)

    def wait(self, tok: Token | StoreToken) -> Smem | Stored:
        k = self.k
        if isinstance(tok, StoreToken):
            # The tile may be reused once the bulk group has read it; its global writes
            # complete before the kernel exits (the exit waits for every group).
            tma.bulk_wait(k, self.c.leader, read=True)
            return Stored(tok.index)
        dst, slot = self.slot_address(tok.tile, tok.count)
        if tok.tile.layout == "sw128T":
            return Smem(dst, tok.tile)  # the transposing copy completed at issue
        bar = self.barrier(tok.tile, slot)
        parity = k.reg("b32")
        k.ins("div.u32", parity, tok.count, Imm(tok.tile.slots))
        k.ins("and.b32", parity, parity, Imm(1))
        tma.mbarrier_wait(k, bar, parity)
        if tok.fill is not None:
            self.edge_fill(tok.fill, Smem(dst, tok.tile))
        return Smem(dst, tok.tile)

    def edge_fill(self, f: EdgeFill, smem: Smem) -> None:
        """The landed tile's elements past the tensor's end (zeros: the tensor map's
        out-of-bounds fill) set to the fill, in place: element [i, j] becomes
        `row + i < rows && col + j < cols ? x : fill`, tile arithmetic's select over
        `iota`, every thread reading and writing its own elements. Then every thread's
        writes are fenced for the async proxy (a TMA store, the ring's next load) and
        synchronised (other threads read them)."""
        t, em = smem.tile, self.em
        rows, cols = self.dims[f.arg]

        def inside(axis: int, start: Reg, dim: Reg) -> tiles.Node:
            i32 = lambda v: tiles.Const(1, 1, "i32", v)  # noqa: E731
            at = tiles.Bin(t.rows, t.cols, "i32", "add", tiles.Iota(t.rows, t.cols, "i32", axis),
                           i32(start))  # fmt: skip
            return tiles.Cmp(t.rows, t.cols, "i1", "lt", at, i32(dim))

        ok = tiles.Bin(t.rows, t.cols, "i1", "and", inside(0, f.row, rows), inside(1, f.col, cols))
        here = tiles.Load(t.rows, t.cols, t.dtype, smem.addr)
        node = tiles.Sel(t.rows, t.cols, t.dtype, ok, here, f.value)
        try:
            s = em.tile_spread(t.rows, t.cols)
            em.guarded(s, lambda: em.evaluate_into(node, here, s))
        except tiles.TileError as e:
            raise refuse("E7001", self.func, f"an `edge` view's fill: {e}") from None
        tma.generic_writes_done(self.k)

    def bump(self, key: tuple[str, int]) -> None:
        self.versions[key] = self.versions.get(key, 0) + 1

    def as_smem(self, v: object, op: ir.Operation) -> Smem:
        if isinstance(v, Smem):
            return v
        if isinstance(v, Zero):
            count = self.next_count(v.tile.ring)
            dst, _ = self.slot_address(v.tile, count)
            # A writer like evaluate's: the slot's bytes may hold another tile (the
            # allocator reuses a dead tile's bytes, a ring slot its older value) whose
            # last readers, other threads, must be done before the fill overwrites it.
            self.k.comment(BARRIER_NOTE)
            self.k.ins("bar.sync", Imm(0))
            tma.fill_zero(self.k, self.c.tid, THREADS, dst, v.tile.nbytes)
            return Smem(dst, v.tile)
        if isinstance(v, Lazy):
            raise refuse(
                "E7001",
                op,
                f"{op.name}: a tile-arithmetic intermediate used as a tile; bind it with "
                f"`let` so it gets a shared-memory slot",
            )
        raise refuse("E7005", op, f"{op.name}: expected a shared-memory tile")

    # -- tile arithmetic (tiles.py) ---------------------------------------------------------

    def node(self, v: ir.Value, op: ir.Operation, reads: dict) -> tiles.Node:
        """Operand `v` of a tile form as an expression node; what it reads into `reads`."""
        lv = self.get(v)
        if isinstance(lv, Lazy):
            reads.update(lv.reads)
            return lv.node
        if isinstance(lv, Scalar):
            cls = lv.reg.cls
            if cls == "b64":  # an i64 scalar of an i32 tile: its low word (wrapping)
                low = self.k.reg("b32")
                self.k.ins("cvt.u32.u64", low, lv.reg)
                return tiles.Const(1, 1, "i32", low)
            if cls not in ("f32", "b32", "pred"):
                raise refuse("E7011", op, f"{op.name}: a {v.type} scalar in tile arithmetic")
            return tiles.Const(1, 1, {"f32": "f32", "b32": "i32", "pred": "i1"}[cls], lv.reg)
        m = T.placed(v.type)
        rows, cols = (list(m.shape) + [1, 1])[:2] if m is not None else (1, 1)
        if isinstance(lv, Zero):
            zero = Imm(0.0) if tiles.kind(_dtype(m)) == "f" else Imm(0)
            return tiles.Const(rows, cols, _dtype(m), zero)
        if isinstance(lv, AccVal):
            key = ("acc", id(lv.acc))
            reads[key] = self.versions.get(key, 0)
            return tiles.AccLeaf(rows, cols, "f32", lv.acc)
        if isinstance(lv, Smem):
            if lv.tile.layout != "rowmajor":
                raise refuse(
                    "E7001",
                    op,
                    f"{op.name} on a tile that is also a matmul_acc operand (its shared-memory "
                    f"layout is swizzled for the MMA); the NVIDIA backends compute on "
                    f"row-major tiles: copy it first",
                )
            key = ("ring", lv.tile.ring)
            reads[key] = self.versions.get(key, 0)
            return tiles.Load(rows, cols, lv.tile.dtype, lv.addr)
        raise refuse("E7005", op, f"{op.name}: an operand that is not a tile ({_describe(lv)})")

    def check_reads(self, lv: Lazy, op: ir.Operation) -> None:
        for key, version in lv.reads.items():
            if self.versions.get(key, 0) != version:
                raise refuse(
                    "E7001",
                    op,
                    f"{op.name}: an unstored tile expression read after one of its operands "
                    f"changed (an accumulator or a ring slot); bind it with `let` in shared "
                    f"memory before the change",
                )

    def resolve(self, n: tiles.Node, op: ir.Operation) -> tiles.Node:
        """`n` with every reduction computed into its scratch buffer (innermost first)
        and replaced by a load of it."""
        if isinstance(n, tiles.Red):
            x = self.resolve(n.x, op)
            # The scratch holds f32 (a float result, rounded) or i32 (an integer sum /
            # max / min, an argmax's indices): 4 bytes an element either way.
            held = "f32" if tiles.kind(n.dtype) == "f" else "i32"
            dst = tiles.Load(n.rows, n.cols, held, n.scratch)
            k = self.k
            # Every earlier tile's elements are written and the scratch's readers done.
            k.comment(BARRIER_NOTE)
            k.ins("bar.sync", Imm(0))
            red = dataclasses.replace(n, x=x)
            try:
                acc = tiles.accs(x)
                if acc and n.axis == 1:
                    (spread,) = self.mma.spreads(acc[0], whole=True)
                    self.em.acc_reduce_rows(red, dst, spread, self.mma.lanes_per_row)
                elif acc:
                    raise tiles.TileError("a reduction over the rows of an accumulator")
                elif n.axis == 1:
                    self.em.reduce_rows(red, dst)
                else:
                    self.em.reduce_cols(red, dst)
            except tiles.TileError as e:
                raise refuse("E7001", op, f"vx.reduce: {e}") from None
            return dst  # read after the next tile barrier (evaluate's)
        for f in tiles.CHILDREN:
            c = getattr(n, f, None)
            if c is not None:
                r = self.resolve(c, op)
                if r is not c:
                    n = dataclasses.replace(n, **{f: r})
        return n

    def evaluate(self, lv: Lazy, op: ir.Operation, tile: Tile) -> Smem:
        """`lv` stored into the next slot of `tile`'s ring (row-major): in the
        accumulator's spread when it reads the accumulator, else in the tile's."""
        if tile.layout not in ("rowmajor", "sw128"):
            raise refuse(
                "E7001",
                op,
                f"{op.name}: a tile-arithmetic result used as matmul_acc's B operand is not "
                f"lowered on {self.target} (an A operand, or a B operand through `transpose`, is)",
            )
        self.check_reads(lv, op)
        node = self.resolve(lv.node, op)
        count = self.next_count(tile.ring)
        addr, _ = self.slot_address(tile, count)
        dst = tiles.Load(tile.rows, tile.cols, tile.dtype, addr)
        k, em = self.k, self.em
        k.comment(BARRIER_NOTE)  # operands written, the slot's last readers done
        k.ins("bar.sync", Imm(0))
        acc = tiles.accs(node)
        if tile.layout == "sw128":
            return self.evaluate_operand(node, op, tile, addr, bool(acc))
        try:
            if len(acc) > 1:
                raise tiles.TileError("an expression over two accumulators")
            if acc and (acc[0].m, acc[0].n) != (tile.rows, tile.cols):
                raise tiles.TileError("an accumulator broadcast to a larger tile")
            if acc:
                for s in self.mma.spreads(acc[0]):
                    em.evaluate_into(node, dst, s)
            else:
                s = em.tile_spread(tile.rows, tile.cols)
                em.guarded(s, lambda: em.evaluate_into(node, dst, s))
        except tiles.TileError as e:
            raise refuse("E7001", op, f"{op.name}: {e}") from None
        # No barrier after: every reader of a tile starts with one (a tile form's,
        # a reduction's, or a TMA store's fence and bar.sync).
        return Smem(addr, tile)

    def evaluate_operand(
        self, node: tiles.Node, op: ir.Operation, tile: Tile, addr: Reg, on_acc: bool
    ) -> Smem:
        """A computed MMA operand (attention's `cast::<bf16>(p)`): written in the swizzled
        K-major layout the descriptor reads, then fenced for the async proxy (the MMA
        reads shared memory through it) and synchronised, since the MMA reads every
        thread's chunks."""
        if on_acc:
            raise refuse(
                "E7001",
                op,
                f"{op.name}: an MMA operand computed from an accumulator; transfer it to "
                f"Memory::VMEM first",
            )
        try:
            self.em.evaluate_sw128(node, addr, tile.rows, tile.cols, tile.dtype)
        except tiles.TileError as e:
            raise refuse("E7001", op, f"{op.name}: {e}") from None
        self.k.ins("fence.proxy.async.shared::cta")
        self.k.ins("bar.sync", Imm(0))
        return Smem(addr, tile)

    def update_acc(self, lv: Lazy, op: ir.Operation) -> AccVal:
        """`acc = f(acc, ...)` computed into the accumulator itself (attention's rescaling
        `acc * alpha`), element by element where it lives; the old value must be dead
        after the op, since nothing else holds it."""
        self.check_reads(lv, op)
        node = self.resolve(lv.node, op)
        acc = tiles.accs(node)
        m = T.placed(op.results[0].type)
        olds = list(dict.fromkeys(x for v in op.operands for x in self.acc_values(v)))
        if len(acc) != 1 or (acc[0].m, acc[0].n) != tuple(m.shape) or not olds:
            raise refuse(
                "E7006",
                op,
                f"{op.name}: an accumulator is updated from one accumulator of its own shape only",
            )
        if not all(_dead_after(v, op) for v in olds):
            raise refuse(
                "E7006",
                op,
                f"{op.name}: the accumulator's old value is read after this update, which the "
                f"NVIDIA backends compute in place (the accumulator has one home)",
            )
        if any(isinstance(n, tiles.Load) for n in tiles.walk(node)):
            # Broadcast operands were written by other threads (a tile form, a reduction).
            self.k.comment(BARRIER_NOTE)
            self.k.ins("bar.sync", Imm(0))
        try:
            for s in self.mma.spreads(acc[0]):
                self.mma.write_back(acc[0], s, self.em.element_values(node, s))
        except tiles.TileError as e:
            raise refuse("E7001", op, f"{op.name}: {e}") from None
        self.mma.written(acc[0])
        self.bump(("acc", id(acc[0])))
        return AccVal(acc[0])

    def acc_values(self, v: ir.Value) -> list[ir.Value]:
        """The accumulator values an operand reads: itself, or those of the unstored
        tile forms it is made of (`(acc * 2.0) * alpha`)."""
        lv = self.get(v)
        if isinstance(lv, AccVal):
            return [v]
        if isinstance(lv, Lazy) and isinstance(v, ir.OpResult):
            return [x for w in v.owner.operands for x in self.acc_values(w)]
        return []

    # -- values through loops and ifs ------------------------------------------------------

    def carry(self, v: object, op: ir.Operation | None = None) -> object:
        """A copy of `v` in fresh registers (a loop-carried or if-joined value). A new
        tile (`Tensor<f32>([8, 1])`) is zero-filled into its slot first, so it joins the
        tiles the body yields; an unstored tile expression cannot be carried."""
        k = self.k
        if isinstance(v, Zero) and op is not None:
            v = self.as_smem(v, op)
        if isinstance(v, Lazy):
            raise refuse(
                "E7006",
                op,
                "a tile expression in the accumulator's space carried through a loop or "
                "an if: the NVIDIA backends carry shared-memory tiles; transfer it to "
                "Memory::VMEM",
            )
        if isinstance(v, Scalar):
            r = k.reg(v.reg.cls)
            k.ins(f"mov.{_movty(r)}", r, v.reg)
            return Scalar(r)
        if isinstance(v, Token):
            return Token(k.mov("b32", v.count), v.tile, self.carry_fill(v.fill))
        if isinstance(v, Smem):
            return Smem(k.mov("b32", v.addr), v.tile)
        if isinstance(v, Global) and v.row is not None:
            return Global(v.arg, k.mov("b32", v.row))
        if isinstance(v, View):
            return View(v.arg, k.mov("b32", v.row), k.mov("b32", v.col), self.carry_fill(v.fill))
        return v

    def carry_fill(self, f: EdgeFill | None) -> EdgeFill | None:
        if f is None:
            return None
        value = f.value.value
        if isinstance(value, Reg):
            value = self.k.mov(value.cls, value)
        return EdgeFill(
            f.arg, self.k.mov("b32", f.row), self.k.mov("b32", f.col),
            dataclasses.replace(f.value, value=value),
        )  # fmt: skip

    def assign(self, dst: object, src: object, op: ir.Operation) -> None:
        k = self.k
        pairs = list(zip(_regs(dst), _regs(src), strict=False))
        if (
            type(dst) is not type(src)
            or len(_regs(dst)) != len(_regs(src))
            or _static(dst) != _static(src)
        ):
            raise refuse(
                "E7006",
                op,
                f"a loop-carried or if-joined value changes what it is "
                f"({_describe(dst)} vs {_describe(src)})",
            )
        for d, s in pairs:
            k.ins(f"mov.{_movty(d)}", d, s)

    def parallel_assign(self, dsts: list[object], srcs: list[object], op: ir.Operation) -> None:
        temps = [self.carry(s, op) for s in srcs]
        for d, t in zip(dsts, temps, strict=True):
            self.assign(d, t, op)


def _movty(r: Reg) -> str:
    return {"pred": "pred", "b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32"}[r.cls]


def _regs(v: object) -> list[Reg]:
    if isinstance(v, Scalar):
        return [v.reg]
    if isinstance(v, Token):
        return [v.count, *_fill_regs(v.fill)]
    if isinstance(v, Smem):
        return [v.addr]
    if isinstance(v, Global) and v.row is not None:
        return [v.row]
    if isinstance(v, View):
        return [v.row, v.col, *_fill_regs(v.fill)]
    return []


def _fill_regs(f: EdgeFill | None) -> list[Reg]:
    if f is None:
        return []
    return [f.row, f.col, *([f.value.value] if isinstance(f.value.value, Reg) else [])]


def _fill_static(f: EdgeFill | None) -> object:
    if f is None:
        return None
    value = f.value.value
    return (f.arg, f.value.dtype, value.cls if isinstance(value, Reg) else value)


def _static(v: object) -> object:
    if isinstance(v, Token):
        return (v.tile, _fill_static(v.fill))
    if isinstance(v, Smem):
        return v.tile
    if isinstance(v, View):
        return ("View", v.arg, False, _fill_static(v.fill))
    if isinstance(v, Global):
        return (type(v).__name__, v.arg, v.row is None)
    if isinstance(v, AccVal):
        return id(v.acc)
    if isinstance(v, Scalar):
        return v.reg.cls
    return v


def _describe(v: object) -> str:
    return type(v).__name__


# -- the rules ------------------------------------------------------------------------------

Rule = Callable[[FunctionLowering, ir.Operation], None]
RULES: dict[str, Rule] = {}


rule = registrar(RULES)


_INT_CLS = {"i1": "pred", "i32": "b32", "i64": "b64", "index": "b64", "f32": "f32"}


def _cls(t: ir.Type, op: ir.Operation) -> str:
    cls = _INT_CLS.get(str(t))
    if cls is None:
        raise refuse("E7011", op, f"{op.name} on {t} is not supported by the NVIDIA backends")
    return cls


_HALF = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


@rule("arith.constant")
def _constant(fl: FunctionLowering, op: ir.Operation) -> None:
    t = op.results[0].type
    if str(t) in tiles.NARROW:
        # A bf16/f16 literal (a scalar of a bf16 tile's comparison): its value, exact in
        # an f32 register, which is how tile arithmetic reads a 16-bit element.
        x = float(np.array(ir.FloatAttr(op.attributes["value"]).value).astype(_HALF[str(t)]))
        fl.set(op.results[0], Scalar(fl.k.mov("f32", Imm(x))))
        return
    cls = _cls(t, op)
    if cls == "f32":  # PTX's exact hex float immediate (ptx.Imm)
        fl.set(
            op.results[0], Scalar(fl.k.mov(cls, Imm(ir.FloatAttr(op.attributes["value"]).value)))
        )
        return
    value = ir.IntegerAttr(op.attributes["value"]).value
    if cls == "pred":
        r = fl.k.setp("ne", "u32", fl.k.mov("b32", Imm(value & 1)), Imm(0))
    else:
        r = fl.k.mov(cls, Imm(value))
    fl.set(op.results[0], Scalar(r))


@rule("arith.index_cast", "arith.extsi", "arith.extui", "arith.trunci")
def _cast(fl: FunctionLowering, op: ir.Operation) -> None:
    src = fl.get(op.operands[0])
    a, b = _cls(op.operands[0].type, op), _cls(op.results[0].type, op)
    if a == b:
        fl.set(op.results[0], src)
        return
    r = fl.k.reg(b)
    signed = "u" if op.name == "arith.extui" else "s"
    if b == "b64":
        fl.k.ins(f"cvt.{signed}64.{signed}32", r, src.reg)
    else:
        fl.k.ins("cvt.u32.u64", r, src.reg)
    fl.set(op.results[0], Scalar(r))


@rule("arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui")
def _convert(fl: FunctionLowering, op: ir.Operation) -> None:
    """A scalar conversion between integers and f32 (ir/scalar_cast.py saturates before
    it): `cvt.rn.f32.s64` rounds to nearest even, `cvt.rzi.s64.f32` truncates."""
    src = fl.get(op.operands[0])
    _cls(op.operands[0].type, op)  # i32, i64 and f32 only: another is refused
    a, b = str(op.operands[0].type), str(op.results[0].type)
    signed = "u" if op.name in ("arith.uitofp", "arith.fptoui") else "s"
    r = fl.k.reg(_cls(op.results[0].type, op))
    if op.name.endswith("tofp"):
        fl.k.ins(f"cvt.rn.f32.{signed}{a[1:]}", r, src.reg)
    else:
        fl.k.ins(f"cvt.rzi.{signed}{b[1:]}.f32", r, src.reg)
    fl.set(op.results[0], Scalar(r))


_BINARY = {
    "arith.addi": "add.s",
    "arith.subi": "sub.s",
    "arith.muli": "mul.lo.s",
    "arith.divsi": "div.s",
    "arith.divui": "div.u",
    "arith.remsi": "rem.s",
    "arith.remui": "rem.u",
    "arith.andi": "and.b",
    "arith.ori": "or.b",
    "arith.xori": "xor.b",
    "arith.minsi": "min.s",
    "arith.maxsi": "max.s",
}


# f32 scalar arithmetic (a `scale: f32` parameter): IEEE round-to-nearest, as the
# other targets compute it (`div.rn`, not the approximate `div.full`). No `arith.remf`:
# PTX has no float remainder, and its refusal names the op.
_FLOAT = {
    "arith.addf": "add.rn.f32",
    "arith.subf": "sub.rn.f32",
    "arith.mulf": "mul.rn.f32",
    "arith.divf": "div.rn.f32",
}
# arith.CmpFPredicate -> setp: oeq, ogt, oge, olt, ole are ordered; une is "unordered
# or not equal" (what `!=` lowers to).
_CMPF = {1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le", 13: "neu", 14: "nan"}  # 14: uno


@rule(*_FLOAT)
def _float_binary(fl: FunctionLowering, op: ir.Operation) -> None:
    a, b = fl.get(op.operands[0]), fl.get(op.operands[1])
    r = fl.k.reg(_cls(op.results[0].type, op))
    fl.k.ins(_FLOAT[op.name], r, a.reg, b.reg)
    fl.set(op.results[0], Scalar(r))


@rule("arith.negf")
def _negf(fl: FunctionLowering, op: ir.Operation) -> None:
    r = fl.k.reg(_cls(op.results[0].type, op))
    fl.k.ins("neg.f32", r, fl.get(op.operands[0]).reg)
    fl.set(op.results[0], Scalar(r))


@rule("arith.cmpf")
def _cmpf(fl: FunctionLowering, op: ir.Operation) -> None:
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    if pred not in _CMPF or _cls(op.operands[0].type, op) != "f32":
        raise refuse(
            "E7011", op, f"{op.name} predicate {pred} is not supported by the NVIDIA backends"
        )
    a, b = fl.get(op.operands[0]), fl.get(op.operands[1])
    fl.set(op.results[0], Scalar(fl.k.setp(_CMPF[pred], "f32", a.reg, b.reg)))


@rule(*_BINARY)
def _binary(fl: FunctionLowering, op: ir.Operation) -> None:
    cls = _cls(op.results[0].type, op)
    if cls == "f32":
        raise refuse("E7011", op, f"{op.name} on f32 is not supported by the NVIDIA backends")
    if cls == "pred" and op.name not in _PRED:
        raise refuse("E7011", op, f"{op.name} on i1 is not supported by the NVIDIA backends")
    a, b = fl.get(op.operands[0]), fl.get(op.operands[1])
    if cls == "pred":  # `&&`, `||`, `!` (xor with true) on bools
        r = fl.k.reg("pred")
        fl.k.ins(f"{_PRED[op.name]}.pred", r, a.reg, b.reg)
        fl.set(op.results[0], Scalar(r))
        return
    r = fl.k.reg(cls)
    fl.k.ins(f"{_BINARY[op.name]}{cls[1:]}", r, a.reg, b.reg)
    fl.set(op.results[0], Scalar(r))


# Logic on bools (i1 values live in predicate registers).
_PRED = {"arith.andi": "and", "arith.ori": "or", "arith.xori": "xor"}


_CMP = ["eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"]


@rule("arith.cmpi")
def _cmpi(fl: FunctionLowering, op: ir.Operation) -> None:
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    cls = _cls(op.operands[0].type, op)
    a, b = fl.get(op.operands[0]), fl.get(op.operands[1])
    ty = ("s" if pred in (2, 3, 4, 5) else "u") + cls[1:]
    if pred in (0, 1):
        ty = "b" + cls[1:]
    fl.set(op.results[0], Scalar(fl.k.setp(_CMP[pred], ty, a.reg, b.reg)))


@rule("arith.select")
def _select(fl: FunctionLowering, op: ir.Operation) -> None:
    c, a, b = (fl.get(v) for v in op.operands)
    cls = _cls(op.results[0].type, op)
    r = fl.k.reg(cls)
    fl.k.ins(f"selp.{cls}", r, a.reg, b.reg, c.reg)
    fl.set(op.results[0], Scalar(r))


@rule("vx.instance", "vx.instances")
def _instance(fl: FunctionLowering, op: ir.Operation) -> None:
    r32 = fl.instance if op.name == "vx.instance" else fl.k.reg("b32")
    if op.name == "vx.instances":
        fl.k.ins("mov.u32", r32, Sym("%nctaid.x"))
    r = fl.k.reg("b64")
    fl.k.ins("cvt.u64.u32", r, r32)
    fl.set(op.results[0], Scalar(r))


@rule("vx.require")
def _require(fl: FunctionLowering, op: ir.Operation) -> None:
    """A `where` clause of the launch: when false, the instance writes VX_ERR_WHERE to the
    status word and skips its body (its result slab is left as it was). The clause is
    uniform over the CTA, so every thread takes the same branch."""
    k = fl.k
    cond = fl.get(op.operands[0])
    ok = k.label("where_ok")
    k.bra(ok, pred=cond.reg)
    code = k.mov("b32", Imm(STATUS["VX_ERR_WHERE"]))
    k.ins("st.global.u32", Addr(fl.status), code, pred=fl.c.leader)
    k.bra(fl.exit)
    k.place(ok)


@rule("vx.len")
def _len(fl: FunctionLowering, op: ir.Operation) -> None:
    v = fl.get(op.operands[0])
    fl.set(op.results[0], Scalar(fl.lens[v.arg]))


@rule("vx.element")
def _element(fl: FunctionLowering, op: ir.Operation) -> None:
    """Element i of a Vec of [R, C] tiles is rows i*R.. of the [len*R, C] 2-D view.
    An index past the end reads zeros (TMA fills out-of-bounds boxes)."""
    vec, idx = fl.get(op.operands[0]), fl.get(op.operands[1])
    rows = T.placed(op.results[0].type).shape[0]
    lo, row = fl.k.reg("b32"), fl.k.reg("b32")
    fl.k.ins("cvt.u32.u64", lo, idx.reg)
    fl.k.ins("mul.lo.u32", row, lo, Imm(rows))
    fl.set(op.results[0], Global(vec.arg, row))


@rule("vx.view")
def _view(fl: FunctionLowering, op: ir.Operation) -> None:
    """A region of a 2-D tensor argument: its offsets become the TMA coordinates (the
    tensor map spans the whole argument; the checker proved the region inside it)."""
    src = fl.get(op.operands[0])
    if not isinstance(src, Global) or src.row is not None:
        raise refuse("E7005", op, "a view of something other than a 2-D tensor argument")
    row, col = (_coord(fl, fl.get(v)) for v in list(op.operands)[1:])
    fl.set(op.results[0], View(src.arg, row, col))


@rule("vx.edge_view")
def _edge_view(fl: FunctionLowering, op: ir.Operation) -> None:
    """An `edge` view (LANGUAGE.md 4.2): a view whose box may reach past the tensor's
    end. The tensor map has the tensor's real dims (the launcher's), so TMA zero-fills
    the box's elements past them on a load (the mbarrier still counts the whole box's
    bytes) and a TMA store writes only those inside; a fill other than zero is a select
    after the load lands (`FunctionLowering.edge_fill`). `0 <= lo` is proved (plan)."""
    src = fl.get(op.operands[0])
    if not isinstance(src, Global) or src.row is not None:
        raise refuse("E7005", op, "an `edge` view of something other than a 2-D tensor argument")
    row, col = (_coord(fl, fl.get(v)) for v in list(op.operands)[2:])
    fill = None
    if not _zero_fill(op):
        value = fl.node(op.operands[1], op, {})
        fill = EdgeFill(src.arg, row, col, value)
    fl.set(op.results[0], View(src.arg, row, col, fill))


def _coord(fl: FunctionLowering, v: Scalar) -> Reg:
    """A TMA coordinate (32-bit) from an index value."""
    if v.reg.cls == "b32":
        return v.reg
    r = fl.k.reg("b32")
    fl.k.ins("cvt.u32.u64", r, v.reg)
    return r


def _store_issue(fl: FunctionLowering, op: ir.Operation, wait: str) -> int:
    """Issue the TMA store of `op`'s tile at its view's coordinates, waited as `wait`
    says (tma.BULK_WAITS); the output's index."""
    smem = fl.as_smem(fl.get(op.operands[0]), op)
    out = fl.get(op.operands[1])
    if not isinstance(out, Global) or out.row is not None:
        raise refuse("E7005", op, f"{op.name}: the output is not a 2-D tensor argument")
    if smem.tile.layout != "rowmajor":
        raise refuse("E7005", op, f"{op.name}: an MMA operand tile stored to HBM")
    row, col = (_coord(fl, fl.get(v)) for v in list(op.operands)[2:])
    p = fl.tmaps[("arg", out.arg, "rowmajor")]
    tma.tma_store(fl.k, fl.c.leader, smem.addr, fl.tmap_addr[p.name], row, col, wait)
    fl.store_groups.append(out.arg)
    return out.arg


@rule("vx.store")
def _store(fl: FunctionLowering, op: ir.Operation) -> None:
    """`transfer(t, c[view])`: the tile may change after it, so the store's bulk group
    has read it before any thread goes on."""
    _store_issue(fl, op, "read")


@rule("vx.store_async")
def _store_async(fl: FunctionLowering, op: ir.Operation) -> None:
    fl.set(op.results[0], StoreToken(_store_issue(fl, op, "none")))


@rule("vx.zeros")
def _zeros(fl: FunctionLowering, op: ir.Operation) -> None:
    if ZerosOp(op).space != "VMEM":
        raise refuse("E7005", op, "a new tensor outside shared memory")
    fl.set(op.results[0], Zero(fl.tile(op, op.results[0].type)))


@rule("vx.transfer_async")
def _transfer_async(fl: FunctionLowering, op: ir.Operation) -> None:
    _routed(op, ("HBM", "VMEM"), "`transfer_async`", "issue async copies HBM -> VMEM")
    fl.set(op.results[0], fl.issue_load(op))


def _routed(op: ir.Operation, route: tuple[str, str], what: str, does: str) -> None:
    """E7005 naming the route the op takes, unless it is the one route the TMA serves."""
    v = view(op)
    if (v.from_, v.space) != route:
        raise refuse(
            "E7005",
            op,
            f"{what} from {v.from_} to {v.space}: the NVIDIA backends {does} (TMA)",
        )


@rule("vx.wait")
def _wait(fl: FunctionLowering, op: ir.Operation) -> None:
    fl.set(op.results[0], fl.wait(fl.get(op.operands[0])))


@rule("vx.transfer")
def _transfer(fl: FunctionLowering, op: ir.Operation) -> None:
    t = view(op)
    src, dst = t.from_, t.space
    acc_space = fl.arch.acc_space
    v = fl.get(op.operands[0])
    v_type = op.operands[0].type
    if (src, dst) == ("HBM", "VMEM"):
        fl.set(op.results[0], fl.wait(fl.issue_load(op)))
    elif (src, dst) == ("VMEM", acc_space) and (
        isinstance(v, Lazy) or (isinstance(v, Smem) and 1 not in T.placed(v_type).shape)
    ):
        # A whole tile or an unstored expression moved to the accumulator's space (a
        # causal mask, `transfer(k_pos <= q_pos, Memory::ACC)`): nothing moves; the
        # accumulator-space expressions that read it load it (or compute it) in the
        # accumulator's spread. A later write to its ring slot before such a read is
        # refused (`check_reads`), never a stale value.
        reads: dict = {}
        node = fl.node(op.operands[0], op, reads)
        fl.set(op.results[0], Lazy(node, dst, reads))
    elif (src, dst) == ("VMEM", acc_space) and not isinstance(v, Zero):
        fl.set(op.results[0], _acc_vector(fl, op, v))
    elif (src, dst) == ("VMEM", acc_space):
        m = T.placed(op.results[0].type)
        if _dtype(m) != "f32" or len(m.shape) != 2:
            raise refuse("E7007", op, "accumulators are 2-D f32 tiles")
        column = t.offset // 512 if dst == "TMEM" else 0
        acc = fl.mma.new_acc(m.shape[0], m.shape[1], column)
        fl.mma.zero(acc)
        fl.set(op.results[0], AccVal(acc))
    elif (src, dst) == (acc_space, "VMEM") and isinstance(v, Lazy):
        fl.set(op.results[0], fl.evaluate(v, op, fl.tile(op, op.results[0].type)))
    elif (src, dst) == (acc_space, "VMEM"):
        if not isinstance(v, AccVal):
            raise refuse("E7007", op, "expected an accumulator")
        tile = fl.tile(op, op.results[0].type)
        if tile.layout != "rowmajor" or tile.dtype != "f32":
            raise refuse("E7005", op, "an accumulator copied into an MMA operand tile")
        count = fl.next_count(tile.ring)
        addr, _ = fl.slot_address(tile, count)
        fl.mma.store(v.acc, addr)
        fl.set(op.results[0], Smem(addr, tile))
    elif (src, dst) == ("VMEM", "HBM"):
        smem = fl.as_smem(v, op)
        index = fl.results[op.results[0]]
        p = fl.tmaps[("result", index, "rowmajor")]
        row = fl.k.reg("b32")
        fl.k.ins("mul.lo.u32", row, fl.instance, Imm(p.tile[0]))
        tma.tma_store(fl.k, fl.c.leader, smem.addr, fl.tmap_addr[p.name], row)
        fl.set(op.results[0], Output(index))
    else:
        raise refuse("E7007", op, f"a transfer from {src} to {dst} has no lowering on {fl.target}")


@rule("vx.matmul_acc")
def _matmul_acc(fl: FunctionLowering, op: ir.Operation) -> None:
    acc = fl.get(op.operands[0])
    if not isinstance(acc, AccVal):
        raise refuse(
            "E7007",
            op,
            f"matmul_acc accumulates into Memory::ACC on {fl.target} "
            f"({fl.arch.acc_space}); transfer the accumulator there first",
        )
    bt = "b" in MatmulAccOp(op).transpose  # fold-transpose: B read transposed
    a = fl.as_smem(fl.get(op.operands[1]), op)
    b = fl.as_smem(fl.get(op.operands[2]), op)
    b_layouts = ("sw128",) if bt else ("sw128T", "sw128MN")
    if a.tile.layout != "sw128" or b.tile.layout not in b_layouts:
        raise refuse("E7007", op, "matmul_acc operands are not in their MMA layouts")
    if bt:  # B^T [N, K] as loaded: K-major, no transpose bit
        b = Smem(b.addr, dataclasses.replace(b.tile, rows=b.tile.cols, cols=b.tile.rows))
    if a.tile.dtype != b.tile.dtype:
        raise refuse("E7007", op, f"matmul_acc operands of types {a.tile.dtype} and {b.tile.dtype}")
    if a.tile.dtype not in MMA_TYPES:
        raise refuse("E7007", op, f"matmul_acc of {a.tile.dtype} operands")
    if (acc.acc.m, acc.acc.n) != (a.tile.rows, b.tile.cols) or a.tile.cols != b.tile.rows:
        raise refuse("E7007", op, "matmul_acc shapes do not agree")
    kbytes = a.tile.cols * a.tile.elem
    fl.bump(("acc", id(acc.acc)))
    try:
        fl.mma.matmul(
            acc.acc,
            Operand(a.addr, a.tile.rows, kbytes, elem=a.tile.elem),
            Operand(b.addr, b.tile.cols, kbytes, b.tile.layout == "sw128MN", b.tile.elem),
            a.tile.dtype,
        )
    except MmaError as e:
        raise refuse("E7007", op, f"{e}") from None


def _acc_vector(fl: FunctionLowering, op: ir.Operation, v: object) -> Lazy:
    """A row or column moved to the accumulator's space (a bias): copied into its private
    shared-memory buffer (its VMEM slot may be reused at once), read from there by the
    epilogue in the accumulator's spread."""
    m = T.placed(op.results[0].type)
    if not isinstance(v, Smem) or 1 not in m.shape[:2]:
        raise refuse(
            "E7005",
            op,
            "loading an accumulator from shared memory: the NVIDIA backends start "
            "accumulators from a new (zero) tensor, and move rows or columns (a bias) to "
            "Memory::ACC only",
        )
    reads: dict = {}
    src = fl.node(op.operands[0], op, reads)
    addr = fl.k.reg("b32")
    fl.k.ins("add.u32", addr, fl.c.base, Imm(fl.private_at + fl.private[op.results[0]]))
    dst = tiles.Load(src.rows, src.cols, src.dtype, addr)
    fl.k.comment(BARRIER_NOTE)
    fl.k.ins("bar.sync", Imm(0))
    s = fl.em.tile_spread(src.rows, src.cols)
    try:
        fl.em.guarded(s, lambda: fl.em.evaluate_into(src, dst, s))
    except tiles.TileError as e:
        raise refuse("E7001", op, f"{op.name}: {e}") from None
    return Lazy(dst, view(op).space)  # its readers start with a tile barrier


def _tile_value(fl: FunctionLowering, op: ir.Operation, make) -> None:
    """A tile form's value: stored into its ring slot when it is a placed shared-memory
    tile; an accumulator updated in place when the result must be one (an MMA
    accumulates into it, or a loop or an `if` carries it); else an expression (`Lazy`)
    computed where it is read."""
    res = op.results[0]
    m = T.placed(res.type)
    rows, cols = m.shape[0], m.shape[1]
    reads: dict = {}
    node = make(rows, cols, _dtype(m), [fl.node(v, op, reads) for v in op.operands])
    lay = ring_layout(op)
    lv = Lazy(node, lay.space, reads)
    if lay.space == "VMEM" and lay.shared:
        fl.set(res, fl.evaluate(lv, op, fl.tile(op, res.type)))
    elif lay.space == fl.arch.acc_space and _needs_acc(res):
        fl.set(res, fl.update_acc(lv, op))
    else:
        fl.set(res, lv)


def _needs_acc(v: ir.Value) -> bool:
    """`v` is read as an accumulator: matmul_acc's first operand, or yielded."""
    return any(
        (u.owner.name == "vx.matmul_acc" and u.operand_number == 0) or u.owner.name == "scf.yield"
        for u in v.uses
    )


def _region_owner(op: ir.Operation) -> ir.Operation | None:
    p = op.parent
    return None if p is None or p.name == "func.func" else p.operation


def _chain(op: ir.Operation) -> list[ir.Operation]:
    """`op` and the ops that enclose it, innermost first (below the function)."""
    out: list[ir.Operation] = []
    x: ir.Operation | None = op
    while x is not None:
        out.append(x)
        x = _region_owner(x)
    return out


def _may_follow(u: ir.Operation, op: ir.Operation) -> bool:
    """Whether `u` may run after `op` in one run of the block that holds both (branches
    of one `if` exclude each other; loops are the caller's concern)."""
    cu, co = _chain(u), _chain(op)
    for x in cu:
        for y in co:
            if x.block == y.block:
                if x == y:  # different regions of x: the branches of an `if`
                    return x.name != "scf.if"
                return y.is_before_in_block(x)
    return True


def _dead_after(v: ir.Value, op: ir.Operation) -> bool:
    """No read of `v` but `op` can come after `op`: `v` may be overwritten in place. A
    loop between `op` and `v`'s definition would read it again next iteration; a loop's
    iteration argument is also its initial value, which must be dead after the loop."""
    home = v.owner if isinstance(v, ir.BlockArgument) else v.owner.operation.block
    x = op
    while x.block != home:
        x = _region_owner(x)
        if x is None or x.name == "scf.for":
            return False
    if any(u.owner != op and _may_follow(u.owner.operation, op) for u in v.uses):
        return False
    if isinstance(v, ir.BlockArgument) and home.owner.operation.name == "scf.for" and v.arg_number:
        loop = home.owner.operation
        return _dead_after(loop.operands[2 + v.arg_number], loop)
    return True


# Tile arithmetic's element types here: floats in f32 registers, i32 in b32, bools (i1)
# as predicates and one byte in shared memory. i64 / f64 tiles are refused (E7001): no
# 64-bit tile path (b64 registers through loads, stores, shfl and the reductions).
_TILE_ELEMS = (*tiles.FLOATS, *tiles.INTS, "i1")


def _tile_check(op: ir.Operation) -> None:
    m = T.placed(op.results[0].type)
    if m is None or len(m.shape) != 2 or not m.has_static_shape:
        raise refuse("E7001", op, f"{op.name}: the NVIDIA backends compute on 2-D static tiles")
    for t in [m, *(T.placed(v.type) for v in op.operands)]:
        if t is not None and _dtype(t) not in _TILE_ELEMS:
            raise refuse(
                "E7001",
                op,
                f"{op.name} on {_dtype(t)} tiles: the NVIDIA backends compute on f32, bf16, "
                f"f16, i32 and bool tiles (no 64-bit tile arithmetic)",
            )


@rule("vx.binary")
def _tile_binary(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Bin(r, c, d, fn, xs[0], xs[1]))


@rule("vx.unary")
def _tile_unary(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Un(r, c, d, fn, xs[0]))


@rule("vx.cast")
def _tile_cast(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Cast(r, c, d, xs[0]))


@rule("vx.compare")
def _tile_compare(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Cmp(r, c, d, fn, xs[0], xs[1]))


@rule("vx.select")
def _tile_select(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Sel(r, c, d, xs[0], xs[1], xs[2]))


@rule("vx.iota")
def _tile_iota(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Iota(r, c, d, axis))


@rule("vx.reduce")
def _tile_reduce(fl: FunctionLowering, op: ir.Operation) -> None:
    _tile_check(op)
    fn = ir.StringAttr(op.attributes["fn"]).value
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    scratch = fl.k.reg("b32")
    fl.k.ins("add.u32", scratch, fl.c.base, Imm(fl.private_at + fl.private[op.results[0]]))
    _tile_value(fl, op, lambda r, c, d, xs: tiles.Red(r, c, d, fn, axis, xs[0], scratch))


@rule("vx.transpose")
def _transpose(fl: FunctionLowering, op: ir.Operation) -> None:
    """A transpose that reaches the backend is one `fold-transpose` could not fold into
    a matmul_acc's B operand, which is the only transpose the MMA reads for free."""
    raise refuse(
        "E7001",
        op,
        "the NVIDIA backends lower `vx.transpose` only as the B operand of the matmul_acc "
        "right after it (folded into the MMA's operand layout); other transposes are not "
        "lowered yet",
    )


@rule("scf.for")
def _for(fl: FunctionLowering, op: ir.Operation) -> None:
    k = fl.k
    lb, ub, step = (fl.get(v) for v in list(op.operands)[:3])
    inits = [fl.get(v) for v in list(op.operands)[3:]]
    body = op.regions[0].blocks[0]
    cls = lb.reg.cls
    bits = cls[1:]
    iv = k.reg(cls)
    k.ins(f"mov.{cls}", iv, lb.reg)
    carried = [fl.carry(v, op) for v in inits]
    fl.set(body.arguments[0], Scalar(iv))
    for a, c in zip(list(body.arguments)[1:], carried, strict=True):
        fl.set(a, c)
    head, end = k.label("for"), k.label("for_end")
    k.place(head)
    k.bra(end, pred=k.setp("ge", f"s{bits}", iv, ub.reg))
    fl.parallel_assign(carried, fl.region_values(body), op)
    k.ins(f"add.s{bits}", iv, iv, step.reg)
    k.bra(head)
    k.place(end)
    for r, c in zip(op.results, carried, strict=True):
        fl.set(r, c)


@rule("scf.if")
def _if(fl: FunctionLowering, op: ir.Operation) -> None:
    k = fl.k
    cond = fl.get(op.operands[0])
    els, end = k.label("else"), k.label("endif")
    joined: list[object] = []

    k.bra(els, pred=cond.reg, negate=True)
    joined.extend(fl.carry(y, op) for y in fl.region_values(op.regions[0].blocks[0]))
    k.bra(end)
    k.place(els)
    if len(op.regions) > 1 and op.regions[1].blocks:
        fl.parallel_assign(joined, fl.region_values(op.regions[1].blocks[0]), op)
    k.place(end)
    for r, j in zip(op.results, joined, strict=True):
        fl.set(r, j)


@rule("func.return")
def _return(fl: FunctionLowering, op: ir.Operation) -> None:
    if op.parent.name != "func.func":
        raise refuse("E7010", op, "a return inside a branch is not lowered on GPU targets")
    for v in op.operands:
        if not isinstance(fl.get(v), Output):
            raise refuse("E7003", op, "a kernel returns tensors it wrote to HBM only")


def _call_refusal(fl: FunctionLowering, op: ir.Operation) -> str:
    """Why a call reaches the backend: an extern, or a recursive helper (vxc/ir/passes/inline.py
    inlines every other)."""
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    if callee in fl.helpers and T.has_body(fl.helpers[callee]):
        return f"`{callee}` calls itself; GPU targets inline helpers, and a recursive one cannot be"
    return (
        f"call to extern `{callee}`: extern device functions need a linkable "
        f"device library, and none exists for Vx on {fl.target} yet (Vx helpers are "
        f"inlined; an extern function has no body to inline)"
    )


@rule("memref.memory_space_cast")
def _space_cast(fl: FunctionLowering, op: ir.Operation) -> None:
    fl.set(op.results[0], fl.get(op.operands[0]))


# -- module -----------------------------------------------------------------------------------


def lower_module(module: ir.Module, target: Target) -> tuple[Module, list[dict]]:
    """Every public func.func with a body becomes one `.entry`; (PTX module, manifest
    entries)."""
    if target.arch is None:  # the driver hands this backend NVIDIA targets only
        raise TypeError(f"the NVIDIA backends build NVIDIA targets, not {target.name}")
    sm = target.arch.sm
    ptx = Module(sm)
    kernels = []
    funcs = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func":  # the HIR lowering emits functions only
            raise TypeError(f"unexpected top-level op `{op.name}`")
        funcs.append(op)
    # Extern declarations and recursive helpers (the only helpers inlining leaves) are
    # reached through calls only, and refused there.
    helpers = {T.sym_name(f): f for f in funcs if T.is_private(f) or not T.has_body(f)}
    for op in funcs:
        if T.sym_name(op) in helpers:
            continue
        kern = Kernel(T.sym_name(op), sm, THREADS)
        kernels.append(FunctionLowering(op, target, kern, helpers).run())
        ptx.kernels.append(kern)
    if not ptx.kernels:
        raise NvidiaError("E7003", "the module has no kernel to build")
    return ptx, kernels


FunctionLowering.rules = RULES
# What the rules use: values, the PTX builder, the arch record, tiles and the helpers
# rules share; not the planning (`plan`, `declare`, `smem_layout`, `prologue`).
FunctionLowering.rule_surface = frozenset(
    {"get", "set", "region_values", "parallel_assign", "carry", "k", "c", "mma", "arch",
     "target", "func", "tile", "issue_load", "wait", "as_smem", "next_count",
     "slot_address", "tmaps", "tmap_addr", "results", "lens",
     "instance", "status", "exit", "store_groups", "node", "evaluate", "em", "private",
     "private_at", "bump", "update_acc"}
)  # fmt: skip
FunctionLowering.no_rule = "the NVIDIA backends have no lowering for `{name}`"
# Views and stores are TMA boxes at the view's coordinates and TMA stores; tile
# arithmetic is tiles.py's expressions and a transpose folds into matmul_acc's B operand
# (what a rule cannot lower it refuses itself, coded, at the op).
REFUSALS: dict[str, RefusalEntry] = {}
FunctionLowering.refusals = REFUSALS
