"""Name resolution, type checking and const-generic monomorphisation.

Placement is symbolic here (space names); the per-target checks give the names
meaning. Parameters are placement-polymorphic at call sites: a device function's
tensor parameters live in HBM when it is a kernel entry, and accept a tensor in
any space when called from device code (visibility is checked per target).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vxc.diagnostics import DiagnosticSink, Span
from vxc.diagnostics.suggest import did_you_mean
from vxc.frontend import ast as A
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.build import HirBuilder, scalar_name
from vxc.hir.dims import DimError, evaluate, rename
from vxc.hir.dims import show as show_dim
from vxc.hir.extent import extent
from vxc.hir.literals import literal_types
from vxc.hir.program import Function, Program, Var
from vxc.hir.tiles import (
    COMPARISONS,
    FN_ELEMENTS,
    NUMBERS,
    TILE_CALLS,
    TILE_INTS,
    TILE_METHODS,
    UNARY_CALLS,
    broadcast,
)
from vxc.hir.tiles import elem_class as _elem_class
from vxc.hir.visit import StmtVisitor
from vxc.tuning import Tuned

PORTABLE_HOME = {"TensorCore": "VMEM"}  # every shipped model declares TensorCore.memory = VMEM
HOST_SPACE = "CPU_DRAM"
DEVICE_ARG_SPACE = "HBM"
INTRINSICS = {"matmul_acc", "assert", "instance", "instances", *TILE_CALLS}
LAUNCH_INTRINSICS = {"instance", "instances"}  # the launch grid (LANGUAGE.md section 4.1)
# Keywords written like calls: a misspelt one (`wiat(t)`) parses as a call to an unknown
# function, so they are candidates for its "did you mean".
CALL_KEYWORDS = ("wait", "transfer", "transfer_async")


MAX_BYTES = (1 << 63) - 1  # the largest size of a tensor: a signed 64-bit byte count


@dataclass
class _Scope:
    names: dict[str, int]
    parent: _Scope | None

    def visible(self) -> set[str]:
        s: _Scope | None = self
        names: set[str] = set()
        while s is not None:
            names |= s.names.keys()
            s = s.parent
        return names

    def lookup(self, name: str) -> int | None:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None


class _Error(Exception):
    """Abandons the current expression after its diagnostic was emitted."""


# The variable id of a name whose `let` failed to check: a later use is not reported again
# (its error was), so one mistake gives one diagnostic, not a cascade of E0101s.
_FAILED = -2


class TypeChecker(StmtVisitor):
    def __init__(
        self,
        items: Sequence[A.Node],
        machine_decls: Sequence[A.Node],
        sink: DiagnosticSink,
        consts: Mapping[str, int] | None = None,
        tuned: Tuned | None = None,
    ):
        self.sink = sink
        self.entry_consts = dict(consts or {})  # `--const N=1024`: generic entries' values
        self.tuned = tuned  # the tuning table's values for the build's target (or None)
        self.decls = [i for i in items if isinstance(i, A.MemoryDecl | A.TopologyDecl)]
        self.homes = dict(PORTABLE_HOME)
        for d in [*machine_decls, *self.decls]:
            if isinstance(d, A.TopologyDecl):
                for f in d.facets:
                    if f.name == "memory" and f.kind == "memory":
                        self.homes[d.name] = f.value
        self.fns: dict[str, A.FnDecl] = {}
        for item in items:
            if isinstance(item, A.FnDecl):
                if item.name in self.fns:
                    sink.emit(
                        "E0102",
                        f"function `{item.name}` is defined twice",
                        item.name_span,
                        notes=[f"first defined at line {self.fns[item.name].span.line}"],
                    )
                    continue
                self.fns[item.name] = item
        self.out: dict[str, Function] = {}
        self.checked: set[str] = set()  # declared names with at least one checked instance
        self.next_vid = 0
        # Statements abandoned by an `_Error` reported elsewhere (E0206 at a callee's
        # declaration): the function is not well typed though it emitted nothing itself.
        self.abandoned = 0
        self.hir = HirBuilder()
        # Inferred integer types of literal-valued `let`s, by Let nid (hir/literals.py;
        # nids are unique in the program, so one table serves every instance).
        self.literal_pins: dict[int, T.Type] = {}
        self.flexible: dict[int, H.Let] = {}  # vid -> its `let` (help on a mismatch)
        # Function instance name -> its const values and its unvalued const names (a
        # template's), for the dimension expressions of its types (hir/dims.py).
        self.dim_env: dict[str, tuple[dict[str, int], frozenset[str]]] = {}

    # ---- driver ----------------------------------------------------------------
    def run(self) -> Program:
        helpers = self._called_by_others()
        self._unknown_consts(helpers)
        self._tuning_warnings(helpers)
        for name, decl in self.fns.items():
            if name in self.out:  # a callee may have been checked on first call
                continue
            if name in helpers and decl.body is not None and not decl.const_params:
                continue  # checked per call site, in the caller's placements (see _instance)
            self._function(decl, name, {}, None)
            self._entry_stacks(decl)
            if decl.const_params and decl.body is not None and name not in helpers:
                self._instantiate_entry(decl)
        # A helper whose every call failed to type-check was never instantiated: check its
        # body once as written, so its own errors are reported too (the program already
        # has errors, so no placement check sees this instance).
        for name, decl in self.fns.items():
            if decl.body is None or decl.const_params:
                continue
            if name not in self.checked:
                self._function(decl, name, {}, None)
        for name, decl in self.fns.items():
            if name not in helpers and decl.body is not None and name in self.out:
                self.out[name].entry = not self.out[name].is_template
        return Program(self.out, self.decls)

    def _unknown_consts(self, helpers: set[str]) -> None:
        """E0111 for each `--const NAME=V` that names no const parameter of a generic
        kernel entry: a typo there would otherwise build the default silently."""
        entries = [
            d
            for n, d in self.fns.items()
            if d.const_params and d.body is not None and n not in helpers
        ]
        known = sorted({c.name for d in entries for c in d.const_params})
        at = entries or list(self.fns.values())  # the first generic entry, else any function
        if not at:
            return  # no function at all: nothing to name, and nothing is built
        for name in sorted(set(self.entry_consts) - set(known)):
            self.sink.emit(
                "E0111",
                f"`--const {name}=...` names no const parameter of a kernel entry",
                at[0].name_span,
                notes=[
                    "the kernel entries' const parameters: "
                    + (", ".join(f"`{k}`" for k in known) if known else "none")
                ],
                help=did_you_mean(name, known, "--const {}=...")
                or "drop the flag, or add the parameter to the kernel (`fn k<const N: i64>`)",
            )

    def _tuning_warnings(self, helpers: set[str]) -> None:
        """W1041 for a table written for other source bytes, W1040 for a table value that
        names no const parameter of a kernel entry (both at the first generic entry)."""
        if self.tuned is None:
            return
        entries = [
            d
            for n, d in self.fns.items()
            if d.const_params and d.body is not None and n not in helpers
        ]
        known = {c.name for d in entries for c in d.const_params}
        at = entries or list(self.fns.values())
        if not at:
            return
        if self.tuned.stale:
            self.sink.emit(
                "W1041",
                f"the tuning table `{self.tuned.path}` was written for another version of "
                "this source; its values are used as written",
                at[0].name_span,
                notes=[f"its {self.tuned.target} values: {_show_values(self.tuned.values)}"],
                help=f"refresh it: `vxc tune {at[0].name_span.file} "
                f"{self.tuned.refresh or '--target ' + self.tuned.target}`",
            )
        for name in sorted(set(self.tuned.values) - known):
            self.sink.emit(
                "W1040",
                f"the tuning table `{self.tuned.path}` gives `{name}`, which no kernel entry "
                "declares as a const parameter; it is not used",
                at[0].name_span,
                help=did_you_mean(name, sorted(known), "{}"),
            )

    def _instantiate_entry(self, decl: A.FnDecl) -> None:
        """A generic kernel entry: one instance for the values named on the build
        (`--const N=1024`), or E0109, never silently nothing."""
        given = {c.name: c.default for c in decl.const_params if c.default is not None}
        if self.tuned is not None:  # the table over the default, `--const` over both
            params = {c.name for c in decl.const_params}
            given.update({k: v for k, v in self.tuned.values.items() if k in params})
        given.update(self.entry_consts)  # `--const` over the default (LANGUAGE.md 3)
        missing = [c.name for c in decl.const_params if c.name not in given]
        if missing:
            example = " ".join(f"--const {m}=..." for m in missing)
            self.sink.emit(
                "E0109",
                f"generic kernel entry `{decl.name}` has no instantiation: nothing would be built",
                decl.name_span,
                notes=[f"no value for const parameter `{missing[0]}`"],
                help=f"name the values on the build (`vxc build {example}`), or call "
                f"`{decl.name}::<...>(...)` from another function",
            )
            return
        values = {c.name: given[c.name] for c in decl.const_params}
        for cp in decl.const_params:
            if _const_range(cp) is None:
                return  # E0206 at the declaration
            ty, lo, hi = _const_range(cp)
            if not lo <= values[cp.name] <= hi:
                self.sink.emit(
                    "E0005",
                    f"--const {cp.name}={values[cp.name]} does not fit `{cp.name}: {ty}` "
                    f"({lo} ..= {hi})",
                    cp.span,
                )
                return
        name = f"{decl.name}<{', '.join(str(values[c.name]) for c in decl.const_params)}>"
        self._function(decl, name, values, decl.name)
        self.out[name].entry = True  # the instance is the kernel entry the build exports

    def _entry_stacks(self, decl: A.FnDecl) -> None:
        """A kernel entry is launched as N instances whose results the caller receives
        stacked (LANGUAGE.md section 4.1): a token neither stacks nor can be waited by
        the launcher, so an entry may not take or return one (E0401)."""
        if decl.body is None:
            return
        fn = self.out.get(decl.name)
        if fn is None:
            return
        for p, hp in zip(decl.params, fn.params, strict=False):
            if isinstance(T.deref(hp.ty), T.TokenT):
                self.sink.emit(
                    "E0401",
                    f"kernel entry `{decl.name}` takes a transfer token `{p.name}`",
                    p.span,
                    notes=["a kernel entry is launched by its caller, which cannot issue a DMA"],
                    help="take the tensor and start the transfer inside the kernel",
                )
        if isinstance(T.deref(fn.ret), T.TokenT) and decl.ret is not None:
            self.sink.emit(
                "E0401",
                f"kernel entry `{decl.name}` returns a transfer token, which does not stack "
                "over instances",
                decl.ret.span,
                notes=[
                    "each instance's result is stacked along a new leading axis for the caller "
                    "(LANGUAGE.md section 4.1), and the caller cannot `wait` a token"
                ],
                help="`wait` the token inside the kernel and return the tensor",
            )

    def _called_by_others(self) -> set[str]:
        """Functions some other function calls: helpers, not kernel entries."""
        return {c.callee for d in self.fns.values() for c in A.calls(d.body) if c.callee != d.name}

    def _function(
        self,
        decl: A.FnDecl,
        name: str,
        consts: dict[str, int],
        generic_of: str | None,
        spaces: dict[int, str] | None = None,
    ) -> Function:
        self.checked.add(decl.name)
        # Every instance (kernel entry, placement, const-generic) is typed on its own HIR
        # tree: two instances of one helper never share a node, a type or a variable id.
        hir = self.hir.function(decl, consts)
        self.dim_env[name] = (dict(consts), frozenset(c.name for c in hir.const_params))
        self.cur_topology = hir.topology
        home = self.homes.get(hir.topology, "VMEM") if hir.topology else HOST_SPACE
        arg_space = DEVICE_ARG_SPACE if hir.topology else HOST_SPACE
        fn = Function(name, hir, [], T.VOID, hir.topology, home, generic_of=generic_of)
        self.out[name] = fn
        self.fn = fn
        errors_before, abandoned_before = self.sink.errors_emitted, self.abandoned
        scope = _Scope({}, None)
        for cp in hir.const_params:  # empty in an instance (hir/build.py)
            # The generic body: a const parameter is a value of its declared type (usable in
            # types and bounds by name); an instance sees its value (a `ConstArg`).
            if cp.name in scope.names:
                self.sink.emit("E0102", f"parameter `{cp.name}` is declared twice", cp.span)
            cp.vid = self._bind(scope, cp.name, self._const_type(cp), False, cp.span, "const")
        for i, p in enumerate(hir.params):
            if p.name in scope.names:
                self.sink.emit("E0102", f"parameter `{p.name}` is declared twice", p.span)
            ty = self._type(p.type, (spaces or {}).get(i, arg_space))
            p.vid = self._bind(scope, p.name, ty, False, p.span, "param")
            fn.params.append(fn.vars[p.vid])
        fn.ret = self._type(hir.ret, arg_space) if hir.ret else T.VOID
        params = {v.name: v.ty for v in fn.params}
        self.literal_pins.update(literal_types(hir, params, fn.ret, self.fns))
        self.home = home
        self.in_assert = False  # `assert(buf == v)` compares a buffer, not elementwise
        for w in hir.where:
            if self._where_calls(w):
                self.abandoned += 1  # reported; the next clause and the body are checked
                continue
            try:
                self._expect_bool(self._expr(w, scope, want=None), w)
            except _Error:  # reported; the next clause and the body are still checked
                self.abandoned += 1
        if hir.body is not None:
            self._block(hir.body, _Scope({}, scope))
        fn.ok = self.sink.errors_emitted == errors_before and self.abandoned == abandoned_before
        return fn

    def _where_calls(self, w: H.Expr) -> bool:
        """E0405: a `where` clause is computed from the parameters, `v.len()` and the launch
        grid (LANGUAGE.md 4.1) before any instance runs; a call of a function (a helper, an
        `extern fn`, also one named `instance`/`instances`, which shadows the intrinsic)
        has no value there. Each such call is reported, innermost calls of a reported one
        not again."""
        calls = [
            n
            for n in H.walk_expr(w)
            if isinstance(n, H.Call) and (n.callee in self.fns or n.callee not in LAUNCH_INTRINSICS)
        ]
        inner = {id(m) for n in calls for m in H.walk_expr(n) if m is not n}
        for n in sorted(
            (n for n in calls if id(n) not in inner), key=lambda n: (n.span.line, n.span.column)
        ):
            decl = self.fns.get(n.callee)
            notes = []
            if decl is not None and n.callee in LAUNCH_INTRINSICS:
                kind = "extern fn" if decl.body is None else "fn"
                notes.append(
                    f"`{n.callee}` here is the `{kind}` declared at line {decl.span.line}, "
                    f"which shadows the launch intrinsic `{n.callee}()`"
                )
            what = "function" if decl is not None or n.callee not in INTRINSICS else "intrinsic"
            self.sink.emit(
                "E0405",
                f"a `where` clause calls {what} `{n.callee}`: clauses are computed from the "
                "parameters, `v.len()` and the launch grid only",
                n.span,
                notes=notes,
                help=(
                    f"rename the `{n.callee}` declared at line {decl.span.line} to use the "
                    f"intrinsic `{n.callee}()`"
                    if notes
                    else "write the condition on the parameters, lengths and grid themselves "
                    "(`where n <= 128`, `where instances() == m / 128`)"
                ),
            )
        return bool(calls)

    def _bind(
        self, scope: _Scope, name: str, ty: T.Type, mutable: bool, span: Span, kind: str
    ) -> int:
        vid = self.next_vid
        self.next_vid += 1
        scope.names[name] = vid
        self.fn.vars[vid] = Var(vid, name, ty, mutable, span, kind)
        return vid

    # ---- types -----------------------------------------------------------------------
    def _type(self, t: A.TypeExpr, space: str) -> T.Type:
        if isinstance(t, A.RefType):
            return T.RefT(t.mutable, self._type(t.inner, space))
        if isinstance(t, A.VecType):
            return T.VecT(self._type(t.elem, space), space)
        if isinstance(t, A.TensorType):
            return self._tensor(T.TensorT(self._elem(t.elem), self._dims(t.dims), space), t.span)
        if isinstance(t, A.TokenType):
            inner = self._type(t.inner, t.space)
            if not isinstance(inner, T.TensorT | T.Void):  # void: a store's token
                self.sink.emit(
                    "E0201", f"a token carries a tensor or `void`, not `{inner.show()}`", t.span
                )
                inner = T.TensorT("f32", (), t.space)
            return T.TokenT(inner, t.space)
        if isinstance(t, A.NamedType):
            if t.name == "void":
                return T.VOID
            if t.name in T.SCALARS:
                return T.Scalar(t.name)
        name = getattr(t, "name", type(t).__name__)
        self.sink.emit(
            "E0103",
            f"unknown type `{name}`",
            t.span,
            help="types are scalars (i32, f32, ...), Tensor, Vec, Token, & and &mut",
        )
        return T.I32

    def _const_type(self, cp: H.Param) -> T.Type:
        """A const parameter's declared type: an integer (it sizes dims and bounds)."""
        ty = T.Scalar(scalar_name(cp.type)) if scalar_name(cp.type) else None
        if ty is not None and T.is_int(ty):
            return ty
        shown = ty.show() if ty is not None else _type_text(cp.type)
        self.sink.emit(
            "E0206",
            f"const parameter `{cp.name}` has type `{shown}`, but const parameters are integers",
            cp.type.span,
            notes=["a const parameter sizes dimensions and bounds: `i8` ... `i64`, `u8` ... `u64`"],
            help=f"pass `{cp.name}` as an ordinary parameter (`{cp.name}: {shown}`)",
        )
        return ty if ty is not None else T.I64

    def _tensor(self, t: T.TensorT, span: Span) -> T.TensorT:
        """A tensor type as written: at least one dimension, none of them below 1 (E0402), and
        (when its dimensions are literals) a size an address space can hold; each is
        reported once here."""
        if not t.dims:
            self.sink.emit(
                "E0201",
                "a tensor has at least one dimension",
                span,
                help="write `Tensor<f32>([1])`, or use a scalar (`f32`) for one value",
            )
        elif (bad := next((d for d in t.dims if isinstance(d, int) and d <= 0), None)) is not None:
            # Every target agrees by refusing it here: Mosaic's vector types and the TMA's
            # boxes need positive sizes, and a tile of no elements carries nothing to move.
            self.sink.emit(
                "E0402",
                f"`{t.show().split(' @ ')[0]}` has a dimension of {bad}: every dimension of a "
                "tensor is at least 1",
                span,
                help="an empty collection is a `Vec` of length 0; a tensor's dimensions are >= 1",
            )
        elif t.elem in T.SCALARS and (t.static_bytes or 0) > MAX_BYTES:
            self.sink.emit(
                "E6009",
                f"`{t.show().split(' @ ')[0]}` is {t.static_bytes} B, more than any memory "
                f"space can hold (the 64-bit address space: {MAX_BYTES} B)",
                span,
                help="split it into tiles that fit and transfer them one by one",
            )
        return t

    def _elem(self, t: A.TypeExpr) -> str:
        if isinstance(t, A.NamedType) and t.name in T.SCALARS:
            return t.name
        self.sink.emit("E0103", "a tensor's element type must be a scalar", t.span)
        return "f32"

    # ---- statements ---------------------------------------------------------------------
    def _block(self, block: H.Block, scope: _Scope) -> None:
        for s in block.stmts:
            try:
                self._stmt(s, scope)
            except _Error:
                self.abandoned += 1
                if isinstance(s, H.Let) and scope.lookup(s.name) is None:
                    scope.names[s.name] = _FAILED
                continue

    def _stmt(self, s: H.Stmt, scope: _Scope) -> None:
        self.visit(s, scope)

    def visit_let(self, s: H.Let, scope: _Scope) -> None:
        if s.declared is None:  # an inferred integer type only guides the value's literals
            ty = self._expr(s.value, scope, self.literal_pins.get(s.nid))
        else:
            want = self._type(s.declared, self.home)
            self._coerce(want, self._expr(s.value, scope, want), s.value, "this `let`")
            ty = want
        s.vid = self._bind(scope, s.name, ty, s.mutable, s.span, "let")
        if s.declared is None and _int_literal_expr(s.value):
            self.flexible[s.vid] = s

    def visit_assign(self, s: H.Assign, scope: _Scope) -> None:
        vid = self._resolve(s.name, scope, s.span)
        var = self.fn.vars[vid]
        s.vid = vid
        ty = self._expr(s.value, scope, var.ty)
        if not var.mutable:
            self.sink.emit(
                "E0303",
                f"cannot assign twice to immutable variable `{s.name}`",
                s.span,
                help=f"declare it with `let mut {s.name}`",
            )
        if ty != var.ty and not _literal_fits(s.value, var.ty):
            self._mismatch(var.ty, ty, s.value, f"assignment to `{s.name}`")

    def visit_expr_stmt(self, s: H.ExprStmt, scope: _Scope) -> None:
        self._expr(s.expr, scope, None)

    def visit_return(self, s: H.Return, scope: _Scope) -> None:
        if s.value is None:
            if self.fn.ret != T.VOID:
                self._mismatch(self.fn.ret, T.VOID, s, "this return")
        else:
            self._coerce(
                self.fn.ret,
                self._expr(s.value, scope, self.fn.ret),
                s.value,
                "the return value",
            )

    def visit_for(self, s: H.For, scope: _Scope) -> None:
        lo = self._expr(s.start, scope, None)
        hi = self._expr(s.end, scope, lo if not _is_literal(s.start, floats=False) else None)
        if _is_literal(s.start, floats=False) and T.is_int(hi):
            s.start.ty = lo = hi
        for e, t in ((s.start, lo), (s.end, hi)):
            if not T.is_int(t):
                self._mismatch(T.I64, t, e, "a range bound")
        inner = _Scope({}, scope)
        s.vid = self._bind(inner, s.var, lo if T.is_int(lo) else T.I64, False, s.span, "for")
        self._block(s.body, inner)

    def visit_if(self, s: H.If, scope: _Scope) -> None:
        self._expect_bool(self._expr(s.cond, scope, T.BOOL), s.cond)
        self._block(s.then, _Scope({}, scope))
        if s.orelse:
            self._block(s.orelse, _Scope({}, scope))

    def visit_spawn(self, s: H.Spawn, scope: _Scope) -> None:
        saved = self.home
        self.home = self.homes.get(s.topology, "VMEM")
        self._block(s.body, _Scope({}, scope))
        self.home = saved

    # ---- expressions ------------------------------------------------------------------------
    def _expr(self, e: H.Expr, scope: _Scope, want: T.Type | None) -> T.Type:
        e.ty = self._infer(e, scope, want)
        return e.ty

    def _infer(self, e: H.Expr, scope: _Scope, want: T.Type | None) -> T.Type:
        match e:
            case H.ConstArg():
                return T.Scalar(e.declared)
            case H.IntLit():
                return want if want is not None and T.is_int(want) else T.I32
            case H.FloatLit():
                return want if want is not None and T.is_float(want) else T.F32
            case H.SizeLit():
                return T.I64
            case H.BoolLit():
                return T.BOOL
            case H.MemPath():
                return T.SpaceT("Memory")
            case H.TopoPath():
                return T.SpaceT("Topology")
            case H.Name():
                vid = self._resolve(e.name, scope, e.span)
                e.vid = vid
                return self.fn.vars[vid].ty
            case H.Unary(op="-"):
                t = self._expr(e.operand, scope, want)
                if isinstance(_tile(t), T.TensorT):
                    return self._tile_elems(_tile(t), e.operand, "negation", NUMBERS)
                if not (T.is_int(t) or T.is_float(t)):
                    self._mismatch(T.I32, t, e.operand, "negation")
                return t
            case H.Unary():
                t = self._expr(e.operand, scope, T.BOOL)
                if isinstance(_tile(t), T.TensorT):
                    return self._tile_elems(_tile(t), e.operand, "`!`", ("bool",))
                self._expect_bool(t, e.operand)
                return T.BOOL
            case H.Binary():
                return self._binary(e, scope, want)
            case H.Borrow():
                inner = self._expr(e.operand, scope, None)
                if e.mutable:
                    self._mutable_place(e)
                if isinstance(inner, T.RefT):  # &tiles[i] of an already borrowed element
                    return T.RefT(e.mutable, inner.inner)
                return T.RefT(e.mutable, inner)
            case H.Index():
                return self._index(e, scope)
            case H.View():
                self.sink.emit(
                    "E0107",
                    "a view is a place: it can only be the source or destination of a transfer",
                    e.span,
                    notes=["the DMA reads (or writes) the region; nothing computes on it directly"],
                    help="transfer it first: `transfer(x[...], Memory::VMEM)`",
                )
                raise _Error
            case H.MethodCall():
                obj = T.deref(self._expr(e.obj, scope, None))
                if e.method == "len" and isinstance(obj, T.VecT) and not e.args:
                    return T.I64
                if isinstance(_tile(obj), T.TensorT) and e.method in TILE_METHODS:
                    return self._reduce(e, _tile(obj))
                self.sink.emit(
                    "E0203",
                    f"no method `{e.method}` on `{obj.show()}`",
                    e.span,
                    notes=[
                        "a tile has " + ", ".join(f"`.{m}(axis)`" for m in TILE_METHODS)
                        if isinstance(_tile(obj), T.TensorT)
                        else "`Vec` has one method, `len()`"
                    ],
                )
                raise _Error
            case H.Transfer():
                return self._transfer(e, scope)
            case H.Wait():
                t = self._expr(e.token, scope, None)
                if isinstance(t, T.TokenT):
                    return t.inner
                self.sink.emit(
                    "E0201",
                    f"`wait` needs a transfer token, found `{t.show()}`",
                    e.token.span,
                    help="`wait` takes the result of `transfer_async`",
                )
                raise _Error
            case H.Iota():
                return self._iota(e, scope)
            case H.TensorNew():
                self._dims_in_scope(e, scope)
                e.dims = list(self._dims(e.dims))  # what the plan and the IR read
                return self._tensor(T.TensorT(self._elem(e.elem), tuple(e.dims), self.home), e.span)
            case H.Call():
                return self._call(e, scope)
        raise AssertionError(f"unhandled expression {type(e).__name__}")

    def _mutable_place(self, e: H.Borrow) -> None:
        """`&mut x` needs `let mut x`, or `x: &mut T` (reborrowed); `&mut v[i]` needs `v`
        to be such a place too (Rust's E0596)."""
        root = e.operand
        while isinstance(root, H.Index | H.View):
            root = root.obj
        if not isinstance(root, H.Name) or root.vid < 0:
            return  # a temporary: `&mut Tensor<f32>([4, 4])`
        var = self.fn.vars[root.vid]
        what = f"`{var.name}`" if root is e.operand else f"an element of `{var.name}`"
        if isinstance(var.ty, T.RefT):
            if var.ty.mutable:
                return
            self.sink.emit(
                "E0305",
                f"cannot borrow {what} as mutable: it is behind a `&` reference",
                e.span,
                notes=[f"`{var.name}` is a `{var.ty.show()}`, bound at line {var.span.line}"],
                help=f"take it as `{var.name}: &mut {_unplaced(var.ty.inner)}`",
            )
        elif not var.mutable:
            self.sink.emit(
                "E0305",
                f"cannot borrow {what} as mutable, as it is not declared as mutable",
                e.span,
                notes=[f"`{var.name}` is bound immutably at line {var.span.line}"],
                help=f"make the binding mutable: `let mut {var.name}`"
                if var.kind == "let"
                else f"move it into a mutable binding first: `let mut {var.name} = {var.name};`",
            )

    def _dims(self, dims) -> tuple[int | str, ...]:
        """A type's dimensions in the current instance: each expression evaluated
        (hir/dims.py), E0110 where it cannot be; then it stays a symbol, so the function
        is not ok and nothing is built from it."""
        values, generic = self.dim_env.get(self.fn.name, ({}, frozenset()))
        out: list[int | str] = []
        for d in dims:
            try:
                out.append(evaluate(d, values, generic))
            except DimError as err:
                self.sink.emit(
                    "E0110",
                    err.message,
                    err.span,
                    notes=err.notes,
                    help="choose const values that give a positive, exact dimension, or "
                    "write the dimension from literals and const parameters",
                )
                out.append(show_dim(d))
        return tuple(out)

    def _dims_in_scope(self, e: H.TensorNew, scope: _Scope) -> None:
        """A named dimension of a new tensor is a runtime value: a variable in scope or a
        const parameter, never an undeclared name (it was taken as a runtime dimension)."""
        consts = {p.name for p in self.fn.decl.const_params}
        for d in e.dims:
            if isinstance(d, str) and d not in consts:
                self._resolve(d, scope, e.span)

    def _resolve(self, name: str, scope: _Scope, span: Span) -> int:
        vid = scope.lookup(name)
        if vid == _FAILED:
            raise _Error  # its `let` was reported
        if vid is None:
            self.sink.emit(
                "E0101",
                f"cannot find `{name}` in this scope",
                span,
                help=did_you_mean(name, scope.visible()),
            )
            raise _Error
        return vid

    def _binary(self, e: H.Binary, scope: _Scope, want: T.Type | None) -> T.Type:
        if e.op in ("&&", "||"):
            for side in (e.lhs, e.rhs):
                self._expect_bool(self._expr(side, scope, T.BOOL), side)
            return T.BOOL
        arith = e.op in "+-*/%"
        lt = self._expr(e.lhs, scope, want if arith else None)
        rt = self._expr(e.rhs, scope, lt if not isinstance(T.deref(lt), T.TensorT) else None)
        if _is_literal(e.lhs) and not _is_literal(e.rhs, floats=False):
            lt = e.lhs.ty = self._expr(e.lhs, scope, rt)
        tensor_side = next((t for t in (lt, rt) if isinstance(T.deref(_read(t)), T.TensorT)), None)
        if tensor_side is not None and e.op in ("==", "!=") and self.in_assert:
            return T.BOOL  # `assert(buf == v)`: the value contract of a seam (all elements v)
        if tensor_side is not None and e.op in COMPARISONS:
            t = self._tile_binary(e.lhs, e.rhs, e, f"operator `{e.op}`", classes=NUMBERS)
            return replace(t, elem="bool")
        if tensor_side is not None and e.op in "+-*/&|":
            classes = {"/": ("float",), "&": ("bool",), "|": ("bool",)}.get(e.op, NUMBERS)
            return self._tile_binary(e.lhs, e.rhs, e, f"operator `{e.op}`", classes=classes)
        if e.op in "&|" and lt == rt == T.BOOL:
            return T.BOOL  # on two bools `&` and `|` are `&&` and `||` without the short cut
        if lt != rt or not (T.is_int(lt) or T.is_float(lt) or (lt == T.BOOL and not arith)):
            self._mismatch(lt, rt, e, f"operator `{e.op}`")
        return lt if arith else T.BOOL

    def _index(self, e: H.Index, scope: _Scope) -> T.Type:
        obj = self._expr(e.obj, scope, None)
        idx = self._expr(e.index, scope, T.I64)
        if not T.is_int(idx):
            self._mismatch(T.I64, idx, e.index, "an index")
        base = T.deref(obj)
        if isinstance(base, T.VecT):
            return T.RefT(False, base.elem)  # a borrowed element: readable, not movable
        self.sink.emit(
            "E0201",
            f"cannot index into `{obj.show()}`",
            e.span,
            notes=["only `Vec` is indexed; tensors are computed on by intrinsics"],
        )
        raise _Error

    def _transfer(self, e: H.Transfer, scope: _Scope) -> T.Type:
        src = T.deref(self._operand(e.src, scope))
        if isinstance(e.src, H.View) and e.src.edge and e.src.fill is None:
            self.sink.emit(
                "E0201",
                "this `edge` view is read, so it needs the value of its elements past the "
                "tensor's end",
                e.src.span,
                help=f"give it a fill value: `{H.show_expr(e.src)[:-1]}, 0.0)`",
            )
            raise _Error
        if isinstance(src, T.TokenT) and isinstance(src.inner, T.TensorT):
            src = src.inner  # transferring an in-flight buffer reads it: E6004 in checks
        if not isinstance(src, T.TensorT):
            what = "transfer_async" if e.is_async else "transfer"
            self.sink.emit("E0201", f"`{what}` moves a tensor, found `{src.show()}`", e.src.span)
            raise _Error
        if e.dest is not None:
            return self._store(e, src, scope)
        placed = replace(src, space=e.space)
        return T.TokenT(placed, e.space) if e.is_async else placed

    def _operand(self, e: H.Expr, scope: _Scope) -> T.Type:
        """A transfer's source or destination: a view is a place there (LANGUAGE.md 4.2)."""
        if isinstance(e, H.View):
            e.ty = self._view(e, scope)
            return e.ty
        return self._expr(e, scope, None)

    def _view(self, e: H.View, scope: _Scope) -> T.Type:
        """`x[lo .. hi, ...]`: a borrowed tensor of the constant extents, where `x` lives."""
        obj = self._expr(e.obj, scope, None)
        base = T.deref(obj)
        if not isinstance(base, T.TensorT):
            self.sink.emit(
                "E0201",
                f"cannot take a view of `{obj.show()}`",
                e.span,
                notes=["views are regions of tensors (`a[r .. r + 128, 0 .. 128]`)"],
            )
            raise _Error
        if len(e.ranges) != len(base.dims):
            self.sink.emit(
                "E0201",
                f"a view of `{base.show()}` needs {len(base.dims)} range(s), found {len(e.ranges)}",
                e.span,
                help="write one `lo .. hi` per dimension",
            )
            raise _Error
        dims: list[int | str] = []
        for r in e.ranges:
            for bound in (r.lo, r.hi):
                t = self._expr(bound, scope, T.I64)
                if not T.is_int(t):
                    self._mismatch(T.I64, t, bound, "a view bound")
                    raise _Error
            dims.append(self._extent(r))
        if e.edge and e.fill is not None:
            self._edge_fill(e.fill, base, scope)
        mutable = isinstance(obj, T.RefT) and obj.mutable
        return T.RefT(mutable, replace(base, dims=tuple(dims)))

    def _edge_fill(self, fill: H.Expr, base: T.TensorT, scope: _Scope) -> None:
        """An `edge` view's fill: a scalar of the tensor's element type (a literal takes it)."""
        elem = T.Scalar(base.elem)
        got = self._expr(fill, scope, elem)
        if got != elem:
            self._mismatch(elem, got, fill, "an `edge` view's fill")
            raise _Error

    def _extent(self, r: H.Range) -> int | str:
        """`hi - lo`: a positive constant (E0106 otherwise, and the range's text stands in
        for it, so the statement's other errors are still found)."""
        consts = frozenset(v.vid for v in self.fn.vars.values() if v.kind == "const")
        size = extent(r.lo, r.hi, consts)
        if isinstance(size, str) or (size is not None and size > 0):
            return size
        lo, hi = H.show_expr(r.lo), H.show_expr(r.hi)
        self.sink.emit(
            "E0106",
            f"the extent of `{lo} .. {hi}` is not a compile-time constant"
            if size is None
            else f"the extent of `{lo} .. {hi}` is {size}: it must be positive",
            r.span,
            notes=[
                "tiles have static shapes: every `hi - lo` is a constant once const "
                "parameters are substituted (the offset `lo` may be a run-time value)"
            ],
            help=f"write the range as `lo .. lo + SIZE` (for example `{lo} .. {lo} + 128`)",
        )
        return f"{hi} - {lo}"

    def _store(self, e: H.Transfer, src: T.TensorT, scope: _Scope) -> T.Type:
        """`transfer(t, out[view])`: the region is overwritten; the source is only read. The
        route goes to the output's space like any transfer's (the plan computes it)."""
        what = "transfer_async" if e.is_async else "transfer"
        if not isinstance(e.dest, H.View):
            got = self._expr(e.dest, scope, None)
            self.sink.emit(
                "E0201",
                f"the destination of `{what}` is `Memory::X` or a view of a `&mut` output, "
                f"found `{got.show()}`",
                e.dest.span,
            )
            raise _Error
        dest = self._operand(e.dest, scope)
        region = T.deref(dest)
        if not (isinstance(dest, T.RefT) and dest.mutable):
            root = _view_root(e.dest)
            var = self.fn.vars.get(root.vid) if root is not None else None
            name = var.name if var is not None else "this tensor"
            self.sink.emit(
                "E0108",
                f"cannot write through `{name}`: it is not a `&mut` output",
                e.dest.span,
                notes=[
                    f"`{name}` is `{var.ty.show()}`"
                    if var is not None
                    else "only a `&mut` tensor parameter is written by a store"
                ],
                help=f"take it as `{name}: &mut {_unplaced(T.deref(var.ty))}`"
                if var is not None and isinstance(T.deref(var.ty), T.TensorT)
                else None,
            )
            raise _Error
        if not region.shape_matches(src):
            self.sink.emit(
                "E0201",
                f"the view is `{_unplaced(region)}` but the stored tile is `{_unplaced(src)}`",
                e.span,
                help="a store's view has the stored tile's element type and shape",
            )
            raise _Error
        e.space = region.space
        return T.TokenT(T.VOID, region.space) if e.is_async else T.VOID

    def _call(self, e: H.Call, scope: _Scope) -> T.Type:
        decl = self.fns.get(e.callee)
        if decl is None and e.callee in INTRINSICS:
            return self._intrinsic(e, scope)
        if decl is None and e.callee == "edge":  # not the form the parser makes a view of
            self.sink.emit(
                "E0201",
                "`edge` takes a view of a tensor and a fill value",
                e.span,
                notes=["`edge(x[lo .. hi, ...], fill)` is a view that may reach past `x`'s end"],
                help="write `edge(x[lo .. hi, ...], 0.0)` (a store's destination may leave "
                "out the fill: `edge(c[lo .. hi, ...])`)",
            )
            raise _Error
        if decl is None:
            self.sink.emit(
                "E0203",
                f"cannot find function `{e.callee}`",
                e.span,
                help=did_you_mean(e.callee, [*self.fns, *INTRINSICS, *CALL_KEYWORDS]),
            )
            raise _Error
        if len(e.args) != len(decl.params):
            self.sink.emit(
                "E0202",
                f"`{e.callee}` takes {len(decl.params)} argument(s) but "
                f"{len(e.args)} were supplied",
                e.span,
            )
            raise _Error
        required = sum(c.default is None for c in decl.const_params)
        if e.const_args is not None and not (
            required <= len(e.const_args) <= len(decl.const_params)
        ):
            takes = (
                f"{len(decl.const_params)}"
                if required == len(decl.const_params)
                else f"{required} to {len(decl.const_params)}"
            )
            self.sink.emit(
                "E0202",
                f"`{e.callee}` takes {takes} const argument(s) but "
                f"{len(e.const_args)} were supplied",
                e.span,
            )
            raise _Error
        if self._forwards_consts(e):
            return self._forwarded(decl, e, scope)
        arg_types = [self._expr(a, scope, None) for a in e.args]
        for a, t in zip(e.args, arg_types, strict=True):
            if T.is_int(t) and _int_literal_expr(a):
                a.ty = None  # `1`, `-1`, `2 * 3`: re-inferred against the parameter below
        inst = self._instance(decl, e, scope, arg_types)
        for a, p in zip(e.args, inst.params, strict=True):
            if a.ty is None:
                a.ty = self._expr(a, scope, p.ty)
            self._coerce(p.ty, a.ty, a, f"argument `{p.name}` of `{e.callee}`")
        e.callee = inst.name
        return inst.ret

    def _forwards_consts(self, e: H.Call) -> bool:
        """`pick::<M>()` in the generic body of `outer<const M: i64>`: M has no value here
        (each instance of `outer` substitutes one, and then instantiates `pick`)."""
        mine = {c.name for c in self.fn.decl.const_params}
        return any(
            isinstance(n, H.Name) and n.name in mine
            for ca in e.const_args or []
            for n in H.walk_expr(ca)
        )

    def _forwarded(self, decl: A.FnDecl, e: H.Call, scope: _Scope) -> T.Type:
        """A call of the generic body that forwards const parameters: its arguments are
        typed, and its result is the callee's with those parameters' names (`[M, M]`)."""
        for a in [*e.args, *(e.const_args or [])]:
            self._expr(a, scope, None)
        names: dict[str, int | str] = {}
        for cp, ca in zip(decl.const_params, e.const_args or [], strict=False):
            value = _const_value(ca)
            names[cp.name] = value if value is not None else H.show_expr(ca)
        ret = _rename_dims(decl.ret, names) if decl.ret is not None else None
        home = DEVICE_ARG_SPACE if decl.topology else HOST_SPACE
        return self._type(ret, home) if ret is not None else T.VOID

    def _instance(
        self, decl: A.FnDecl, e: H.Call, scope: _Scope, arg_types: list[T.Type]
    ) -> Function:
        """The function a call runs: const generics and the tensors' placements fixed.

        A Vx function called from Vx code is checked once per distinct tuple of its
        tensor arguments' spaces (placement monomorphisation), so its body sees where
        its arguments really live; kernel entries (never called) take them in HBM.
        """
        consts = self._consts(decl, e, arg_types) if decl.const_params else {}
        spaces = _arg_spaces(decl, arg_types) if decl.body is not None else {}
        parts = [str(consts[c.name]) for c in decl.const_params] + list(spaces.values())
        name = f"{decl.name}<{', '.join(parts)}>" if parts else decl.name
        if name not in self.out:
            saved = (self.fn, self.home, self.cur_topology)
            self._function(decl, name, consts, decl.name if parts else None, spaces)
            self.fn, self.home, self.cur_topology = saved
        return self.out[name]

    def _consts(self, decl: A.FnDecl, e: H.Call, arg_types: list[T.Type]) -> dict[str, int]:
        consts: dict[str, int] = {}
        for cp, ca in zip(decl.const_params, e.const_args or [], strict=False):
            value = _const_value(ca)
            if value is None:
                self.sink.emit("E0204", "const arguments must be integer literals", ca.span)
                raise _Error
            consts[cp.name] = value
        for p, t in zip(decl.params, arg_types, strict=True):
            _unify_dims(p.type, t, {c.name for c in decl.const_params}, consts)
        for cp in decl.const_params:  # neither given nor inferred: the default (LANGUAGE.md 3)
            if cp.name not in consts and cp.default is not None:
                consts[cp.name] = cp.default
        missing = [c.name for c in decl.const_params if c.name not in consts]
        if missing:
            self.sink.emit(
                "E0204",
                f"cannot infer const parameter `{missing[0]}` of `{decl.name}`",
                e.span,
                help=f"pass it explicitly: `{decl.name}::<...>(...)`",
            )
            raise _Error
        args = dict(zip((c.name for c in decl.const_params), e.const_args or [], strict=False))
        for cp in decl.const_params:
            if _const_range(cp) is None:
                raise _Error  # E0206 at the declaration (its generic body is always checked)
            ty, lo, hi = _const_range(cp)
            if not lo <= consts[cp.name] <= hi:
                self.sink.emit(
                    "E0005",
                    f"const argument {consts[cp.name]} does not fit `{cp.name}: {ty}` of "
                    f"`{decl.name}` ({lo} ..= {hi})",
                    args[cp.name].span if cp.name in args else e.span,
                )
                raise _Error
        return consts

    def _intrinsic(self, e: H.Call, scope: _Scope) -> T.Type:
        if e.callee in TILE_CALLS:
            return self._tile_call(e, scope)
        if e.callee in LAUNCH_INTRINSICS:
            if e.args:
                self.sink.emit(
                    "E0202",
                    f"`{e.callee}()` takes no arguments but {len(e.args)} were supplied",
                    e.span,
                )
                raise _Error
            return T.I64
        if e.callee == "assert":
            if len(e.args) != 1:
                self.sink.emit("E0202", "`assert` takes one condition", e.span)
                raise _Error
            self.in_assert = True
            try:
                self._expect_bool(self._expr(e.args[0], scope, T.BOOL), e.args[0])
            finally:
                self.in_assert = False
            return T.VOID
        if len(e.args) != 3:
            self.sink.emit(
                "E0202",
                f"`matmul_acc` takes 3 arguments (acc, a, b) but {len(e.args)} were supplied",
                e.span,
                help="the one-argument form of the seed is not an intrinsic: declare it "
                "(`extern fn matmul_acc(t: Tensor<...>) -> void on Topology::X;`)",
            )
            raise _Error
        acc, a, b = (self._expr(x, scope, None) for x in e.args)
        if not (isinstance(acc, T.RefT) and acc.mutable and isinstance(acc.inner, T.TensorT)):
            self._mismatch(
                T.RefT(True, T.TensorT("f32", ("M", "N"), "VMEM")),
                acc,
                e.args[0],
                "the accumulator of `matmul_acc`",
            )
            raise _Error  # `&4` has no dims to compare below
        ta, tb = T.deref(_read(a)), T.deref(_read(b))
        for arg, t in ((e.args[1], ta), (e.args[2], tb)):
            if not isinstance(t, T.TensorT) or len(t.dims) != 2:
                self.sink.emit(
                    "E0201", f"`matmul_acc` multiplies 2-D tensors, found `{t.show()}`", arg.span
                )
                raise _Error
        tacc = acc.inner
        if not (
            len(tacc.dims) == 2
            and tacc.elem == "f32"
            and ta.elem == tb.elem
            and ta.dims[1] == tb.dims[0]
            and tacc.dims == (ta.dims[0], tb.dims[1])
        ):
            self.sink.emit(
                "E0201",
                f"`matmul_acc` shapes do not agree: acc {tacc.show()}, "
                f"a {ta.show()}, b {tb.show()}",
                e.span,
                notes=["acc: [M, N] f32 += a: [M, K] @ b: [K, N]"],
            )
        return T.VOID

    # ---- tile arithmetic (LANGUAGE.md section 4.3) ----------------------------------------------
    def _tile_call(self, e: H.Call, scope: _Scope) -> T.Type:
        arity = TILE_CALLS[e.callee]
        if len(e.args) != arity:
            self.sink.emit(
                "E0202",
                f"`{e.callee}` takes {arity} argument(s) but {len(e.args)} were supplied",
                e.span,
            )
            raise _Error
        if (e.const_args is not None) != (e.callee == "cast"):
            self.sink.emit(
                "E0204",
                "`cast` names its element type: `cast::<f32>(t)`"
                if e.callee == "cast"
                else f"`{e.callee}` takes no const arguments",
                e.span,
            )
            raise _Error
        if e.callee in ("max", "min"):
            return self._tile_binary(
                e.args[0], e.args[1], e, f"`{e.callee}`", scope, classes=NUMBERS
            )
        if e.callee == "select":
            return self._select(e, scope)
        if e.callee == "cast":
            x = self._expr(e.args[0], scope, None)
            if isinstance(x, T.Scalar):
                return self._scalar_cast(e, x)
            t = self._tile_of(x, e.args[0], "`cast`")
            self._tile_elems(t, e.args[0], "`cast`", (*NUMBERS, "bool"))
            return replace(t, elem=self._cast_elem(e))
        t = self._tile_operand(e.args[0], scope, f"`{e.callee}`")
        if e.callee == "transpose":
            if len(t.dims) != 2:
                self.sink.emit(
                    "E0201",
                    f"`transpose` takes a 2-D tile, found `{t.show()}`",
                    e.args[0].span,
                )
                raise _Error
            return replace(t, dims=(t.dims[1], t.dims[0]))
        return self._tile_unary(t, e.args[0], e.callee)

    def _scalar_cast(self, e: H.Call, x: T.Scalar) -> T.Scalar:
        """`cast::<E>(n)` of a number (LANGUAGE.md 4.3): between the integer and float
        types (truncating toward zero; an integer out of `E`'s range is E6045 where the
        checks find a value for it, else the conversion saturates)."""
        arg = e.const_args[0] if len(e.const_args) == 1 else None
        numeric = T.INTS | T.FLOATS
        if not (isinstance(arg, H.Name) and arg.name in numeric) or x.name not in numeric:
            self.sink.emit(
                "E0204",
                "`cast::<E>` of a scalar converts between number types "
                f"({', '.join(sorted(numeric))}); found `{x.show()}`"
                if x.name not in numeric
                else "`cast::<E>` of a scalar takes one number type "
                f"({', '.join(sorted(numeric))})",
                arg.span if arg is not None and x.name in numeric else e.span,
            )
            raise _Error
        return T.Scalar(arg.name)

    def _cast_elem(self, e: H.Call) -> str:
        arg = e.const_args[0] if len(e.const_args) == 1 else None
        if not (isinstance(arg, H.Name) and arg.name in (*T.FLOATS, *TILE_INTS)):
            self.sink.emit(
                "E0204",
                "`cast::<E>` of a tile takes one element type: a float (f32, bf16, f16, "
                "f64), i32 or i64 (a bool tile comes from a comparison)",
                arg.span if arg is not None else e.span,
            )
            raise _Error
        return arg.name

    def _tile_operand(self, a: H.Expr, scope: _Scope, what: str) -> T.TensorT:
        return self._tile_of(self._expr(a, scope, None), a, what)

    def _tile_of(self, ty: T.Type, a: H.Expr, what: str) -> T.TensorT:
        t = _tile(ty)
        if not isinstance(t, T.TensorT):
            self._mismatch(T.TensorT("f32", ("M", "N"), self.home), t, a, f"the operand of {what}")
            raise _Error
        return t

    def _tile_unary(self, t: T.TensorT, a: H.Expr, fn: str) -> T.TensorT:
        """`exp(t)` ... on float tiles; `abs` also on integer tiles (the op table's
        FN_ELEMENTS, wrapping as two's complement: `abs` of the minimum is itself)."""
        if "int" in FN_ELEMENTS.get(fn, ()):
            return self._tile_elems(t, a, f"`{fn}`", ("float", "int"))
        self._float_tile(t, a, f"`{fn}`")
        return t

    def _tile_elems(
        self, t: T.TensorT, a: H.Expr, what: str, classes: tuple[str, ...]
    ) -> T.TensorT:
        """`t`, when its element is of one of `classes` ("float", "int": i32/i64, "bool")."""
        if _elem_class(t.elem) in classes:
            return t
        words = {"float": "float", "int": "i32 / i64", "bool": "bool"}
        kinds = " or ".join(words[c] for c in classes)
        self.sink.emit(
            "E0201",
            f"{what} computes on {kinds} tiles, found `{t.show()}`",
            a.span,
            help=f"cast it first: `cast::<f32>({H.show_expr(a)})`"
            if "float" in classes and _elem_class(t.elem) is not None
            else "a bool tile comes from a comparison (`a < b`) and feeds `select`, "
            "`&`, `|` and `!`"
            if "bool" in classes
            else None,
        )
        raise _Error

    def _iota(self, e: H.Iota, scope: _Scope) -> T.TensorT:
        """`iota::<E>([dims], axis)`: an i32 / i64 tile in the home memory, counting along
        a literal axis of its shape."""
        self._dims_in_scope(e, scope)
        e.dims = list(self._dims(e.dims))
        elem = self._elem(e.elem)
        if elem not in TILE_INTS:
            self.sink.emit(
                "E0204",
                f"`iota::<E>` counts in i32 or i64, found `{elem}`",
                e.span,
                help="write `iota::<i32>(...)` and cast the tile: `cast::<f32>(iota::<i32>(...))`",
            )
            raise _Error
        if not 0 <= e.axis < len(e.dims):
            self.sink.emit(
                "E0202",
                f"`iota` counts along one axis of its {len(e.dims)}-D shape "
                f"(0 ..= {len(e.dims) - 1}), found {e.axis}",
                e.span,
            )
            raise _Error
        return self._tensor(T.TensorT(elem, tuple(e.dims), self.home), e.span)

    def _select(self, e: H.Call, scope: _Scope) -> T.TensorT:
        """`select(c, a, b)`: `c` a bool tile; `a` and `b` tiles of one element type or
        scalars adapting to it; the three shapes broadcast together."""
        c, a, b = e.args
        for x in e.args:
            self._expr(x, scope, None)
        cond = self._tile_elems(self._tile_of(c.ty, c, "`select`"), c, "`select`", ("bool",))
        values = [(x, _tile(x.ty)) for x in (a, b) if isinstance(_tile(x.ty), T.TensorT)]
        if values:
            first = values[0][1]
        else:  # `select(c, 1.0, 0.0)`: the scalars' type, f32 for float literals
            elem = next((x.ty.name for x in (a, b) if isinstance(x.ty, T.Scalar)), "f32")
            first = replace(cond, elem=elem)
        for x, t in values:
            if t.elem != first.elem:
                self.sink.emit(
                    "E0201",
                    f"mismatched element types in `select`: `{first.show()}` and `{t.show()}`",
                    e.span,
                    help=f"cast one side: `cast::<{first.elem}>({H.show_expr(x)})`",
                )
                raise _Error
        for k, x in enumerate(e.args[1:], 1):
            if not isinstance(_tile(x.ty), T.TensorT):
                e.args[k] = self._tile_scalar(x, first, "`select`")
        dims = cond.dims
        for _x, t in values:
            joined = broadcast(dims, t.dims)
            if joined is None:
                self.sink.emit(
                    "E0201",
                    f"mismatched shapes in `select`: `{cond.show()}` and `{t.show()}` do not "
                    "broadcast",
                    e.span,
                    help=_broadcast_help(dims, t.dims),
                )
                raise _Error
            dims = joined
        return replace(first, dims=dims, space=cond.space)

    def _float_tile(self, t: T.TensorT, a: H.Expr, what: str) -> None:
        """Tile arithmetic computes on float elements (integer tiles: cast first)."""
        if t.elem not in T.FLOATS:
            self.sink.emit(
                "E0201",
                f"tile arithmetic in {what} computes on float tiles, found `{t.show()}`",
                a.span,
                help=f"cast it first: `cast::<f32>({H.show_expr(a)})`",
            )
            raise _Error

    def _tile_binary(
        self,
        lhs: H.Expr,
        rhs: H.Expr,
        e: H.Expr,
        what: str,
        scope: _Scope | None = None,
        classes: tuple[str, ...] = ("float",),
    ) -> T.TensorT:
        """`a + b`, `max(a, b)`: one element type; shapes broadcast as numpy does; a scalar
        adapts to the tile's element type. The result lives where the (first) tile
        operand lives; operands in different spaces are E6044, a per-target check."""
        if scope is not None:  # an intrinsic call: its operands are not typed yet
            for side in (lhs, rhs):
                self._expr(side, scope, None)
        tiles = [(s, _tile(s.ty)) for s in (lhs, rhs) if isinstance(_tile(s.ty), T.TensorT)]
        if not tiles:
            self._mismatch(T.TensorT("f32", ("M", "N"), self.home), lhs.ty, lhs, what)
            raise _Error
        first = tiles[0][1]
        for side, t in tiles:
            self._tile_elems(t, side, what, classes)
        for side in (lhs, rhs):
            if not isinstance(_tile(side.ty), T.TensorT):
                _replace_operand(e, side, self._tile_scalar(side, first, what))
        if len(tiles) == 1:
            return first
        (ls, lt), (rs, rt) = tiles
        if lt.elem != rt.elem:
            self.sink.emit(
                "E0201",
                f"mismatched element types in {what}: `{lt.show()}` and `{rt.show()}`",
                e.span,
                notes=["the operands of tile arithmetic share one element type"],
                help=f"cast one side: `cast::<{lt.elem}>({H.show_expr(rs)})`",
            )
            raise _Error
        dims = broadcast(lt.dims, rt.dims)
        if dims is None:
            self.sink.emit(
                "E0201",
                f"mismatched shapes in {what}: `{lt.show()}` and `{rt.show()}` do not broadcast",
                e.span,
                notes=[
                    "numpy broadcasting: dimensions agree when equal or when one is 1 "
                    "(`[M, 1]` or `[1, N]` against `[M, N]`)"
                ],
                help=_broadcast_help(lt.dims, rt.dims),
            )
            raise _Error
        return replace(lt, dims=dims)

    def _tile_scalar(self, side: H.Expr, tile: T.TensorT, what: str) -> H.Expr:
        """A scalar operand, as the tile arithmetic reads it: a literal takes the tile's
        element type; a float variable must be of the tile's element type, or `f32`
        (bf16/f16 compute in f32); an integer of another integer type adapts to an integer
        tile's (LANGUAGE.md 4.3, `iota::<i32>([128, 64], 0) + r`) as `cast::<E>(r)` with
        the cast's obligation: a value the clauses allow outside `E` is E6045."""
        elem = T.Scalar(tile.elem)
        if isinstance(side, H.IntLit | H.FloatLit) and not isinstance(side, H.ConstArg):
            side.ty = elem
            return side
        if isinstance(side, H.Unary) and side.op == "-" and _is_literal(side.operand):
            side.ty = side.operand.ty = elem
            return side
        if side.ty == elem or side.ty == T.F32:
            return side
        if tile.elem in TILE_INTS and T.is_int(side.ty):
            # The implicit cast shares its operand's span, which E6045's message reads.
            kind = H.Name(side.span, tile.elem, nid=self.hir.fresh_nid())
            cast = H.Call(side.span, "cast", [side], [kind], nid=self.hir.fresh_nid())
            cast.ty = elem
            return cast
        self._mismatch(elem, side.ty, side, f"the scalar operand of {what}")
        raise _Error

    def _reduce(self, e: H.MethodCall, t: T.TensorT) -> T.TensorT:
        """`a.sum(axis)` / `a.max(axis)` / `a.min(axis)`: a literal axis, kept as size 1."""
        axis = _const_value(e.args[0]) if len(e.args) == 1 else None
        if axis is None or not 0 <= axis < len(t.dims):
            self.sink.emit(
                "E0202",
                f"`.{e.method}(axis)` takes one literal axis of the {len(t.dims)}-D tile "
                f"`{t.show()}` (0 ..= {len(t.dims) - 1})",
                e.span,
            )
            raise _Error
        self._tile_elems(t, e.obj, f"`.{e.method}`", NUMBERS)
        for a in e.args:
            a.ty = T.I64
        elem = "i32" if e.method in ("argmax", "argmin") else t.elem
        dims = tuple(1 if i == axis else d for i, d in enumerate(t.dims))
        return replace(t, dims=dims, elem=elem)

    # ---- helpers --------------------------------------------------------------------------------
    def _coerce(self, want: T.Type, got: T.Type, e: H.Node, what: str) -> None:
        if not _compatible(want, got):
            if (
                isinstance(want, T.TensorT)
                and isinstance(got, T.RefT)
                and isinstance(got.inner, T.TensorT)
                and isinstance(e, H.Index | H.View)
            ):
                self.sink.emit(
                    "E0304",
                    f"cannot move `{got.inner.show()}` out of a borrowed `Vec`",
                    e.span,
                    help="transfer it instead: the DMA reads the element without moving it",
                )
                return
            self._mismatch(want, got, e, what)

    def _mismatch(self, want: T.Type, got: T.Type, e: H.Node, what: str) -> None:
        if want.show() == got.show():  # `a < b` of two tiles: the types agree, the form does not
            self.sink.emit(
                "E0201",
                f"{what} is not defined on `{got.show()}`",
                e.span,
                help="tiles take `+ - * /`, `max`, `min`, "
                + ", ".join(f"`{f}`" for f in UNARY_CALLS)
                + ", `.sum(axis)`, `.max(axis)`, `.min(axis)`, `cast::<E>` and `transpose` "
                "(LANGUAGE.md section 4.3)"
                if isinstance(T.deref(got), T.TensorT)
                else None,
            )
            return
        self.sink.emit(
            "E0201",
            f"mismatched types in {what}: expected `{want.show()}`, found `{got.show()}`",
            e.span,
            help=self._annotate_help(want, got, e),
        )

    def _annotate_help(self, want: T.Type, got: T.Type, e: H.Node) -> str | None:
        """When a side of the mismatch is a literal-valued `let` whose uses disagree on its
        integer type (so none was inferred), name the annotation that settles it."""
        sides = [e.lhs, e.rhs] if isinstance(e, H.Binary) else [e]
        for side in sides:
            let = self.flexible.get(side.vid) if isinstance(side, H.Name) else None
            if let is None:
                continue
            other = got if side.ty == want else want
            if T.is_int(other):
                return (
                    f"`{let.name}` (line {let.span.line}) holds an integer literal and is "
                    f"`{side.ty.show()}` here; if it is meant as `{other.show()}`, "
                    f"declare it: `let {'mut ' if let.mutable else ''}{let.name}: "
                    f"{other.show()} = ...;`"
                )
        return None

    def _expect_bool(self, t: T.Type, e: H.Node) -> None:
        if t != T.BOOL:
            self._mismatch(T.BOOL, t, e, "a condition")


