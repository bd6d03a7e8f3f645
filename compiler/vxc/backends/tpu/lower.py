"""vx function -> Mosaic TPU kernel (`func.func` in the `tpu` dialect), by rules keyed by op name.

One Mosaic module per kernel function, shaped the way Mosaic (and Pallas) expect:

    func.func @K(%pid: i32, <inputs>, <outputs>, <scratch>)
        attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>],
                    iteration_bounds = array<i64: N>, window_params = [{}, ...],
                    scalar_prefetch = 0, scratch_operands = S, tpu.core_type = #tpu.core_type<tc>}

- Inputs and outputs live in HBM as `#tpu.memory_space<any>` (the kernel moves them itself).
  A `Vec`'s runtime length is a placeholder dimension (Pallas's export convention, see
  `placeholder`): the export keeps it symbolic and XLA substitutes the real length.
- Every scratchpad ring of the allocator (the vx ops' `ring`/`slots` attributes) is one VMEM
  scratch buffer `memref<slots x tile>` (just `memref<tile>` for one slot); every ring that
  an async transfer fills has `slots` DMA semaphores; blocking transfers share one more.
  Rings of more than one slot rotate a counter kept in SMEM (slot = counter++ mod slots),
  exactly the IR's contract, so the seed's loop reuses two tile buffers and two semaphores
  for any number of tiles.
- `vx.transfer_async` -> `tpu.enqueue_dma` (target semaphore = the slot's); `vx.wait` ->
  `tpu.wait_dma2` on it; `vx.transfer` -> the pair back to back; `vx.matmul_acc` ->
  `vector.load`s, `tpu.matmul` (f32 accumulator), `tpu.vector_store`; loops -> `scf.for`
  over i32 (a token crosses iterations as two i32s: its slot and its source tile index).
- A returned tensor must be the result of a transfer into HBM: that DMA writes the output.
- Views and stores (LANGUAGE.md 4.2): a `vx.view` is a `Ref` with offsets, and the DMA
  that reads it takes a `tpu.memref_slice` of the HBM operand at those offsets; a
  `&mut` tensor is an output operand aliasing its input (`input_output_aliases`), read
  and written through the output; `vx.store` is a DMA into its slice, waited at once,
  `vx.store_async` one on the store semaphore, waited where its token is. A shape
  parameter (a scalar naming a dimension: gemm's m, n, k) is no operand: it is its
  dimension's placeholder, and every dynamic dimension is a dimension variable of the
  export (its `vx.dims` name, or `NAME_len` for a Vec).
- `edge` views (LANGUAGE.md 4.2): a ragged region is moved in whole (8, 128) tiles, the
  part inside the tensor rounded up into its tile padding, and filled in vregs (edge.py).
- The grid: a `where` clause `instances() == E`, E a function of the shapes (gemm:
  `(m / 128) * (n / 128)`), gives `iteration_bounds = [placeholder of E]` and the custom
  call a leading i32 operand with E's value (Pallas's dynamic grid); otherwise a launch
  of N instances (`--tpu-instances N`, also an override) has `iteration_bounds = [N]`,
  outputs stacked `N x ...`, each instance writing slice `%pid`; N = 0 is a plain call.
  `vx.instance` is `%pid`. An entry's `vx.require` clauses become `jax.export` shape
  constraints where they compare affine expressions of the dimension variables, and
  are listed in the manifest.
- Mosaic's per-DMA bounds checks are switched off when every view and store was proved
  in bounds (`proved = 1`, E6041) and no Vec is indexed (`vx.element` carries no proof).

What Mosaic cannot express is refused (`TpuError`, a coded diagnostic), naming the value
and the rule; calls and memory-space casts are refusal entries of the walk.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, func, memref, scf, vector
from jaxlib.mosaic.python import tpu

from vxc.backends import RefusalEntry
from vxc.backends.tpu import edge as edges
from vxc.backends.tpu.base import RULES, Ref, placed, rule
from vxc.backends.tpu.edge import Edge, EdgeRef
from vxc.backends.tpu.errors import fail
from vxc.backends.tpu.tiling import check_footprint, mosaic_element, slot_element
from vxc.backends.walk import Walk
from vxc.errors import Refusal, Unsupported
from vxc.ir import types as T
from vxc.ir.loc import inlined_notes, span_of
from vxc.ir.ops import TILE_OPS, RequireOp, TransferOp, ring_layout, view

# Pallas's export convention: a symbolic dimension appears in the Mosaic module as a
# placeholder constant counting down from int32 max; module attributes map it to the
# operand dimension it stands for, and XLA substitutes the value when the export is
# specialised to concrete shapes.
PLACEHOLDER_TOP = 2**31 - 1
SCALARS = {"index": "i32", "i64": "i32", "i32": "i32", "i1": "i1", "f32": "f32"}
# Scalar parameters are SMEM scalars (scalar prefetch, TARGETS.md): one `memref<1xW>` in
# SMEM each, read once at the top. The export takes the Vx type (i64 is the 32-bit scalar
# unit's i32, docs/TPU.md); SMEM holds 32-bit words, so a bool travels as an i32 0/1.
# Vx scalar type -> (the export's and manifest's dtype, the SMEM word).
SMEM_PARAMS = {"i64": ("i32", "i32"), "i32": ("i32", "i32"), "f32": ("f32", "f32"),
               "i1": ("bool", "i32")}  # fmt: skip


def _func_name(f: ir.Operation) -> str:
    return ir.StringAttr(f.attributes["sym_name"]).value


@dataclass(frozen=True)
class Param:
    """One HBM operand of the kernel (input or output), as the export and manifest see it."""

    name: str
    dtype: str
    shape: tuple[int | None, ...]  # None: a symbolic dimension
    symbols: tuple[str | None, ...] = ()  # per dimension: the export's dimension variable
    smem: bool = False  # a scalar parameter: a scalar-prefetch operand in SMEM, shape ()

    @property
    def symbol(self) -> str | None:
        """The first dimension variable (a Vec's length), or None."""
        return next((s for s in self.symbols if s), None)

    def to_json(self) -> dict:
        syms = self.symbols or (None,) * len(self.shape)
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": [s if d is None else d for d, s in zip(self.shape, syms, strict=True)],
            "space": "SMEM" if self.smem else "HBM",
        }

    @property
    def word(self) -> str:
        """The SMEM word a scalar parameter travels in (docs/TPU.md)."""
        return "i32" if self.dtype == "bool" else self.dtype


@dataclass
class Ring:
    """One scratch buffer (a ring of `slots` tiles) plus its DMA semaphores."""

    key: int  # ring id (>= 0) or a negative id for a private ring = -1 site
    space: str
    slots: int
    tile: ir.MemRefType  # vx type of one tile
    op: ir.Operation  # first op placing into it (for messages)
    sems: bool = False  # an async transfer fills it
    buf: ir.Value | None = None
    sem: ir.Value | None = None
    counter: int | None = None  # index into the SMEM counters when slots > 1
    what: str = ""  # how messages name it


@dataclass(frozen=True)
class Token:
    src: Ref
    dst: Ref
    ring: Ring | None  # None: a store's token (the store semaphore)
    slot: ir.Value | None
    op: ir.Operation
    edge: Edge | None = None  # an `edge` view's transfer: its waits and fill (edge.py)


@dataclass
class Early:
    """A blocking transfer of read-only HBM data into a private VMEM slot, issued as soon
    as its region's offsets exist and waited just before its result's first use: its own
    semaphore (index `sem`), and the top-level positions of both (docs/TPU.md)."""

    op: ir.Operation  # the `vx.transfer`
    view: ir.Operation | None  # the `vx.view` it reads, lowered with it
    pulled: tuple[ir.Operation, ...]  # the scalar ops of the view's offsets, moved with it
    issue_after: int  # index in the body after whose op the DMA starts (-1: at the top)
    wait_before: int  # index of the first op that uses the tile
    sem: int


@dataclass
class Kernel:
    """A lowered kernel: its Mosaic text and what the export/manifest need."""

    name: str
    inputs: list[Param]
    outputs: list[Param]
    scratch: list[str]  # Mosaic types of the scratch operands
    module: ir.Module = field(repr=False)
    instances: int = 0  # launch grid: 0 = a plain call, N = N instances, results stacked
    preconditions: list[str] = field(default_factory=list)  # the entry's `where` clauses
    constraints: list[str] = field(default_factory=list)  # of the export's dimension variables
    # (input index, output index): a `&mut` tensor is an input the kernel's output aliases.
    aliases: list[tuple[int, int]] = field(default_factory=list)
    # The grid as a function of the dimension variables when the `where` clause fixes
    # `instances()` (gemm: `(m // 128) * (n // 128)`); None: the static `grid`.
    grid_expr: str | None = None
    shape_params: list[str] = field(default_factory=list)  # scalars given by the shapes
    # Every view and store proved in bounds (E6041) and no Vec indexed: Mosaic's run-time
    # DMA bounds checks are switched off (`disable_bounds_checks`).
    bounds_proved: bool = False
    # Scalar parameters (position among `params()`, the SMEM param): the Mosaic kernel
    # takes them first, as scalar-prefetch operands; `inputs` are the HBM tensors.
    scalars: list[tuple[int, Param]] = field(default_factory=list)

    def params(self) -> list[Param]:
        """Every operand parameter in the Vx function's order (the manifest's and the
        export's): the HBM tensors and the SMEM scalars, no shape parameter."""
        out = list(self.inputs)
        for pos, p in sorted(self.scalars, key=lambda x: x[0]):
            out.insert(pos, p)
        return out

    def param_position(self, input_index: int) -> int:
        """Where HBM input `input_index` is among `params()`."""
        return self.params().index(self.inputs[input_index])

    @property
    def grid(self) -> int:
        return max(1, self.instances)

    @property
    def grid_operands(self) -> int:
        """Leading scalar operands of the custom call: a grid bound that depends on the
        shapes is passed as one (Pallas's dynamic grid convention), before the inputs."""
        return int(bool(self.grid_expr) and any(c.isalpha() for c in self.grid_expr))

    @property
    def symbols(self) -> list[str]:
        """The dimension variables, in order of first appearance in the inputs."""
        out: list[str] = []
        for p in self.inputs:
            out += [s for s in p.symbols if s and s not in out]
        return out


