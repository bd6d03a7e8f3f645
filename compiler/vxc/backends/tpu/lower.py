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
- A launch of N instances (a build parameter: a Mosaic grid is static) has
  `iteration_bounds = [N]`; `vx.instance` is `%pid`, outputs are stacked `N x ...` and
  each instance writes slice `%pid`; N = 0 is a plain call (one instance, results as
  declared). An entry's `vx.require` clauses become `jax.export` shape constraints where
  they compare Vec lengths, and are listed in the manifest.

What Mosaic cannot express is refused (`TpuError`, a coded diagnostic), naming the value
and the rule; calls and memory-space casts are refusal entries of the walk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, func, memref, scf, vector
from jaxlib.mosaic.python import tpu

from vxc.backends import RefusalEntry
from vxc.backends.tpu.errors import fail
from vxc.backends.tpu.tiling import check_footprint, mosaic_element
from vxc.backends.walk import Walk
from vxc.errors import Refusal, Unsupported
from vxc.ir import types as T
from vxc.ir.loc import span_of
from vxc.ir.ops import TILE_OPS, RequireOp, TransferOp, ring_layout, view
from vxc.rules import registrar

# Pallas's export convention: a symbolic dimension appears in the Mosaic module as a
# placeholder constant counting down from int32 max; module attributes map it to the
# operand dimension it stands for, and XLA substitutes the value when the export is
# specialised to concrete shapes.
PLACEHOLDER_TOP = 2**31 - 1
SCALARS = {"index": "i32", "i64": "i32", "i32": "i32", "i1": "i1", "f32": "f32"}
DOT_DIMS = "#tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>"


def _func_name(f: ir.Operation) -> str:
    return ir.StringAttr(f.attributes["sym_name"]).value


def _placed(t: ir.Type) -> ir.MemRefType:
    return ir.MemRefType(T.token_inner(t) if T.is_token(t) else t)


@dataclass(frozen=True)
class Param:
    """One HBM operand of the kernel (input or output), as the export and manifest see it."""

    name: str
    dtype: str
    shape: tuple[int | None, ...]  # None: the symbolic Vec length
    symbol: str | None = None  # the export's dimension variable for shape[0]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": [self.symbol if d is None else d for d in self.shape],
            "space": "HBM",
        }


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
class Ref:
    """A tensor in Mosaic: a base memref, optionally indexed by one leading index."""

    base: ir.Value
    index: ir.Value | None
    vx_type: ir.MemRefType
    name: str


@dataclass(frozen=True)
class Token:
    src: Ref
    dst: Ref
    ring: Ring
    slot: ir.Value | None
    op: ir.Operation


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

    @property
    def grid(self) -> int:
        return max(1, self.instances)

    @property
    def symbols(self) -> list[str]:
        return [p.symbol for p in self.inputs if p.symbol]


Rule = Callable[["FunctionLowering", ir.Operation], None]
RULES: dict[str, Rule] = {}


rule = registrar(RULES)


VIEW_OPS = ("vx.view", "vx.store", "vx.store_async")


def _call_refusal(op: ir.Operation) -> str:
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    return (
        f"tpu backend: call to `{callee}`: a TPU artifact is one Mosaic kernel, and a call "
        "has no Mosaic equivalent (an `extern fn` is host code the kernel cannot reach; "
        "inline helper functions into the kernel)"
    )