def _const_range(cp: A.Param) -> tuple[str, int, int] | None:
    """A const parameter's integer type and its values, or None (not an integer: E0206)."""
    ty = scalar_name(cp.type)
    if ty is None or not T.is_int(T.Scalar(ty)):
        return None
    return (ty, *T.int_range(ty))


def _rename_dims(t: A.TypeExpr, names: Mapping[str, int | str]) -> A.TypeExpr:
    """A callee's type with its const parameters' names replaced by the caller's."""
    match t:
        case A.TensorType():
            dims = tuple(rename(d, names) for d in t.dims)
            return replace(t, elem=_rename_dims(t.elem, names), dims=dims)
        case A.RefType() | A.TokenType():
            return replace(t, inner=_rename_dims(t.inner, names))
        case A.VecType():
            return replace(t, elem=_rename_dims(t.elem, names))
    return t


def _replace_operand(parent: H.Expr, old: H.Expr, new: H.Expr) -> None:
    """Put `new` where `parent` reads `old` (a binary operator's side, a call's argument)."""
    if new is old:
        return
    if isinstance(parent, H.Binary):
        if parent.lhs is old:
            parent.lhs = new
        else:
            parent.rhs = new
    elif isinstance(parent, H.Call):
        parent.args = [new if a is old else a for a in parent.args]