VIEW_OPS = ("vx.view", "vx.store", "vx.store_async")
# Op -> its operands that must be tiles in memory (a DMA reads a buffer; matmul_acc
# updates its accumulator in place); every other tile operand may be a vector.
MEMORY_OPERANDS = {"vx.transfer": (0,), "vx.transfer_async": (0,), "vx.store": (0,),
                   "vx.store_async": (0,), "vx.matmul_acc": (0,), "vx.view": (0,),
                   "vx.element": (0,)}  # fmt: skip
# Ops whose result lives in vector registers unless an op needs it in memory (vregs.py).
VREG_OPS = (*TILE_OPS, "vx.zeros")


def _call_refusal(op: ir.Operation) -> str:
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    # Vx helpers were inlined before the backend (vxc/ir/passes/inline.py), but a recursive one.
    module = op
    while module.name != "builtin.module":
        module = module.parent
    defined = any(
        f.operation.name == "func.func"
        and T.sym_name(f.operation) == callee
        and T.has_body(f.operation)
        for f in module.regions[0].blocks[0].operations
    )
    why = (
        f"`{callee}` calls itself, so it cannot be inlined"
        if defined
        else "an `extern fn` is host code the kernel cannot reach"
    )
    return (
        f"tpu backend: call to `{callee}`: a TPU artifact is one Mosaic kernel, and a call "
        f"has no Mosaic equivalent ({why})"
    )


# Ops the tpu backend refuses by design (the walk raises these; see vxc/backends/walk.py).
REFUSALS: dict[str, RefusalEntry] = {
    "func.call": RefusalEntry("E7002", _call_refusal),
    "memref.memory_space_cast": RefusalEntry(
        "E7005",
        "tpu backend: a tensor is reinterpreted in another memory space "
        "(`memref.memory_space_cast`), which Mosaic cannot express",
    ),
}


