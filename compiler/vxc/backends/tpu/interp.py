"""A numpy interpreter for exactly the Mosaic ops the TPU backend emits, with DMA hazards.

    result = run(mosaic_text, [tiles, w])      # -> Run(outputs=[...], trace=[...])

Semantics (what a TensorCore guarantees, made strict):
- `tpu.enqueue_dma` snapshots its source and puts the DMA in flight; its destination is
  written only when a `tpu.wait_dma2` on the same semaphore completes it. Until then the
  destination is poisoned: any read of it (vector.load, DMA source, memref.load) is a
  stale read, reported naming the reading op and the DMA; so is any write to it.
- A `tpu.wait_dma2` with no DMA in flight on its semaphore (a second wait, or a wait with
  nothing enqueued: a hang on hardware) is reported; so is a DMA still in flight when the
  kernel returns (its semaphore left signalled).
- VMEM scratch starts as NaN (uninitialised), SMEM as zeros; `tpu.matmul` computes
  acc + lhs @ rhs, products exact and rounded to f32 once per matmul, with f32 operands
  first rounded to bf16 unless the op asks for `#tpu.contract_precision<fp32>` (the MXU's
  one-pass default); `scf.for` runs its body; a Vec's placeholder length (the
  `tpu.dynamic_dimension_mapping_*` attributes) becomes the actual input's length, as XLA
  does when it specialises the export.
- Vector arithmetic (the tile ops, backends/tpu/vregs.py) is numpy's f32: one rounding
  per op, `arith.truncf` to bf16/f16 nearest even, `vector.multi_reduction` in f32,
  `tpu.matmul` honouring its dimension numbers (a folded transpose); `scf.if` runs the
  branch its condition picks; a `tpu.assume_multiple` that does not hold is reported.
- `trace` records DMA starts/waits and matmuls with the HBM tile each one moved or read,
  so a test can check that tile i+1's DMA is issued before tile i's matmul; `dmas` each
  DMA started, as (instance, source buffer, source region), to count what an instance
  moved (which key tiles a causal attention instance reads).
- The grid (`iteration_bounds`) runs one instance after another with its program id,
  as one TensorCore does; scratch persists across instances.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from vxc.backends.tpu.context import mosaic_context
from vxc.backends.tpu.lower import STABLEHLO, fold
from vxc.rules import registrar

DTYPES = {
    "f32": np.float32,
    "bf16": ml_dtypes.bfloat16,
    "i32": np.int32,
    "f16": np.float16,
    "i16": np.int16,
    "i8": np.int8,
    "i1": np.bool_,  # masks (vector<..xi1>) only: a bool tile in VMEM is i8 0/1
}


def _uninit(shape, dtype) -> np.ndarray:
    """Uninitialised memory: NaN, or for an integer buffer the byte pattern 0x55."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        return np.full(shape, int.from_bytes(b"\x55" * dtype.itemsize, "little"), dtype)
    return np.full(shape, np.nan, dtype)


DYNAMIC = -(2**63)  # MLIR's dynamic size: a grid bound given at run time


class InterpError(Exception):
    """The module did something a TPU would not do correctly; the message names the op."""


@dataclass(eq=False)
class Buffer:
    name: str
    array: np.ndarray
    labels: dict = field(default_factory=dict)  # leading index -> provenance label
    logical: tuple[int, ...] | None = None  # an HBM tensor's shape inside its tile padding

    def value(self) -> np.ndarray:
        """The tensor without its tile padding."""
        if self.logical is None:
            return self.array
        return self.array[tuple(slice(0, n) for n in self.logical)]