def _view_root(e: H.Expr) -> H.Name | None:
    while isinstance(e, H.View | H.Index | H.Borrow):
        e = e.operand if isinstance(e, H.Borrow) else e.obj
    return e if isinstance(e, H.Name) and e.vid >= 0 else None


def _tile(t: T.Type | None) -> T.Type | None:
    """The tile an operand of tile arithmetic reads: through a borrow, a token reads its
    (possibly in-flight) buffer (E6004 in the checks)."""
    if t is None:
        return None
    base = T.deref(t)
    return base.inner if isinstance(base, T.TokenT) else base


def _broadcast_help(a: tuple, b: tuple) -> str:
    """What would make two shapes agree: a reduction keeping the axis, or a transpose."""
    if len(a) == 2 and len(b) == 2 and (a[1], a[0]) == tuple(b):
        return "transpose one side: `transpose(...)`"
    if len(a) == 2 and len(b) == 2:
        return (
            f"reduce the wider one keeping the axis: `.sum(1)` of `[{a[0]}, N]` is "
            f"`[{a[0]}, 1]`, which broadcasts against `[{a[0]}, {a[1]}]`"
        )
    return "give both the same shape, or make a dimension 1 so that it broadcasts"


def _read(t: T.Type) -> T.Type:
    """The tensor a value is read as: a token reads its (possibly in-flight) buffer."""
    base = T.deref(t)
    return base.inner if isinstance(base, T.TokenT) else t