class FunctionLowering(Walk):
    rules = RULES
    refusals = REFUSALS
    no_rule = "tpu backend: `{name}` has no Mosaic lowering"
    # What the rules use: the value environment, the Mosaic types and constants, the
    # ref/ring helpers and the launch; not the kernel planning of `plan` and `run`.
    rule_surface = frozenset(
        {"env", "ctx", "vx", "ty", "scalar", "i32", "idx", "hbm", "dst", "view", "load",
         "store", "sem", "flatten", "unflatten", "same_shape", "pid", "instances",
         "inputs", "constraints", "preconditions", "precision", "grid_value", "grid_tree",
         "store_sems", "shape_params", "tensor_index", "unchecked", "in_memory",
         "carried_types", "aligned", "promoted", "in_registers", "multiple_of"}
    )  # fmt: skip

    def __init__(
        self, vx_func: ir.Operation, ctx: ir.Context, instances: int = 0, precision: str = "f32"
    ):
        self.vx = vx_func
        self.ctx = ctx
        self.instances = instances
        self.precision = precision  # of f32 matmuls: "f32" (fp32 contract) or "bf16"
        self.preconditions: list[str] = []
        self.constraints: list[str] = []
        self.name = _func_name(vx_func)
        self.env: dict[ir.Value, object] = {}
        self.rings: dict[int, Ring] = {}
        self.private: dict[ir.Operation, int] = {}
        self.outputs: dict[ir.Operation, int] = {}  # transfer op -> output index
        self.inputs: list[Param] = []
        self.out_params: list[Param] = []
        self.placeholders: dict[str, int] = {}  # dimension variable -> placeholder value
        self.dim_at: dict[str, tuple[int, int]] = {}  # its first (input, dimension)
        self.shape_params: dict[int, str] = {}  # argument index -> dimension variable
        self.tensor_index: dict[int, int] = {}  # argument index -> input index
        self.scalars: list[tuple[int, Param]] = []  # (position among the params, SMEM param)
        self.scalar_index: dict[int, int] = {}  # argument index -> index among the scalars
        self.mut_args: list[int] = []  # argument indices of `&mut` tensors
        self.mut_output: dict[int, int] = {}  # argument index -> output index
        self.aliases: list[tuple[int, int]] = []
        self.grid_tree: Dim | None = None  # the grid from the `where` clause
        self.bounds_proved = True  # every view/store proved (E6041), no Vec indexed
        self.stores_async = False  # some `vx.store_async`: a semaphore for stores
        self.unchecked: list[str] = []  # `where` clauses no export constraint states
        self.ret_values: list[ir.Value] = []
        # Tiles some op needs in memory (a DMA's source, matmul_acc's accumulator): a tile
        # op or fill stores its result into its ring slot only then (vregs.py).
        self.in_memory: set[ir.Value] = set()
        self.multiples: dict[int, int] = {}  # argument index -> what its clauses say divides it
        self.capacity = 0  # bytes of VMEM (the transfers' `capacity`)
        self.early: dict[ir.Operation, Early] = {}  # blocking transfers issued early
        self.early_refs: dict[ir.Operation, tuple[Ref, Ref]] = {}  # their DMA's ends
        self.pulled_done: set[ir.Operation] = set()  # scalar ops lowered with an early DMA
        # Zero-filled accumulators that only matmul_acc updates inside loops: their value
        # is kept in vector registers (the zeros a constant, each matmul's result the next
        # one's accumulator, a loop carrying it) and stored into the slot only before an
        # op that needs the memory (`registers`, `materialize`).
        self.in_registers: set[ir.Value] = set()
        self.promoted: dict[ir.Value, ir.Value] = {}  # accumulator -> its current vector

    # -- types ---------------------------------------------------------------------
    def ty(self, text: str) -> ir.Type:
        return ir.Type.parse(text, context=self.ctx)

    def hbm_type(self, p: Param) -> ir.Type:
        """An HBM operand's Mosaic type: each dimension variable its placeholder."""
        syms = p.symbols or (None,) * len(p.shape)
        dims = [
            self.placeholders[s] if d is None else d for d, s in zip(p.shape, syms, strict=True)
        ]
        return self.ty(self._memref(dims, self.ty(p.dtype), "any"))

    def _memref(self, dims, element, space: str) -> str:
        shape = "".join(f"{d}x" for d in dims)
        elem = slot_element(element) if space == "vmem" else mosaic_element(element)
        return f"memref<{shape}{elem}, #tpu.memory_space<{space}>>"

    def scalar(self, t: ir.Type, op: ir.Operation) -> ir.Type:
        name = SCALARS.get(str(t))
        if name is None:
            raise fail(
                "E7011",
                op,
                f"scalar type {t} has no TPU scalar form (supported: {sorted(SCALARS)})",
            )
        return self.ty(name)

    def i32(self, n: int) -> ir.Value:
        return arith.ConstantOp(self.ty("i32"), n).result

    def idx(self, n: int) -> ir.Value:
        return arith.ConstantOp(ir.IndexType.get(self.ctx), n).result

    # -- planning ---------------------------------------------------------------------
    def plan(self) -> None:
        f = self.vx
        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        named = {d for i in range(len(ftype.inputs)) for d in T.arg_dims(f, i) if d}
        for i, t in enumerate(ftype.inputs):
            self._plan_param(i, t, T.arg_name(f, i), named)
        block = f.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        self.ret_values = list(ret.operands)
        for k, v in enumerate(self.ret_values):
            owner = v.owner
            if not (
                isinstance(owner, ir.OpView | ir.Operation)
                and owner.name == "vx.transfer"
                and TransferOp(owner).space == "HBM"
                and owner.parent == f
            ) or (not ir.MemRefType(v.type).has_static_shape):
                raise fail(
                    "E7003",
                    ret,
                    f"kernel `{self.name}`: result {k} must be a tensor of static shape "
                    "transferred into HBM (`return transfer(t, Memory::HBM)`) in the "
                    "function body: its DMA writes the kernel's output",
                )
            self.outputs[owner.operation] = k
            t = ir.MemRefType(v.type)
            stack = (self.instances,) if self.instances else ()
            self.out_params.append(
                Param(
                    f"result{k}" if len(self.ret_values) > 1 else "result",
                    mosaic_element(t.element_type, ret),
                    stack + tuple(t.shape),
                )
            )
        # `&mut` tensors: outputs after the returned results, each aliasing its input.
        for i in self.mut_args:
            k = len(self.out_params)
            self.out_params.append(self.inputs[self.tensor_index[i]])
            self.aliases.append((self.tensor_index[i], k))
            self.mut_output[i] = k
        self.grid_tree = None if self.instances else _where_grid(self, f)
        self.multiples = _where_multiples(f)
        if self.grid_tree is not None and self.ret_values:
            raise fail(
                "E7003",
                ret,
                f"kernel `{self.name}`: its `where` clause fixes the grid from the shapes; "
                "such a kernel writes its results through `&mut` tensors (a returned "
                "tensor would be stacked by a count only known at the call)",
            )

        def uses(op: ir.Operation) -> ir.WalkResult:
            for k in MEMORY_OPERANDS.get(op.name, ()):
                self.in_memory.add(op.operands[k])
            return ir.WalkResult.ADVANCE

        f.walk(uses)
        errors: list[Refusal] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            try:
                self._plan_op(op)
            except Refusal as e:  # exceptions do not cross MLIR's walk: carry it out
                errors.append(e.at(span_of(op), inlined_notes(op)))
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        f.walk(visit)
        if errors:
            raise errors[0]
        self._plan_early()
        self.in_registers = _register_accumulators(self.vx, self.in_memory)
        check_footprint(
            [
                (
                    r.op,
                    r.what,
                    ([r.slots] if r.slots > 1 else []) + list(r.tile.shape),
                    r.tile.element_type,
                )
                for r in self.rings.values()
            ],
            self.capacity,
        )

    def _plan_param(self, i: int, t: ir.Type, name: str, named: set[str]) -> None:
        """Argument `i`: a shape parameter (a scalar naming a dimension: the export's
        dimension variable, not an operand) or an HBM tensor operand, each dynamic
        dimension a dimension variable (its `vx.dims` name, or `NAME_len` for a Vec)."""
        f = self.vx
        if not isinstance(t, ir.MemRefType):
            if name in named and str(t) in ("i64", "i32", "index"):
                self.shape_params[i] = name
                return
            if str(t) not in SMEM_PARAMS:
                raise fail(
                    "E7003",
                    f,
                    f"kernel `{self.name}`: scalar parameter `{name}` ({t}) is not "
                    "supported: TPU scalar parameters are SMEM scalars of "
                    f"{', '.join(sorted(SMEM_PARAMS[k][0] if k == 'i1' else k for k in SMEM_PARAMS))}",
                )
            dtype = SMEM_PARAMS[str(t)][0]
            self.scalar_index[i] = len(self.scalars)
            pos = len(self.inputs) + len(self.scalars)
            self.scalars.append((pos, Param(name, dtype, (), smem=True)))
            return
        if T.space_of(t) != "HBM":
            raise fail("E7003", f, f"kernel `{self.name}`: parameter `{name}` must be in HBM")
        dims = T.arg_dims(f, i)
        shape = tuple(None if d == T.DYNAMIC else d for d in t.shape)
        symbols: list[str | None] = []
        for k, d in enumerate(shape):
            sym = None
            if d is None:
                sym = dims[k] if k < len(dims) and dims[k] else (f"{name}_len" if k == 0 else None)
                if sym is None:
                    raise fail(
                        "E7003",
                        f,
                        f"parameter `{name}` ({t}): dimension {k} is dynamic and names no "
                        "shape parameter",
                    )
                if sym not in self.dim_at:
                    self.dim_at[sym] = (len(self.inputs), k)
                    self.placeholders[sym] = PLACEHOLDER_TOP - len(self.placeholders)
            symbols.append(sym)
        self.tensor_index[i] = len(self.inputs)
        self.inputs.append(Param(name, mosaic_element(t.element_type, f), shape, tuple(symbols)))
        if T.arg_is_mut(f, i):
            self.mut_args.append(i)

    def _plan_op(self, op: ir.Operation) -> None:
        if op.name == "vx.element" or (op.name in VIEW_OPS and not view(op).proved):
            self.bounds_proved = False  # Mosaic's run-time bounds check stays
        if op.name == "vx.store_async":
            self.stores_async = True
        if op.name == "func.call" or op.name in TILE_OPS:
            # Its refusal: a call's before the casts that feed it, a tile op's before its
            # ring is planned.
            self.rule_for(op)
        lay = ring_layout(op)
        if lay is None or (op.name in VREG_OPS and op.results[0] not in self.in_memory):
            return  # a tile in vector registers takes no ring slot
        space = lay.space
        if space == "HBM" and op.name == "vx.transfer":
            if op not in self.outputs:
                raise fail(
                    "E7005",
                    op,
                    "a transfer into HBM must be returned by the kernel: Mosaic "
                    "kernels write HBM only through their output operands",
                )
            return
        if space not in ("VMEM", "ACC"):
            raise fail(
                "E7005", op, f"`{op.name}` into {space}: the tpu backend places tiles in VMEM only"
            )
        tile = placed(op.results[0].type)
        if op.name in ("vx.transfer", "vx.transfer_async"):
            self.capacity = max(self.capacity, view(op).capacity)
        slot_element(tile.element_type, op)
        if not tile.has_static_shape:
            raise fail(
                "E7004",
                op,
                f"{self.describe_dst(op)} has a dynamic shape {tile}; VMEM tiles need static shapes",
            )
        ring = lay.ring
        if ring < 0:
            ring = -1 - len(self.private) - 1
            self.private[op] = ring
        r = self.rings.get(ring)
        if r is None:
            r = self.rings[ring] = Ring(ring, space, max(1, lay.slots), tile, op)
            r.what = self.describe_dst(op)
        elif str(r.tile) != str(tile):
            raise fail(
                "E7005",
                op,
                f"scratch ring {ring} holds both {r.tile} and {tile}; the tpu backend "
                "gives each ring one typed VMEM buffer",
            )
        if op.name == "vx.transfer_async":
            r.sems = True

    def _plan_early(self) -> None:
        """The body's blocking transfers that can start early (`Early`): the source is a
        parameter that is not `&mut` (nothing the kernel does writes it) or a view of one,
        and the destination a one-slot ring no other op fills (nothing else reads or
        writes the slot in between). The DMA starts right after the op that defines the
        last of the view's offsets (their scalar arithmetic moved with it), or after the
        last loop before its use, and is waited before the first op using the tile:
        stream's and stream_grid's `w` travels with tile 0 and is waited before the tile
        loop; gemm_epilogue's bias starts after the K loop, before the last K step."""
        body = [op.operation for op in self.vx.regions[0].blocks[0].operations]
        at = {r: k for k, op in enumerate(body) for r in op.results}
        fills: Counter[int] = Counter()

        def count(op: ir.Operation) -> ir.WalkResult:
            lay = ring_layout(op)
            if lay is not None:
                fills[self.private.get(op, lay.ring)] += 1
            return ir.WalkResult.ADVANCE

        self.vx.walk(count)
        for k, op in enumerate(body):
            if op.name != "vx.transfer" or op in self.outputs:
                continue
            lay = ring_layout(op)
            key = self.private.get(op, lay.ring)
            if lay.space not in ("VMEM", "ACC") or max(1, lay.slots) != 1 or fills[key] != 1:
                continue
            src, view_op = op.operands[0], None
            if _is_op(src.owner, "vx.view") and src.owner.operation in body:
                view_op = src.owner.operation
                deps, src = list(view_op.operands)[1:], view_op.operands[0]
            else:
                deps = []
            if not self._read_only(src):
                continue
            # The scalar arithmetic of the offsets moves with the DMA (no memory, no
            # effect), so the DMA waits only for the effects its offsets depend on.
            chain, issue = _pure_chain(deps, at, body)
            users = [j for j in range(k + 1, len(body)) if _uses(body[j], op.results[0])]
            wait = users[0] if users else len(body) - 1  # before the return at the latest
            # Measured (docs/PERFORMANCE.md): a DMA started before a loop that separates
            # it from its wait (gemm_epilogue's bias before the K loop) keeps its
            # addresses live across the loop and costs 3-12 bundles an instance; started
            # after the last such loop it costs none and still overlaps the last K step.
            loops = [j for j in range(issue + 1, wait) if len(body[j].regions)]
            issue = max([issue, *loops])
            pulled = tuple(o for o in chain if at[o.results[0]] > issue)
            if issue < k - 1 or wait > k + 1:
                self.early[op] = Early(op, view_op, pulled, issue, wait, len(self.early))

    def _read_only(self, v: ir.Value) -> bool:
        """`v` is an HBM tensor parameter of the kernel that is not `&mut`."""
        return (
            isinstance(v, ir.BlockArgument)
            and v.owner.owner == self.vx
            and v.arg_number in self.tensor_index
            and v.arg_number not in self.mut_args
        )

    def lower_body(self, block: ir.Block) -> None:
        """The kernel's body in order, each `Early` transfer's DMA started after op
        `issue_after` and waited before op `wait_before`."""
        body = [op.operation for op in block.operations]
        moved = {e.view for e in self.early.values() if e.view} | set(self.early)
        moved |= {o for e in self.early.values() for o in e.pulled}
        self._start_early(-1)
        for k, op in enumerate(body):
            for e in self.early.values():
                if e.wait_before == k:
                    with self.op_scope(e.op):
                        _early_wait(self, e)
            if op not in moved:
                self.lower_op(op)
            self._start_early(k)

    def _start_early(self, after: int) -> None:
        for e in self.early.values():
            if e.issue_after == after:
                for o in e.pulled:
                    if o not in self.pulled_done:  # two DMAs may share an offset
                        self.pulled_done.add(o)
                        self.lower_op(o)
                if e.view is not None:
                    self.lower_op(e.view)
                with self.op_scope(e.op):
                    _early_start(self, e)

    def lower_op(self, op: ir.Operation) -> None:
        """An accumulator kept in registers is stored before an op that reads its memory
        (a DMA, a transpose, anything but matmul_acc, tile arithmetic and the loops that
        carry it); tile arithmetic reads the vector itself."""
        swapped: dict[ir.Value, object] = {}
        for acc, value in list(self.promoted.items()):
            if not _uses(op, acc) or op.name in ("vx.matmul_acc", "scf.for"):
                continue  # (matmul_acc and a carrying loop were checked by the planning)
            if op.name in TILE_OPS and op.name != "vx.transpose":
                swapped[acc] = self.env[acc]
                self.env[acc] = value
                continue
            with self.op_scope(op):
                self.store(self.env[acc], value)
            del self.promoted[acc]
        try:
            super().lower_op(op)
        finally:
            self.env.update(swapped)

    def describe_dst(self, op: ir.Operation) -> str:
        if op.name == "vx.zeros":
            return "the zero-filled accumulator"
        return f"the VMEM copy of {self.describe(op.operands[0])}"

    def describe(self, v: ir.Value) -> str:
        if isinstance(v, ir.BlockArgument) and v.owner.owner == self.vx:
            return f"`{T.arg_name(self.vx, v.arg_number)}`"
        if isinstance(v, ir.BlockArgument):
            return "a loop-carried value"
        owner = v.owner
        if owner.name == "vx.element":
            return f"an element of {self.describe(owner.operands[0])}"
        return f"the result of `{owner.name}`"

    # -- function ----------------------------------------------------------------------
    def run(self) -> Kernel:
        self.plan()
        rings = [self.rings[k] for k in sorted(self.rings, key=lambda k: (k < 0, abs(k)))]
        scratch: list[str] = []
        for r in rings:
            lead = [r.slots] if r.slots > 1 else []
            scratch.append(self._memref(lead + list(r.tile.shape), r.tile.element_type, "vmem"))
        sem_rings = [r for r in rings if r.sems]
        for r in sem_rings:
            scratch.append(
                f"memref<{r.slots}x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>"
            )
        one_sem = "memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>"
        scratch.append(one_sem)  # blocking transfers and stores
        if self.stores_async:
            # Async stores signal their own semaphore: a DMA semaphore counts bytes, so a
            # blocking transfer's wait on a shared one could be satisfied by a store.
            scratch.append(one_sem)
        if self.early:  # one semaphore per early transfer
            scratch.append(
                f"memref<{len(self.early)}x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>"
            )
        counted = [r for r in rings if r.slots > 1]
        if counted:
            scratch.append(f"memref<{len(counted)}xi32, #tpu.memory_space<smem>>")

        f = self.vx
        smem_types = [
            self.ty(f"memref<1x{p.word}, #tpu.memory_space<smem>>") for _, p in self.scalars
        ]
        in_types = [self.hbm_type(p) for p in self.inputs]
        out_types = [self.hbm_type(p) for p in self.out_params]
        arg_types = [
            self.ty("i32"),
            *smem_types,
            *in_types,
            *out_types,
            *(self.ty(s) for s in scratch),
        ]
        grid = self.grid_tree
        if isinstance(grid, str | tuple):  # a function of the dimension variables
            self.grid_value = PLACEHOLDER_TOP - len(self.placeholders)
        else:
            self.grid_value = max(1, self.instances) if grid is None else grid
        with self.ctx, ir.Location.unknown(self.ctx):
            module = ir.Module.create()
            for sym, value in self.placeholders.items():
                self._map_placeholder(module, value, sym)
            if isinstance(grid, str | tuple):
                self._map_placeholder(module, self.grid_value, grid)
            with ir.InsertionPoint(module.body):
                fn = func.FuncOp(self.name, ir.FunctionType.get(arg_types, []))
            n_io = len(in_types) + len(out_types)
            attrs = fn.operation.attributes
            attrs["dimension_semantics"] = ir.ArrayAttr.get(
                [ir.Attribute.parse("#tpu.dimension_semantics<parallel>")]
            )
            attrs["iteration_bounds"] = ir.DenseI64ArrayAttr.get([self.grid_value])
            attrs["scalar_prefetch"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(smem_types)
            )
            attrs["scratch_operands"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(scratch)
            )
            attrs["tpu.core_type"] = ir.Attribute.parse("#tpu.core_type<tc>")
            attrs["window_params"] = ir.ArrayAttr.get([ir.DictAttr.get({})] * n_io)
            entry = fn.add_entry_block()
            args = list(entry.arguments)
            self.pid = args[0]  # the program id of grid dimension 0: `vx.instance`
            n_s = len(smem_types)
            self.smem_args = args[1 : 1 + n_s]
            self.in_args = args[1 + n_s : 1 + n_s + len(in_types)]
            self.out_args = args[1 + n_s + len(in_types) : 1 + n_s + n_io]
            sargs = iter(args[1 + n_s + n_io :])
            for r in rings:
                r.buf = next(sargs)
            for r in sem_rings:
                r.sem = next(sargs)
            self.sync_sem = next(sargs)
            self.store_sems = next(sargs) if self.stores_async else None
            self.early_sems = next(sargs) if self.early else None
            self.counters = next(sargs) if counted else None
            for k, r in enumerate(counted):
                r.counter = k
            with ir.InsertionPoint(entry):
                for r in counted:
                    memref.StoreOp(self.i32(0), self.counters, [self.idx(r.counter)])
                vx_block = f.regions[0].blocks[0]
                for i, a in enumerate(vx_block.arguments):
                    self.env[a] = self._argument(i, a)
                self.lower_body(vx_block)
        return Kernel(
            self.name,
            self.inputs,
            self.out_params,
            scratch,
            module,
            self.instances,
            self.preconditions,
            self.constraints,
            self.aliases,
            None if grid is None else _render(grid),
            list(self.shape_params.values()),
            # Mosaic's checks may go only if the proofs' assumptions are checked too:
            # every `where` clause holds for the build or is an export constraint.
            self.bounds_proved and not self.unchecked,
            self.scalars,
        )

    def _argument(self, i: int, a: ir.Value) -> object:
        """What vx argument `i` is in the kernel: a shape parameter is its dimension's
        placeholder (XLA substitutes the call's size); a `&mut` tensor is its output
        operand, which aliases the input, so reads and writes see one buffer."""
        if i in self.shape_params:
            return self.i32(self.placeholders[self.shape_params[i]])
        if i in self.scalar_index:  # read once from its SMEM word
            k = self.scalar_index[i]
            word = memref.LoadOp(self.smem_args[k], [self.idx(0)]).result
            if self.scalars[k][1].dtype != "bool":
                return word
            return arith.CmpIOp(arith.CmpIPredicate.ne, word, self.i32(0)).result
        name = T.arg_name(self.vx, i)
        if i in self.mut_output:
            return Ref(self.out_args[self.mut_output[i]], None, ir.MemRefType(a.type), name)
        return Ref(self.in_args[self.tensor_index[i]], None, ir.MemRefType(a.type), name)

    def _map_placeholder(self, module: ir.Module, value: int, expr: Dim) -> None:
        """Module attributes that tell XLA what a placeholder stands for: a StableHLO
        function of every dimension variable (sorted by name) computing `expr`, and
        where each variable is found among the operands' dimensions."""
        syms = sorted(self.dim_at)
        # The custom call's operands: the grid bound (when the shapes give it), the SMEM
        # scalars, then the HBM inputs.
        lead = int(isinstance(self.grid_tree, str | tuple)) + len(self.scalars)
        attrs = module.operation.attributes
        attrs[f"tpu.dynamic_dimension_mapping_module_{value}"] = ir.StringAttr.get(
            shape_module(syms, expr)
        )
        i64 = ir.IntegerType.get_signless(64)
        attrs[f"tpu.dynamic_dimension_mapping_indices_{value}"] = ir.ArrayAttr.get(
            [
                ir.DictAttr.get(
                    {
                        "dimension_index": ir.IntegerAttr.get(i64, self.dim_at[s][1]),
                        "operand_index": ir.IntegerAttr.get(i64, self.dim_at[s][0] + lead),
                    }
                )
                for s in syms
            ]
        )

    def location(self, op: ir.Operation) -> ir.Location:
        """The vx op's source position as a Mosaic location (libtpu's errors then name the
        .vx line), or unknown."""
        loc = op.location
        try:
            return ir.Location.file(loc.filename, loc.start_line, loc.start_col, context=self.ctx)
        except AttributeError:
            return ir.Location.unknown(self.ctx)

    def op_scope(self, op: ir.Operation):
        return self.location(op)

    # -- helpers used by the rules --------------------------------------------------------
    def aligned(self, v: ir.Value) -> ir.Value:
        """The Mosaic value of vx offset `v`, marked with what is known to divide it
        (`tpu.assume_multiple`): Mosaic slices a VMEM/HBM ref only at offsets it can see
        are multiples of its (8, 128) tiling, and an offset built from a scalar
        parameter (attention's `hd * s`) is one only by the `where` clause `s % 128 == 0`,
        which the proofs assumed as well."""
        x = self.env[v]
        owner = v.owner
        if isinstance(owner, ir.OpView | ir.Operation) and owner.name == "arith.constant":
            return x
        k = _multiple(self, v)
        return tpu.AssumeMultipleOp(x, k).result if k > 1 else x

    def multiple_of(self, v: ir.Value) -> int:
        """A number known to divide vx integer `v` (`_multiple`)."""
        return _multiple(self, v)

    def view(self, ref: Ref) -> ir.Value:
        """The memref a DMA reads or writes: the base, its `index`-th leading slice, or
        the region at `starts` of that (a `tpu.memref_slice` with dynamic offsets)."""
        if ref.index is None and ref.starts is None:
            return ref.base
        base_t = ir.MemRefType(ref.base.type)
        tile = list(ref.vx_type.shape)
        space = ir.Attribute.parse(str(base_t.memory_space))
        elem = base_t.element_type
        lead = [] if ref.index is None else [1]
        starts = ([] if ref.index is None else [ref.index]) + list(
            ref.starts if ref.starts is not None else [self.i32(0) for _ in tile]
        )
        one = ir.MemRefType.get(lead + tile, elem, memory_space=space)
        s = tpu.MemRefSliceOp(one, ref.base, starts, []).result
        if ref.index is None:
            return s
        sq = ir.MemRefType.get(tile, elem, memory_space=space)
        return tpu.MemRefSqueezeOp(sq, s).result

    def _indices(self, ref: Ref) -> list[ir.Value]:
        """vector.load/store indices of `ref`'s first element (index type)."""
        tile = ref.vx_type.shape
        rest = (
            [arith.IndexCastOp(ir.IndexType.get(), v).result for v in ref.starts]
            if ref.starts is not None
            else [self.idx(0) for _ in tile]
        )
        if ref.index is None:
            return rest
        return [arith.IndexCastOp(ir.IndexType.get(), ref.index).result, *rest]

    def load(self, ref: Ref) -> ir.Value:
        base_t = ir.MemRefType(ref.base.type)
        tile = list(ref.vx_type.shape)
        vt = ir.VectorType.get(tile, base_t.element_type)
        if ref.index is None:
            return vector.LoadOp(vt, ref.base, self._indices(ref)).result
        full = ir.VectorType.get([1, *tile], base_t.element_type)
        v = vector.LoadOp(full, ref.base, self._indices(ref)).result
        return vector.ShapeCastOp(vt, v).result

    def store(self, ref: Ref, value: ir.Value) -> None:
        tile = list(ref.vx_type.shape)
        if ref.index is None:
            tpu.vector_store(value, ref.base, self._indices(ref))
            return
        base_t = ir.MemRefType(ref.base.type)
        full = ir.VectorType.get([1, *tile], base_t.element_type)
        v = vector.ShapeCastOp(full, value).result
        tpu.vector_store(v, ref.base, self._indices(ref))

    def ring_of(self, op: ir.Operation) -> Ring:
        ring = ring_layout(op).ring
        return self.rings[self.private[op] if ring < 0 else ring]

    def next_slot(self, r: Ring) -> ir.Value | None:
        """Slot of this execution: counter mod slots, then counter += 1 (rings of > 1 slot;
        the IR's contract)."""
        if r.slots == 1:
            return None
        at = self.idx(r.counter)
        n = memref.LoadOp(self.counters, [at]).result
        if r.slots & (r.slots - 1) == 0:  # a power of two: the remainder is one `and`
            slot = arith.RemUIOp(n, self.i32(r.slots)).result
            memref.StoreOp(arith.AddIOp(n, self.i32(1)).result, self.counters, [at])
            return slot
        # Else the scalar unit has no cheap remainder: keep the slot itself in SMEM and
        # wrap it (slot + 1, or 0 past the last), the same sequence of slots.
        succ = arith.AddIOp(n, self.i32(1)).result
        last = arith.CmpIOp(arith.CmpIPredicate.eq, succ, self.i32(r.slots)).result
        memref.StoreOp(arith.SelectOp(last, self.i32(0), succ).result, self.counters, [at])
        return n

    def sem(self, r: Ring | None, slot: ir.Value | None, arr: ir.Value | None = None) -> ir.Value:
        """The DMA semaphore of ring `r`'s slot; of blocking transfers (`r` None); or
        element `slot` of `arr`."""
        arr = arr if arr is not None else self.sync_sem if r is None else r.sem
        one = self.ty("memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>")
        s = tpu.MemRefSliceOp(one, arr, [slot if slot is not None else self.i32(0)], []).result
        return tpu.MemRefSqueezeOp(
            self.ty("memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>"), s
        ).result

    def hbm(self, v: ir.Value, op: ir.Operation) -> Ref:
        ref = self.env[v]
        if isinstance(ref, ir.Value) and isinstance(ref.type, ir.VectorType):
            raise fail(
                "E7006",
                op,
                f"`{op.name}` needs {self.describe(v)} in memory, and a tile carried by a "
                "loop or a branch lives in vector registers with no ring slot on the tpu; "
                "compute a new tile from it first (`t * 1.0`)",
            )
        if not isinstance(ref, Ref):
            raise fail("E7005", op, f"operand of `{op.name}` is not a tensor")
        return ref

    def dst(self, op: ir.Operation) -> tuple[Ref, Ring | None, ir.Value | None]:
        t = placed(op.results[0].type)
        if op in self.outputs:
            k = self.outputs[op]
            # A launch writes its instance's slice of the stacked result.
            at = self.pid if self.instances else None
            return Ref(self.out_args[k], at, t, f"result{k}"), None, None
        r = self.ring_of(op)
        slot = self.next_slot(r)
        return Ref(r.buf, slot, t, f"ring{r.key}"), r, slot

    # -- flattening values across scf.for ------------------------------------------------
    def flatten(self, v: object, op: ir.Operation) -> list[ir.Value]:
        if isinstance(v, Token):
            if v.ring is None:
                raise fail(
                    "E7006",
                    op,
                    "a store's token carried by a loop has no Mosaic form yet; wait on it "
                    "in the iteration that starts the store",
                )
            edge = [*v.edge.values(), *v.src.starts] if v.edge is not None else []
            return [
                v.slot if v.slot is not None else self.i32(0),
                v.src.index if v.src.index is not None else self.i32(0),
                *edge,  # a ragged read's counts, fill and offsets: its wait needs them
            ]
        from vxc.backends.tpu.vregs import mask_to_i32, tile_of

        if isinstance(v, ir.Value):
            # A mask crosses as i32 0/1: Mosaic carries no i1 vector through scf.for/if.
            return [mask_to_i32(self.rule_context, v) if _is_mask(v) else v]
        if isinstance(v, Ref) and "vmem" in str(ir.MemRefType(v.base.type).memory_space):
            # A tile crosses iterations and branches in vregs (a bool tile as i32 0/1).
            x = tile_of(self.rule_context, v, op)
            return [mask_to_i32(self.rule_context, x) if _is_mask(x) else x]
        if isinstance(v, Ref):
            raise fail(
                "E7006", op, "a tensor in HBM carried by a loop or a branch has no Mosaic form"
            )
        from vxc.backends.tpu.vregs import tile_of

        return [tile_of(self.rule_context, v, op)]  # a transpose, computed

    def carried_types(self, t: ir.Type, op: ir.Operation) -> list[ir.Type]:
        """The Mosaic types a vx value of type `t` crosses a loop or a branch as."""
        if T.is_token(t):
            return [self.ty("i32"), self.ty("i32")]
        if isinstance(t, ir.MemRefType):
            shape = "x".join(str(d) for d in t.shape)
            elem = "i32" if str(t.element_type) == "i1" else mosaic_element(t.element_type, op)
            return [self.ty(f"vector<{shape}x{elem}>")]  # a mask as i32 0/1 (`flatten`)
        return [self.scalar(t, op)]

    def unflatten(self, proto: object, vals: list[ir.Value]) -> tuple[object, int]:
        if isinstance(proto, Token):
            slot = vals[0] if proto.ring.slots > 1 else None
            # A view's offsets are not carried: the wait reads only the semaphore and the
            # size (Mosaic's `tpu.wait_dma2`), and the loop's first region (whose offsets
            # dominate the loop) has that size. A carried offset would cost scalar
            # registers and lose the tile alignment Mosaic must see in a slice's offsets.
            starts = proto.src.starts
            edge, n = proto.edge, n_of(proto)
            if edge is not None:  # its counts, fill and offsets crossed with it
                k = len(edge.values())
                rest = vals[2 + k : n]
                starts = tuple(
                    tpu.AssumeMultipleOp(x, m).result
                    for x, m in zip(rest, (edges.ROWS, edges.LANES), strict=True)
                )
                counts = tuple(vals[2 : 2 + len(edge.counts)])
                fill = vals[2 + len(counts)] if edge.fill is not None else None
                edge = Edge(edge.dims, counts, fill, edge.packing)
            src = Ref(
                proto.src.base,
                vals[1] if proto.src.index is not None else None,
                proto.src.vx_type,
                proto.src.name,
                starts,
            )
            dst = Ref(proto.ring.buf, slot, proto.dst.vx_type, proto.dst.name)
            return Token(src, dst, proto.ring, slot, proto.op, edge), n
        if _is_mask(proto) or (isinstance(proto, Ref) and str(proto.vx_type.element_type) == "i1"):
            from vxc.backends.tpu.vregs import i32_to_mask

            return i32_to_mask(self.rule_context, vals[0]), 1  # carried as i32 0/1
        return vals[0], 1

    def same_shape(self, a: object, b: object, op: ir.Operation) -> None:
        if isinstance(a, Token) != isinstance(b, Token):
            raise fail("E7006", op, "loop-carried value changes kind")
        if isinstance(a, Token) and (
            a.ring is not b.ring
            or a.src.base != b.src.base
            or (a.src.index is None) != (b.src.index is None)
            or (a.src.starts is None) != (b.src.starts is None)
            or (a.edge is None) != (b.edge is None)
        ):
            raise fail(
                "E7006",
                op,
                "a token carried by a loop must come from transfers of one source Vec into "
                "one scratch ring on every iteration",
            )


