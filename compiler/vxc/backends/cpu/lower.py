"""vx module -> LLVM IR (llvmlite), one C-ABI function per `func.func`.

On the CPU every Vx space is host memory. Scratchpad placements (ops with a
`ring` id) live in a per-call arena: one region per space, sized by the
largest `offset + slots*slot_bytes` of its rings, so the IR's ping-pong
offsets become real addresses. `ring = -1` sites get a private arena buffer.
`transfer`/`transfer_async` copy into their slot; `wait` is a no-op; a token is
represented by the buffer it will yield.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from jaxlib.mlir import ir
from llvmlite import ir as ll

from vxc.backends.cpu import abi, fused, fusion, launch, tiles_math
from vxc.backends.cpu import tiles as tiles_ll
from vxc.backends.cpu.amx import amx_fits, define_amx_ready, define_kernel_query, define_matmul_amx
from vxc.backends.cpu.arith import lltype, lower_arith
from vxc.backends.cpu.errors import STATUS, BackendError
from vxc.backends.cpu.loops import I64, Mem, counted_loop
from vxc.backends.cpu.matmul import (
    WIDEN,
    Blocking,
    bf16dot_fits,
    define_matmul,
    define_matmul_bf16,
    define_pack,
    define_widen,
    define_widen_transposed,
)
from vxc.backends.walk import Walk, refuse
from vxc.errors import Refusal
from vxc.ir import types as T
from vxc.ir.loc import inlined_notes, span_of
from vxc.ir.ops import (
    BinaryOp,
    CompareOp,
    EdgeViewOp,
    ElementOp,
    IotaOp,
    MatmulAccOp,
    ReduceOp,
    RequireOp,
    StoreAsyncOp,
    StoreOp,
    UnaryOp,
    ViewOp,
    buffer_root,
    ring_layout,
)

I8, I32 = ll.IntType(8), ll.IntType(32)
PTR = ll.PointerType()
ALIGN = 64  # arena regions start on cache lines
BODY_SUFFIX = "__vx_instance"  # the internal body of kernel `K` (launch.py wraps it)
WHERE_SUFFIX = "__vx_where"  # kernel `K`'s `where` clauses alone, run before any instance
# What may compute a `where` clause (the IR states the clauses at the top of the entry,
# computed from the parameters and the grid): no op that allocates or moves data.
WHERE_OPS = ("arith.", "vx.len", "vx.instance", "vx.instances", "vx.require")


def _c(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


def _round(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


# The ops that read a `vx.view` (as their first operand): copies into a tile, stores;
# a return copies it into the result (any operand: a function may return several).
_READS_A_VIEW = frozenset({"vx.transfer", "vx.transfer_async", "vx.store", "vx.store_async"})


@dataclass
class Region:
    """A lowered `vx.view`: a static-size region of a contiguous tensor at run-time
    offsets. Only transfers read it (a strided copy into their slot)."""

    base: Mem
    offsets: list[ll.Value]
    sizes: list[int]
    # An `edge` view's (LANGUAGE.md 4.2): how many of each dimension's `sizes` lie inside
    # the tensor (0 ..= size, at run time), and the value of the others when read.
    counts: list[ll.Value] | None = None
    fill: ll.Value | None = None


@dataclass
class Transposed:
    """A `matmul_acc` operand read transposed (its `transpose` attribute, set by the pass
    `fold-transpose`): the source tile, which the matmul reads in transposed order."""

    src: Mem

    @property
    def dims(self) -> list[ll.Value]:
        return self.src.dims[::-1]


def _memref(t: ir.Type) -> ir.MemRefType:
    inner = T.token_inner(t) if T.is_token(t) else t
    if not isinstance(inner, ir.MemRefType):  # the verifier's operand types rule it out
        raise TypeError(f"cpu backend: expected a tensor type, got {t}")
    return inner


def flat_types(t: ir.Type) -> list[ll.Type]:
    """LLVM values a lowered value of MLIR type `t` travels as (phis, calls)."""
    if isinstance(t, ir.MemRefType) or T.is_token(t):
        m = _memref(t)
        return [PTR] + [I64 for d in m.shape if d == T.DYNAMIC]
    return [lltype(t)]


def flatten(t: ir.Type, v: Mem | ll.Value) -> list[ll.Value]:
    if isinstance(v, Mem):
        m = _memref(t)
        return [v.ptr] + [v.dims[i] for i, d in enumerate(m.shape) if d == T.DYNAMIC]
    return [v]


def unflatten(t: ir.Type, vals: list[ll.Value]) -> Mem | ll.Value:
    if isinstance(t, ir.MemRefType) or T.is_token(t):
        m = _memref(t)
        dyn = iter(vals[1:])
        return Mem(vals[0], [next(dyn) if d == T.DYNAMIC else _c(d) for d in m.shape])
    return vals[0]


@dataclass
class ArenaPlan:
    size: int = 0
    space_base: dict[str, int] = field(default_factory=dict)
    site: dict[object, int] = field(default_factory=dict)  # op (or (op, i)) -> byte offset
    rings: dict[int, int] = field(default_factory=dict)  # ring id -> slots


def _static_bytes(t: ir.MemRefType, what: str, op: ir.Operation | None = None) -> int:
    n = T.static_bytes(t)
    if n is None:
        raise BackendError(
            "E7004", f"cpu backend: {what} needs a static shape, got {t}", span_of(op)
        )
    return n


def plan_arena(func: ir.Operation, unbuffered: frozenset | set = frozenset()) -> ArenaPlan:
    """Lay out every scratch placement of `func` in one arena; a private result of a fused
    tree that needs no buffer (`unbuffered`), or one that is its operand's buffer
    (`in_place`), takes none."""
    plan = ArenaPlan()
    extent: dict[str, int] = {}
    sites: list[tuple[object, int]] = []

    def visit(op: ir.Operation) -> None:
        lay = ring_layout(op)  # a placing vx op, or a call placed in a caller's ring
        if lay is not None and lay.shared:
            extent[lay.space] = max(extent.get(lay.space, 0), lay.end)
            plan.rings[lay.ring] = lay.slots
        elif lay is not None and (op in unbuffered or fusion.in_place(op) is not None):
            return
        elif lay is not None:
            t = _memref(op.results[0].type)
            sites.append((op, _static_bytes(t, f"'{op.name}'", op)))
        elif op.name == "vx.matmul_acc":
            # bf16/f16 operands are widened to f32 into buffers of their own (matmul.py),
            # and so is an f32 operand read transposed, transposed on the way.
            mm = MatmulAccOp(op)
            for i, v, letter in ((1, mm.a, "a"), (2, mm.b, "b")):
                t = _memref(v.type)
                if str(t.element_type) in WIDEN or letter in mm.transpose:
                    n = _static_bytes(t, f"'vx.matmul_acc' with {t.element_type} operands", op)
                    sites.append(((op, i), n * 4 // T.element_bytes(t.element_type)))
        elif op.name == "func.call":
            for i, r in enumerate(op.results):
                placed = T.token_inner(r.type) if T.is_token(r.type) else r.type
                if isinstance(placed, ir.MemRefType):
                    sites.append(((op, i), _static_bytes(placed, "a call result", op)))

    _walk(func, visit)
    cursor = 0
    for space in sorted(extent):
        plan.space_base[space] = cursor
        cursor += _round(extent[space])
    for key, nbytes in sites:
        plan.site[key] = cursor
        cursor += _round(max(nbytes, 1))
    plan.size = cursor
    return plan


def extern_writes(module: ir.Module) -> dict[str, set[int]]:
    """Per `extern fn`, the parameters it may write through: its `&mut` ones (`vx.mut`);
    its C prototype makes the others `const`, so a caller's pointer passed there stays
    read-only."""
    out: dict[str, set[int]] = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and not T.has_body(op):
            n = len(ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).inputs)
            out[T.sym_name(op)] = {i for i in range(n) if T.arg_is_mut(op, i)}
    return out


def _walk(func: ir.Operation, visit: Callable[[ir.Operation], None]) -> None:
    """`visit` every op of `func` in pre-order; a refusal crosses MLIR's walk."""
    errors: list[Refusal] = []

    def step(op: ir.Operation) -> ir.WalkResult:
        try:
            visit(op)
        except Refusal as e:  # exceptions do not cross MLIR's walk: carry it out
            errors.append(e)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(step)
    if errors:
        raise errors[0]