# Ops the tpu backend refuses by design (the walk raises these; see vxc/backends/walk.py).
REFUSALS: dict[str, RefusalEntry] = {
    "func.call": RefusalEntry("E7002", _call_refusal),
    # Views and stores (LANGUAGE.md 4.2) lower to `tpu.enqueue_dma` of a strided slice
    # (TARGETS.md); not written yet: refused with the op's line.
    **{
        name: RefusalEntry("E7001", f"tpu backend: `{name}` (a view or a store) is not lowered yet")
        for name in VIEW_OPS
    },
    # Tile arithmetic (LANGUAGE.md 4.3) lowers to Mosaic vector ops; not written yet.
    **{
        name: RefusalEntry("E7001", f"tpu backend: `{name}` (tile arithmetic) is not lowered yet")
        for name in TILE_OPS
    },
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
         "inputs", "constraints", "preconditions", "precision"}
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
        self.placeholders: dict[int, int] = {}  # input index -> placeholder value
        self.ret_values: list[ir.Value] = []
        self.capacity = 0  # bytes of VMEM (the transfers' `capacity`)

    # -- types ---------------------------------------------------------------------
    def ty(self, text: str) -> ir.Type:
        return ir.Type.parse(text, context=self.ctx)

    def hbm_type(self, t: ir.MemRefType, lead: int | None = None) -> ir.Type:
        dims = [lead if (i == 0 and d == T.DYNAMIC) else d for i, d in enumerate(t.shape)]
        return self.ty(self._memref(dims, t.element_type, "any"))

    def _memref(self, dims, element, space: str) -> str:
        shape = "".join(f"{d}x" for d in dims)
        return f"memref<{shape}{mosaic_element(element)}, #tpu.memory_space<{space}>>"

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
        for i, t in enumerate(ftype.inputs):
            name = T.arg_name(f, i)
            if not isinstance(t, ir.MemRefType):
                raise fail(
                    "E7003",
                    f,
                    f"kernel `{self.name}`: scalar parameter `{name}` ({t}) is not supported: "
                    "TPU kernel arguments are HBM tensors",
                )
            if T.space_of(t) != "HBM":
                raise fail("E7003", f, f"kernel `{self.name}`: parameter `{name}` must be in HBM")
            shape = tuple(None if d == T.DYNAMIC else d for d in t.shape)
            if None in shape[1:] or (shape and shape[0] is None and t.rank < 2):
                raise fail(
                    "E7003", f, f"parameter `{name}` ({t}): only a Vec's length may be dynamic"
                )
            symbol = None
            if shape and shape[0] is None:
                symbol = f"{name}_len"
                self.placeholders[i] = PLACEHOLDER_TOP - len(self.placeholders)
            self.inputs.append(Param(name, mosaic_element(t.element_type, f), shape, symbol))
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

        errors: list[Refusal] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            try:
                self._plan_op(op)
            except Refusal as e:  # exceptions do not cross MLIR's walk: carry it out
                errors.append(e.at(span_of(op)))
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        f.walk(visit)
        if errors:
            raise errors[0]
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

    def _plan_op(self, op: ir.Operation) -> None:
        if op.name == "func.call" or op.name in TILE_OPS:
            # Its refusal: a call's before the casts that feed it, a tile op's before its
            # ring is planned.
            self.rule_for(op)
        lay = ring_layout(op)
        if lay is None:
            return
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
        tile = _placed(op.results[0].type)
        if op.name != "vx.zeros":
            self.capacity = max(self.capacity, view(op).capacity)
        mosaic_element(tile.element_type)
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

    def describe_dst(self, op: ir.Operation) -> str:
        if op.name == "vx.zeros":
            return "the zero-filled accumulator"
        return f"the VMEM copy of {self.describe(op.operands[0])}"

    def describe(self, v: ir.Value) -> str:
        if isinstance(v, ir.BlockArgument) and v.owner.owner == self.vx:
            return f"`{T.arg_name(self.vx, v.arg_number)}`"
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
        scratch.append("memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>")  # blocking
        counted = [r for r in rings if r.slots > 1]
        if counted:
            scratch.append(f"memref<{len(counted)}xi32, #tpu.memory_space<smem>>")

        f = self.vx
        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        in_types = [
            self.hbm_type(ir.MemRefType(t), self.placeholders.get(i))
            for i, t in enumerate(ftype.inputs)
        ]
        out_types = [
            self.ty(self._memref(p.shape, self.ty(p.dtype), "any")) for p in self.out_params
        ]
        arg_types = [self.ty("i32"), *in_types, *out_types, *(self.ty(s) for s in scratch)]
        with self.ctx, ir.Location.unknown(self.ctx):
            module = ir.Module.create()
            for k, (i, p) in enumerate(sorted(self.placeholders.items(), key=lambda x: -x[1])):
                del k
                self._map_placeholder(module, i, p)
            with ir.InsertionPoint(module.body):
                fn = func.FuncOp(self.name, ir.FunctionType.get(arg_types, []))
            n_io = len(in_types) + len(out_types)
            attrs = fn.operation.attributes
            attrs["dimension_semantics"] = ir.ArrayAttr.get(
                [ir.Attribute.parse("#tpu.dimension_semantics<parallel>")]
            )
            attrs["iteration_bounds"] = ir.DenseI64ArrayAttr.get([max(1, self.instances)])
            attrs["scalar_prefetch"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
            attrs["scratch_operands"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(scratch)
            )
            attrs["tpu.core_type"] = ir.Attribute.parse("#tpu.core_type<tc>")
            attrs["window_params"] = ir.ArrayAttr.get([ir.DictAttr.get({})] * n_io)
            entry = fn.add_entry_block()
            args = list(entry.arguments)
            self.pid = args[0]  # the program id of grid dimension 0: `vx.instance`
            self.in_args = args[1 : 1 + len(in_types)]
            self.out_args = args[1 + len(in_types) : 1 + n_io]
            sargs = iter(args[1 + n_io :])
            for r in rings:
                r.buf = next(sargs)
            for r in sem_rings:
                r.sem = next(sargs)
            self.sync_sem = next(sargs)
            self.counters = next(sargs) if counted else None
            for k, r in enumerate(counted):
                r.counter = k
            with ir.InsertionPoint(entry):
                for r in counted:
                    memref.StoreOp(self.i32(0), self.counters, [self.idx(r.counter)])
                vx_block = f.regions[0].blocks[0]
                for i, a in enumerate(vx_block.arguments):
                    self.env[a] = Ref(
                        self.in_args[i], None, ir.MemRefType(a.type), T.arg_name(f, i)
                    )
                self.lower_block(vx_block)
        return Kernel(
            self.name,
            self.inputs,
            self.out_params,
            scratch,
            module,
            self.instances,
            self.preconditions,
            self.constraints,
        )

    def _map_placeholder(self, module: ir.Module, operand: int, value: int) -> None:
        """Module attributes that tell XLA which operand dimension a placeholder stands for
        (one function of every dimension variable, returning this one)."""
        syms = sorted((p.symbol, i) for i, p in enumerate(self.inputs) if p.symbol)
        pos = [s for s, _ in syms].index(self.inputs[operand].symbol)
        params = ", ".join(f"%arg{k}: tensor<i32>" for k in range(len(syms)))
        text = (
            "module @jit_evaluate_shape attributes {jax.uses_shape_polymorphism = false, "
            "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
            f"  func.func public @main({params}) -> (tensor<i32>) {{\n"
            f"    return %arg{pos} : tensor<i32>\n  }}\n}}\n"
        )
        attrs = module.operation.attributes
        attrs[f"tpu.dynamic_dimension_mapping_module_{value}"] = ir.StringAttr.get(text)
        i64 = ir.IntegerType.get_signless(64)
        attrs[f"tpu.dynamic_dimension_mapping_indices_{value}"] = ir.ArrayAttr.get(
            [
                ir.DictAttr.get(
                    {
                        "dimension_index": ir.IntegerAttr.get(i64, 0),
                        "operand_index": ir.IntegerAttr.get(i64, i),
                    }
                )
                for _, i in syms
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
    def view(self, ref: Ref) -> ir.Value:
        """The memref a DMA reads or writes: the base, or its `index`-th leading slice."""
        if ref.index is None:
            return ref.base
        base_t = ir.MemRefType(ref.base.type)
        rest = list(base_t.shape[1:])
        space = str(base_t.memory_space)
        elem = base_t.element_type
        one = ir.MemRefType.get([1, *rest], elem, memory_space=ir.Attribute.parse(space))
        zeros = [self.i32(0) for _ in rest]
        s = tpu.MemRefSliceOp(one, ref.base, [ref.index, *zeros], []).result
        sq = ir.MemRefType.get(rest, elem, memory_space=ir.Attribute.parse(space))
        return tpu.MemRefSqueezeOp(sq, s).result

    def load(self, ref: Ref) -> ir.Value:
        base_t = ir.MemRefType(ref.base.type)
        tile = list(ref.vx_type.shape)
        vt = ir.VectorType.get(tile, base_t.element_type)
        if ref.index is None:
            return vector.LoadOp(vt, ref.base, [self.idx(0) for _ in tile]).result
        at = arith.IndexCastOp(ir.IndexType.get(), ref.index).result
        full = ir.VectorType.get([1, *tile], base_t.element_type)
        v = vector.LoadOp(full, ref.base, [at, *(self.idx(0) for _ in tile)]).result
        return vector.ShapeCastOp(vt, v).result

    def store(self, ref: Ref, value: ir.Value) -> None:
        tile = list(ref.vx_type.shape)
        if ref.index is None:
            tpu.vector_store(value, ref.base, [self.idx(0) for _ in tile])
            return
        base_t = ir.MemRefType(ref.base.type)
        full = ir.VectorType.get([1, *tile], base_t.element_type)
        v = vector.ShapeCastOp(full, value).result
        at = arith.IndexCastOp(ir.IndexType.get(), ref.index).result
        tpu.vector_store(v, ref.base, [at, *(self.idx(0) for _ in tile)])

    def ring_of(self, op: ir.Operation) -> Ring:
        ring = ring_layout(op).ring
        return self.rings[self.private[op] if ring < 0 else ring]

    def next_slot(self, r: Ring) -> ir.Value | None:
        """Slot of this execution: counter mod slots, then counter += 1 (rings of > 1 slot)."""
        if r.slots == 1:
            return None
        at = self.idx(r.counter)
        n = memref.LoadOp(self.counters, [at]).result
        slot = arith.RemUIOp(n, self.i32(r.slots)).result
        memref.StoreOp(arith.AddIOp(n, self.i32(1)).result, self.counters, [at])
        return slot

    def sem(self, r: Ring | None, slot: ir.Value | None) -> ir.Value:
        arr = self.sync_sem if r is None else r.sem
        one = self.ty("memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>")
        s = tpu.MemRefSliceOp(one, arr, [slot if slot is not None else self.i32(0)], []).result
        return tpu.MemRefSqueezeOp(
            self.ty("memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>"), s
        ).result

    def hbm(self, v: ir.Value, op: ir.Operation) -> Ref:
        ref = self.env[v]
        if not isinstance(ref, Ref):
            raise fail("E7005", op, f"operand of `{op.name}` is not a tensor")
        return ref

    def dst(self, op: ir.Operation) -> tuple[Ref, Ring | None, ir.Value | None]:
        t = _placed(op.results[0].type)
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
            return [
                v.slot if v.slot is not None else self.i32(0),
                v.src.index if v.src.index is not None else self.i32(0),
            ]
        if isinstance(v, ir.Value):
            return [v]
        raise fail(
            "E7006", op, "a tensor carried by a loop has no Mosaic form; carry a token instead"
        )

    def unflatten(self, proto: object, vals: list[ir.Value]) -> tuple[object, int]:
        if isinstance(proto, Token):
            slot = vals[0] if proto.ring.slots > 1 else None
            src = Ref(
                proto.src.base,
                vals[1] if proto.src.index is not None else None,
                proto.src.vx_type,
                proto.src.name,
            )
            dst = Ref(proto.ring.buf, slot, proto.dst.vx_type, proto.dst.name)
            return Token(src, dst, proto.ring, slot, proto.op), 2
        return vals[0], 1

    def same_shape(self, a: object, b: object, op: ir.Operation) -> None:
        if isinstance(a, Token) != isinstance(b, Token):
            raise fail("E7006", op, "loop-carried value changes kind")
        if isinstance(a, Token) and (
            a.ring is not b.ring
            or a.src.base != b.src.base
            or (a.src.index is None) != (b.src.index is None)
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
    lo.env[op.results[0]] = Ref(vec.base, i, _placed(op.results[0].type), f"{vec.name}[i]")


@rule("vx.len")
def _len(lo: FunctionLowering, op: ir.Operation) -> None:
    vec = lo.hbm(op.operands[0], op)
    t = ir.MemRefType(vec.base.type)
    lo.env[op.results[0]] = lo.i32(t.shape[0])


@rule("vx.zeros")
def _zeros(lo: FunctionLowering, op: ir.Operation) -> None:
    ref, _, _ = lo.dst(op)
    t = ref.vx_type
    elem = ir.MemRefType(ref.base.type).element_type
    vt = ir.VectorType.get(list(t.shape), elem)
    zero = arith.ConstantOp(vt, ir.DenseElementsAttr.get_splat(vt, _zero(elem))).result
    lo.store(ref, zero)
    lo.env[op.results[0]] = ref


def _zero(elem: ir.Type) -> ir.Attribute:
    if isinstance(elem, ir.IntegerType):
        return ir.IntegerAttr.get(elem, 0)
    return ir.FloatAttr.get(elem, 0.0)


@rule("vx.transfer")
def _transfer(lo: FunctionLowering, op: ir.Operation) -> None:
    src = lo.hbm(op.operands[0], op)
    dst, _, _ = lo.dst(op)
    s, d = lo.view(src), lo.view(dst)
    sem = lo.sem(None, None)
    tpu.EnqueueDMAOp(s, d, target_semaphore=sem)
    tpu.WaitDMA2Op(lo.sem(None, None), s, d)
    lo.env[op.results[0]] = dst


@rule("vx.transfer_async")
def _transfer_async(lo: FunctionLowering, op: ir.Operation) -> None:
    src = lo.hbm(op.operands[0], op)
    dst, ring, slot = lo.dst(op)
    if ring is None:
        raise fail(
            "E7005", op, "an async transfer into HBM has no Mosaic form here; use `transfer`"
        )
    tpu.EnqueueDMAOp(lo.view(src), lo.view(dst), target_semaphore=lo.sem(ring, slot))
    lo.env[op.results[0]] = Token(src, dst, ring, slot, op)


@rule("vx.wait")
def _wait(lo: FunctionLowering, op: ir.Operation) -> None:
    tok = lo.env[op.operands[0]]
    assert isinstance(tok, Token)
    tpu.WaitDMA2Op(lo.sem(tok.ring, tok.slot), lo.view(tok.src), lo.view(tok.dst))
    lo.env[op.results[0]] = tok.dst


@rule("vx.matmul_acc")
def _matmul_acc(lo: FunctionLowering, op: ir.Operation) -> None:
    acc, a, b = (lo.hbm(v, op) for v in op.operands)
    for ref, what in ((acc, "acc"), (a, "a"), (b, "b")):
        if ir.MemRefType(ref.base.type).memory_space is None or "vmem" not in str(
            ir.MemRefType(ref.base.type).memory_space
        ):
            raise fail(
                "E7007", op, f"matmul_acc operand `{what}` must be in VMEM (transfer it first)"
            )
    elem = str(_placed(op.operands[1].type).element_type)
    if elem not in ("f32", "bf16", "f16"):
        raise fail(
            "E7007", op, f"matmul_acc on {elem} operands: the MXU path takes f32, bf16 or f16"
        )
    av, bv, cv = lo.load(a), lo.load(b), lo.load(acc)
    # Mosaic's default for f32 operands is one MXU pass, which rounds them to bf16; the
    # fp32 contract precision computes what the cpu does, to f32 rounding (docs/TPU.md).
    exact = elem == "f32" and lo.precision == "f32"
    r = tpu.MatmulOp(
        cv.type,
        av,
        bv,
        cv,
        False,
        precision=ir.Attribute.parse("#tpu.contract_precision<fp32>") if exact else None,
        dimension_numbers=ir.Attribute.parse(DOT_DIMS),
    ).result
    lo.store(acc, r)


@rule("scf.for")
def _for(lo: FunctionLowering, op: ir.Operation) -> None:
    lb, ub, step = (lo.env[v] for v in list(op.operands)[:3])
    inits = [lo.env[v] for v in list(op.operands)[3:]]
    flat = [x for v in inits for x in lo.flatten(v, op)]
    loop = scf.ForOp(lb, ub, step, flat)
    body = op.regions[0].blocks[0]
    lo.env[body.arguments[0]] = loop.induction_variable
    inner = list(loop.inner_iter_args)
    pos = 0
    for proto, arg in zip(inits, list(body.arguments)[1:], strict=True):
        val, n = lo.unflatten(proto, inner[pos : pos + n_of(proto)])
        lo.env[arg] = val
        pos += n
    with ir.InsertionPoint(loop.body):
        yielded = [lo.env[v] for v in lo.lower_block(body)]
        y = list(body.operations)[-1].operation
        for a, b in zip(inits, yielded, strict=True):
            lo.same_shape(a, b, y)
        scf.YieldOp([x for v in yielded for x in lo.flatten(v, y)])
    results = list(loop.results)
    pos = 0
    for proto, r in zip(inits, op.results, strict=True):
        val, n = lo.unflatten(proto, results[pos : pos + n_of(proto)])
        lo.env[r] = val
        pos += n


def n_of(proto: object) -> int:
    return 2 if isinstance(proto, Token) else 1


@rule("vx.instance")
def _instance(lo: FunctionLowering, op: ir.Operation) -> None:
    lo.env[op.results[0]] = lo.pid


@rule("vx.instances")
def _instances(lo: FunctionLowering, op: ir.Operation) -> None:
    lo.env[op.results[0]] = lo.i32(max(1, lo.instances))


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
    if constraint is not None and constraint not in lo.constraints:
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
    a, b = (_dim_expr(lo, v) for v in op.operands)
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return {0: a == b, 1: a != b, 2: a < b, 3: a <= b, 4: a > b, 5: a >= b,
                6: a < b, 7: a <= b, 8: a > b, 9: a >= b}[pred]  # fmt: skip
    if pred == 0:
        return f"{a} == {b}"
    if pred not in _GE:
        return None
    big, small, plus = _GE[pred]
    x, y = (a, b)[big], (a, b)[small]
    return f"{x} >= {y} + 1" if plus else f"{x} >= {y}"


def _dim_expr(lo: FunctionLowering, v: ir.Value) -> str | int | None:
    op = v.owner
    if isinstance(v, ir.BlockArgument) or not isinstance(op, ir.OpView | ir.Operation):
        return None
    if op.name == "vx.len":
        vec = op.operands[0]
        if isinstance(vec, ir.BlockArgument) and vec.owner.owner == lo.vx:
            p = lo.inputs[vec.arg_number]
            return p.symbol or p.shape[0]
        return None
    if op.name == "vx.instances":
        return max(1, lo.instances)
    if op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    if op.name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
        return _dim_expr(lo, op.operands[0])
    if op.name in ("arith.addi", "arith.subi", "arith.muli"):
        x, y = (_dim_expr(lo, o) for o in op.operands)
        if x is None or y is None:
            return None
        sign = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}[op.name]
        if isinstance(x, int) and isinstance(y, int):
            # Folded as the scalar unit computes it: 32-bit two's complement, wrapping.
            exact = {"+": x + y, "-": x - y, "*": x * y}[sign]
            return (exact + (1 << 31)) % (1 << 32) - (1 << 31)
        return f"({x} {sign} {y})"
    return None


@rule("func.return")
def _return(lo: FunctionLowering, op: ir.Operation) -> None:
    func.ReturnOp([])


@rule("arith.constant")
def _constant(lo: FunctionLowering, op: ir.Operation) -> None:
    t = lo.scalar(op.results[0].type, op)
    attr = op.attributes["value"]
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
        if len(f.regions[0].blocks) == 0:
            continue  # an extern declaration; its calls are reported where they are
        kernels.append(FunctionLowering(f, ctx, instances, precision).run())
    return kernels