# ---------------------------------------------------------------------------------------
# Rules.


@rule("vx.element")
def _element(lo: FunctionLowering, op: ir.Operation) -> None:
    vec = lo.hbm(op.operands[0], op)
    i = lo.env[op.operands[1]]
    lo.env[op.results[0]] = Ref(vec.base, i, placed(op.results[0].type), f"{vec.name}[i]")


@rule("vx.len")
def _len(lo: FunctionLowering, op: ir.Operation) -> None:
    vec = lo.hbm(op.operands[0], op)
    t = ir.MemRefType(vec.base.type)
    lo.env[op.results[0]] = lo.i32(t.shape[0])


@rule("vx.zeros")
def _zeros(lo: FunctionLowering, op: ir.Operation) -> None:
    """A fill (`Tensor<E>([dims])`): a constant vector, stored into its ring slot when an
    op needs it in memory (an accumulator)."""
    t = placed(op.results[0].type)
    elem = lo.ty(mosaic_element(t.element_type, op))
    vt = ir.VectorType.get(list(t.shape), elem)
    zero = arith.ConstantOp(vt, ir.DenseElementsAttr.get_splat(vt, _zero(elem))).result
    if op.results[0] not in lo.in_memory:
        lo.env[op.results[0]] = zero
        return
    ref, _, _ = lo.dst(op)
    if op.results[0] in lo.in_registers:
        lo.promoted[op.results[0]] = zero  # the first matmul_acc adds onto the constant
    else:
        lo.store(ref, zero)
    lo.env[op.results[0]] = ref


