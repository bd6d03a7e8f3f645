"""A brute-force oracle for the view, race and in-flight checks (issue 30 item 6).

The seam checker (compiler/vxc/checks/seams.py) proves with z3 that views lie inside
their tensors (E6041), that instances neither write overlapping regions of an output
nor read what another writes (E6042), and that a store in flight has neither its
source changed nor its destination touched again (E6043). This module decides the same
three questions for *small launches* by running the kernel: every kernel entry is
executed concretely, integer and bool control flow only (a tile's values never decide a
view), for every instance of every launch drawn from a small set of parameter values
that the `where` clauses admit.

What it models, and what makes it give up ("not enumerable", never a guess):

- integers as Vx defines them (two's complement wrapping per type; `/` truncates, `%`
  has the dividend's sign, `x / 0 == 0`, `x % 0 == x`, `MIN / -1 == MIN`, `x % -1 == 0`:
  tests/e2e/test_integer_semantics.py `reference`), bools, views, output regions and
  store tokens; tiles and floats are opaque;
- a float comparison, a `.len()` of anything but a `Vec` parameter, an integer from a
  `Vec` or an extern, a helper whose body moves data (a transfer, view or wait) or that
  is recursive: not enumerable;
- a launch whose instance runs past `STEP_BUDGET` statements is skipped (the verdict
  is then `partial`); launches beyond `MAX_LAUNCHES` are sampled deterministically.

The verdict is a set of codes, "E6041" / "E6042" / "E6043", found in some launch, with
one witness each (the values and the statement), or None for not enumerable.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function, Program

STEP_BUDGET = 10_000  # statements one instance may run
MAX_LAUNCHES = 400  # parameter assignments tried per kernel (sampled beyond it)
WORK_BUDGET = 400_000  # statements per kernel over all its launches
MAX_INSTANCES = 16  # a launch with more instances (a `where` clause fixes it) is skipped
DEFAULT_INSTANCES = (1, 2, 3, 4)

SHAPE_VALUES = (0, 1, 64, 127, 128, 129, 256, 384, 512)
LEN_VALUES = (0, 1, 2, 3, 4)


class NotEnumerable(Exception):
    """A form the oracle does not model: the kernel's verdict is None."""


class OverBudget(Exception):
    """One instance ran past STEP_BUDGET: its launch is skipped."""


class _Return(Exception):
    def __init__(self, value):
        self.value = value


# ---- integer semantics (LANGUAGE.md, docs/DESIGN.md) --------------------------------
def wrap(x: int, ty: str) -> int:
    lo, hi = T.int_range(ty)
    return (x - lo) % (hi - lo + 1) + lo


def vx_div(x: int, d: int, ty: str) -> int:
    if d == 0:
        return 0
    q = abs(x) // abs(d)
    return wrap(q if (x < 0) == (d < 0) else -q, ty)


def vx_rem(x: int, d: int, ty: str) -> int:
    if d == 0:
        return wrap(x, ty)
    q = abs(x) // abs(d)
    q = q if (x < 0) == (d < 0) else -q
    return wrap(x - d * q, ty)


def _int_ty(t) -> str:
    return t.name if t is not None and T.is_int(t) else "i64"


