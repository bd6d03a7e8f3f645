"""Checked HIR -> vx dialect module (the IR contract of docs/IR.md).

Structured control flow maps onto scf: a `for` becomes `scf.for` whose iter_args
are the outer variables the body assigns (the seed's `inflight` token), an `if`
becomes `scf.if` yielding the outer variables either branch assigns. Each route
hop of a transfer is one vx op; a multi-hop async transfer moves the leading
hops blocking and issues the last one async (it completes when its last hop does).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, func, memref, scf

from vxc.checks.seams import show_expr
from vxc.errors import Unsupported
from vxc.frontend import ast as A
from vxc.hir import types as T
from vxc.hir.program import Function
from vxc.ir import builders as B
from vxc.ir import types as IT
from vxc.ir.context import make_context

_ELEM = {"u8": "ui8", "u16": "ui16", "u32": "ui32", "u64": "ui64", "bool": "i1"}


# The launch grid's intrinsics (LANGUAGE.md section 4.1) -> their vx op builders.
_LAUNCH = {"instance": B.instance, "instances": B.instances}


class LoweringError(Unsupported):
    """A checked program that uses a form the IR does not express yet (said plainly)."""


def symbol(name: str) -> str:
    """IR/C symbol of a function: instances `scale<128, VMEM>` become `scale__128_VMEM`."""
    if "<" not in name:
        return name
    base, args = name.split("<", 1)
    return base + "__" + "_".join(a.strip() for a in args.rstrip(">").split(","))


def _elem(name: str) -> str:
    return _ELEM.get(name, name)


@dataclass
class _Ctx:
    checked: object  # api.Checked
    fn: Function
    placement: object  # checks.placement.FnPlacement
    env: dict[int, ir.Value]


class Lowering:
    def __init__(self, checked):
        self.checked = checked
        self.machine = checked.machine

    # ---- types ----------------------------------------------------------------------
    def space(self, name: str) -> str:
        return self.machine.space(name) or name

    def ty(self, t: T.Type) -> ir.Type:
        if isinstance(t, T.RefT):
            return self.ty(t.inner)
        if isinstance(t, T.TensorT):
            dims = [d if isinstance(d, int) else None for d in t.dims]
            return IT.memref_type(dims, _elem(t.elem), self.space(t.space))
        if isinstance(t, T.VecT):
            inner = t.elem
            if not isinstance(inner, T.TensorT):
                raise LoweringError(f"`{t.show()}`: only Vec of tensors is lowered")
            dims = [None] + [d if isinstance(d, int) else None for d in inner.dims]
            return IT.memref_type(dims, _elem(inner.elem), self.space(t.space))
        if isinstance(t, T.TokenT):
            return IT.token_type(self.ty(t.inner))
        if isinstance(t, T.Scalar):
            if t.name in T.FLOATS:
                return ir.Type.parse(t.name)
            return ir.IntegerType.get_signless(1 if t.name == "bool" else T.SCALARS[t.name] * 8)
        raise LoweringError(f"type `{t.show()}` has no IR form")

    # ---- module ---------------------------------------------------------------------------
    def run(self) -> ir.Module:
        self.context = make_context()
        with self.context, ir.Location.unknown():
            module = ir.Module.create()
            module.operation.attributes["vx.target"] = ir.StringAttr.get(self.checked.target)
            functions = self.checked.analysis.program.functions
            self.helpers = _called(functions)
            with ir.InsertionPoint(module.body):
                for fn in functions.values():
                    if fn.generic_of is None and fn.decl.const_params:
                        continue  # only the instances are code
                    self.function(fn)
            return module

    def function(self, fn: Function) -> None:
        arg_types = [self.ty(p.ty) for p in fn.params]
        results = [] if fn.ret == T.VOID else [self.ty(fn.ret)]
        op = func.FuncOp(
            symbol(fn.name),
            ir.FunctionType.get(arg_types, results),
            # Externs are declarations; helpers (called by other functions) are private
            # definitions: the backend keeps them out of the C header.
            visibility="private" if fn.is_extern or fn.name in self.helpers else None,
        )
        op.arg_attrs = ir.ArrayAttr.get(
            [ir.DictAttr.get({"vx.name": ir.StringAttr.get(p.name)}) for p in fn.params]
        )
        if fn.topology:
            op.attributes["vx.topology"] = ir.StringAttr.get(fn.topology)
        if not fn.is_extern and fn.name not in self.helpers:
            # A kernel entry: launched as N instances, results stacked (docs/IR.md).
            op.attributes["vx.launch"] = ir.StringAttr.get("instances")
        if fn.is_extern:
            return
        block = op.add_entry_block()
        ctx = _Ctx(
            self.checked,
            fn,
            self.checked.placements.get(fn.name),
            {p.vid: block.arguments[i] for i, p in enumerate(fn.params)},
        )
        with ir.InsertionPoint(block):
            if fn.name not in self.helpers:
                # An entry's `where` clauses are its launch's preconditions (a helper's are
                # proved at each call instead).
                for w in fn.decl.where:
                    B.require(self.expr(ctx, w), clause=show_expr(w))
            self.tail(ctx, list(fn.decl.body.stmts), results, func.ReturnOp)

    def tail(self, ctx: _Ctx, stmts: list[A.Stmt], results: list[ir.Type], finish) -> None:
        """Lower the rest of a function body; `finish(values)` ends it (func.return, or
        scf.yield inside a guard). An `if` with a `return` in a branch becomes an scf.if
        yielding the function's results, with the statements after it copied into the
        branch that falls through: `if n == 0 { return z; } rest` is
        `return (n == 0 ? z : rest)`."""
        for i, s in enumerate(stmts):
            if isinstance(s, A.Return):
                finish([] if s.value is None else [self.expr(ctx, s.value)])
                return
            if isinstance(s, A.If) and _returns(s):
                rest = stmts[i + 1 :]
                op = scf.IfOp(self.expr(ctx, s.cond), results, has_else=True)
                entry = dict(ctx.env)
                branches = ((op.then_block, s.then), (op.else_block, s.orelse))
                for region_block, body in branches:
                    ctx.env = dict(entry)
                    with ir.InsertionPoint(region_block):
                        self.tail(
                            ctx, list(body.stmts if body else []) + rest, results, scf.YieldOp
                        )
                ctx.env = entry
                finish(list(op.results))
                return
            self.stmt(ctx, s)
        if results:  # the checker proved every path returns; this is a lowering bug
            raise LoweringError("a function with a result reached its end")
        finish([])

    # ---- statements ---------------------------------------------------------------------------
    def block(self, ctx: _Ctx, block: A.Block) -> bool:
        """Lower statements; True when the block ended in a `return`."""
        for s in block.stmts:
            if isinstance(s, A.Return):
                vals = [] if s.value is None else [self.expr(ctx, s.value)]
                func.ReturnOp(vals)
                return True
            self.stmt(ctx, s)
        return False

    def stmt(self, ctx: _Ctx, s: A.Stmt) -> None:
        if isinstance(s, A.Let | A.Assign):
            ctx.env[s.vid] = self.expr(ctx, s.value)
        elif isinstance(s, A.ExprStmt):
            self.expr(ctx, s.expr)
        elif isinstance(s, A.For):
            self.for_(ctx, s)
        elif isinstance(s, A.If):
            self.if_(ctx, s)
        elif isinstance(s, A.Spawn):
            # One host thread plays every core on cpu; device backends place the block.
            if self.block(ctx, s.body):
                raise LoweringError("`return` inside `spawn` is not lowered")

    def for_(self, ctx: _Ctx, s: A.For) -> None:
        lo = self.index(self.expr(ctx, s.start))
        hi = self.index(self.expr(ctx, s.end))
        one = arith.ConstantOp(ir.IndexType.get(), 1).result
        carried = sorted(v for v in A.assigned_vars(s.body) if v in ctx.env)
        loop = scf.ForOp(lo, hi, one, [ctx.env[v] for v in carried])
        with ir.InsertionPoint(loop.body):
            iv = loop.induction_variable
            ctx.env[s.vid] = arith.IndexCastOp(self.ty(ctx.fn.vars[s.vid].ty), iv).result
            for v, arg in zip(carried, loop.inner_iter_args, strict=True):
                ctx.env[v] = arg
            if self.block(ctx, s.body):
                raise LoweringError("`return` inside a loop is not lowered; hoist it")
            scf.YieldOp([ctx.env[v] for v in carried])
        for v, res in zip(carried, loop.results, strict=True):
            ctx.env[v] = res

    def if_(self, ctx: _Ctx, s: A.If) -> None:
        cond = self.expr(ctx, s.cond)
        carried = [
            v
            for v in A.assigned_vars(s.then) | (A.assigned_vars(s.orelse) if s.orelse else set())
            if v in ctx.env
        ]
        op = scf.IfOp(cond, [ctx.env[v].type for v in carried], has_else=True)
        entry = dict(ctx.env)
        for region_block, body in ((op.then_block, s.then), (op.else_block, s.orelse)):
            ctx.env = dict(entry)
            with ir.InsertionPoint(region_block):
                if body is not None and self.block(ctx, body):
                    raise LoweringError("`return` inside `if` is not lowered; hoist it")
                scf.YieldOp([ctx.env[v] for v in carried])
        ctx.env = entry
        for v, res in zip(carried, op.results, strict=True):
            ctx.env[v] = res

    # ---- expressions ------------------------------------------------------------------------------
    def index(self, v: ir.Value) -> ir.Value:
        """`v` as an index; folds the i64 round trip of a loop variable or `len()`."""
        if isinstance(v.type, ir.IndexType):
            return v
        owner = getattr(v.owner, "operation", v.owner)
        if getattr(owner, "name", None) == "arith.index_cast":
            source = owner.operands[0]
            if isinstance(source.type, ir.IndexType):
                return source
        return arith.IndexCastOp(ir.IndexType.get(), v).result

    def expr(self, ctx: _Ctx, e: A.Expr) -> ir.Value | None:
        match e:
            case A.IntLit() | A.SizeLit():
                return arith.ConstantOp(self.ty(e.ty), e.value).result
            case A.FloatLit():
                return arith.ConstantOp(self.ty(e.ty), e.value).result
            case A.BoolLit():
                return arith.ConstantOp(ir.IntegerType.get_signless(1), int(e.value)).result
            case A.Name():
                return ctx.env[e.vid]
            case A.Borrow():
                return self.expr(ctx, e.operand)
            case A.Unary():
                return self.unary(ctx, e)
            case A.Binary():
                return self.binary(ctx, e)
            case A.Index():
                vec = self.expr(ctx, e.obj)
                return B.element(vec, self.index(self.expr(ctx, e.index))).result
            case A.MethodCall(method="len"):
                n = B.len_(self.expr(ctx, e.obj)).result
                return arith.IndexCastOp(self.ty(T.I64), n).result
            case A.Transfer():
                return self.transfer(ctx, e)
            case A.Wait():
                return B.wait(self.expr(ctx, e.token)).result
            case A.TensorNew():
                return self.zeros(ctx, e)
            case A.Call():
                return self.call(ctx, e)
        raise LoweringError(f"expression `{type(e).__name__}` is not lowered")

    def unary(self, ctx: _Ctx, e: A.Unary) -> ir.Value:
        v = self.expr(ctx, e.operand)
        if e.op == "!":
            true = arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result
            return arith.XOrIOp(v, true).result
        if T.is_float(e.ty):
            return arith.NegFOp(v).result
        zero = arith.ConstantOp(v.type, 0).result
        return arith.SubIOp(zero, v).result

    def binary(self, ctx: _Ctx, e: A.Binary) -> ir.Value:
        lhs, rhs = self.expr(ctx, e.lhs), self.expr(ctx, e.rhs)
        fl = T.is_float(e.lhs.ty)
        unsigned = isinstance(e.lhs.ty, T.Scalar) and e.lhs.ty.name.startswith("u")
        if e.op in ("&&", "||"):
            return (arith.AndIOp if e.op == "&&" else arith.OrIOp)(lhs, rhs).result
        if e.op in ("+", "-", "*", "/", "%"):
            ops = (
                {
                    "+": arith.AddFOp,
                    "-": arith.SubFOp,
                    "*": arith.MulFOp,
                    "/": arith.DivFOp,
                    "%": arith.RemFOp,
                }
                if fl
                else {
                    "+": arith.AddIOp,
                    "-": arith.SubIOp,
                    "*": arith.MulIOp,
                    "/": arith.DivUIOp if unsigned else arith.DivSIOp,
                    "%": arith.RemUIOp if unsigned else arith.RemSIOp,
                }
            )
            return ops[e.op](lhs, rhs).result
        if isinstance(T.deref(e.lhs.ty), T.TensorT | T.TokenT):
            raise LoweringError("a tensor comparison is a compile-time contract, not a value")
        names = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
        if fl:
            pred = {"eq": "oeq", "ne": "une"}.get(names[e.op], "o" + names[e.op])
            return arith.CmpFOp(getattr(arith.CmpFPredicate, pred.upper()), lhs, rhs).result
        pred = names[e.op]
        if pred not in ("eq", "ne"):
            pred = ("u" if unsigned else "s") + pred
        return arith.CmpIOp(getattr(arith.CmpIPredicate, pred), lhs, rhs).result

    def _hop_attrs(self, hop, alloc) -> dict[str, object]:
        mem = self.machine.memories[hop.dst]
        attrs: dict[str, object] = {
            "space": hop.dst,
            "from_": hop.src,
            "within": self.space(mem.within or "") or "",
            "capacity": mem.capacity,
            "granule": mem.granule,
            "scope": mem.scope,
            "edge_cost": hop.cost,
            "ring": -1,
            "offset": 0,
            "slots": 1,
        }
        if alloc is not None:
            attrs.update(
                offset=alloc.offset, slots=alloc.slots, slot_bytes=alloc.slot_bytes, ring=alloc.ring
            )
        return attrs

    def transfer(self, ctx: _Ctx, e: A.Transfer) -> ir.Value:
        value = self.expr(ctx, e.src)
        hops = ctx.placement.hops_of(e) if ctx.placement is not None else []
        if not hops:
            placed = self.ty(e.ty.inner if isinstance(e.ty, T.TokenT) else e.ty)
            if e.is_async:  # already there: a token that is complete at once
                return B.transfer_async(value, **self._same_space(placed)).result
            return value
        for i, (hop, alloc) in enumerate(hops):
            last = i == len(hops) - 1
            build = B.transfer_async if (last and e.is_async) else B.transfer
            value = build(value, **self._hop_attrs(hop, alloc)).result
        return value

    def _same_space(self, placed: ir.Type) -> dict[str, object]:
        space = IT.space_of(placed)
        mem = self.machine.memories.get(space)
        return {
            "space": space,
            "from_": space,
            "within": "",
            "capacity": 0,
            "granule": 0,
            "scope": mem.scope if mem else "device",
            "edge_cost": 0,
            "ring": -1,
            "offset": 0,
            "slots": 1,
        }

    def zeros(self, ctx: _Ctx, e: A.TensorNew) -> ir.Value:
        alloc = ctx.placement.alloc_of(e) if ctx.placement is not None else None
        kw: dict[str, object] = {"ring": -1, "offset": 0, "slots": 1}
        if alloc is not None:
            kw = {
                "ring": alloc.ring,
                "offset": alloc.offset,
                "slots": alloc.slots,
                "slot_bytes": alloc.slot_bytes,
            }
        return B.zeros(self.ty(e.ty), **kw).result

    def call(self, ctx: _Ctx, e: A.Call) -> ir.Value | None:
        program = ctx.checked.analysis.program
        callee = program.functions.get(e.callee)
        if callee is None and e.callee == "matmul_acc":
            B.matmul_acc(*(self.expr(ctx, a) for a in e.args))
            return None
        if callee is None and e.callee in _LAUNCH:
            return _LAUNCH[e.callee]().result
        if callee is None and e.callee == "assert":
            return None  # proved at compile time (seams, bounds); not re-checked at run time
        args = []
        for a, p in zip(e.args, callee.params, strict=True):
            v = self.expr(ctx, a)
            want = self.ty(p.ty)
            if v.type != want and IT.as_memref(v.type) is not None:
                v = memref.MemorySpaceCastOp(want, v).result  # placement-polymorphic param
            args.append(v)
        results = [] if callee.ret == T.VOID else [self.ty(callee.ret)]
        op = func.CallOp(results, ir.FlatSymbolRefAttr.get(symbol(callee.name)), args)
        alloc = ctx.placement.alloc_of(e) if ctx.placement is not None else None
        if alloc is not None:  # the scratchpad slot the caller receives the result in
            i64 = ir.IntegerType.get_signless(64)
            op.attributes["space"] = ir.StringAttr.get(alloc.space)
            for name in ("ring", "offset", "slots", "slot_bytes"):
                op.attributes[name] = ir.IntegerAttr.get(i64, getattr(alloc, name))
        return op.results[0] if results else None


def _called(functions: dict[str, Function]) -> set[str]:
    """Names of the functions some other function calls."""
    return {
        c.callee
        for fn in functions.values()
        for c in A.walk_calls(fn.decl.body)
        if c.callee != fn.name
    }


def _returns(s: A.If) -> bool:
    """Whether a branch of `s` returns (outside loops and spawns, which stay unsupported)."""
    stack = [s]
    while stack:
        node = stack.pop()
        for body in (node.then, node.orelse):
            for st in body.stmts if body else []:
                if isinstance(st, A.Return):
                    return True
                if isinstance(st, A.If):
                    stack.append(st)
    return False


def lower_program(checked) -> ir.Module:
    return Lowering(checked).run()