def _zero(elem: ir.Type) -> ir.Attribute:
    if isinstance(elem, ir.IntegerType):
        return ir.IntegerAttr.get(elem, 0)
    return ir.FloatAttr.get(elem, 0.0)


@rule("vx.edge_view")
def _edge_view(lo: FunctionLowering, op: ir.Operation) -> None:
    """An `edge` view: its region and what a ragged transfer of it needs (edge.py)."""
    edges.edge_view(lo, op)


@rule("vx.transfer")
def _transfer(lo: FunctionLowering, op: ir.Operation) -> None:
    if isinstance(lo.env[op.operands[0]], EdgeRef):  # a ragged read, waited and filled at once
        e = lo.env[op.operands[0]]
        dst, _, _ = lo.dst(op)
        edges.start(lo, e.ref, dst, e.edge, lo.sem(None, None), reading=True)
        edges.finish(lo, e.ref, dst, e.edge, lambda: lo.sem(None, None), reading=True)
        lo.env[op.results[0]] = dst
        return
    src = lo.hbm(op.operands[0], op)
    dst, _, _ = lo.dst(op)
    s, d = lo.view(src), lo.view(dst)
    sem = lo.sem(None, None)
    tpu.EnqueueDMAOp(s, d, target_semaphore=sem)
    tpu.WaitDMA2Op(lo.sem(None, None), s, d)
    lo.env[op.results[0]] = dst