def tile_padded(shape: tuple[int, ...], dtype) -> tuple[int, ...]:
    """The shape an HBM tensor occupies on a TPU: its two minor dimensions padded to whole
    tiles, as Mosaic lays out a kernel argument (`infer-memref-layout`'s tiling factor,
    and the layouts libtpu gives the custom call's operands, docs/TPU.md "Edge views"):
    128 lanes; 8 rows, or for a tensor of at most 4 rows the power of two >= its rows
    (at least 2 for 16-bit, 4 for 8-bit elements: their packing). 1-D tensors as they are."""
    if len(shape) < 2:
        return tuple(shape)
    rows, lanes = shape[-2], shape[-1]
    packing = max(1, 4 // np.dtype(dtype).itemsize)
    if rows <= 4:
        rows = max(packing, 1 << (rows - 1).bit_length()) if rows else 0
    else:
        rows = -(-rows // 8) * 8
    return (*shape[:-2], rows, -(-lanes // 128) * 128 if lanes else 0)


def _padded(array: np.ndarray) -> np.ndarray:
    """`array` in a buffer of its tile-padded shape, the padding uninitialised (NaN)."""
    out = _uninit(tile_padded(array.shape, array.dtype), array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


@dataclass(frozen=True)
class View:
    buf: Buffer
    region: tuple[tuple[int, int], ...]  # (start, size) per buffer dim
    shape: tuple[int, ...]  # logical shape (squeezed)
    # An HBM operand: how far a slice may reach per dimension (its tile padding, which a
    # DMA of whole tiles moves, docs/TPU.md "Edge views"); else the region's sizes.
    bounds: tuple[int, ...] | None = None

    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(s, s + n) for s, n in self.region)

    def read(self) -> np.ndarray:
        return self.buf.array[self.slices()].reshape(self.shape).copy()

    def write(self, value: np.ndarray) -> None:
        self.buf.array[self.slices()] = np.asarray(value).reshape([n for _, n in self.region])

    def overlaps(self, other: View) -> bool:
        if self.buf is not other.buf:
            return False
        return all(
            a < c + d and c < a + b
            for (a, b), (c, d) in zip(self.region, other.region, strict=True)
        )

    def label(self) -> str:
        """`name[k]` for one leading slice (a Vec tile, a ring slot), else `name`."""
        if self.region and self.region[0][1] == 1 and self.buf.array.shape[0] > 1:
            return f"{self.buf.name}[{self.region[0][0]}]"
        return self.buf.name


@dataclass
class Dma:
    op_text: str
    sem: tuple[int, int]  # (id of the semaphore buffer, index)
    src: View
    dst: View
    data: np.ndarray
    label: str


@dataclass
class Run:
    outputs: list[np.ndarray]
    trace: list[tuple]  # ("dma_start"|"dma_wait", src label, dst label) / ("matmul", lhs label)
    dmas: list[tuple[int, str, tuple]] = field(default_factory=list)  # (pid, src, region)


def _describe(op: ir.Operation) -> str:
    text = str(op).strip().splitlines()[0]
    return f"`{op.name}` ({text[:160]})"


Rule = Callable[["Interp", ir.Operation], None]
RULES: dict[str, Rule] = {}


rule = registrar(RULES)


class Interp:
    def __init__(
        self, module: ir.Module, inputs: list[np.ndarray], names=None, aliases=None, grid=None
    ) -> None:
        self.module = module
        self.aliases: dict[int, int] = dict(aliases or {})  # output index -> input index
        self.grid = grid  # the run-time grid bounds (a specialised dynamic grid)
        self.names = names or [f"in{i}" for i in range(len(inputs))]
        self.provenance: dict[ir.Value, str] = {}
        self.env: dict[ir.Value, object] = {}
        self.inflight: list[Dma] = []
        self.trace: list[tuple] = []
        self.dmas: list[tuple[int, str, tuple]] = []
        self.pid = 0
        self.placeholders: dict[int, int] = {}
        self.inputs = inputs
        for name in module.operation.attributes:
            m = re.fullmatch(r"tpu\.dynamic_dimension_mapping_module_(\d+)", name)
            if m:
                self.placeholders[int(m.group(1))] = -1
        self.fn = next(
            op.operation for op in module.body.operations if op.operation.name == "func.func"
        )

    # -- memory ----------------------------------------------------------------------
    def _memref_parts(self, t: ir.MemRefType) -> tuple[list[int], str, str]:
        ms = str(t.memory_space)
        space = re.search(r"memory_space<(\w+)>", ms).group(1) if ms != "None" else "any"
        return list(t.shape), str(t.element_type), space

    def check_read(self, view: View, op: ir.Operation) -> None:
        for d in self.inflight:
            if d.dst.overlaps(view):
                raise InterpError(
                    f"stale read: {_describe(op)} reads {view.label()} while the DMA "
                    f"{d.label} into it is in flight (started by {d.op_text}); "
                    "wait on its semaphore first"
                )

    def check_write(self, view: View, op: ir.Operation) -> None:
        for d in self.inflight:
            if d.dst.overlaps(view):
                raise InterpError(
                    f"write during DMA: {_describe(op)} writes {view.label()} while the DMA "
                    f"{d.label} into it is in flight (started by {d.op_text})"
                )
            if d.src.overlaps(view):
                raise InterpError(
                    f"source overwritten in flight: {_describe(op)} writes {view.label()}, "
                    f"the source of the DMA {d.label} still in flight"
                )

    # -- run ---------------------------------------------------------------------------
    def run(self) -> Run:
        block = self.fn.regions[0].blocks[0]
        args = list(block.arguments)
        n_in = len(self.inputs)
        scratch = ir.IntegerAttr(self.fn.attributes["scratch_operands"]).value
        n_out = len(args) - 1 - n_in - scratch
        # Placeholders: which operand dimension each one stands for.
        attrs = self.module.operation.attributes
        # A grid bound given by the shapes is the custom call's leading operand (one per
        # placeholder bound): the mapping's operand indices count it.
        lead = sum(
            1
            for g in ir.DenseI64ArrayAttr(self.fn.attributes["iteration_bounds"])
            if g in self.placeholders
        )
        for name in attrs:
            m = re.fullmatch(r"tpu\.dynamic_dimension_mapping_module_(\d+)", name)
            if not m:
                continue
            p = int(m.group(1))
            idx = ir.ArrayAttr(
                self.module.operation.attributes[f"tpu.dynamic_dimension_mapping_indices_{p}"]
            )
            sizes = []
            for loc in idx:
                loc = ir.DictAttr(loc)
                operand = ir.IntegerAttr(loc["operand_index"]).value
                dim = ir.IntegerAttr(loc["dimension_index"]).value
                sizes.append(int(self.inputs[operand - lead].shape[dim]))
            self.placeholders[p] = evaluate_shape(ir.StringAttr(attrs[name]).value, sizes)
        outputs = []
        for i, a in enumerate(args[1:]):
            t = ir.MemRefType(a.type)
            shape, elem, space = self._memref_parts(t)
            # HBM tensors (inputs and outputs) lie in their tile padding (`tile_padded`).
            if i < n_in:
                arr = np.array(self.inputs[i], dtype=DTYPES.get(elem, np.float32), copy=True)
                want = [self.placeholders.get(d, d) for d in shape]
                if list(arr.shape) != want:
                    raise InterpError(f"input {i} has shape {arr.shape}, the kernel takes {want}")
                buf = Buffer(self.names[i], _padded(arr), logical=arr.shape)
            elif i - n_in in self.aliases:  # a `&mut` input's buffer, written in place
                src = self.aliases[i - n_in]
                arr = np.array(self.inputs[src], copy=True)
                buf = Buffer(self.names[src], _padded(arr), logical=arr.shape)
                outputs.append(buf)
            elif i < n_in + n_out:
                want = [self.placeholders.get(d, d) for d in shape]
                arr = _uninit(want, DTYPES.get(elem, np.float32))
                buf = Buffer(f"result{i - n_in}", _padded(arr), logical=arr.shape)
                outputs.append(buf)
            elif "dma_semaphore" in elem:
                buf = Buffer(f"%arg{i + 1}", np.zeros(shape or [1], np.int64))
            elif space == "smem":
                buf = Buffer(f"%arg{i + 1}", np.zeros(shape, DTYPES[elem]))
            else:  # VMEM scratch: named as in the Mosaic text
                buf = Buffer(f"%arg{i + 1}", _uninit(shape, DTYPES.get(elem, np.float32)))
            dims = buf.logical or buf.array.shape
            bounds = buf.array.shape if buf.logical is not None else None
            self.env[a] = View(buf, tuple((0, d) for d in dims), tuple(dims), bounds)
        # The grid, one instance after another as one TensorCore runs it (scratch persists
        # across instances; each instance must leave no DMA in flight).
        grid = [
            self.placeholders.get(g, g)
            for g in ir.DenseI64ArrayAttr(self.fn.attributes["iteration_bounds"])
        ]
        if any(g == DYNAMIC for g in grid):
            # libtpu's specialisation: a bound the shapes give is the call's leading
            # operand, not in the module; the caller passes it (`grid`).
            if self.grid is None:
                raise InterpError(
                    "the grid bound is a run-time operand of this module (a grid the "
                    "shapes give, as libtpu specialised it): pass it as `grid`"
                )
            dyn = iter(self.grid)
            grid = [next(dyn) if g == DYNAMIC else g for g in grid]
        for pid in range(grid[0] if grid else 1):
            self.env[args[0]] = np.int32(pid)
            self.pid = pid
            self.trace.append(("instance", pid))
            self.block(block)
            if self.inflight:
                d = self.inflight[0]
                raise InterpError(
                    f"semaphore left signalled: the DMA {d.label} started by {d.op_text} is "
                    f"never waited (its semaphore is still signalled when instance {pid} returns)"
                )
        return Run([b.value() for b in outputs], self.trace, self.dmas)

    def block(self, block: ir.Block) -> list:
        for op in block.operations:
            op = op.operation
            if op.name in ("scf.yield", "func.return"):
                return [self.env[v] for v in op.operands]
            fn = RULES.get(op.name)
            if fn is None:
                raise InterpError(f"the interpreter has no rule for {_describe(op)}")
            fn(self, op)
        return []


# ---------------------------------------------------------------------------------------


def _scalar_type(t: ir.Type):
    s = str(t)
    return {"i32": np.int32, "index": np.int64, "i1": np.bool_, "f32": np.float32}.get(s)


@rule("arith.constant")
def _constant(it: Interp, op: ir.Operation) -> None:
    attr = op.attributes["value"]
    t = op.results[0].type
    if isinstance(t, ir.VectorType):
        dense = ir.DenseElementsAttr(attr)
        splat = dense.get_splat_value()
        val = (
            ir.FloatAttr(splat).value
            if isinstance(splat.type, ir.FloatType)
            else ir.IntegerAttr(splat).value
        )
        it.env[op.results[0]] = np.full(
            list(t.shape), val, DTYPES.get(str(t.element_type), np.float32)
        )
        return
    if isinstance(t, ir.FloatType):
        it.env[op.results[0]] = np.float32(ir.FloatAttr(attr).value)
        return
    v = ir.IntegerAttr(attr).value
    v = it.placeholders.get(v, v) if v in it.placeholders else v
    it.env[op.results[0]] = _scalar_type(t)(v)


_SHAPE_LINE = re.compile(r"%(\w+) = stablehlo\.(\w+) (.*?) : tensor<i32>")


def evaluate_shape(text: str, args: list[int]) -> int:
    """The value of a placeholder's mapping module (`lower.shape_module`: StableHLO
    constants and integer arithmetic of the dimension variables) for `args`."""
    ops = {v: k for k, v in STABLEHLO.items()}
    env = {f"%arg{k}": a for k, a in enumerate(args)}
    for name, op, rest in _SHAPE_LINE.findall(text):
        if op == "constant":
            env[f"%{name}"] = int(re.fullmatch(r"dense<(-?\d+)>", rest).group(1))
        elif op in ops:
            x, y = (env[t.strip()] for t in rest.split(","))
            env[f"%{name}"] = fold(ops[op], x, y)
        else:
            raise InterpError(f"mapping module op stablehlo.{op} is not evaluated here")
    return env[re.search(r"return (%\w+)", text).group(1)]


def _divsi(a, b):  # C semantics: the quotient truncates toward zero
    # (the lowering never divides by 0 nor MIN by -1: docs/DESIGN.md, integer arithmetic)
    q = abs(int(a)) // abs(int(b))
    return type(a)(q if (int(a) < 0) == (int(b) < 0) else -q)


def _remsi(a, b):  # the remainder takes the dividend's sign
    return type(a)(int(a) - int(_divsi(a, b)) * int(b))


_BIN = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
    "arith.remui": np.remainder, "arith.remsi": _remsi, "arith.divsi": _divsi,
    "arith.divui": np.floor_divide, "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or,
    "arith.xori": np.bitwise_xor, "arith.minsi": np.minimum, "arith.maxsi": np.maximum,
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
    "arith.shli": np.left_shift, "arith.shrui": lambda a, b: _unsigned(np.right_shift, a, b),
}  # fmt: skip


def _unsigned(fn, a, b):
    """`fn` on the bits of a and b as unsigned integers of their width (arith's `ui` ops)."""
    a, b = np.asarray(a), np.asarray(b)
    u = np.dtype(f"uint{a.dtype.itemsize * 8}")
    return fn(a.astype(u), b.astype(u)).astype(a.dtype)[()]


@rule(*_BIN)
def _binary(it: Interp, op: ir.Operation) -> None:
    a, b = (it.env[v] for v in op.operands)
    # Integers wrap, as `arith` defines (docs/DESIGN.md); floats are IEEE (inf, NaN).
    with np.errstate(all="ignore"):
        it.env[op.results[0]] = _BIN[op.name](a, b)


# Elementwise f32 functions (f32 in, f32 out: numpy's f32 ops round once, as the VPU
# does for these; `math.exp` is numpy's, within a few ulp of the EUP's).
_UNARY = {
    "arith.negf": np.negative,
    "math.exp": np.exp,
    "math.sqrt": np.sqrt,
    "math.tanh": np.tanh,
    "math.log": np.log,
    "math.absf": np.abs,
    "math.rsqrt": lambda x: np.float32(1) / np.sqrt(x),  # two f32 roundings: within 1.5 ulp
    "math.erf": lambda x: _erf(np.asarray(x, np.float64)).astype(np.float32),  # rounded once
}
_erf = np.vectorize(math.erf, otypes=[np.float64])


@rule(*_UNARY)
def _unary(it: Interp, op: ir.Operation) -> None:
    with np.errstate(all="ignore"):
        it.env[op.results[0]] = _UNARY[op.name](it.env[op.operands[0]])


@rule("arith.extf", "arith.truncf")
def _float_cast(it: Interp, op: ir.Operation) -> None:
    """Widening is exact; narrowing rounds to nearest even (ml_dtypes, as the VPU)."""
    t = op.results[0].type
    elem = t.element_type if isinstance(t, ir.VectorType) else t
    out = np.asarray(it.env[op.operands[0]]).astype(DTYPES[str(elem)])
    it.env[op.results[0]] = out if isinstance(t, ir.VectorType) else out[()]


# arith.cmpf predicates: ordered ones are false on NaN, unordered ones true.
_CMPF = {1: (np.equal, False), 2: (np.greater, False), 3: (np.greater_equal, False),
         4: (np.less, False), 5: (np.less_equal, False), 6: (np.not_equal, False),
         8: (np.equal, True), 9: (np.greater, True), 10: (np.greater_equal, True),
         11: (np.less, True), 12: (np.less_equal, True), 13: (np.not_equal, True)}  # fmt: skip


@rule("arith.cmpf")
def _cmpf(it: Interp, op: ir.Operation) -> None:
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    a, b = (it.env[v] for v in op.operands)
    if pred in (0, 15):  # false, true
        it.env[op.results[0]] = np.bool_(pred == 15)
        return
    if pred in (7, 14):  # ord, uno
        nan = np.isnan(a) | np.isnan(b)
        it.env[op.results[0]] = ~nan if pred == 7 else nan
        return
    fn, unordered = _CMPF[pred]
    nan = np.isnan(a) | np.isnan(b)
    it.env[op.results[0]] = (fn(a, b) & ~nan) | (nan & unordered)


@rule("tpu.assume_multiple")
def _assume_multiple(it: Interp, op: ir.Operation) -> None:
    """A promise to Mosaic's alignment checks; the interpreter holds the kernel to it."""
    x = it.env[op.operands[0]]
    k = ir.IntegerAttr(op.attributes["multiple"]).value
    if int(x) % k:
        raise InterpError(f"{_describe(op)}: {int(x)} is not a multiple of {k}")
    it.env[op.results[0]] = x


@rule("vector.broadcast")
def _broadcast(it: Interp, op: ir.Operation) -> None:
    shape = list(ir.VectorType(op.results[0].type).shape)
    src = np.asarray(it.env[op.operands[0]])
    it.env[op.results[0]] = np.broadcast_to(src, shape).copy()


_KINDS = {"add": np.add, "maximumf": np.maximum, "minimumf": np.minimum,
          "maxsi": np.maximum, "minsi": np.minimum}  # fmt: skip


@rule("vector.multi_reduction")
def _multi_reduction(it: Interp, op: ir.Operation) -> None:
    """The reduction in f32 (pairwise, as numpy sums; the hardware's order differs only
    by f32 rounding), or in i32 (a sum wraps), combined with the accumulator."""
    src, acc = (it.env[v] for v in op.operands)
    kind = re.search(r"#vector\.kind<(\w+)>", str(op.attributes["kind"])).group(1)
    dims = tuple(ir.DenseI64ArrayAttr(op.attributes["reduction_dims"]))
    fn = _KINDS[kind]
    with np.errstate(all="ignore"):
        it.env[op.results[0]] = fn(fn.reduce(src, axis=dims), acc).astype(src.dtype)


@rule("vector.transpose")
def _vtranspose(it: Interp, op: ir.Operation) -> None:
    perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    it.env[op.results[0]] = np.transpose(it.env[op.operands[0]], perm).copy()


@rule("arith.index_cast", "arith.extsi", "arith.extui", "arith.trunci")
def _index_cast(it: Interp, op: ir.Operation) -> None:
    """Integer casts; of vectors: a mask's extui gives 0/1, extsi sign-extends, trunci
    keeps the low bits (numpy's astype between integer types)."""
    t = op.results[0].type
    x = it.env[op.operands[0]]
    if isinstance(t, ir.VectorType):
        it.env[op.results[0]] = np.asarray(x).astype(DTYPES[str(t.element_type)])
        return
    it.env[op.results[0]] = _scalar_type(t)(x)


@rule("arith.sitofp", "arith.fptosi")
def _convert(it: Interp, op: ir.Operation) -> None:
    """i32 to f32 rounds to nearest even (exact through a double first); f32 to i32
    truncates. Its operand is in range: ir/scalar_cast.py saturates a scalar first, and
    vregs._float_to_i32 a vector; one out of range is reported (undefined in `arith`)."""
    x = it.env[op.operands[0]]
    t = op.results[0].type
    if isinstance(t, ir.VectorType):
        to = DTYPES[str(t.element_type)]
        if op.name == "arith.sitofp":
            it.env[op.results[0]] = np.asarray(x, np.float64).astype(to)
            return
        x = np.asarray(x)
        info = np.iinfo(to)
        if np.isnan(x).any() or (x < info.min).any() or (x >= info.max + 1.0).any():
            raise InterpError(f"{_describe(op)}: an operand is NaN or out of the i32 range")
        it.env[op.results[0]] = np.trunc(x).astype(to)
        return
    to = _scalar_type(t)
    it.env[op.results[0]] = to(float(x)) if op.name == "arith.sitofp" else to(np.trunc(x))


@rule("tpu.iota")
def _iota(it: Interp, op: ir.Operation) -> None:
    """Element [i0, i1, ..] is i_d along the op's dimension d."""
    t = ir.VectorType(op.results[0].type)
    (d,) = list(ir.DenseI32ArrayAttr(op.attributes["dimensions"]))
    shape = list(t.shape)
    idx = np.arange(shape[d], dtype=DTYPES[str(t.element_type)])
    view = [1] * len(shape)
    view[d] = shape[d]
    it.env[op.results[0]] = np.broadcast_to(idx.reshape(view), shape).copy()


_CMP = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
        6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}  # fmt: skip


@rule("arith.cmpi")
def _cmpi(it: Interp, op: ir.Operation) -> None:
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    a, b = (it.env[v] for v in op.operands)
    it.env[op.results[0]] = _CMP[pred](a, b)


@rule("arith.select")
def _select(it: Interp, op: ir.Operation) -> None:
    c, a, b = (it.env[v] for v in op.operands)
    # A scalar condition picks a whole operand; a vector of them picks per element.
    it.env[op.results[0]] = np.where(c, a, b) if np.ndim(c) else (a if c else b)


@rule("memref.load")
def _mload(it: Interp, op: ir.Operation) -> None:
    view, *idx = (it.env[v] for v in op.operands)
    cell = View(
        view.buf, tuple((s + int(i), 1) for (s, _), i in zip(view.region, idx, strict=True)), ()
    )
    it.check_read(cell, op)
    it.env[op.results[0]] = cell.read()[()]


@rule("memref.store")
def _mstore(it: Interp, op: ir.Operation) -> None:
    value, view, *idx = (it.env[v] for v in op.operands)
    cell = View(
        view.buf, tuple((s + int(i), 1) for (s, _), i in zip(view.region, idx, strict=True)), ()
    )
    it.check_write(cell, op)
    cell.write(value)


@rule("tpu.memref_slice")
def _slice(it: Interp, op: ir.Operation) -> None:
    view = it.env[op.operands[0]]
    starts = [int(it.env[v]) for v in list(op.operands)[1:]]
    shape = list(ir.MemRefType(op.results[0].type).shape)
    if len(view.shape) != len(view.region):
        raise InterpError(f"the interpreter slices only unsqueezed memrefs: {_describe(op)}")
    region = []
    bounds = view.bounds or tuple(n for _, n in view.region)
    for (s, n), start, size, bound in zip(view.region, starts, shape, bounds, strict=True):
        if start < 0 or start + size > bound:
            padded = f" ({n} in its tile padding of {bound})" if bound != n else ""
            raise InterpError(
                f"out of bounds: {_describe(op)} slices [{start}, {start + size}) of a "
                f"dimension of {n}{padded}"
            )
        region.append((s + start, size))
    it.env[op.results[0]] = View(view.buf, tuple(region), tuple(shape))


@rule("tpu.memref_squeeze")
def _squeeze(it: Interp, op: ir.Operation) -> None:
    view = it.env[op.operands[0]]
    it.env[op.results[0]] = View(
        view.buf, view.region, tuple(ir.MemRefType(op.results[0].type).shape)
    )


def _sem_key(view: View) -> tuple[int, int]:
    return (id(view.buf), view.region[0][0] if view.region else 0)


@rule("tpu.enqueue_dma")
def _enqueue(it: Interp, op: ir.Operation) -> None:
    src, dst = it.env[op.operands[0]], it.env[op.operands[1]]
    sem = it.env[op.operands[2]]
    it.check_read(src, op)
    it.check_write(dst, op)
    label = f"{src.label()} -> {dst.label()}"
    it.inflight.append(Dma(_describe(op), _sem_key(sem), src, dst, src.read(), label))
    it.trace.append(("dma_start", src.label(), dst.label()))
    it.dmas.append((it.pid, src.buf.name, src.region))


@rule("tpu.wait_dma2")
def _wait(it: Interp, op: ir.Operation) -> None:
    sem, src, dst = (it.env[v] for v in op.operands[:3])
    key = _sem_key(sem)
    # A DMA semaphore counts bytes: a wait completes the DMA its descriptor describes, so
    # the one on its semaphore into the same place of the same size (a ragged transfer's
    # chunks are waited chunk by chunk, edge.py).
    sized = [d for d in it.inflight if d.sem == key and d.dst.overlaps(dst)]
    if sized and not any(d.data.size == math.prod(dst.shape) for d in sized):
        raise InterpError(
            f"wait of another size: {_describe(op)} waits for {math.prod(dst.shape)} elements "
            f"into {dst.label()}, but the DMA in flight there on its semaphore moves "
            f"{sized[0].data.size} (started by {sized[0].op_text})"
        )
    for d in sized:
        if d.data.size == math.prod(dst.shape):
            it.inflight.remove(d)
            d.dst.write(d.data)
            if d.dst.region and d.dst.buf.array.ndim > len(d.dst.shape):
                d.dst.buf.labels[d.dst.region[0][0]] = d.src.label()
            else:
                d.dst.buf.labels[None] = d.src.label()
            it.trace.append(("dma_wait", d.src.label(), d.dst.label()))
            return
    raise InterpError(
        f"semaphore waited twice: {_describe(op)} waits for a DMA into {dst.label()} but no DMA "
        "on its semaphore is in flight (on a TPU this wait never returns)"
    )


def _provenance(view: View, lead: int | None) -> str:
    return view.buf.labels.get(lead, view.buf.labels.get(None, view.buf.name))


@rule("vector.load")
def _vload(it: Interp, op: ir.Operation) -> None:
    view, *idx = (it.env[v] for v in op.operands)
    shape = list(ir.VectorType(op.results[0].type).shape)
    region = tuple((s + int(i), n) for (s, _), i, n in zip(view.region, idx, shape, strict=True))
    v = View(view.buf, region, tuple(shape))
    it.check_read(v, op)
    out = v.read()
    it.env[op.results[0]] = out
    it.provenance[op.results[0]] = _provenance(view, region[0][0] if len(shape) > 2 else None)


@rule("tpu.vector_store")
def _vstore(it: Interp, op: ir.Operation) -> None:
    value, view, *idx = (it.env[v] for v in op.operands)
    shape = list(np.shape(value))
    region = tuple((s + int(i), n) for (s, _), i, n in zip(view.region, idx, shape, strict=True))
    v = View(view.buf, region, tuple(shape))
    it.check_write(v, op)
    v.write(value)


@rule("vector.shape_cast")
def _shape_cast(it: Interp, op: ir.Operation) -> None:
    src = op.operands[0]
    it.env[op.results[0]] = it.env[src].reshape(list(ir.VectorType(op.results[0].type).shape))
    it.provenance[op.results[0]] = it.provenance.get(src, "?")


_DIMS = re.compile(r"dot_dimension_numbers<\[(\d)\], \[(\d)\]")


@rule("tpu.matmul")
def _matmul(it: Interp, op: ir.Operation) -> None:
    lhs, rhs, acc = (it.env[v] for v in op.operands)
    # The contracting dimensions (lhs, rhs): [1], [0] is lhs @ rhs; a transposed operand
    # (a folded `transpose`) contracts its other one.
    lc, rc = (int(d) for d in _DIMS.search(str(op.attributes["dimension_numbers"])).groups())
    lhs, rhs = (lhs if lc == 1 else lhs.T), (rhs if rc == 0 else rhs.T)
    if lhs.dtype == np.float32 and "precision" not in op.attributes:
        # Mosaic's default for f32: one MXU pass, operands rounded to bf16 (nearest even);
        # with `#tpu.contract_precision<fp32>` the product is exact to f32 rounding.
        lhs, rhs = (x.astype(ml_dtypes.bfloat16) for x in (lhs, rhs))
    prod = lhs.astype(np.float64) @ rhs.astype(np.float64)
    it.env[op.results[0]] = (acc.astype(np.float64) + prod).astype(np.float32)
    it.trace.append(("matmul", it.provenance.get(op.operands[0], "?")))


@rule("scf.if")
def _if(it: Interp, op: ir.Operation) -> None:
    region = op.regions[0] if it.env[op.operands[0]] else op.regions[1]
    out = it.block(region.blocks[0]) if len(region.blocks) else []
    for r, v in zip(op.results, out, strict=True):
        it.env[r] = v


@rule("scf.for")
def _for(it: Interp, op: ir.Operation) -> None:
    lb, ub, step, *carried = (it.env[v] for v in op.operands)
    body = op.regions[0].blocks[0]
    args = list(body.arguments)
    i = lb
    while i < ub:
        it.env[args[0]] = i
        for a, v in zip(args[1:], carried, strict=True):
            it.env[a] = v
        carried = it.block(body)
        i = type(i)(i + step)
    for r, v in zip(op.results, carried, strict=True):
        it.env[r] = v


def operands(params: list[dict], args: list) -> tuple[list[np.ndarray], list[str], list[int]]:
    """A call's arguments (in the manifest's `params` order, the Vx one) as the Mosaic
    kernel takes them: the SMEM scalars first, each a 1-element array of its word (a bool
    as an i32 0/1), then the HBM tensors. Also their names, and where each parameter went
    (to map the manifest's alias indices)."""
    smem = [k for k, p in enumerate(params) if p["space"] == "SMEM"]
    order = smem + [k for k in range(len(params)) if k not in smem]
    inputs = []
    for k in order:
        if k in smem:
            word = "i32" if params[k]["dtype"] == "bool" else params[k]["dtype"]
            inputs.append(np.array([args[k]]).astype(DTYPES[word]))
        else:
            inputs.append(args[k])
    return inputs, [params[k]["name"] for k in order], [order.index(k) for k in range(len(params))]


def run(
    module: ir.Module | str,
    inputs: list[np.ndarray],
    names: list[str] | None = None,
    aliases: list[tuple[int, int]] | None = None,
    grid: list[int] | None = None,
) -> Run:
    """Interpret the kernel of a Mosaic module on `inputs` (numpy arrays, in order);
    `names` (the manifest's parameter names) label them in messages and the trace;
    `aliases` (the kernel's (input, output) pairs: `&mut` tensors) make an output start
    as a copy of its input, as the aliased buffer does on the TPU; `grid`: the bounds a
    specialised module takes at run time (a grid its shapes give)."""
    if isinstance(module, str):
        ctx = mosaic_context()
        with ctx:
            module = ir.Module.parse(module)
    it = Interp(module, inputs, names, {o: i for i, o in aliases or ()}, grid)
    with module.context:
        return it.run()
