"""Checked HIR -> vx dialect module (the IR contract of docs/IR.md).

Structured control flow maps onto scf: a `for` becomes `scf.for` whose iter_args
are the outer variables the body assigns (the seed's `inflight` token), an `if`
becomes `scf.if` yielding the outer variables either branch assigns. Each route
hop of a transfer is one vx op; a multi-hop async transfer moves the leading
hops blocking and issues the last one async (it completes when its last hop does).

Lowering is by rules: `STMT_RULES` and `EXPR_RULES` map a HIR node class, and
`INTRINSIC_RULES` an intrinsic's name, to the function that lowers it (as Pallas
keeps `lowering_rules[prim]`); a new node kind is one registered rule. Every op a
rule creates carries the MLIR location of the node's source span
(`loc("k.vx":12:5)`), so the verifier and the backends name the `.vx` line. The
attributes of placing ops (transfers, new tensors, call results) are copied from the
target plan (plan/__init__.py); nothing here routes or allocates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, func, memref, scf

from vxc.elements import BY_NAME
from vxc.errors import Refusal
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function, Program
from vxc.hir.tiles import tile_form, tile_operands
from vxc.ir import builders as B
from vxc.ir import types as IT
from vxc.ir.context import make_context
from vxc.ir.loc import location
from vxc.plan import TargetPlan
from vxc.plan.placement import FnPlacement
from vxc.rules import registrar


def _total_division(op: type, x: ir.Value, d: ir.Value, rem: bool, unsigned: bool) -> ir.Value:
    """Vx integer division is total and wraps (docs/DESIGN.md, integer arithmetic):
    `x / 0 == 0`, `x % 0 == x`, `x / -1 == 0 - x` (so `MIN / -1 == MIN`), `x % -1 == 0`.
    The target divides by a divisor that is never 0 nor -1, so no target meets its
    undefined case (LLVM poison, x86's SIGFPE, Mosaic's UB, PTX's unspecified result) and
    all agree. Only compares, selects and small constants: every backend has them."""
    owner = d.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant":
        if ir.IntegerAttr(owner.attributes["value"]).value not in (0, -1):
            return op(x, d).result  # a literal divisor other than 0 and -1 needs no guard
    t = x.type

    def const(v: int) -> ir.Value:
        return arith.ConstantOp(t, v).result

    def equals(v: int) -> ir.Value:
        return arith.CmpIOp(arith.CmpIPredicate.eq, d, const(v)).result

    by_zero, safe = equals(0), d
    if not unsigned:
        by_minus_one = equals(-1)
        safe = arith.SelectOp(by_minus_one, const(1), safe).result
    result = op(x, arith.SelectOp(by_zero, const(1), safe).result).result
    if not unsigned:
        negated = const(0) if rem else arith.SubIOp(const(0), x).result
        result = arith.SelectOp(by_minus_one, negated, result).result
    return arith.SelectOp(by_zero, x if rem else const(0), result).result


class LoweringError(Refusal):
    """A checked program that uses a form the IR does not express yet (E7010, said plainly,
    at the span of the node)."""

    def __init__(self, message: str, span=None):
        super().__init__("E7010", message, span)


def symbol(name: str) -> str:
    """IR/C symbol of a function: instances `scale<128, VMEM>` become `scale__128_VMEM`
    (a negative const argument `-2` becomes `m2`)."""
    if "<" not in name:
        return name
    base, args = name.split("<", 1)
    return base + "__" + "_".join(a.strip().replace("-", "m") for a in args.rstrip(">").split(","))


def _arg_attrs(p) -> ir.DictAttr:
    """`vx.name` names the parameter in headers and manifests; `vx.mut` marks a `&mut`
    parameter, which a caller's code may see written (an `extern fn`'s C prototype drops
    `const` for it, so a C definition with a plain pointer matches); for a tensor,
    `vx.dims` names the dimensions that shape parameters give (`["m", "k"]`, "" for a
    literal), which the launcher checks against the arguments before any instance runs
    (LANGUAGE.md section 3)."""
    attrs: dict[str, ir.Attribute] = {"vx.name": ir.StringAttr.get(p.name)}
    if isinstance(p.ty, T.RefT) and p.ty.mutable:
        attrs["vx.mut"] = ir.UnitAttr.get()
    t = T.deref(p.ty)
    if isinstance(t, T.TensorT) and any(isinstance(d, str) for d in t.dims):
        names = [d if isinstance(d, str) else "" for d in t.dims]
        attrs["vx.dims"] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])
    return ir.DictAttr.get(attrs)


def _elem(name: str) -> str:
    return BY_NAME[name].mlir


@dataclass
class _Ctx:
    program: Program
    fn: Function
    placement: FnPlacement | None
    env: dict[int, ir.Value]


# Comparison operators -> arith predicates (ordered floats; `!=` is unordered-or-unequal).
_F, _I = arith.CmpFPredicate, arith.CmpIPredicate
_CMPF = {"==": _F.OEQ, "!=": _F.UNE, "<": _F.OLT, "<=": _F.OLE, ">": _F.OGT, ">=": _F.OGE}
_CMPI_S = {"==": _I.eq, "!=": _I.ne, "<": _I.slt, "<=": _I.sle, ">": _I.sgt, ">=": _I.sge}
_CMPI_U = {"==": _I.eq, "!=": _I.ne, "<": _I.ult, "<=": _I.ule, ">": _I.ugt, ">=": _I.uge}

StmtRule = Callable[["Lowering", _Ctx, H.Stmt], None]
ExprRule = Callable[["Lowering", _Ctx, H.Expr], "ir.Value | None"]
STMT_RULES: dict[type, StmtRule] = {}
EXPR_RULES: dict[type, ExprRule] = {}
INTRINSIC_RULES: dict[str, ExprRule] = {}  # calls of `matmul_acc`, `assert`, ...


def _rule(table: dict, *keys):
    """Register the decorated function as the lowering rule of `keys` in `table`."""
    return registrar(table)(*keys)


class Lowering:
    def __init__(self, program: Program, plan: TargetPlan):
        self.program, self.plan = program, plan
        self.machine = plan.machine

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
            # Kept, and read: the plan sized the rings and working sets for this target,
            # so vxc.backends.emit_target refuses to build the module for another one.
            module.operation.attributes["vx.target"] = ir.StringAttr.get(self.plan.target)
            functions = self.program.functions
            with ir.InsertionPoint(module.body):
                for fn in functions.values():
                    if fn.is_template:
                        continue  # only the instances are code
                    self.function(fn)
            return module

    def function(self, fn: Function) -> None:
        try:
            with location(fn.decl.span):
                self._function(fn)
        except Refusal as e:
            raise e.at(fn.decl.span) from None

    def _function(self, fn: Function) -> None:
        arg_types = [self.ty(p.ty) for p in fn.params]
        results = [] if fn.ret == T.VOID else [self.ty(fn.ret)]
        op = func.FuncOp(
            symbol(fn.name),
            ir.FunctionType.get(arg_types, results),
            # Externs are declarations; helpers (called by other functions) are private
            # definitions: the backend keeps them out of the C header.
            visibility=None if fn.entry else "private",
        )
        op.arg_attrs = ir.ArrayAttr.get([_arg_attrs(p) for p in fn.params])
        if fn.topology:
            op.attributes["vx.topology"] = ir.StringAttr.get(fn.topology)
        if fn.entry:
            # A kernel entry: launched as N instances, results stacked (docs/IR.md).
            op.attributes["vx.launch"] = ir.StringAttr.get("instances")
        if fn.is_extern:
            return
        block = op.add_entry_block()
        ctx = _Ctx(
            self.program,
            fn,
            self.plan.functions.get(fn.name),
            {p.vid: block.arguments[i] for i, p in enumerate(fn.params)},
        )
        with ir.InsertionPoint(block):
            if fn.entry:
                # An entry's `where` clauses are its launch's preconditions (a helper's are
                # proved at each call instead).
                for w in fn.decl.where:
                    cond = self.expr(ctx, w)
                    with location(w.span):
                        B.require(cond, clause=H.show_expr(w))
            self.tail(ctx, list(fn.decl.body.stmts), results, func.ReturnOp)

    def tail(self, ctx: _Ctx, stmts: list[H.Stmt], results: list[ir.Type], finish) -> None:
        """Lower the rest of a function body; `finish(values)` ends it (func.return, or
        scf.yield inside a guard). An `if` with a `return` in a branch becomes an scf.if
        yielding the function's results, with the statements after it copied into the
        branch that falls through: `if n == 0 { return z; } rest` is
        `return (n == 0 ? z : rest)`."""
        for i, s in enumerate(stmts):
            if isinstance(s, H.Return):
                values = [] if s.value is None else [self.expr(ctx, s.value)]
                self._check_return(ctx, s, values)
                with location(s.span):
                    finish(values)
                return
            if isinstance(s, H.If) and _returns(s):
                rest = stmts[i + 1 :]
                cond = self.expr(ctx, s.cond)
                with location(s.span):
                    op = scf.IfOp(cond, results, has_else=True)
                entry = dict(ctx.env)
                branches = ((op.then_block, s.then), (op.else_block, s.orelse))
                for region_block, body in branches:
                    ctx.env = dict(entry)
                    with ir.InsertionPoint(region_block):
                        self.tail(
                            ctx, list(body.stmts if body else []) + rest, results, scf.YieldOp
                        )
                ctx.env = entry
                with location(s.span):
                    finish(list(op.results))
                return
            self.stmt(ctx, s)
        if results:  # the checker proved every path returns; this is a lowering bug
            raise RuntimeError("a function with a result reached its end")
        finish([])

    def _check_return(self, ctx: _Ctx, s: H.Return, values: list[ir.Value]) -> None:
        """The IR returns a value of the function's result type. A tensor that lives in
        another space of the target (a tile returned from VMEM, SMEM or a topology's own
        space, where the result is HBM or host memory) would need a move the program
        does not make: said plainly here, where func.return would fail the verifier."""
        if ctx.fn.ret == T.VOID or len(values) != 1:
            return
        want = self.ty(ctx.fn.ret)
        if values[0].type != want:
            raise LoweringError(
                f"`{ctx.fn.decl.name}` returns a tensor that lives in "
                f"`{_space_name(values[0].type)}` where its result is `{_space_name(want)}`; "
                "this version does not move a returned tensor: transfer it there first "
                f"(`transfer(..., Memory::{_space_name(want)})`)",
                s.span,
            )

    # ---- statements ---------------------------------------------------------------------------
    def block(self, ctx: _Ctx, block: H.Block) -> bool:
        """Lower statements; True when the block ended in a `return`."""
        for s in block.stmts:
            if isinstance(s, H.Return):
                vals = [] if s.value is None else [self.expr(ctx, s.value)]
                self._check_return(ctx, s, vals)
                with location(s.span):
                    func.ReturnOp(vals)
                return True
            self.stmt(ctx, s)
        return False

    def stmt(self, ctx: _Ctx, s: H.Stmt) -> None:
        rule = STMT_RULES.get(type(s))
        if rule is None:
            raise LoweringError(f"statement `{type(s).__name__}` is not lowered", s.span)
        try:
            with location(s.span):
                rule(self, ctx, s)
        except Refusal as e:
            raise e.at(s.span) from None

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

    def expr(self, ctx: _Ctx, e: H.Expr) -> ir.Value | None:
        rule = EXPR_RULES.get(type(e))
        if rule is None:
            raise LoweringError(f"expression `{type(e).__name__}` is not lowered", e.span)
        try:
            with location(e.span):
                return rule(self, ctx, e)
        except Refusal as err:
            raise err.at(e.span) from None

    def tile(self, ctx: _Ctx, e: H.Expr) -> ir.Value | None:
        """Tile arithmetic (LANGUAGE.md section 4.3): one vx op per form, placed where the
        plan put it (a placed tile's ring slot, or an intermediate's private buffer)."""
        form = tile_form(e, ctx.program.functions)
        operands = []
        for a in tile_operands(e):
            operands.append(self.expr(ctx, a))  # `max(a, 0)`: `_number` makes a float zero
        (attrs,) = self._ops(ctx, e)
        result = self.ty(e.ty)
        if not ir.MemRefType(result).has_static_shape:
            raise LoweringError(
                f"tile arithmetic on a tile of runtime shape (`{e.ty.show()}`) is not "
                "lowered by this version: transfer a tile of constant shape first "
                "(a view with constant extents)",
                e.span,
            )
        if form.fn:
            attrs = {**attrs, "fn": form.fn}
        if form.op == "vx.reduce":
            attrs["axis"] = _const_int(e.args[0])
        if form.op == "vx.iota":
            attrs["axis"] = e.axis
        return B.build(form.op, operands, result_types=[result], **attrs).results[0]

    def unary(self, ctx: _Ctx, e: H.Unary) -> ir.Value:
        if tile_form(e) is not None:
            return self.tile(ctx, e)
        v = self.expr(ctx, e.operand)
        if e.op == "!":
            true = arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result
            return arith.XOrIOp(v, true).result
        if T.is_float(e.ty):
            return arith.NegFOp(v).result
        zero = arith.ConstantOp(v.type, 0).result
        return arith.SubIOp(zero, v).result

    def binary(self, ctx: _Ctx, e: H.Binary) -> ir.Value:
        if tile_form(e) is not None:
            return self.tile(ctx, e)
        lhs, rhs = self.expr(ctx, e.lhs), self.expr(ctx, e.rhs)
        fl = T.is_float(e.lhs.ty)
        unsigned = isinstance(e.lhs.ty, T.Scalar) and e.lhs.ty.name.startswith("u")
        if e.op in ("&&", "||", "&", "|"):
            return (arith.AndIOp if e.op in ("&&", "&") else arith.OrIOp)(lhs, rhs).result
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
            if not fl and e.op in ("/", "%"):
                return _total_division(ops[e.op], lhs, rhs, e.op == "%", unsigned)
            return ops[e.op](lhs, rhs).result
        if isinstance(T.deref(e.lhs.ty), T.TensorT | T.TokenT):
            raise LoweringError("a tensor comparison is a compile-time contract, not a value")
        if fl:
            return arith.CmpFOp(_CMPF[e.op], lhs, rhs).result
        return arith.CmpIOp((_CMPI_U if unsigned else _CMPI_S)[e.op], lhs, rhs).result

    def _ops(self, ctx: _Ctx, e: H.Expr) -> list[dict[str, object]]:
        """The attributes of the vx ops `e` lowers to, from the target plan."""
        node = ctx.placement.nodes.get(e.nid) if ctx.placement is not None else None
        if node is None:
            # The plan places every transfer, new tensor and call it checked: a bug here.
            raise RuntimeError(f"`{type(e).__name__}` at line {e.span.line} has no placement")
        return node.ops

    def transfer(self, ctx: _Ctx, e: H.Transfer) -> ir.Value | None:
        value = self.expr(ctx, e.src)
        ops = self._ops(ctx, e)
        if e.dest is not None:
            return self.store(ctx, e, value, ops)
        for i, attrs in enumerate(ops):
            last = i == len(ops) - 1
            build = B.transfer_async if (last and e.is_async) else B.transfer
            value = build(value, **attrs).result
        return value

    def store(self, ctx: _Ctx, e: H.Transfer, value: ir.Value, ops: list) -> ir.Value | None:
        """`transfer(t, c[view])`: the route's leading hops move the tile blocking, the last
        one is the store into the region (LANGUAGE.md 4.2); a tile already in the output's
        space is stored with no edge."""
        for attrs in ops[:-1]:
            value = B.transfer(value, **attrs).result
        last = ops[-1] if ops else {"space": self.space(e.space), "from": self.space(e.space)}
        out, offsets = self._region(ctx, e.dest)
        attrs = {
            "space": last["space"],
            "from": last["from"],
            "edge_cost": last.get("edge_cost", 0),
            "proved": int(e.dest.nid in ctx.placement.proved),
            "disjoint": int(e.nid in ctx.placement.proved),
            "edge_view": int(e.dest.edge),
        }
        build = B.store_async if e.is_async else B.store
        op = build(value, out, *offsets, **attrs)
        return op.results[0] if e.is_async else None

    def _region(self, ctx: _Ctx, v: H.View) -> tuple[ir.Value, list[ir.Value]]:
        """The tensor a view is of, and its offsets as indices."""
        return self.expr(ctx, v.obj), [self.index(self.expr(ctx, r.lo)) for r in v.ranges]

    def view(self, ctx: _Ctx, e: H.View) -> ir.Value:
        src, offsets = self._region(ctx, e)
        sizes = list(T.deref(e.ty).dims)
        proved = int(e.nid in ctx.placement.proved)
        if e.edge:  # a store's destination is no value: only a read's view comes here
            fill = self.expr(ctx, e.fill)
            return B.edge_view(src, fill, offsets, sizes, proved=proved).result
        return B.view(src, offsets, sizes, proved=proved).result

    def zeros(self, ctx: _Ctx, e: H.TensorNew) -> ir.Value:
        (attrs,) = self._ops(ctx, e)
        t = self.ty(e.ty)
        if not ir.MemRefType(t).has_static_shape:
            # vx.zeros has no size operands: said plainly, where the verifier would fail.
            raise LoweringError(
                f"a new tensor of runtime shape (`{e.ty.show()}`) is not "
                "lowered by this version: give its dimensions as constants",
                e.span,
            )
        return B.zeros(t, **attrs).result

    def call(self, ctx: _Ctx, e: H.Call) -> ir.Value | None:
        program = ctx.program
        callee = program.functions.get(e.callee)
        if callee is None and tile_form(e, program.functions) is not None:
            return self.tile(ctx, e)
        if callee is None:  # an intrinsic (a declared function of that name shadows it)
            rule = INTRINSIC_RULES.get(e.callee)
            if rule is None:
                raise LoweringError(f"call of `{e.callee}` is not lowered", e.span)
            return rule(self, ctx, e)
        args = []
        for a, p in zip(e.args, callee.params, strict=True):
            v = self.expr(ctx, a)
            want = self.ty(p.ty)
            if v.type != want and IT.as_memref(v.type) is not None:
                v = memref.MemorySpaceCastOp(want, v).result  # placement-polymorphic param
            args.append(v)
        results = [] if callee.ret == T.VOID else [self.ty(callee.ret)]
        op = func.CallOp(results, ir.FlatSymbolRefAttr.get(symbol(callee.name)), args)
        node = ctx.placement.nodes.get(e.nid) if ctx.placement is not None else None
        # The scratchpad slot the caller receives the result in, when the plan gave one.
        for name, value in (node.ops[0] if node is not None and node.ops else {}).items():
            op.attributes[name] = (
                ir.StringAttr.get(value)
                if isinstance(value, str)
                else ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
            )
        return op.results[0] if results else None


# ---- statement rules ---------------------------------------------------------------------
@_rule(STMT_RULES, H.Let, H.Assign)
def _let(lo: Lowering, ctx: _Ctx, s: H.Let | H.Assign) -> None:
    ctx.env[s.vid] = lo.expr(ctx, s.value)


@_rule(STMT_RULES, H.ExprStmt)
def _expr_stmt(lo: Lowering, ctx: _Ctx, s: H.ExprStmt) -> None:
    lo.expr(ctx, s.expr)


@_rule(STMT_RULES, H.Spawn)
def _spawn(lo: Lowering, ctx: _Ctx, s: H.Spawn) -> None:
    # One host thread plays every core on cpu; device backends place the block.
    if lo.block(ctx, s.body):
        raise LoweringError("`return` inside `spawn` is not lowered")


@_rule(STMT_RULES, H.For)
def _for(lo: Lowering, ctx: _Ctx, s: H.For) -> None:
    start = lo.index(lo.expr(ctx, s.start))
    end = lo.index(lo.expr(ctx, s.end))
    one = arith.ConstantOp(ir.IndexType.get(), 1).result
    carried = sorted(v for v in H.assigned_vars(s.body) if v in ctx.env)
    loop = scf.ForOp(start, end, one, [ctx.env[v] for v in carried])
    with ir.InsertionPoint(loop.body):
        iv = loop.induction_variable
        ctx.env[s.vid] = arith.IndexCastOp(lo.ty(ctx.fn.vars[s.vid].ty), iv).result
        for v, arg in zip(carried, loop.inner_iter_args, strict=True):
            ctx.env[v] = arg
        if lo.block(ctx, s.body):
            raise LoweringError("`return` inside a loop is not lowered; hoist it")
        scf.YieldOp([ctx.env[v] for v in carried])
    for v, res in zip(carried, loop.results, strict=True):
        ctx.env[v] = res


@_rule(STMT_RULES, H.If)
def _if(lo: Lowering, ctx: _Ctx, s: H.If) -> None:
    cond = lo.expr(ctx, s.cond)
    carried = [
        v
        for v in H.assigned_vars(s.then) | (H.assigned_vars(s.orelse) if s.orelse else set())
        if v in ctx.env
    ]
    op = scf.IfOp(cond, [ctx.env[v].type for v in carried], has_else=True)
    entry = dict(ctx.env)
    for region_block, body in ((op.then_block, s.then), (op.else_block, s.orelse)):
        ctx.env = dict(entry)
        with ir.InsertionPoint(region_block):
            if body is not None and lo.block(ctx, body):
                raise LoweringError("`return` inside `if` is not lowered; hoist it")
            scf.YieldOp([ctx.env[v] for v in carried])
    ctx.env = entry
    for v, res in zip(carried, op.results, strict=True):
        ctx.env[v] = res


# ---- expression rules --------------------------------------------------------------------
@_rule(EXPR_RULES, H.IntLit, H.ConstArg, H.SizeLit, H.FloatLit)
def _number(lo: Lowering, ctx: _Ctx, e: H.Expr) -> ir.Value:
    # An integer literal typed float (`min(a, 1)`) is given as a float: an int for an
    # arith.constant of float type becomes an IntegerAttr of that type, which jaxlib's
    # bindings accept (one such build never returned, in a long test run).
    value = float(e.value) if T.is_float(e.ty) else e.value
    return arith.ConstantOp(lo.ty(e.ty), value).result


@_rule(EXPR_RULES, H.BoolLit)
def _bool(lo: Lowering, ctx: _Ctx, e: H.BoolLit) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(1), int(e.value)).result


@_rule(EXPR_RULES, H.Name)
def _name(lo: Lowering, ctx: _Ctx, e: H.Name) -> ir.Value:
    return ctx.env[e.vid]


@_rule(EXPR_RULES, H.Borrow)
def _borrow(lo: Lowering, ctx: _Ctx, e: H.Borrow) -> ir.Value:
    return lo.expr(ctx, e.operand)  # a reference is the tensor itself in the IR


@_rule(EXPR_RULES, H.Index)
def _index(lo: Lowering, ctx: _Ctx, e: H.Index) -> ir.Value:
    vec = lo.expr(ctx, e.obj)
    proved = int(e.nid in ctx.placement.proved)  # in bounds for every allowed value
    return B.element(vec, lo.index(lo.expr(ctx, e.index)), proved=proved).result


@_rule(EXPR_RULES, H.MethodCall)
def _method(lo: Lowering, ctx: _Ctx, e: H.MethodCall) -> ir.Value:
    if tile_form(e) is not None:
        return lo.tile(ctx, e)
    if e.method != "len":
        raise LoweringError(f"method `{e.method}` is not lowered", e.span)
    n = B.len_(lo.expr(ctx, e.obj)).result
    return arith.IndexCastOp(lo.ty(T.I64), n).result


@_rule(EXPR_RULES, H.Wait)
def _wait(lo: Lowering, ctx: _Ctx, e: H.Wait) -> ir.Value:
    return B.wait(lo.expr(ctx, e.token)).result


EXPR_RULES[H.Unary] = Lowering.unary
EXPR_RULES[H.Binary] = Lowering.binary
EXPR_RULES[H.Transfer] = Lowering.transfer
EXPR_RULES[H.View] = Lowering.view
EXPR_RULES[H.TensorNew] = Lowering.zeros
EXPR_RULES[H.Iota] = Lowering.tile
EXPR_RULES[H.Call] = Lowering.call


# ---- intrinsic rules (calls no declaration shadows) --------------------------------------
@_rule(INTRINSIC_RULES, "matmul_acc")
def _matmul_acc(lo: Lowering, ctx: _Ctx, e: H.Call) -> None:
    B.matmul_acc(*(lo.expr(ctx, a) for a in e.args))


@_rule(INTRINSIC_RULES, "cast")
def _scalar_cast(lo: Lowering, ctx: _Ctx, e: H.Call) -> ir.Value:
    """`cast::<E>(n)` of a number (a tile's cast is the vx.cast form)."""
    from vxc.ir import scalar_cast

    x = lo.expr(ctx, e.args[0])
    return scalar_cast.lower(x, e.args[0].ty.name, e.ty.name, lo.ty(e.ty))


@_rule(INTRINSIC_RULES, "assert")
def _assert(lo: Lowering, ctx: _Ctx, e: H.Call) -> None:
    return None  # proved at compile time (seams, bounds); not re-checked at run time


@_rule(INTRINSIC_RULES, "instance")
def _instance(lo: Lowering, ctx: _Ctx, e: H.Call) -> ir.Value:
    return B.instance().result  # the launch grid, LANGUAGE.md section 4.1


@_rule(INTRINSIC_RULES, "instances")
def _instances(lo: Lowering, ctx: _Ctx, e: H.Call) -> ir.Value:
    return B.instances().result


def _const_int(e: H.Expr) -> int:
    """A literal axis (the checker admitted only literals, possibly negated)."""
    if isinstance(e, H.Unary):
        return -_const_int(e.operand)
    return e.value


def _space_name(t: ir.Type) -> str:
    from vxc.ir import types as IT

    return IT.space_of(t) or str(t)


def _returns(s: H.If) -> bool:
    """Whether a branch of `s` returns (outside loops and spawns, which stay unsupported)."""
    stack = [s]
    while stack:
        node = stack.pop()
        for body in (node.then, node.orelse):
            for st in body.stmts if body else []:
                if isinstance(st, H.Return):
                    return True
                if isinstance(st, H.If):
                    stack.append(st)
    return False


def lower_program(program: Program, plan: TargetPlan) -> ir.Module:
    """The vx module of a checked program for the plan's target (api.Checked has both)."""
    return Lowering(program, plan).run()