def _early_start(lo: FunctionLowering, e: Early) -> None:
    """An `Early` transfer's DMA, on its own semaphore (a DMA semaphore counts bytes: a
    blocking transfer's wait on the shared one could be released by it)."""
    src = lo.hbm(e.op.operands[0], e.op)
    dst, _, _ = lo.dst(e.op)
    tpu.EnqueueDMAOp(
        lo.view(src), lo.view(dst), target_semaphore=lo.sem(None, lo.i32(e.sem), lo.early_sems)
    )
    lo.env[e.op.results[0]] = dst
    lo.early_refs[e.op] = (src, dst)


def _early_wait(lo: FunctionLowering, e: Early) -> None:
    src, dst = lo.early_refs[e.op]
    tpu.WaitDMA2Op(lo.sem(None, lo.i32(e.sem), lo.early_sems), lo.view(src), lo.view(dst))


@rule("vx.transfer_async")
def _transfer_async(lo: FunctionLowering, op: ir.Operation) -> None:
    e = lo.env[op.operands[0]]
    src = e.ref if isinstance(e, EdgeRef) else lo.hbm(op.operands[0], op)
    dst, ring, slot = lo.dst(op)
    if ring is None:
        raise fail(
            "E7005", op, "an async transfer into HBM has no Mosaic form here; use `transfer`"
        )
    if isinstance(e, EdgeRef):  # a ragged read: its waits and fill are at the wait
        edges.start(lo, src, dst, e.edge, lo.sem(ring, slot), reading=True)
        lo.env[op.results[0]] = Token(src, dst, ring, slot, op, e.edge)
        return
    tpu.EnqueueDMAOp(lo.view(src), lo.view(dst), target_semaphore=lo.sem(ring, slot))
    lo.env[op.results[0]] = Token(src, dst, ring, slot, op)


@rule("vx.wait")
def _wait(lo: FunctionLowering, op: ir.Operation) -> None:
    tok = lo.env[op.operands[0]]
    assert isinstance(tok, Token)

    def sem() -> ir.Value:
        return lo.sem(None, None, lo.store_sems) if tok.ring is None else lo.sem(tok.ring, tok.slot)

    if tok.edge is not None:  # a ragged transfer: the waits of its chunks (and the fill)
        edges.finish(lo, tok.src, tok.dst, tok.edge, sem, reading=tok.ring is not None)
    else:
        tpu.WaitDMA2Op(sem(), lo.view(tok.src), lo.view(tok.dst))
    lo.env[op.results[0]] = tok.dst


@rule("vx.view")
def _view(lo: FunctionLowering, op: ir.Operation) -> None:
    """No code: the region is a `Ref` with offsets; the DMA that reads it slices it."""
    src = lo.hbm(op.operands[0], op)
    offs = [lo.aligned(v) for v in list(op.operands)[1:]]
    if src.starts is not None:  # a view of a view: offsets add up
        offs = [arith.AddIOp(a, b).result for a, b in zip(src.starts, offs, strict=True)]
    t = placed(op.results[0].type)
    lo.env[op.results[0]] = Ref(src.base, src.index, t, f"{src.name}[view]", tuple(offs))


@rule("vx.store", "vx.store_async")
def _store(lo: FunctionLowering, op: ir.Operation) -> None:
    """A DMA of the tile into the output's region (`&mut` tensors are output operands);
    blocking: waited at once on the blocking semaphore; async: on the store semaphore
    when its token is waited."""
    tile = lo.hbm(op.operands[0], op)
    out = lo.hbm(op.operands[1], op)
    offs = tuple(lo.aligned(v) for v in list(op.operands)[2:])
    dst = Ref(out.base, out.index, placed(op.operands[0].type), f"{out.name}[view]", offs)
    if view(op).edge_view:  # only the part inside the output, in whole tiles (edge.py)
        e = edges.store_edge(lo, op, out, offs)
        if op.name == "vx.store":
            edges.start(lo, tile, dst, e, lo.sem(None, None), reading=False)
            edges.finish(lo, tile, dst, e, lambda: lo.sem(None, None), reading=False)
            return
        edges.start(lo, tile, dst, e, lo.sem(None, None, lo.store_sems), reading=False)
        lo.env[op.results[0]] = Token(tile, dst, None, None, op, e)
        return
    s, d = lo.view(tile), lo.view(dst)
    if op.name == "vx.store":
        tpu.EnqueueDMAOp(s, d, target_semaphore=lo.sem(None, None))
        tpu.WaitDMA2Op(lo.sem(None, None), s, d)
        return
    tpu.EnqueueDMAOp(s, d, target_semaphore=lo.sem(None, None, lo.store_sems))
    lo.env[op.results[0]] = Token(tile, dst, None, None, op)


@rule("scf.for")
def _for(lo: FunctionLowering, op: ir.Operation) -> None:
    lb, ub, step = (lo.env[v] for v in list(op.operands)[:3])
    inits = [lo.env[v] for v in list(op.operands)[3:]]
    flat = [x for v in inits for x in lo.flatten(v, op)]
    # Accumulators in registers that the body updates cross iterations as vectors, after
    # the loop's own values.
    accs = [a for a in lo.promoted if _uses(op, a)]
    loop = scf.ForOp(lb, ub, step, flat + [lo.promoted[a] for a in accs])
    body = op.regions[0].blocks[0]
    lo.env[body.arguments[0]] = loop.induction_variable
    inner = list(loop.inner_iter_args)
    with ir.InsertionPoint(loop.body):
        pos = 0  # (in the body: a mask is carried as i32 and compared back there)
        for proto, arg in zip(inits, list(body.arguments)[1:], strict=True):
            val, n = lo.unflatten(proto, inner[pos : pos + n_of(proto)])
            lo.env[arg] = val
            pos += n
        for a, v in zip(accs, inner[len(flat) :], strict=True):
            lo.promoted[a] = v
        yielded = [lo.env[v] for v in lo.lower_block(body)]
        y = list(body.operations)[-1].operation
        for a, b in zip(inits, yielded, strict=True):
            lo.same_shape(a, b, y)
        scf.YieldOp([x for v in yielded for x in lo.flatten(v, y)] + [lo.promoted[a] for a in accs])
    results = list(loop.results)
    for a, v in zip(accs, results[len(flat) :], strict=True):
        lo.promoted[a] = v
    pos = 0
    for proto, r in zip(inits, op.results, strict=True):
        val, n = lo.unflatten(proto, results[pos : pos + n_of(proto)])
        lo.env[r] = val
        pos += n