def _compatible(want: T.Type, got: T.Type) -> bool:
    if want == got:
        return True
    if isinstance(want, T.TensorT) and isinstance(got, T.TokenT):
        return want.shape_matches(got.inner)  # implicit read of the buffer: E6004 in checks
    if isinstance(want, T.TensorT) and isinstance(got, T.TensorT):
        return want.shape_matches(got)  # placement-polymorphic parameter
    if isinstance(want, T.RefT) and isinstance(got, T.RefT):
        return (not want.mutable or got.mutable) and _compatible(want.inner, got.inner)
    if isinstance(want, T.VecT) and isinstance(got, T.VecT):
        return _compatible(want.elem, got.elem)
    if isinstance(want, T.TokenT) and isinstance(got, T.TokenT):
        return want.inner.shape_matches(got.inner) and want.space == got.space
    if T.is_int(want) and T.is_int(got):
        return False
    return False


def _arg_spaces(decl: A.FnDecl, arg_types: list[T.Type]) -> dict[int, str]:
    """Parameter index -> the space of the tensor (or Vec) the caller passes."""
    out: dict[int, str] = {}
    for i, (p, at) in enumerate(zip(decl.params, arg_types, strict=True)):
        pt = p.type.inner if isinstance(p.type, A.RefType) else p.type
        base = T.deref(at)
        if isinstance(pt, A.TensorType | A.VecType) and isinstance(base, T.TensorT | T.VecT):
            out[i] = base.space
    return out