def written_args(func: ir.Operation, externs: dict[str, set[int]] | None = None) -> set[int]:
    """Indices of entry-block arguments that matmul_acc or a call may write through (a
    call to an extern only through its `&mut` parameters, `externs`)."""
    entry = func.regions[0].blocks[0] if func.regions[0].blocks else None
    out: set[int] = set()

    def root(v: ir.Value) -> None:
        v = buffer_root(v)
        if isinstance(v, ir.BlockArgument) and entry is not None and v.owner == entry:
            out.add(v.arg_number)

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "vx.matmul_acc":
            root(op.operands[0])
        elif op.name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            writes = (externs or {}).get(callee)
            for i, v in enumerate(op.operands):
                if isinstance(v.type, ir.MemRefType) and (writes is None or i in writes):
                    root(v)
        elif op.name in ("vx.store", "vx.store_async"):
            root(op.operands[1])  # an output: the C caller allocates it, writable
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return out


def llvm_function_type(sig: abi.Signature) -> ll.FunctionType:
    args: list[ll.Type] = []
    for p in sig.params:
        if p.kind == "tensor":
            args += [PTR] + [I64] * len(p.dynamic_dims)
        else:
            args.append(I8 if p.dtype == "i1" else _scalar_ll(p.dtype))
    args += [PTR] * len(sig.results)
    return ll.FunctionType(I32, args)


def static_mnk(op: ir.Operation) -> tuple[int, int, int] | None:
    """(M, N, K) of a `matmul_acc` with static shapes, read from `acc` [M, N] and A (or A^T
    [K, M] when the op reads it transposed), else None."""
    tacc, ta = (_memref(v.type) for v in op.operands[:2])
    if not all(_memref(v.type).has_static_shape for v in op.operands):
        return None
    m, n = tacc.shape
    k = ta.shape[0 if "a" in MatmulAccOp(op).transpose else 1]
    return m, n, k


def _scalar_ll(dtype: str) -> ll.Type:
    floats = {"f32": ll.FloatType(), "f64": ll.DoubleType(), "f16": ll.HalfType()}
    if dtype in floats:
        return floats[dtype]
    if dtype == "bf16":  # its bits, as the header's uint16_t (LLVM's bfloat is not in llvmlite)
        return ll.IntType(16)
    if dtype == "index":
        return I64
    return ll.IntType(int(dtype.lstrip("ui")))


class ModuleLowering:
    def __init__(self, module: ir.Module, triple: str, data_layout: str, blocking: Blocking):
        self.module = module
        self.ll = ll.Module(name="vx")
        self.ll.triple = triple
        self.ll.data_layout = data_layout
        self.blocking = blocking
        self.sigs: dict[str, abi.Signature] = {}
        self.fns: dict[str, ll.Function] = {}
        self.funcs: list[ir.Operation] = []
        self.requires: dict[str, list[str]] = {}  # kernel -> its `where` clauses (vx.require)
        self.variants: dict[str, set[str]] = {}  # function -> its matmul sites' paths

    def intrinsic(self, name: str, ret: ll.Type, args: list[ll.Type]) -> ll.Function:
        if name in self.ll.globals:
            return self.ll.globals[name]
        return ll.Function(self.ll, ll.FunctionType(ret, args), name=name)

    def run(self) -> ll.Module:
        externs = extern_writes(self.module)
        for op in self.module.body.operations:
            op = op.operation  # the OpView's .name would be the symbol name
            if op.name != "func.func":  # the HIR lowering emits functions only
                raise TypeError(f"cpu backend: unexpected top-level op '{op.name}'")
            try:
                sig = abi.signature(op, written_args(op, externs))
            except Refusal as e:
                raise e.at(span_of(op), inlined_notes(op)) from None
            if sig.name in self.sigs:  # MLIR's symbol table rules it out
                raise TypeError(f"cpu backend: function @{sig.name} defined twice")
            self.sigs[sig.name] = sig
            self.funcs.append(op)
        for sig in self.sigs.values():
            if sig.kernel and sig.launch_name in self.sigs:
                raise BackendError(
                    "E7003",
                    f"cpu backend: kernel @{sig.name}'s launch entry point collides with "
                    f"function @{sig.launch_name}; rename one of them",
                    span_of(self.funcs[list(self.sigs).index(sig.name)]),
                )
            fnty = llvm_function_type(sig)
            if sig.extern:
                self.fns[sig.name] = ll.Function(self.ll, fnty, name=sig.name)
                continue
            # The body of one instance: the C arguments, then instance() and instances().
            name = sig.name if sig.internal else f"{sig.name}{BODY_SUFFIX}"
            if not sig.internal and name in self.sigs:
                raise BackendError(
                    "E7003",
                    f"cpu backend: function @{name} collides with a kernel body",
                    span_of(self.funcs[list(self.sigs).index(sig.name)]),
                )
            fn = ll.Function(self.ll, ll.FunctionType(I32, [*fnty.args, I64, I64]), name=name)
            fn.attributes.add("nounwind")
            fn.linkage = "internal"  # helpers and bodies are not exported from the object
            self.fns[sig.name] = fn
        for op in self.funcs:
            if op.regions[0].blocks:
                FunctionLowering(self, op).run()
        for name, clauses in self.requires.items():
            self.sigs[name] = replace(self.sigs[name], requires=tuple(clauses))
        wheres = {
            name: WhereLowering(self, op).run()
            for op in self.funcs
            if (name := ir.StringAttr(op.attributes["sym_name"]).value) in self.requires
            and self.sigs[name].kernel
        }
        for sig in self.sigs.values():
            if sig.kernel:
                fnty = llvm_function_type(sig)
                launch.define_single(self.ll, sig, fnty, self.fns[sig.name])
                body = self.fns[sig.name]
                launch.define_launch(self.ll, sig, fnty, body, wheres.get(sig.name))
                if "amx" in self.variants.get(sig.name, ()):
                    define_kernel_query(self.ll, sig.name)
        return self.ll