@rule("scf.if")
def _if(lo: FunctionLowering, op: ir.Operation) -> None:
    """`scf.if` on the scalar unit; its results cross the branches as loop-carried values
    do (a tile as its vector, a token as its slot and source index)."""
    types = [t for r in op.results for t in lo.carried_types(r.type, op)]
    blocks = [r.blocks[0] for r in op.regions if len(r.blocks)]
    new = scf.IfOp(lo.env[op.operands[0]], types, has_else=len(blocks) > 1)
    protos: list[object] | None = None
    for block, into in zip(blocks, (new.then_block, new.else_block), strict=False):
        with ir.InsertionPoint(into):
            yielded = [lo.env[v] for v in lo.lower_block(block)]
            y = list(block.operations)[-1].operation
            if any(isinstance(v, Token) and v.edge is not None for v in yielded):
                raise fail(
                    "E7006",
                    y,
                    "the token of an `edge` view's transfer crossing a branch has no Mosaic "
                    "form yet; wait on it in the branch that starts it",
                )
            if protos is None:
                protos = yielded
            for a, b in zip(protos, yielded, strict=True):
                lo.same_shape(a, b, y)
            scf.YieldOp([x for v in yielded for x in lo.flatten(v, y)])
    results = list(new.results)
    pos = 0
    for proto, r in zip(protos or [], op.results, strict=True):
        val, n = lo.unflatten(proto, results[pos : pos + n_of(proto)])
        lo.env[r] = val
        pos += n


def _is_mask(v: object) -> bool:
    """`v` is an i1 vector (a bool tile in vregs)."""
    return (
        isinstance(v, ir.Value)
        and isinstance(v.type, ir.VectorType)
        and str(ir.VectorType(v.type).element_type) == "i1"
    )


def n_of(proto: object) -> int:
    """How many i32s carry `proto` across an iteration: a token's slot and its source's
    Vec index; any other value is itself."""
    if not isinstance(proto, Token):
        return 1
    if proto.edge is None:
        return 2
    return 2 + len(proto.edge.values()) + len(proto.src.starts)  # and a ragged read's state


@rule("vx.instance")
def _instance(lo: FunctionLowering, op: ir.Operation) -> None:
    lo.env[op.results[0]] = lo.pid


@rule("vx.instances")
def _instances(lo: FunctionLowering, op: ir.Operation) -> None:
    lo.env[op.results[0]] = lo.i32(lo.grid_value)  # a placeholder when the shapes give it


@rule("vx.require")
def _require(lo: FunctionLowering, op: ir.Operation) -> None:
    """A launch precondition. A Mosaic kernel has no status to report, so a clause over
    Vec lengths and the instance count becomes a constraint of the export's dimension
    variables (`jax.export` checks it when the artifact is called: a launch with more
    instances than tiles is refused there); one the export cannot state is left to the
    caller. Both are recorded in the manifest."""
    clause = RequireOp(op).clause
    constraint = _constraint(lo, op.operands[0])
    if constraint is True:
        return  # holds for every call of this build
    if constraint is False:
        raise fail(
            "E7009",
            op,
            f"the launch precondition `{clause}` is false for this build "
            f"(--tpu-instances {lo.instances})",
        )
    if constraint is None:
        lo.unchecked.append(clause)  # the caller's to meet; the proofs assumed it
    elif constraint not in lo.constraints:
        lo.constraints.append(constraint)
    if clause not in lo.preconditions:
        lo.preconditions.append(clause)


_GE = {3: (1, 0, 0), 7: (1, 0, 0), 2: (1, 0, 1), 6: (1, 0, 1),  # sle/ule, slt/ult: rhs >= lhs (+1)
       5: (0, 1, 0), 9: (0, 1, 0), 4: (0, 1, 1), 8: (0, 1, 1)}  # sge/uge, sgt/ugt  # fmt: skip


def _constraint(lo: FunctionLowering, cond: ir.Value) -> str | bool | None:
    """`cond` as a `jax.export` constraint (`A >= B` / `A == B`), True/False when it does
    not depend on a Vec length, None when it is not an affine comparison of lengths."""
    op = cond.owner
    if not isinstance(op, ir.OpView | ir.Operation) or op.name != "arith.cmpi":
        return None
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    a, b = (_dim_tree(lo, v) for v in op.operands)
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return {0: a == b, 1: a != b, 2: a < b, 3: a <= b, 4: a > b, 5: a >= b,
                6: a < b, 7: a <= b, 8: a > b, 9: a >= b}[pred]  # fmt: skip
    if a == b and pred in (0, 3, 5, 7, 9):
        return True  # the grid the clause defines, compared with itself
    x, y = _jax(a), _jax(b)
    if x is None or y is None:
        return None
    if pred == 0:
        # jax.export takes `A == B` with A one term (a product of variables, mod and
        # floordiv terms, and a coefficient).
        if _term(a) and not isinstance(a, int):
            return f"{x} == {y}"
        if _term(b) and not isinstance(b, int):
            return f"{y} == {x}"
        return None
    if pred not in _GE:
        return None
    big, small, plus = _GE[pred]
    x, y = (x, y)[big], (x, y)[small]
    return f"{x} >= {y} + 1" if plus else f"{x} >= {y}"


# A function of the dimension variables: a constant, a variable, or (op, lhs, rhs) with op
# one of SHAPE_OPS (integer arithmetic, `/` truncating as `arith.divsi` and StableHLO do).
Dim = int | str | tuple
SHAPE_OPS = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*", "arith.divsi": "/",
             "arith.remsi": "%"}  # fmt: skip
STABLEHLO = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "remainder"}


def _wrap(n: int) -> int:
    """`n` as the scalar unit holds it: 32-bit two's complement, wrapping."""
    return (n + (1 << 31)) % (1 << 32) - (1 << 31)


def fold(sign: str, x: int, y: int) -> int:
    if sign in ("/", "%"):
        q = abs(x) // abs(y)
        q = q if (x < 0) == (y < 0) else -q
        return q if sign == "/" else x - q * y  # the remainder takes the dividend's sign
    return _wrap({"+": x + y, "-": x - y, "*": x * y}[sign])


def _dim_tree(lo: FunctionLowering, v: ir.Value) -> Dim | None:
    if isinstance(v, ir.BlockArgument):
        if v.owner.owner == lo.vx and v.arg_number in lo.shape_params:
            return lo.shape_params[v.arg_number]
        return None
    op = v.owner
    if not isinstance(op, ir.OpView | ir.Operation):
        return None
    if op.name == "vx.len":
        vec = op.operands[0]
        if isinstance(vec, ir.BlockArgument) and vec.owner.owner == lo.vx:
            p = lo.inputs[lo.tensor_index[vec.arg_number]]
            return p.symbol or p.shape[0]
        return None
    if op.name == "vx.instances":
        return lo.grid_tree if lo.grid_tree is not None else max(1, lo.instances)
    if op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    if op.name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
        return _dim_tree(lo, op.operands[0])
    if op.name in SHAPE_OPS:
        x, y = (_dim_tree(lo, o) for o in op.operands)
        if x is None or y is None:
            return None
        sign = SHAPE_OPS[op.name]
        if sign in ("/", "%") and not (isinstance(y, int) and y > 0):
            return None  # only a division by a positive constant (no guard needed)
        if isinstance(x, int) and isinstance(y, int):
            return fold(sign, x, y)
        return (sign, x, y)
    return None


def _where_equalities(f: ir.Operation):
    """The two sides of each top-level `where` clause `A == B` of `f`."""
    for op in f.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "vx.require":
            continue
        cmp = op.operands[0].owner
        if _is_op(cmp, "arith.cmpi") and ir.IntegerAttr(cmp.attributes["predicate"]).value == 0:
            yield list(cmp.operands)


_MULTIPLE_CAP = 1 << 20  # enough for any tiling; keeps products small


def _where_multiples(f: ir.Operation) -> dict[int, int]:
    """Argument index -> C for each top-level `where` clause `arg % C == 0`."""
    out: dict[int, int] = {}
    for sides in _where_equalities(f):
        rem, zero = (o.owner for o in sides)
        if not _is_op(rem, "arith.remsi"):
            rem, zero = zero, rem
        if not (_is_const(zero, 0) and _is_op(rem, "arith.remsi")):
            continue
        arg, c = rem.operands
        if isinstance(arg, ir.BlockArgument) and arg.owner.owner == f and _is_const(c.owner):
            k = ir.IntegerAttr(c.owner.attributes["value"]).value
            if k > 0:
                out[arg.arg_number] = math.lcm(out.get(arg.arg_number, 1), k)
    return out


def _is_op(op, name: str) -> bool:
    """`op` (a value's owner: an op, or a block for an argument) is a `name` op."""
    return isinstance(op, ir.OpView | ir.Operation) and op.name == name


# Ops without memory effects whose results are scalars: an early DMA's offsets may be
# computed ahead of their place in the body.
PURE_VX = ("vx.instance", "vx.instances", "vx.len")


def _pure_chain(
    values: list[ir.Value], at: dict[ir.Value, int], body: list[ir.Operation]
) -> tuple[list[ir.Operation], int]:
    """The body's effect-free scalar ops (`arith`, `PURE_VX`) that compute `values`,
    transitively, in body order, and the index of the last other body op they read (-1:
    only arguments)."""
    chain: set[ir.Operation] = set()
    leaf = -1
    stack = list(values)
    while stack:
        v = stack.pop()
        j = at.get(v)
        if j is None:
            continue  # an argument
        op = body[j]
        if op.name.startswith("arith.") or op.name in PURE_VX:
            if op not in chain:
                chain.add(op)
                stack.extend(op.operands)
        else:
            leaf = max(leaf, j)
    return sorted(chain, key=lambda o: at[o.results[0]]), leaf