def _unplaced(t: T.Type) -> str:
    """A type as the source writes it: without the ` @ SPACE` placements that `show` adds."""
    return re.sub(r" @ \w+", "", t.show())


def _is_literal(e: H.Expr, floats: bool = True) -> bool:
    """A literal that takes its context's type (a const parameter's value does not)."""
    kinds = (H.IntLit, H.FloatLit) if floats else (H.IntLit,)
    return isinstance(e, kinds) and not isinstance(e, H.ConstArg)


def _const_value(e: H.Expr) -> int | None:
    """The value of a const argument: an integer literal, possibly negated."""
    if isinstance(e, H.Unary) and e.op == "-":
        inner = _const_value(e.operand)
        return None if inner is None else -inner
    return e.value if isinstance(e, H.IntLit) else None


def _type_text(t: A.TypeExpr) -> str:
    match t:
        case A.NamedType():
            return t.name
        case A.RefType():
            return ("&mut " if t.mutable else "&") + _type_text(t.inner)
        case A.TensorType():
            return "Tensor<...>"
        case A.VecType():
            return "Vec<...>"
        case A.TokenType():
            return "Token<...>"
    return type(t).__name__


def _int_literal_expr(e: H.Expr) -> bool:
    """An integer expression made of literals only: it takes the type its context needs."""
    match e:
        case H.ConstArg():
            return False
        case H.IntLit():
            return True
        case H.Unary(op="-"):
            return _int_literal_expr(e.operand)
        case H.Binary(op="+" | "-" | "*" | "/" | "%"):
            return _int_literal_expr(e.lhs) and _int_literal_expr(e.rhs)
    return False