class FunctionLowering(Walk):
    no_rule = "cpu backend: cannot lower '{name}'"
    # What the rules (the op_* methods below, `_arith`) use: values, the builder and
    # the arena, status guards; not the signature planning of `run`.
    rule_surface = frozenset(
        {"values", "get", "bind_flat", "region_values", "b", "allocas", "mod", "fn", "sig",
         "plan", "counters", "exit", "instance", "instances", "guard", "nbytes", "memcpy",
         "at", "slot", "_copy_in", "require", "strided", "copy_region", "region_guard", "bf16dot",
         "clamped_copy_in", "fill_tile", "inside_counts", "start_guard",
         "matmul_bf16dot", "amx", "matmul_amx", "matmul_vector", "variant",
         "op_vx_store", "tile_dst"}
    )  # fmt: skip

    def __init__(self, mod: ModuleLowering, func: ir.Operation):
        self.mod = mod
        self.func = func
        self.sig = mod.sigs[ir.StringAttr(func.attributes["sym_name"]).value]
        self.fn = mod.fns[self.sig.name]
        self.fusion = fusion.analyze(func)
        self.plan = plan_arena(func, self.fusion.unbuffered)
        self.values: dict[ir.Value, Mem | ll.Value] = {}
        self.counters: dict[int, ll.Value] = {}

    # -- plumbing --------------------------------------------------------------

    def run(self) -> None:
        entry = self.fn.append_basic_block("entry")
        start = self.fn.append_basic_block("start")
        self.exit = self.fn.append_basic_block("exit")
        self.allocas = ll.IRBuilder(entry)
        self.status = self.allocas.alloca(I32, name="status")
        self.allocas.store(ll.Constant(I32, 0), self.status)
        for ring in sorted(self.plan.rings):
            slot = self.allocas.alloca(I64, name=f"ring{ring}")
            self.allocas.store(_c(0), slot)
            self.counters[ring] = slot
        b = self.b = ll.IRBuilder(start)
        self.instance, self.instances = self.fn.args[-2], self.fn.args[-1]
        self.instance.name, self.instances.name = "vx_instance", "vx_instances"
        if self.plan.size:
            alloc = self.mod.intrinsic("aligned_alloc", PTR, [I64, I64])
            self.arena = b.call(alloc, [_c(ALIGN), _c(self.plan.size)], name="arena")
            self.guard(b.icmp_unsigned("==", self.arena, ll.Constant(PTR, None)), "VX_ERR_ALLOC")
        else:
            self.arena = ll.Constant(PTR, None)
        self.bind_args()
        body = self.func.regions[0].blocks[0]
        self.lower_block(body)
        self.allocas.branch(start)
        eb = ll.IRBuilder(self.exit)
        if self.plan.size:
            eb.call(self.mod.intrinsic("free", ll.VoidType(), [PTR]), [self.arena])
        eb.ret(eb.load(self.status))

    def guard(self, bad: ll.Value, code: str | ll.Value) -> None:
        """If `bad`, leave the function with status `code`; continue on the good path."""
        fail = self.b.append_basic_block("fail")
        ok = self.b.append_basic_block("ok")
        self.b.cbranch(bad, fail, ok)
        self.b.position_at_end(fail)
        value = ll.Constant(I32, STATUS[code]) if isinstance(code, str) else code
        self.b.store(value, self.status)
        self.b.branch(self.exit)
        self.b.position_at_end(ok)

    def bind_args(self) -> None:
        args = iter(self.fn.args)
        block = self.func.regions[0].blocks[0]
        for p, barg in zip(self.sig.params, block.arguments, strict=True):
            if p.kind == "tensor":
                ptr = next(args)
                ptr.name = abi.local_name(p.name)
                dims = []
                for i, d in enumerate(p.shape):
                    if d is None:
                        dim = next(args)
                        dim.name = abi.local_name(f"{p.name}_dim{i}")
                        dims.append(dim)
                    else:
                        dims.append(_c(d))
                self.values[barg] = Mem(ptr, dims)
            else:
                v = next(args)
                v.name = abi.local_name(p.name)
                self.values[barg] = self.b.trunc(v, ll.IntType(1)) if p.dtype == "i1" else v

    def get(self, v: ir.Value) -> Mem | ll.Value:
        if v not in self.values:  # MLIR's dominance rules it out
            raise KeyError(f"cpu backend: value {v} used before it is defined")
        return self.values[v]

    def nbytes(self, t: ir.Type, m: Mem) -> ll.Value:
        mt = _memref(t)
        eb = T.element_bytes(mt.element_type)
        if eb is None:
            raise BackendError("E7004", f"cpu backend: unsupported element type {mt.element_type}")
        static, total = eb, None
        for d, dv in zip(mt.shape, m.dims, strict=True):
            if d == T.DYNAMIC:
                total = dv if total is None else self.b.mul(total, dv)
            else:
                static *= d
        return _c(static) if total is None else self.b.mul(total, _c(static))

    def memcpy(self, dst: ll.Value, src: ll.Value, n: ll.Value) -> None:
        f = self.mod.intrinsic(
            "llvm.memcpy.p0.p0.i64", ll.VoidType(), [PTR, PTR, I64, ll.IntType(1)]
        )
        self.b.call(f, [dst, src, n, ll.Constant(ll.IntType(1), 0)])

    def at(self, offset: ll.Value) -> ll.Value:
        return self.b.gep(self.arena, [offset], inbounds=True, source_etype=I8)

    # -- blocks and control flow ------------------------------------------------

    def lower_op(self, op: ir.Operation) -> None:
        """A fused tree's ops (fusion.py) are lowered together, where the tree is emitted."""
        if op in self.fusion.skip:
            return
        tree = self.fusion.emit.get(op)
        if tree is None:
            super().lower_op(op)
            return
        try:
            fused.emit(self, tree)
        except Refusal as e:
            raise e.at(span_of(op), inlined_notes(op)) from None
        for later in tree.deferred:
            super().lower_op(later)

    def fallback(self, op: ir.Operation):
        return _arith if op.name.startswith("arith.") else None

    def region_values(self, block: ir.Block) -> list[Mem | ll.Value]:
        """Lower a region's block; the lowered values its `scf.yield` yields."""
        return [self.get(v) for v in self.lower_block(block) or []]

    def lower_return(self, op: ir.Operation) -> None:
        nres = len(self.sig.results)
        outs = self.fn.args[len(self.fn.args) - 2 - nres : len(self.fn.args) - 2]
        for r, v, out in zip(self.sig.results, op.operands, outs, strict=True):
            val = self.get(v)
            if r.kind == "tensor" and isinstance(val, Region):  # a view no transfer copied
                whole = [_c(d) for d in val.sizes]
                result = Region(Mem(out, whole), [_c(0)] * len(whole), val.sizes)
                self.copy_region(result, val, _memref(v.type).element_type)
            elif r.kind == "tensor":
                placed = T.token_inner(v.type) if T.is_token(v.type) else v.type
                self.memcpy(out, val.ptr, self.nbytes(placed, val))
            else:
                self.b.store(self.b.zext(val, I8) if r.dtype == "i1" else val, out)
        self.b.branch(self.exit)

    def op_scf_for(self, op: ir.Operation) -> None:
        lb, ub, step = (self.get(v) for v in op.operands[:3])
        inits = op.operands[3:]
        body = op.regions[0].blocks[0]
        iter_types = [v.type for v in inits]
        flat_init = [x for v in inits for x in flatten(v.type, self.get(v))]

        def step_fn(iv: ll.Value, flat: list[ll.Value]) -> list[ll.Value]:
            self.values[body.arguments[0]] = iv
            self.bind_flat(body.arguments[1:], iter_types, flat)
            yielded = self.region_values(body)
            return [x for t, v in zip(iter_types, yielded, strict=True) for x in flatten(t, v)]

        final = counted_loop(self.b, lb, ub, step, step_fn, flat_init, name="for")
        self.bind_flat(op.results, iter_types, final)

    def bind_flat(self, targets, types: list[ir.Type], flat: list[ll.Value]) -> None:
        pos = 0
        for tgt, t in zip(targets, types, strict=True):
            n = len(flat_types(t))
            self.values[tgt] = unflatten(t, flat[pos : pos + n])
            pos += n

    def op_scf_if(self, op: ir.Operation) -> None:
        b = self.b
        types = [r.type for r in op.results]
        then_bb, else_bb = b.append_basic_block("then"), b.append_basic_block("else")
        merge = b.append_basic_block("endif")
        b.cbranch(self.get(op.operands[0]), then_bb, else_bb)
        incoming = []
        for region, bb in ((op.regions[0], then_bb), (op.regions[1], else_bb)):
            b.position_at_end(bb)
            vals = self.region_values(region.blocks[0]) if region.blocks else []
            incoming.append(
                ([x for t, v in zip(types, vals, strict=True) for x in flatten(t, v)], b.block)
            )
            b.branch(merge)
        b.position_at_end(merge)
        phis = []
        for i, ty in enumerate(x for t in types for x in flat_types(t)):
            phi = b.phi(ty)
            for vals, blk in incoming:
                phi.add_incoming(vals[i], blk)
            phis.append(phi)
        self.bind_flat(op.results, types, phis)

    def op_func_call(self, op: ir.Operation) -> None:
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if callee not in self.mod.sigs:  # MLIR's symbol verifier rules it out
            raise KeyError(f"cpu backend: call to unknown function @{callee}")
        sig = self.mod.sigs[callee]
        args: list[ll.Value] = []
        for p, v in zip(sig.params, op.operands, strict=True):
            val = self.get(v)
            if p.kind == "tensor":
                args += [val.ptr] + [val.dims[i] for i in p.dynamic_dims]
            else:
                args.append(self.b.zext(val, I8) if p.dtype == "i1" else val)
        outs = []
        for i, (r, res) in enumerate(zip(sig.results, op.results, strict=True)):
            if r.kind == "tensor":
                if ring_layout(op) is not None:
                    placed = _memref(T.token_inner(res.type) if T.is_token(res.type) else res.type)
                    ptr = self.slot(op, placed, _c(_static_bytes(placed, "a call result", op)))
                else:
                    ptr = self.at(_c(self.plan.site[(op, i)]))
                self.values[res] = Mem(ptr, [_c(d) for d in r.shape])
            else:
                ptr = self.allocas.alloca(I8 if r.dtype == "i1" else lltype(res.type))
            outs.append(ptr)
        launch_args = [] if sig.extern else [self.instance, self.instances]
        status = self.b.call(self.mod.fns[callee], args + outs + launch_args)
        # A failing callee's status is the caller's status.
        self.guard(self.b.icmp_signed("!=", status, ll.Constant(I32, 0)), status)
        for r, res, ptr in zip(sig.results, op.results, outs, strict=True):
            if r.kind == "scalar":
                v = self.b.load(ptr)
                self.values[res] = self.b.trunc(v, ll.IntType(1)) if r.dtype == "i1" else v

    # -- vx ops -----------------------------------------------------------------

    def slot(self, op: ir.Operation, t: ir.MemRefType, nbytes: ll.Value) -> ll.Value:
        """Address of this execution's buffer for a placing op."""
        lay = ring_layout(op)
        if not lay.shared:
            return self.at(_c(self.plan.site[op]))
        if not t.has_static_shape:
            self.guard(self.b.icmp_unsigned(">", nbytes, _c(lay.slot_bytes)), "VX_ERR_CAPACITY")
        counter = self.counters[lay.ring]
        n = self.b.load(counter)
        self.b.store(self.b.add(n, _c(1)), counter)
        index = self.b.urem(n, _c(lay.slots)) if lay.slots > 1 else _c(0)
        base = self.plan.space_base[lay.space] + lay.offset
        return self.at(self.b.add(_c(base), self.b.mul(index, _c(lay.slot_bytes))))

    def strided(self, tile: ll.Value, r: Region, elem: ir.Type, into_tile: bool) -> None:
        """Copy between a contiguous tile and region `r` of a larger tensor."""
        whole = Region(Mem(tile, [_c(d) for d in r.sizes]), [_c(0)] * len(r.sizes), r.sizes)
        self.copy_region(whole, r, elem) if into_tile else self.copy_region(r, whole, elem)

    def copy_region(
        self, dst: Region, src: Region, elem: ir.Type, counts: list[ll.Value] | None = None
    ) -> None:
        """Copy region `src` into region `dst` (the same sizes; each a region of its own
        contiguous tensor, a whole tile being one at offsets 0): one memcpy per innermost
        row, loops over the leading dimensions. `counts`: copy only the leading `counts[d]`
        elements of each dimension (an `edge` view's part inside its tensor)."""
        eb = T.element_bytes(elem)
        extent = counts or [_c(n) for n in src.sizes]
        row = self.b.mul(extent[-1], _c(eb)) if counts else _c(src.sizes[-1] * eb)

        def at(r: Region, lin: ll.Value) -> ll.Value:
            return self.b.gep(r.base.ptr, [self.b.mul(lin, _c(eb))], inbounds=True, source_etype=I8)

        def step(r: Region, d: int, lin: ll.Value, i: ll.Value) -> ll.Value:
            """The linear element index of dimension d's element i (offset) in r."""
            return self.b.add(self.b.mul(lin, r.base.dims[d]), self.b.add(r.offsets[d], i))

        def level(d: int, dst_lin: ll.Value, src_lin: ll.Value) -> None:
            # *_lin: the linear element index of the leading dims fixed so far.
            if d == len(src.sizes) - 1:
                zero = _c(0)
                self.memcpy(
                    at(dst, step(dst, d, dst_lin, zero)), at(src, step(src, d, src_lin, zero)), row
                )
                return

            def body(i: ll.Value, carried: list) -> list:
                level(d + 1, step(dst, d, dst_lin, i), step(src, d, src_lin, i))
                return []

            counted_loop(self.b, _c(0), extent[d], _c(1), body, [], name=f"rows{d}")

        level(0, _c(0), _c(0))

    def _copy_in(self, op: ir.Operation) -> Mem:
        src = self.get(op.operands[0])
        t = _memref(op.results[0].type)
        if isinstance(src, Region) and src.counts is not None:  # an `edge` view
            dst = self.slot(op, t, _c(_static_bytes(t, "a view")))
            self.clamped_copy_in(dst, src, t.element_type)
            return Mem(dst, [_c(d) for d in src.sizes])
        if isinstance(src, Region):  # a view: a strided copy of the region into the slot
            dst = self.slot(op, t, _c(_static_bytes(t, "a view")))
            self.strided(dst, src, t.element_type, into_tile=True)
            return Mem(dst, [_c(d) for d in src.sizes])
        n = self.nbytes(op.operands[0].type, src)
        dst = self.slot(op, t, n)
        self.memcpy(dst, src.ptr, n)
        return Mem(dst, list(src.dims))

    def clamped_copy_in(self, tile: ll.Value, r: Region, elem: ir.Type) -> None:
        """An `edge` view into a tile: where the region reaches past the tensor, the whole
        tile is first set to the fill; then the part inside is copied (a clamped copy)."""
        partial = ll.Constant(ll.IntType(1), 0)
        for n, size in zip(r.counts, r.sizes, strict=True):
            partial = self.b.or_(partial, self.b.icmp_signed("<", n, _c(size)))
        with self.b.if_then(partial, likely=False):
            self.fill_tile(tile, r.sizes, elem, r.fill)
        whole = Region(Mem(tile, [_c(d) for d in r.sizes]), [_c(0)] * len(r.sizes), r.sizes)
        self.copy_region(whole, r, elem, r.counts)

    def fill_tile(self, tile: ll.Value, sizes: list[int], elem: ir.Type, fill: ll.Value) -> None:
        """Every element of a contiguous tile set to the scalar `fill` (a loop LLVM vectorises)."""
        kind = str(elem)
        stored = self.b.zext(fill, I8) if kind == "i1" else fill  # a bool tile: byte mask
        eb = T.element_bytes(elem)

        def body(i: ll.Value, carried: list) -> list:
            at = self.b.gep(tile, [self.b.mul(i, _c(eb))], inbounds=True, source_etype=I8)
            self.b.store(stored, at)
            return []

        counted_loop(self.b, _c(0), _c(math.prod(sizes)), _c(1), body, [], name="fill")

    def op_vx_transfer(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self._copy_in(op)

    def op_vx_transfer_async(self, op: ir.Operation) -> None:
        # The copy completes here, so the token is simply the filled buffer.
        self.values[op.results[0]] = self._copy_in(op)

    def op_memref_memory_space_cast(self, op: ir.Operation) -> None:
        # Every Vx space is host memory here: a tensor passed to a placement-polymorphic
        # parameter (an `extern fn`'s) is the same pointer, whatever its space.
        self.values[op.results[0]] = self.get(op.operands[0])

    def op_vx_wait(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self.get(op.operands[0])

    def op_vx_zeros(self, op: ir.Operation) -> None:
        t = _memref(op.results[0].type)
        m = Mem(ll.Constant(PTR, None), [_c(d) for d in t.shape])
        n = self.nbytes(t, m)
        m.ptr = self.slot(op, t, n)
        f = self.mod.intrinsic("llvm.memset.p0.i64", ll.VoidType(), [PTR, I8, I64, ll.IntType(1)])
        self.b.call(f, [m.ptr, ll.Constant(I8, 0), n, ll.Constant(ll.IntType(1), 0)])
        self.values[op.results[0]] = m

    def bf16dot(self, op: ir.Operation) -> bool:
        mnk = static_mnk(op)
        return mnk is not None and bf16dot_fits(self.mod.blocking, *mnk)

    def op_vx_view(self, op: ir.Operation) -> None:
        v = ViewOp(op)
        for use in v.region.uses:
            user = use.owner
            if user.name == "func.return":
                continue
            if user.name not in _READS_A_VIEW or use.operand_number != 0:
                # `transfer(x[..], Memory::HBM)` with x in HBM moves nothing, so the view
                # itself would be the tile: only a copy or a store reads a view here.
                raise refuse(
                    "E7005",
                    user,
                    f"cpu backend: `{user.name}` takes a view of a tensor that no transfer "
                    f"copied (a move within the tensor's own space, {v.region.type.memory_space})",
                    "transfer the view into a scratchpad (`Memory::VMEM`) to make it a tile",
                )
        base = self.get(v.src)
        offsets = [self.get(x) for x in v.offsets]
        sizes = list(_memref(v.region.type).shape)
        self.region_guard(v.proved, base, offsets, sizes)
        self.values[v.region] = Region(base, offsets, sizes)

    def op_vx_edge_view(self, op: ir.Operation) -> None:
        """An `edge` view: its region and, per dimension, how much of it is inside the
        tensor, `clamp(dim - offset, 0, size)`; only `0 <= offset` is checked (if not proved)."""
        v = EdgeViewOp(op)
        for use in v.region.uses:
            if use.owner.name not in ("vx.transfer", "vx.transfer_async"):
                raise refuse(
                    "E7005",
                    use.owner,
                    f"cpu backend: `{use.owner.name}` takes an `edge` view that no transfer copied",
                    "transfer the view into a scratchpad (`Memory::VMEM`) to make it a tile",
                )
        base = self.get(v.src)
        offsets = [self.get(x) for x in v.offsets]
        sizes = list(_memref(v.region.type).shape)
        self.start_guard(v.proved, offsets)
        counts = self.inside_counts(base, offsets, sizes)
        self.values[v.region] = Region(base, offsets, sizes, counts, self.get(v.fill))

    def inside_counts(self, base: Mem, offsets, sizes) -> list[ll.Value]:
        """Per dimension, how many of a region's `size` elements from `offset` (>= 0) are
        inside the tensor: `clamp(dim - offset, 0, size)`."""
        counts = []
        for off, size, dim in zip(offsets, sizes, base.dims, strict=True):
            left = self.b.sub(dim, off)
            left = self.b.select(self.b.icmp_signed("<", left, _c(0)), _c(0), left)
            counts.append(self.b.select(self.b.icmp_signed("<", left, _c(size)), left, _c(size)))
        return counts

    def start_guard(self, proved: int, offsets) -> None:
        """An `edge` region's start the checker did not prove `>= 0` is checked here (its
        end may pass the tensor's)."""
        if proved:
            return
        bad = ll.Constant(ll.IntType(1), 0)
        for off in offsets:
            bad = self.b.or_(bad, self.b.icmp_signed("<", off, _c(0)))
        self.guard(bad, "VX_ERR_INDEX")

    def region_guard(self, proved: int, base: Mem, offsets, sizes) -> None:
        """A region the checker did not prove inside its tensor is checked here."""
        if proved:
            return  # E6041 proved it for every allowed value
        bad = ll.Constant(ll.IntType(1), 0)
        for off, size, dim in zip(offsets, sizes, base.dims, strict=True):
            past = self.b.icmp_signed(">", self.b.add(off, _c(size)), dim)
            bad = self.b.or_(bad, self.b.or_(self.b.icmp_signed("<", off, _c(0)), past))
        self.guard(bad, "VX_ERR_INDEX")

    def op_vx_store(self, op: ir.Operation) -> None:
        st = StoreOp(op) if op.name == "vx.store" else StoreAsyncOp(op)
        tile, out = self.get(st.src), self.get(st.dst)
        offsets = [self.get(v) for v in st.offsets]
        t = _memref(st.src.type)
        region = Region(out, offsets, list(t.shape))
        if st.edge_view:  # only the elements inside the output are written (a clamped copy)
            self.start_guard(st.proved, offsets)
            counts = self.inside_counts(out, offsets, region.sizes)
            src = (
                tile
                if isinstance(tile, Region)
                else Region(
                    Mem(tile.ptr, [_c(d) for d in region.sizes]),
                    [_c(0)] * len(region.sizes),
                    region.sizes,
                )
            )
            self.copy_region(region, src, t.element_type, counts)
            return
        self.region_guard(st.proved, out, offsets, region.sizes)
        if isinstance(tile, Region):  # a view stored as it is (its transfer copied nothing)
            self.copy_region(region, tile, t.element_type)
        else:
            self.strided(tile.ptr, region, t.element_type, into_tile=False)

    def op_vx_store_async(self, op: ir.Operation) -> None:
        # The copy completes here (as a transfer_async's does); the token is the tile.
        self.op_vx_store(op)
        self.values[op.results[0]] = self.get(op.operands[0])

    def op_vx_element(self, op: ir.Operation) -> None:
        vec, i = self.get(op.operands[0]), self.get(op.operands[1])
        if not ElementOp(op).proved:  # E6041 proved it in bounds for every allowed value
            self.guard(self.b.icmp_unsigned(">=", i, vec.dims[0]), "VX_ERR_INDEX")
        tile_t = _memref(op.results[0].type)
        tile = Mem(vec.ptr, vec.dims[1:])
        offset = self.b.mul(i, self.nbytes(tile_t, tile))
        tile.ptr = self.b.gep(vec.ptr, [offset], inbounds=True, source_etype=I8)
        self.values[op.results[0]] = tile

    def op_vx_instance(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self.instance

    def op_vx_instances(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self.instances

    def op_vx_require(self, op: ir.Operation) -> None:
        self.mod.requires.setdefault(self.sig.name, []).append(RequireOp(op).clause)
        self.require(op)

    def require(self, op: ir.Operation) -> None:
        ok = self.get(op.operands[0])
        self.guard(self.b.icmp_unsigned("==", ok, ll.Constant(ll.IntType(1), 0)), "VX_ERR_WHERE")

    def op_vx_len(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self.get(op.operands[0]).dims[0]

    def op_vx_matmul_acc(self, op: ir.Operation) -> None:
        acc, a, b = (self.get(v) for v in op.operands)
        transpose = MatmulAccOp(op).transpose
        a, b = (Transposed(x) if c in transpose else x for x, c in ((a, "a"), (b, "b")))
        ta, tb = (_memref(v.type) for v in op.operands[1:])
        elem = str(ta.element_type)
        if elem != "f32" and elem not in WIDEN or str(tb.element_type) != elem:
            raise BackendError(
                "E7007",
                f"cpu backend: vx.matmul_acc supports f32, bf16 and f16 operands, "
                f"got {ta.element_type} and {tb.element_type}",
            )
        m, n, k = acc.dims[0], acc.dims[1], a.dims[1]
        if not all(_memref(v.type).has_static_shape for v in op.operands):
            bad = self.b.or_(
                self.b.icmp_signed("!=", a.dims[0], m),
                self.b.or_(
                    self.b.icmp_signed("!=", b.dims[0], k), self.b.icmp_signed("!=", b.dims[1], n)
                ),
            )
            self.guard(bad, "VX_ERR_SHAPE")
        if elem == "bf16" and self.amx(op) and not isinstance(a, Transposed):
            self.matmul_amx(op, acc, a, b, (ta, tb))
            return
        self.matmul_vector(op, acc, a, b, (ta, tb))

    def matmul_vector(
        self,
        op: ir.Operation,
        acc: Mem,
        a: Mem | Transposed,
        b: Mem | Transposed,
        types: tuple[ir.MemRefType, ir.MemRefType],
    ) -> None:
        """The vector registers' matmul: `vdpbf16ps`, or operands widened to f32 (or f32
        as they are) into the f32 micro-kernel."""
        ta, tb = types
        elem = str(ta.element_type)
        m, n, k = acc.dims[0], acc.dims[1], a.dims[1]
        if elem == "bf16" and self.bf16dot(op):
            self.variant("avx512bf16")
            self.matmul_bf16dot(op, acc, a, b)
            return
        self.variant("f32")
        ptrs = []
        for i, (mem, t) in enumerate(((a, ta), (b, tb)), start=1):
            if elem == "f32" and not isinstance(mem, Transposed):
                ptrs.append(mem.ptr)
                continue
            # Widen to f32 (exact for bf16 and f16), transposed on the way for a folded
            # transpose, then run the f32 micro-kernel.
            dst = self.at(_c(self.plan.site[(op, i)]))
            if isinstance(mem, Transposed):
                rows, cols = mem.src.dims
                self.b.call(
                    define_widen_transposed(self.mod.ll, elem), [dst, mem.src.ptr, rows, cols]
                )
            else:
                count = _c(T.static_bytes(t) // T.element_bytes(t.element_type))
                self.b.call(define_widen(self.mod.ll, elem), [dst, mem.ptr, count])
            ptrs.append(dst)
        fn = define_matmul(self.mod.ll, self.mod.blocking)
        self.b.call(fn, [acc.ptr, ptrs[0], ptrs[1], m, n, k])

    def amx(self, op: ir.Operation) -> bool:
        # The tile state's permission is asked the Linux way (amx.py: arch_prctl by its
        # x86-64 Linux syscall number); elsewhere the vector path.
        linux = "-linux" in self.mod.ll.triple
        mnk = static_mnk(op)
        return self.mod.blocking.amx and linux and mnk is not None and amx_fits(*mnk)

    def variant(self, name: str) -> None:
        """Record the matmul path a function's site compiles to (the manifest's `variants`)."""
        self.mod.variants.setdefault(self.sig.name, set()).add(name)

    def matmul_amx(
        self,
        op: ir.Operation,
        acc: Mem,
        a: Mem,
        b: Mem | Transposed,
        types: tuple[ir.MemRefType, ir.MemRefType],
    ) -> None:
        """AMX (amx.py) where the process may use the tile state, else the vector path: B
        packed in row pairs (into b's widening buffer, twice the size it needs; B^T's pairs
        are its 32-bit words), A read in place."""
        self.variant("amx")
        m, n = acc.dims
        k = a.dims[1]
        ready = self.b.call(define_amx_ready(self.mod.ll), [])
        with self.b.if_else(ready, likely=True) as (tiles, vector):
            with tiles:
                packed = self.at(_c(self.plan.site[(op, 2)]))
                bt = isinstance(b, Transposed)
                src = (b.src if bt else b).ptr
                self.b.call(define_pack(self.mod.ll, bt), [packed, src, k, n])
                self.b.call(define_matmul_amx(self.mod.ll), [acc.ptr, a.ptr, packed, m, n, k])
            with vector:
                self.matmul_vector(op, acc, a, b, types)

    def matmul_bf16dot(self, op: ir.Operation, acc: Mem, a: Mem | Transposed, b: Mem | Transposed):
        """AVX512_BF16: B packed in row pairs (into b's widening buffer, which is twice the
        size it needs), A read in place, `vdpbf16ps` accumulating in f32. A folded transpose
        is read by the packing: B^T's pairs are its 32-bit words; A^T is packed like B."""
        m, n = acc.dims
        k = a.dims[1]
        packed = self.at(_c(self.plan.site[(op, 2)]))
        bt = isinstance(b, Transposed)
        self.b.call(define_pack(self.mod.ll, bt), [packed, (b.src if bt else b).ptr, k, n])
        a_ptr = a.ptr if not isinstance(a, Transposed) else self.at(_c(self.plan.site[(op, 1)]))
        if isinstance(a, Transposed):  # A^T [K, M] packed in row pairs, as B is
            self.b.call(define_pack(self.mod.ll), [a_ptr, a.src.ptr, k, m])
        fn = define_matmul_bf16(self.mod.ll, self.mod.blocking, isinstance(a, Transposed))
        self.b.call(fn, [acc.ptr, a_ptr, packed, m, n, k])

    # -- tile arithmetic (LANGUAGE.md section 4.3; backends/cpu/tiles.py) -------------------

    def tile_dst(self, op: ir.Operation) -> tuple[ll.Value, ir.MemRefType]:
        """The result buffer of a tile op (its ring slot, or its private arena buffer)."""
        t = _memref(op.results[0].type)
        nbytes = _static_bytes(t, f"'{op.name}'", op)
        for v in op.operands:
            if isinstance(v.type, ir.MemRefType):
                _static_bytes(v.type, f"an operand of '{op.name}'", op)
        k = fusion.in_place(op)  # the result is operand k's buffer (read before written)
        ptr = self.get(op.operands[k]).ptr if k is not None else self.slot(op, t, _c(nbytes))
        self.values[op.results[0]] = Mem(ptr, [_c(d) for d in t.shape])
        return ptr, t


def _tile_elementwise(
    lo: FunctionLowering, op: ir.Operation, fn: str, values_from: int = 0
) -> None:
    """An elementwise tile function of the op's operands. A scalar operand is converted to
    the compute type of the value tiles (the operands from `values_from` on: `select`'s
    condition is not one), or of the result where no value is a tile."""
    dst, t = lo.tile_dst(op)
    args, values = [], []
    tiles = [v.type for v in op.operands[values_from:] if isinstance(v.type, ir.MemRefType)]
    ctype = tiles_ll.compute(str((tiles[0] if tiles else t).element_type))
    for v in op.operands:
        if isinstance(v.type, ir.MemRefType):
            shape = (1,) * (t.rank - v.type.rank) + tuple(v.type.shape)
            args.append(tiles_ll.TileArg(str(v.type.element_type), shape))
            values.append(lo.get(v).ptr)
        else:
            args.append(tiles_ll.TileArg(ctype, None))
            values.append(tiles_ll.scalar_arg(lo.b, lo.get(v), str(v.type), ctype))
    f = tiles_ll.define_elementwise(lo.mod.ll, fn, str(t.element_type), tuple(t.shape), args)
    lo.b.call(f, [dst, *values])


def _tile_binary(lo: FunctionLowering, op: ir.Operation) -> None:
    _tile_elementwise(lo, op, BinaryOp(op).fn)


def _tile_unary(lo: FunctionLowering, op: ir.Operation) -> None:
    fn = UnaryOp(op).fn
    if fn in tiles_math.NO_F64 and str(_memref(op.results[0].type).element_type) == "f64":
        raise refuse(
            "E7001",
            op,
            f"cpu backend: `{fn}` on f64 tiles is not lowered (its forms are f32's)",
            "cast the tile to f32 first: `cast::<f32>(t)`",
        )
    _tile_elementwise(lo, op, fn)


def _tile_cast(lo: FunctionLowering, op: ir.Operation) -> None:
    _tile_elementwise(lo, op, "cast")


def _tile_reduce(lo: FunctionLowering, op: ir.Operation) -> None:
    r = ReduceOp(op)
    dst, _t = lo.tile_dst(op)
    src = _memref(r.src.type)
    define = tiles_ll.define_argreduce if r.fn in ("argmax", "argmin") else tiles_ll.define_reduce
    f = define(lo.mod.ll, r.fn, str(src.element_type), tuple(src.shape), r.axis)
    lo.b.call(f, [dst, lo.get(r.src).ptr])


def _tile_compare(lo: FunctionLowering, op: ir.Operation) -> None:
    _tile_elementwise(lo, op, CompareOp(op).fn)


def _tile_select(lo: FunctionLowering, op: ir.Operation) -> None:
    _tile_elementwise(lo, op, "select", values_from=1)


def _tile_iota(lo: FunctionLowering, op: ir.Operation) -> None:
    dst, t = lo.tile_dst(op)
    f = tiles_ll.define_iota(lo.mod.ll, str(t.element_type), tuple(t.shape), IotaOp(op).axis)
    lo.b.call(f, [dst])


def _tile_transpose(lo: FunctionLowering, op: ir.Operation) -> None:
    dst, _t = lo.tile_dst(op)
    src = _memref(op.operands[0].type)
    f = tiles_ll.define_transpose(lo.mod.ll, str(src.element_type), tuple(src.shape))
    lo.b.call(f, [dst, lo.get(op.operands[0]).ptr])


def _arith(lo: FunctionLowering, op: ir.Operation) -> None:
    args = [lo.get(v) for v in op.operands]
    lo.values[op.results[0]] = lower_arith(lo.b, op, args)


# The lowering rule of each op, keyed by op name (`arith.*` ops go to lower_arith).


class WhereLowering(FunctionLowering):
    """`K__vx_where`: the body's signature, but only the entry ops up to its last
    `vx.require` (VX_ERR_WHERE, else VX_OK). `K_launch` runs it before it starts the pool,
    so a launch that breaks the clauses is refused before any instance runs, in time
    independent of the instance count (docs/DESIGN.md)."""

    def __init__(self, mod: ModuleLowering, func: ir.Operation):
        super().__init__(mod, func)
        ops = [op.operation for op in func.regions[0].blocks[0].operations]
        last = max(k for k, op in enumerate(ops) if op.name == "vx.require")
        self.prologue = ops[: last + 1]
        for op in self.prologue:
            if not op.name.startswith(WHERE_OPS):  # the IR states the clauses first
                raise RuntimeError(
                    f"cpu backend: `{op.name}` before the last `vx.require` of "
                    f"@{self.sig.name}: a `where` clause is computed from parameters and the "
                    "grid only"
                )
        self.per_instance = any(op.name == "vx.instance" for op in self.prologue)
        body = mod.fns[self.sig.name]
        self.fn = ll.Function(mod.ll, body.function_type, name=self.sig.name + WHERE_SUFFIX)
        self.fn.attributes.add("nounwind")
        self.fn.linkage = "internal"
        self.plan = replace(self.plan, size=0)  # the clauses use no scratch

    def run(self) -> WhereLowering:
        entry = self.fn.append_basic_block("entry")
        self.exit = self.fn.append_basic_block("exit")
        self.allocas = ll.IRBuilder(entry)
        self.status = self.allocas.alloca(I32, name="status")
        self.allocas.store(ll.Constant(I32, 0), self.status)
        self.b = self.allocas
        self.instance, self.instances = self.fn.args[-2], self.fn.args[-1]
        self.arena = ll.Constant(PTR, None)
        self.bind_args()
        for op in self.prologue:  # the clauses were recorded by the body's lowering
            self.require(op) if op.name == "vx.require" else self.lower_op(op)
        self.b.branch(self.exit)
        eb = ll.IRBuilder(self.exit)
        eb.ret(eb.load(self.status))
        return self


RULES: dict[str, Callable[[FunctionLowering, ir.Operation], None]] = {
    "func.return": FunctionLowering.lower_return,
    "scf.for": FunctionLowering.op_scf_for,
    "scf.if": FunctionLowering.op_scf_if,
    "func.call": FunctionLowering.op_func_call,
    "memref.memory_space_cast": FunctionLowering.op_memref_memory_space_cast,
    "vx.transfer": FunctionLowering.op_vx_transfer,
    "vx.transfer_async": FunctionLowering.op_vx_transfer_async,
    "vx.wait": FunctionLowering.op_vx_wait,
    "vx.zeros": FunctionLowering.op_vx_zeros,
    "vx.element": FunctionLowering.op_vx_element,
    "vx.view": FunctionLowering.op_vx_view,
    "vx.edge_view": FunctionLowering.op_vx_edge_view,
    "vx.store": FunctionLowering.op_vx_store,
    "vx.store_async": FunctionLowering.op_vx_store_async,
    "vx.len": FunctionLowering.op_vx_len,
    "vx.matmul_acc": FunctionLowering.op_vx_matmul_acc,
    "vx.instance": FunctionLowering.op_vx_instance,
    "vx.instances": FunctionLowering.op_vx_instances,
    "vx.require": FunctionLowering.op_vx_require,
    "vx.binary": _tile_binary,
    "vx.unary": _tile_unary,
    "vx.reduce": _tile_reduce,
    "vx.cast": _tile_cast,
    "vx.transpose": _tile_transpose,
    "vx.compare": _tile_compare,
    "vx.select": _tile_select,
    "vx.iota": _tile_iota,
}

FunctionLowering.rules = RULES