def _register_accumulators(f: ir.Operation, in_memory: set[ir.Value]) -> set[ir.Value]:
    """The zero fills in memory (matmul_acc accumulators) of `f` whose every use in a
    loop nested in the fill's block is as the accumulator (operand 0 only) of a
    matmul_acc on 16-bit operands, inside `scf.for`s alone: their value can live in
    vector registers, carried by those loops, and be stored in the fill's block before
    an op there needs the memory (`FunctionLowering.lower_op`). f32 operands keep the
    accumulator in VMEM: measured, stream's f32 step grows by 2-14 bundles with it in
    registers (docs/PERFORMANCE.md)."""
    fills: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "vx.zeros" and op.results[0] in in_memory:
            fills.append(op)
        return ir.WalkResult.ADVANCE

    f.walk(visit)
    out: set[ir.Value] = set()
    for fill in fills:
        acc, home = fill.results[0], fill.parent
        if all(_register_use(use.owner, use.operand_number, acc, home) for use in acc.uses):
            out.add(acc)
    return out


def _register_use(user: ir.Operation, k: int, acc: ir.Value, home: ir.Operation) -> bool:
    if user.name == "vx.matmul_acc":
        if str(placed(user.operands[1].type).element_type) == "f32":
            return False
        if k != 0 or any(o == acc for o in list(user.operands)[1:]):
            return False
    if user.parent == home:
        return True  # in the fill's block: stored there first if it needs the memory
    p = user.parent
    while p != home and p.name == "scf.for":
        p = p.parent
    return p == home and user.name == "vx.matmul_acc"


def _uses(op: ir.Operation, v: ir.Value) -> bool:
    """`op` or an op nested in its regions reads `v`."""
    found = False

    def visit(o: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found = found or any(x == v for x in o.operands)
        return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _is_const(op, value: int | None = None) -> bool:
    if not _is_op(op, "arith.constant"):
        return False
    return value is None or ir.IntegerAttr(op.attributes["value"]).value == value


def _multiple(lo: FunctionLowering, v: ir.Value) -> int:
    """A number known to divide the integer `v` (1 when nothing is known): constants,
    sums and products of them, and arguments by their `where` clauses."""
    if isinstance(v, ir.BlockArgument):
        if v.owner.owner == lo.vx:
            return lo.multiples.get(v.arg_number, 1)
        return 1
    op = v.owner
    if op.name == "arith.constant":
        n = abs(ir.IntegerAttr(op.attributes["value"]).value)
        return n if 0 < n < _MULTIPLE_CAP else _MULTIPLE_CAP if n == 0 else 1
    if op.name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
        return _multiple(lo, op.operands[0])
    if op.name == "arith.muli":
        a, b = (_multiple(lo, o) for o in op.operands)
        return min(a * b, _MULTIPLE_CAP)
    if op.name in ("arith.addi", "arith.subi"):
        return math.gcd(*(_multiple(lo, o) for o in op.operands))
    return 1


def _render(d: Dim) -> str:
    """Python's spelling, as `Kernel.grid_expr` holds it (`//`, `%`: the dimensions are
    non-negative, so floor and truncation agree)."""
    if not isinstance(d, tuple):
        return str(d)
    sign = "//" if d[0] == "/" else d[0]
    return f"({_render(d[1])} {sign} {_render(d[2])})"


def _term(d: Dim) -> bool:
    """A product of variables, constants, mod and floordiv terms (no sum)."""
    return not isinstance(d, tuple) or d[0] in "/%" or (d[0] == "*" and _term(d[1]) and _term(d[2]))


def _jax(d: Dim) -> str | None:
    """jax.export's constraint spelling (`floordiv(m, 128)`, `mod(m, 128)`; its parser
    takes no parentheses, so a sum inside a product or a difference is None)."""
    if not isinstance(d, tuple):
        return str(d)
    op, a, b = d
    x, y = _jax(a), _jax(b)
    if x is None or y is None:
        return None
    if op in "/%":
        return f"{'floordiv' if op == '/' else 'mod'}({x}, {y})"
    if op == "*":
        return f"{x} * {y}" if _term(a) and _term(b) else None
    if op == "-" and not _term(b):
        return None
    return f"{x} {op} {y}"


def _where_grid(lo: FunctionLowering, f: ir.Operation) -> Dim | None:
    """The grid a top-level `where` clause `instances() == E` fixes, E a function of the
    shapes (LANGUAGE.md 4.1), or None."""
    for sides in _where_equalities(f):
        for k in (0, 1):
            owner = sides[k].owner
            if isinstance(owner, ir.OpView | ir.Operation) and owner.name == "vx.instances":
                grid = _dim_tree(lo, sides[1 - k])
                if grid is not None and not _uses_grid(lo, sides[1 - k]):
                    return grid
    return None


def _uses_grid(lo: FunctionLowering, v: ir.Value) -> bool:
    op = v.owner
    if isinstance(v, ir.BlockArgument) or not isinstance(op, ir.OpView | ir.Operation):
        return False
    return op.name == "vx.instances" or any(_uses_grid(lo, o) for o in op.operands)


def shape_module(syms: list[str], expr: Dim) -> str:
    """The StableHLO function of the dimension variables `syms` (its arguments, in order)
    that XLA evaluates to replace a placeholder with `expr` (Pallas's export convention;
    the interpreter evaluates the same text)."""
    params = ", ".join(f"%arg{k}: tensor<i32>" for k in range(len(syms)))
    lines: list[str] = []

    def emit(d: Dim) -> str:
        if isinstance(d, str):
            return f"%arg{syms.index(d)}"
        if isinstance(d, int):
            lines.append(f"    %{len(lines)} = stablehlo.constant dense<{d}> : tensor<i32>")
            return f"%{len(lines) - 1}"
        x, y = emit(d[1]), emit(d[2])
        lines.append(f"    %{len(lines)} = stablehlo.{STABLEHLO[d[0]]} {x}, {y} : tensor<i32>")
        return f"%{len(lines) - 1}"

    out = emit(expr)
    body = "".join(line + "\n" for line in lines)
    return (
        "module @jit_evaluate_shape attributes {jax.uses_shape_polymorphism = false, "
        "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
        f"  func.func public @main({params}) -> (tensor<i32>) {{\n"
        f"{body}    return {out} : tensor<i32>\n  }}\n}}\n"
    )


@rule("func.return")
def _return(lo: FunctionLowering, op: ir.Operation) -> None:
    func.ReturnOp([])


@rule("arith.constant")
def _constant(lo: FunctionLowering, op: ir.Operation) -> None:
    """A scalar constant; a bf16/f16 one (a literal beside a bf16/f16 tile, already
    rounded to it) is its exact f32 value: tile arithmetic computes in f32 (vregs.py),
    and the scalar unit has no 16-bit floats (an op computing on it is refused there)."""
    attr = op.attributes["value"]
    if str(op.results[0].type) in ("bf16", "f16"):
        lo.env[op.results[0]] = arith.ConstantOp(lo.ty("f32"), ir.FloatAttr(attr).value).result
        return
    t = lo.scalar(op.results[0].type, op)
    if isinstance(t, ir.IntegerType):
        v = ir.IntegerAttr(attr).value
        if t.width == 32 and not -(2**31) <= v < 2**31:
            raise fail("E7008", op, f"constant {v} does not fit the TPU's 32-bit scalar unit")
        lo.env[op.results[0]] = arith.ConstantOp(t, v).result
    else:
        lo.env[op.results[0]] = arith.ConstantOp(t, ir.FloatAttr(attr).value).result


@rule("arith.index_cast", "arith.extsi", "arith.trunci", "arith.extui")
def _int_cast(lo: FunctionLowering, op: ir.Operation) -> None:
    src = lo.env[op.operands[0]]
    t = lo.scalar(op.results[0].type, op)
    if src.type == t:
        lo.env[op.results[0]] = src
    else:
        lo.env[op.results[0]] = ir.Operation.create(op.name, [t], [src]).result


@rule(
    "arith.addi",
    "arith.subi",
    "arith.muli",
    "arith.divsi",
    "arith.remsi",
    "arith.divui",
    "arith.remui",
    "arith.andi",
    "arith.ori",
    "arith.xori",
    "arith.cmpi",
    "arith.select",
    "arith.minsi",
    "arith.maxsi",
    "arith.addf",
    "arith.subf",
    "arith.mulf",
    "arith.divf",
    "arith.negf",
    "arith.cmpf",
    "arith.maximumf",
    "arith.minimumf",
    "arith.sitofp",  # a scalar cast (ir/scalar_cast.py: saturated before fptosi)
    "arith.fptosi",
)
def _scalar_arith(lo: FunctionLowering, op: ir.Operation) -> None:
    operands = [lo.env[v] for v in op.operands]
    types = [lo.scalar(r.type, op) for r in op.results]
    attrs = {
        name: ir.Attribute.parse(str(op.attributes[name]), context=lo.ctx) for name in op.attributes
    }
    new = ir.Operation.create(op.name, types, operands, attrs)
    for r, n in zip(op.results, new.results, strict=True):
        lo.env[r] = n


def lower_module(
    vx_module: ir.Module, ctx: ir.Context, instances: int = 0, precision: str = "f32"
) -> list[Kernel]:
    """Every kernel (defined, public function) of the vx module, lowered to Mosaic for a
    launch of `instances` (0: a plain call), f32 matmuls at `precision`."""
    if instances < 0:
        raise Unsupported(f"--tpu-instances must be >= 0 (0 = a plain call), got {instances}")
    kernels = []
    funcs = [op.operation for op in vx_module.body.operations if op.operation.name == "func.func"]
    for f in funcs:
        if len(f.regions[0].blocks) == 0 or T.is_private(f):
            continue  # an extern declaration or a recursive helper: refused at its calls
        kernels.append(FunctionLowering(f, ctx, instances, precision).run())
    return kernels


# The tile ops' rules (and matmul_acc's, which takes their vectors), registered in RULES.
from vxc.backends.tpu import vregs  # noqa: E402, F401