def _literal_fits(e: H.Expr, ty: T.Type) -> bool:
    return _is_literal(e, floats=False) and T.is_int(ty)


def _unify_dims(pt: A.TypeExpr, at: T.Type, names: set[str], out: dict[str, int]) -> None:
    """Bind const-generic dims of a parameter type from an argument's type."""
    at = T.deref(at)
    if isinstance(pt, A.RefType):
        _unify_dims(pt.inner, at, names, out)
    elif isinstance(pt, A.VecType) and isinstance(at, T.VecT):
        _unify_dims(pt.elem, at.elem, names, out)
    elif isinstance(pt, A.TokenType) and isinstance(at, T.TokenT):
        _unify_dims(pt.inner, at.inner, names, out)
    elif isinstance(pt, A.TensorType) and isinstance(at, T.TensorT | T.TokenT):
        tensor = at.inner if isinstance(at, T.TokenT) else at
        for d, actual in zip(pt.dims, tensor.dims, strict=False):
            if isinstance(d, str) and d in names and isinstance(actual, int):
                out.setdefault(d, actual)


def typecheck(
    items: Sequence[A.Node],
    machine_decls: Sequence[A.Node],
    sink: DiagnosticSink,
    consts: Mapping[str, int] | None = None,
    tuned: Tuned | None = None,
) -> Program:
    return TypeChecker(items, machine_decls, sink, consts, tuned).run()


def _show_values(values: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sorted(values.items())) or "none"