# ---- runtime values -------------------------------------------------------------
class Opaque:
    """A tile, a float, a tensor argument: a value whose content never matters here."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<opaque>"


OPAQUE = Opaque()


@dataclass(frozen=True)
class Vec:
    length: int


@dataclass(frozen=True)
class Token:
    stores: frozenset[int]  # the dynamic stores it completes when waited


@dataclass
class Access:
    """One load from or store to an output region by one instance."""

    out: int  # the output parameter's vid
    name: str
    region: tuple[tuple[int, int], ...]
    dims: tuple[int, ...]
    writes: bool
    line: int

    @property
    def inside(self) -> bool:
        return all(0 <= lo and hi <= d for (lo, hi), d in zip(self.region, self.dims, strict=True))


def _overlap(a: tuple, b: tuple) -> tuple[int, ...] | None:
    """A shared element of two regions, or None."""
    at = []
    for (lo, hi), (lo2, hi2) in zip(a, b, strict=True):
        x, y = max(lo, lo2), min(hi, hi2)
        if x >= y:
            return None
        at.append(x)
    return tuple(at)


@dataclass
class Verdict:
    codes: set[str] | None  # None: not enumerable
    reason: str = ""  # why not enumerable
    witness: dict[str, str] = field(default_factory=dict)  # code -> the launch and the place
    launches: int = 0  # launches run to completion
    skipped: int = 0  # launches over budget
    partial: bool = False  # some launch skipped or the launches sampled


# ---- one instance ------------------------------------------------------------------
class Instance:
    """Runs one instance of a kernel entry for one launch, recording its accesses and
    the E6041 / E6043 it meets (E6042 needs every instance: `Launch`)."""

    def __init__(self, fn: Function, functions: dict[str, Function], launch: Launch, k: int):
        self.fn, self.functions, self.launch = fn, functions, launch
        self.instance = k
        self.env: dict[int, object] = {}
        self.dims: dict[int, tuple] = {}
        self.accesses: list[Access] = []
        # dynamic store id -> (source vid or None, destination Access or None, line)
        self.inflight: dict[int, tuple[int | None, Access | None, int]] = {}
        self.next_store = 0
        self.steps = 0
        self.depth = 0

    def found(self, code: str, what: str) -> None:
        self.launch.found(code, f"{what} (instance() = {self.instance})")

    # statements
    def run(self) -> None:
        for p in self.fn.params:
            self.env[p.vid] = self.launch.args.get(p.vid, OPAQUE)
        try:
            self.block(self.fn.decl.body)
        except _Return:
            pass

    def block(self, b: H.Block | None) -> None:
        for s in b.stmts if b else []:
            self.stmt(s)

    def stmt(self, s: H.Stmt) -> None:
        self.steps += 1
        if self.steps > STEP_BUDGET:
            raise OverBudget
        match s:
            case H.Let() | H.Assign():
                value = self.eval(s.value)
                self.changed(
                    s.vid, s.span.line, "bound again" if isinstance(s, H.Let) else "assigned"
                )
                self.env[s.vid] = value
            case H.ExprStmt():
                self.eval(s.expr)
            case H.Return():
                raise _Return(self.eval(s.value) if s.value is not None else None)
            case H.If():
                cond = self.eval(s.cond)
                if not isinstance(cond, bool):
                    raise NotEnumerable("an `if` condition that is not a bool")
                if cond:
                    self.block(s.then)
                elif s.orelse is not None:
                    self.block(s.orelse)
            case H.For():
                lo, hi = self.int(s.start), self.int(s.end)
                ty = _int_ty(self.fn_vars()[s.vid].ty)
                i = lo
                while i < hi:
                    self.env[s.vid] = wrap(i, ty)
                    self.block(s.body)
                    i += 1
            case H.Spawn():
                self.block(s.body)
            case _:
                raise NotEnumerable(f"statement {type(s).__name__}")

    def fn_vars(self):
        return self.fn.vars

    # expressions
    def int(self, e: H.Expr) -> int:
        v = self.eval(e)
        if isinstance(v, bool) or not isinstance(v, int):
            raise NotEnumerable(f"an integer that is not one: {H.show_expr(e)}")
        return v

    def eval(self, e: H.Expr):  # noqa: C901 - one case per form
        match e:
            case H.BoolLit():
                return e.value
            case H.IntLit() | H.SizeLit():
                return e.value
            case H.FloatLit():
                return OPAQUE
            case H.Name():
                if e.vid not in self.env:
                    raise NotEnumerable(f"unbound name {e.name}")
                return self.env[e.vid]
            case H.MemPath() | H.TopoPath():
                return OPAQUE
            case H.Unary(op="!"):
                v = self.eval(e.operand)
                if not isinstance(v, bool):
                    raise NotEnumerable("`!` of a non-bool")
                return not v
            case H.Unary(op="-"):
                v = self.eval(e.operand)
                if T.is_int(e.ty):
                    return wrap(-self._as_int(v, e), e.ty.name)
                return OPAQUE
            case H.Binary(op="&&" | "||"):
                lhs = self.eval(e.lhs)
                if not isinstance(lhs, bool):
                    raise NotEnumerable("a logic operand that is not a bool")
                if (e.op == "&&") != lhs:
                    return lhs
                rhs = self.eval(e.rhs)
                if not isinstance(rhs, bool):
                    raise NotEnumerable("a logic operand that is not a bool")
                return rhs
            case H.Binary(op="==" | "!=" | "<" | "<=" | ">" | ">="):
                lhs, rhs = self.eval(e.lhs), self.eval(e.rhs)
                if isinstance(lhs, bool) and isinstance(rhs, bool) and e.op in ("==", "!="):
                    return (lhs == rhs) == (e.op == "==")
                if not (T.is_int(e.lhs.ty) and T.is_int(e.rhs.ty)):
                    raise NotEnumerable("a comparison of non-integers (a float compare)")
                a, b = self._as_int(lhs, e.lhs), self._as_int(rhs, e.rhs)
                return {
                    "==": a == b,
                    "!=": a != b,
                    "<": a < b,
                    "<=": a <= b,
                    ">": a > b,
                    ">=": a >= b,
                }[e.op]
            case H.Binary():
                lhs, rhs = self.eval(e.lhs), self.eval(e.rhs)
                if not T.is_int(e.ty):
                    return OPAQUE  # tile or float arithmetic: its value never matters
                a, b, ty = self._as_int(lhs, e.lhs), self._as_int(rhs, e.rhs), e.ty.name
                match e.op:
                    case "+":
                        return wrap(a + b, ty)
                    case "-":
                        return wrap(a - b, ty)
                    case "*":
                        return wrap(a * b, ty)
                    case "/":
                        return vx_div(a, b, ty)
                    case "%":
                        return vx_rem(a, b, ty)
                raise NotEnumerable(f"operator {e.op}")
            case H.Borrow():
                root = _strip(e.operand)
                if e.mutable and isinstance(root, H.Name):
                    self.changed(root.vid, e.span.line, "borrowed `&mut`")
                return self.eval(e.operand)
            case H.Transfer():
                return self.transfer(e)
            case H.Wait():
                tok = self.eval(e.token)
                if isinstance(tok, Token):
                    for sid in tok.stores:
                        self.inflight.pop(sid, None)
                return None if T.is_store_token(e.token.ty) else OPAQUE
            case H.View():
                self.view_bounds(e)
                return OPAQUE
            case H.Index():
                self.eval(e.obj)
                self.int(e.index)
                if T.is_int(e.ty) or e.ty == T.BOOL:
                    raise NotEnumerable("a scalar read from a Vec")
                return OPAQUE
            case H.TensorNew():
                return OPAQUE
            case H.MethodCall(method="len"):
                v = self.eval(e.obj)
                if not isinstance(v, Vec):
                    raise NotEnumerable("`.len()` of something that is not a Vec parameter")
                return v.length
            case H.MethodCall():
                self.eval(e.obj)
                for a in e.args:
                    self.eval(a)
                if T.is_int(e.ty) or e.ty == T.BOOL:
                    raise NotEnumerable(f"method `{e.method}` with a scalar result")
                return OPAQUE
            case H.Call():
                return self.call(e)
        raise NotEnumerable(f"expression {type(e).__name__}")

    def _as_int(self, v, e: H.Expr) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise NotEnumerable(f"an integer operand that is not known: {H.show_expr(e)}")
        return v

    def call(self, e: H.Call):
        user = self.functions.get(e.callee)
        if user is None:
            if e.callee == "instance":
                return self.instance
            if e.callee == "instances":
                return self.launch.instances
            if e.callee == "assert":
                return None  # compile-time contracts: not re-checked at run time
            for a in e.args:  # matmul_acc, tile functions: their operands' effects
                self.eval(a)
            if T.is_int(e.ty) or e.ty == T.BOOL:
                raise NotEnumerable(f"intrinsic `{e.callee}` with a scalar result")
            return OPAQUE
        args = [self.eval(a) for a in e.args]
        for a, p in zip(e.args, user.params, strict=False):
            if isinstance(a, H.Name) and p.ty.movable:
                self.changed(a.vid, a.span.line, "moved away")
        if user.is_extern:
            if T.is_int(e.ty) or e.ty == T.BOOL:
                raise NotEnumerable(f"extern `{e.callee}` with a scalar result")
            return OPAQUE
        if _moves_data(user):
            raise NotEnumerable(f"helper `{e.callee}` moves data")
        self.depth += 1
        if self.depth > 32:
            raise NotEnumerable("helpers nested too deep (recursion)")
        saved_fn, saved_env = self.fn, self.env
        self.fn, self.env = user, {}
        for p, v in zip(user.params, args, strict=False):
            self.env[p.vid] = v
        try:
            self.block(user.decl.body)
            result = None
        except _Return as r:
            result = r.value
        finally:
            self.fn, self.env = saved_fn, saved_env
            self.depth -= 1
        return OPAQUE if result is None and e.ty not in (T.VOID,) else result

    # views, outputs, stores
    def dim_values(self, ty) -> tuple[int, ...]:
        t = T.deref(ty)
        if not isinstance(t, T.TensorT):
            raise NotEnumerable("a view of something that is not a tensor")
        out = []
        for d in t.dims:
            if isinstance(d, int):
                out.append(d)
            elif d in self.launch.named:
                out.append(self.launch.named[d])
            else:
                raise NotEnumerable(f"a dimension `{d}` that is no parameter")
        return tuple(out)

    def region(self, v: H.View) -> tuple[tuple[int, int], ...]:
        return tuple((self.int(r.lo), self.int(r.hi)) for r in v.ranges)

    def view_bounds(self, v: H.View) -> tuple:
        self.eval(v.obj)
        dims = self.dim_values(v.obj.ty)
        region = self.region(v)
        for (lo, hi), d, r in zip(region, dims, v.ranges, strict=True):
            # an `edge` view may reach past the end, not before the start (LANGUAGE.md 4.2)
            if lo < 0 or (hi > d and not v.edge):
                self.found(
                    "E6041",
                    f"view `{H.show_expr(v)}` at line {r.span.line} is {lo} .. {hi} of a "
                    f"dimension of {d}",
                )
        if v.edge:  # the elements it touches: those inside the tensor
            return tuple((lo, min(hi, d)) for (lo, hi), d in zip(region, dims, strict=True))
        return region

    def output(self, e: H.Expr, region, writes: bool, line: int) -> Access | None:
        """The access when `e` is a view of an output (or a whole output)."""
        obj = e.obj if isinstance(e, H.View) else e
        root = _strip(obj)
        ty = root.ty if isinstance(root, H.Name) else None
        if not (isinstance(ty, T.RefT) and ty.mutable and isinstance(ty.inner, T.TensorT)):
            return None
        if self.fn is not self.launch.fn:
            raise NotEnumerable("an output accessed in a helper")
        dims = self.dim_values(ty)
        if region is None:
            region = tuple((0, d) for d in dims)
        return Access(root.vid, root.name, region, dims, writes, line)

    def against_inflight(self, acc: Access, how: str) -> None:
        for _, dest, line in self.inflight.values():
            if dest is None or dest.out != acc.out or not (dest.inside and acc.inside):
                continue
            at = _overlap(dest.region, acc.region)
            if at is not None:
                self.found(
                    "E6043",
                    f"`{acc.name}` {how} at line {acc.line} while the store at line {line} "
                    f"is in flight: both touch `{acc.name}{list(at)}`",
                )

    def changed(self, vid: int, line: int, how: str) -> None:
        if self.fn is not self.launch.fn:
            return  # a helper's own variables are never a store's source
        for src, _, at in self.inflight.values():
            if src == vid:
                name = self.fn.vars[vid].name if vid in self.fn.vars else "?"
                self.found(
                    "E6043",
                    f"`{name}` is {how} at line {line} while the store at line {at} is in flight",
                )

    def transfer(self, t: H.Transfer):
        src_region = self.view_bounds(t.src) if isinstance(t.src, H.View) else None
        if not isinstance(t.src, H.View):
            self.eval(t.src)
        dest_region = self.view_bounds(t.dest) if isinstance(t.dest, H.View) else None
        line = t.span.line
        read = self.output(t.src, src_region, False, t.src.span.line)
        if read is not None:
            self.against_inflight(read, "is read")
            self.accesses.append(read)
        src = _strip(t.src)
        if t.dest is None:
            if isinstance(src, H.Name) and not isinstance(src.ty, T.TokenT):
                self.changed(src.vid, line, "moved away")
            return Token(frozenset()) if t.is_async else OPAQUE
        dest = self.output(t.dest, dest_region, True, line) if dest_region is not None else None
        if dest is None:
            raise NotEnumerable("a store whose destination is not a view of an output")
        self.against_inflight(dest, "is stored to")
        self.accesses.append(dest)
        if not t.is_async:
            return None
        sid = self.next_store
        self.next_store += 1
        self.inflight[sid] = (src.vid if isinstance(src, H.Name) else None, dest, line)
        return Token(frozenset({sid}))


def _strip(e: H.Expr) -> H.Expr:
    while isinstance(e, H.Borrow):
        e = e.operand
    return e


def _moves_data(fn: Function) -> bool:
    for s in H.walk_stmts(fn.decl.body):
        for x in vars(s).values():
            if isinstance(x, H.Expr):
                for n in H.walk_expr(x):
                    if isinstance(n, H.Transfer | H.Wait | H.View):
                        return True
        if isinstance(s, H.Spawn):
            return True
    return False


# ---- one launch: every instance, then the races ----------------------------------------
class Launch:
    def __init__(self, fn, functions, args: dict[int, object], instances: int, verdict: Verdict):
        self.fn, self.functions, self.args, self.instances = fn, functions, args, instances
        self.verdict = verdict
        self.named = {p.name: args[p.vid] for p in fn.params if isinstance(args.get(p.vid), int)}
        self.steps = 0

    def describe(self) -> str:
        shown = [
            f"{p.name} = {str(self.args[p.vid]).lower()}"
            for p in self.fn.params
            if isinstance(self.args.get(p.vid), int | Vec)
        ]
        shown = [s.replace("Vec(length=", "len ").rstrip(")") if "Vec" in s else s for s in shown]
        return ", ".join([*shown, f"instances() = {self.instances}"])

    def found(self, code: str, what: str) -> None:
        v = self.verdict
        v.codes.add(code)
        v.witness.setdefault(code, f"{self.describe()}: {what}")

    def run(self) -> None:
        done = []
        for k in range(self.instances):
            inst = Instance(self.fn, self.functions, self, k)
            try:
                inst.run()
            finally:
                self.steps += inst.steps
            done.append(inst)
        self.races(done)

    def races(self, done: list[Instance]) -> None:
        for p, q in itertools.combinations(range(len(done)), 2):
            a_acc = [a for a in done[p].accesses if a.inside]
            b_acc = [b for b in done[q].accesses if b.inside]
            seen = set()
            for a in a_acc:
                for b in b_acc:
                    if a.out != b.out or not (a.writes or b.writes):
                        continue
                    key = (a.region, a.writes, b.region, b.writes)
                    if key in seen:
                        continue
                    seen.add(key)
                    at = _overlap(a.region, b.region)
                    if at is None:
                        continue
                    how = (
                        "both write"
                        if a.writes and b.writes
                        else "one writes what the other reads:"
                    )
                    self.found(
                        "E6042",
                        f"instances {p} (line {a.line}) and {q} (line {b.line}) {how} "
                        f"`{a.name}{list(at)}`",
                    )
                    return


# ---- the launches of a kernel -------------------------------------------------------
def _literals(fn: Function) -> set[int]:
    out = set()
    for w in fn.decl.where:
        for n in H.walk_expr(w):
            if isinstance(n, H.IntLit) and abs(n.value) < 1 << 20:
                out |= {n.value - 1, n.value, n.value + 1}
    return out


def _shape_names(fn: Function) -> set[str]:
    out: set[str] = set()
    for p in fn.params:
        t = T.deref(p.ty)
        t = T.deref(t.elem) if isinstance(t, T.VecT) else t
        if isinstance(t, T.TensorT):
            out |= {d for d in t.dims if isinstance(d, str)}
    return out


def derived(fn: Function) -> list[tuple[int, H.Expr]]:
    """Integer parameters a `where p == E` clause computes from the others (`n == h * s`):
    (vid, E) in clause order; E names only parameters enumerated or derived before it."""
    ints = {p.vid for p in fn.params if T.is_int(p.ty)}
    out: list[tuple[int, H.Expr]] = []
    taken: set[int] = set()
    for w in fn.decl.where:
        if not (isinstance(w, H.Binary) and w.op == "=="):
            continue
        for lhs, rhs in ((w.lhs, w.rhs), (w.rhs, w.lhs)):
            if not (isinstance(lhs, H.Name) and lhs.vid in ints and lhs.vid not in taken):
                continue
            names = {n.vid for n in H.walk_expr(rhs) if isinstance(n, H.Name)}
            grid = any(
                isinstance(n, H.Call) and n.callee in ("instance", "instances")
                for n in H.walk_expr(rhs)
            )
            if grid or lhs.vid in names:
                continue
            out.append((lhs.vid, rhs))
            taken.add(lhs.vid)
            break
    # E may only name parameters that are enumerated or derived earlier
    return [
        (vid, e)
        for k, (vid, e) in enumerate(out)
        if not any(
            isinstance(n, H.Name) and n.vid in {v for v, _ in out[k:]} for n in H.walk_expr(e)
        )
    ]


def candidates(fn: Function) -> list[tuple[int, list]]:
    """(vid, the values to try) for each parameter whose value matters."""
    lits = _literals(fn)
    shapes = _shape_names(fn)
    computed = {vid for vid, _ in derived(fn)}
    out = []
    for p in fn.params:
        ty = p.ty
        if p.vid in computed:
            continue
        if T.is_int(ty):
            lo, hi = T.int_range(ty.name)
            if p.name in shapes:
                vals = set(SHAPE_VALUES) | {x for x in lits if x >= 0}
            else:
                vals = {0, 1, -1, 2, 3, 127, 128, 256, lo, hi} | lits
            vals = sorted(v for v in vals if lo <= v <= hi)
            out.append((p.vid, vals))
        elif ty == T.BOOL:
            out.append((p.vid, [False, True]))
        elif isinstance(T.deref(ty), T.VecT):
            out.append((p.vid, [Vec(n) for n in LEN_VALUES]))
        elif T.is_float(ty):
            continue
    return out


def _fixed_instances(fn: Function, probe: Instance) -> int | None:
    """`instances()` when a `where instances() == E` clause fixes it (E free of the grid)."""
    for w in fn.decl.where:
        if not (isinstance(w, H.Binary) and w.op == "=="):
            continue
        for lhs, rhs in ((w.lhs, w.rhs), (w.rhs, w.lhs)):
            if (
                isinstance(lhs, H.Call)
                and lhs.callee == "instances"
                and "instances" not in probe.functions
                and not any(
                    isinstance(n, H.Call) and n.callee in ("instance", "instances")
                    for n in H.walk_expr(rhs)
                )
            ):
                return probe.int(rhs)
    return None


def _where_holds(inst: Instance) -> bool:
    for w in inst.fn.decl.where:
        v = inst.eval(w)
        if not isinstance(v, bool):
            raise NotEnumerable("a `where` clause that is not a bool")
        if not v:
            return False
    return True


def run_kernel(fn: Function, functions: dict[str, Function]) -> Verdict:
    verdict = Verdict(set())
    try:
        _enumerate(fn, functions, verdict)
    except NotEnumerable as e:
        return Verdict(None, reason=str(e), launches=verdict.launches)
    if verdict.launches == 0:
        return Verdict(
            None,
            reason="no launch ran (none satisfies the `where` clauses, or all over budget)",
            skipped=verdict.skipped,
        )
    return verdict


def _enumerate(fn: Function, functions: dict[str, Function], verdict: Verdict) -> None:
    cands = candidates(fn)
    computed = derived(fn)
    space = 1
    for _, vals in cands:
        space *= len(vals)
    if space <= MAX_LAUNCHES:
        picks = itertools.product(*(vals for _, vals in cands))
    else:
        verdict.partial = True
        rng = random.Random(fn.name)
        picks = (
            tuple(vals[idx % len(vals)] for (_, vals), idx in zip(cands, digits, strict=True))
            for digits in (
                _unrank(n, [len(v) for _, v in cands])
                for n in sorted(rng.sample(range(space), MAX_LAUNCHES))
            )
        )
    work = 0
    for values in picks:
        args = {vid: v for (vid, _), v in zip(cands, values, strict=True)}
        probe_launch = Launch(fn, functions, args, 1, verdict)
        probe = Instance(fn, functions, probe_launch, 0)
        probe.env = args
        for vid, e in computed:
            args[vid] = probe.int(e)
        probe_launch = Launch(fn, functions, args, 1, verdict)
        probe = Instance(fn, functions, probe_launch, 0)
        probe.env = dict(args)
        fixed = _fixed_instances(fn, probe)
        counts = [fixed] if fixed is not None else DEFAULT_INSTANCES
        for n in counts:
            if n < 1 or n > MAX_INSTANCES:
                continue
            launch = Launch(fn, functions, args, n, verdict)
            ok = True
            for k in range(n):
                check = Instance(fn, functions, launch, k)
                check.env = dict(args)
                if not _where_holds(check):
                    ok = False
                    break
            if not ok:
                continue
            try:
                launch.run()
                verdict.launches += 1
            except OverBudget:
                verdict.skipped += 1
                verdict.partial = True
            work += launch.steps
            if work > WORK_BUDGET:
                verdict.partial = True
                return


def _unrank(n: int, sizes: list[int]) -> list[int]:
    out = []
    for s in sizes:
        out.append(n % s)
        n //= s
    return out


def entries(program: Program) -> list[Function]:
    """The kernel entries with code (const-generic templates excluded)."""
    return [f for f in program.functions.values() if f.entry and f.has_code]


@dataclass
class ProgramVerdict:
    codes: set[str] | None  # the union over the entries; None if any is not enumerable
    found: set[str]  # the codes found in the entries that were enumerable
    kernels: dict[str, Verdict]

    @property
    def witness(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, v in self.kernels.items():
            for code, w in (v.witness or {}).items():
                out.setdefault(code, f"{name}: {w}")
        return out

    @property
    def partial(self) -> bool:
        return any(v.partial for v in self.kernels.values())


def run_program(program: Program) -> ProgramVerdict:
    kernels = {f.name: run_kernel(f, program.functions) for f in entries(program)}
    found = set().union(*(v.codes for v in kernels.values() if v.codes is not None))
    complete = bool(kernels) and all(v.codes is not None for v in kernels.values())
    return ProgramVerdict(found if complete else None, found, kernels)


def oracle(sources) -> ProgramVerdict | None:
    """The verdict for source files (`api.Source`), None where the program does not
    type-check (the checker's own errors decide those)."""
    from vxc import api

    analysis = api.analyze(list(sources))
    if not analysis.ok:
        return None
    return run_program(analysis.program)
