"""`vxc report`: what the target plan already knows about each kernel's cost.

For every kernel entry the plan (vxc/plan/) has routed each transfer over the
machine's edges, sized it, and given every scratchpad tile a ring. This module walks
the entry's HIR with the launch's runtime sizes (each `Vec` length and runtime
dimension; `--size NAME=N`, default `DEFAULT_SIZE`) and counts, for the whole launch
(each instance walked with its own `instance()` when the walk reads it, a causal
attention's triangle; else one instance's cost times the grid):

- the bytes and transfers crossing each edge (`HBM -> VMEM`), from the plan's hops;
- the FLOPs of `matmul_acc` (2 M N K per call, from the operand types) and of tile
  arithmetic (one per element of its result, or of the reduced operand: `exp` and
  `sqrt` count as one, as rooflines count a special-function op);
- loop trip counts from the evaluated bounds (a body whose cost depends on its loop
  variable is walked once per iteration), an `if` whose condition is a runtime value
  as the costlier branch (the row then says it is an upper bound);
- the rings of the plan: slots in flight and bytes per slot.

The roofline sets the FLOPs against the bytes crossing the edges of each memory that
declares a `bandwidth` (the device memory: HBM; CPU_DRAM on the cpu) and the
topology's `peak_gflops`: attainable = min(peak, intensity x bandwidth), and the
launch takes at least max(FLOPs / peak, bytes / bandwidth). Nothing here is measured:
it is what the declarations and the plan imply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vxc.checks.seams import LaunchSizes, where_sizes
from vxc.checks.solver import Undecided
from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function
from vxc.hir.tiles import tile_form
from vxc.machines.model import Machine
from vxc.plan import TargetPlan
from vxc.plan.scratchpad import human_size as human

DEFAULT_SIZE = 1024  # every runtime size the command line does not give
MAX_ITERATIONS = 1 << 20  # loop iterations walked one by one before the report gives up
MAX_INSTANCES = 1 << 16  # instances walked one by one when their costs differ


class ReportError(Exception):
    """A kernel whose cost this walk cannot count (said plainly, never guessed)."""


class _Unknown(Exception):
    """A control value (a loop bound) that depends on a value the walk does not know."""


@dataclass
class Cost:
    """One instance's traffic and work. edges: "SRC -> DST" -> bytes; moves: the same
    key -> transfers; bound: an `if` on a runtime value was counted as its costlier
    branch, so the figures are upper bounds."""

    edges: dict[str, int] = field(default_factory=dict)
    moves: dict[str, int] = field(default_factory=dict)
    flops: int = 0
    matmuls: int = 0
    externs: dict[str, int] = field(default_factory=dict)
    bound: bool = False

    def add(self, other: Cost, times: int = 1) -> None:
        for mine, theirs in ((self.edges, other.edges), (self.moves, other.moves)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v * times
        for k, v in other.externs.items():
            self.externs[k] = self.externs.get(k, 0) + v * times
        self.flops += other.flops * times
        self.matmuls += other.matmuls * times
        self.bound |= other.bound

    def total(self) -> int:
        return self.flops + sum(self.edges.values())


@dataclass
class Sizes:
    """Runtime sizes by name (a Vec parameter's length, a dimension, a scalar
    parameter); `used` records each one the walk read, with its value, for the table."""

    given: dict[str, int]
    default: int = DEFAULT_SIZE
    used: dict[str, int] = field(default_factory=dict)

    def get(self, name: str) -> int:
        value = self.given.get(name, self.default)
        self.used[name] = value
        return value


@dataclass
class RingRow:
    function: str  # the kernel, or a helper instance it calls (which has its own rings)
    ring: int
    space: str
    slots: int
    slot_bytes: int
    tiles: int
    names: tuple[str, ...] = ()  # the variables its tiles are bound to, in program order


@dataclass
class KernelReport:
    """One kernel entry on one target."""

    kernel: str
    target: str
    instances: int
    cost: Cost
    rings: list[RingRow]
    sizes: dict[str, int]
    peak_flops: float  # FLOP/s, 0 when the model declares no peak
    memory: str  # the memory whose bandwidth bounds the kernel (the device memory)
    bandwidth: float  # B/s, 0 when no memory declares one
    memory_bytes: int  # the launch's, across that memory's edges
    elements: tuple[str, ...]  # the element types of the matmul operands
    # FLOPs of the cheapest and the costliest instance; `cost` is the launch's sum.
    instance_flops: tuple[int, int] = (0, 0)
    per_instance: bool = False  # each instance walked (its cost depends on `instance()`)

    @property
    def intensity(self) -> float | None:
        """FLOP per byte of device-memory traffic; None without traffic."""
        return self.cost.flops / self.memory_bytes if self.memory_bytes else None

    @property
    def ridge(self) -> float | None:
        return self.peak_flops / self.bandwidth if self.peak_flops and self.bandwidth else None

    @property
    def attainable(self) -> float | None:
        """FLOP/s the roofline allows: min(peak, intensity x bandwidth)."""
        if not self.peak_flops:
            return None
        if self.intensity is None:
            return self.peak_flops
        return min(self.peak_flops, self.intensity * self.bandwidth)

    @property
    def bound_by(self) -> str:
        if self.intensity is None or self.ridge is None:
            return "compute" if self.cost.flops else "-"
        return "memory" if self.intensity < self.ridge else "compute"

    @property
    def seconds(self) -> float | None:
        """The launch's lower bound: max(FLOPs / peak, bytes / bandwidth), all instances."""
        if not self.peak_flops or not self.bandwidth:
            return None
        return max(self.cost.flops / self.peak_flops, self.memory_bytes / self.bandwidth)


def _tensor(ty: T.Type | None) -> T.TensorT | None:
    ty = _deref(ty)
    if isinstance(ty, T.TokenT):
        return ty.inner
    return ty if isinstance(ty, T.TensorT) else None


def entries(functions: dict[str, Function]) -> list[str]:
    """The kernel entries (`Function.entry`: code no other function calls), in declaration
    order: what a launch runs and the report has a row for."""
    return [n for n, fn in functions.items() if fn.entry and fn.has_code]


class _Walk:
    """Counts one kernel's cost over the plan (one walk per kernel and target)."""

    def __init__(
        self, plan: TargetPlan, functions: dict[str, Function], sizes: Sizes, instances: int
    ):
        self.plan, self.functions, self.sizes, self.instances = plan, functions, sizes, instances
        self.instance = 0  # the instance being walked: what `instance()` evaluates to
        # A loop bound or branch condition read `instance()`: instances may differ.
        self.reads_instance = False
        self._touched = False  # the value last evaluated depends on `instance()`
        self.elements: set[str] = set()
        self.helpers: dict[str, None] = {}  # helper instances called, in first-call order

    def entry(self, name: str) -> Cost:
        fn = self.functions[name]
        env: dict[object, int] = {}
        for p in fn.params:
            if isinstance(_deref(p.ty), T.VecT):
                env[("len", p.vid)] = self.sizes.get(f"{p.name}.len()")
            elif isinstance(p.ty, T.Scalar) and _is_int(p.ty):
                env[p.vid] = self.sizes.get(p.name)
        try:
            return self.function(name, env)
        except _Unknown as e:
            raise ReportError(f"`{name}`: cannot count: {e}") from None

    def function(self, name: str, env: dict[object, int]) -> Cost:
        """A function body's cost; _Unknown propagates, so that a loop around a call
        whose cost depends on the loop variable walks it per iteration."""
        cost = Cost()
        self.block(name, self.functions[name].decl.body, env, cost)
        return cost

    def block(self, fn: str, block: H.Block | None, env: dict, cost: Cost) -> None:
        for s in block.stmts if block else []:
            self.stmt(fn, s, env, cost)

    def stmt(self, fn: str, s: H.Stmt, env: dict, cost: Cost) -> None:
        match s:
            case H.Let() | H.Assign():
                self.expr(fn, s.value, env, cost)
                self.bind(s.vid, s.value, env)
            case H.ExprStmt():
                self.expr(fn, s.expr, env, cost)
            case H.Return() if s.value is not None:
                self.expr(fn, s.value, env, cost)
            case H.For():
                self.loop(fn, s, env, cost)
            case H.If():
                self.branch(fn, s, env, cost)
            case H.Spawn():
                self.block(fn, s.body, env, cost)

    def bind(self, vid: int, value: H.Expr, env: dict) -> None:
        for key in (vid, ("len", vid), ("instance", vid)):
            env.pop(key, None)
        self._touched = False
        known = self.value(value, env)
        if known is not None:
            env[vid] = known
            if self._touched:  # `let r = instance() * 128`: r varies with the instance
                env[("instance", vid)] = True
        elif isinstance(value, H.Name | H.Borrow) and ("len", _vid(value)) in env:
            env[("len", vid)] = env[("len", _vid(value))]

    def loop(self, fn: str, s: H.For, env: dict, cost: Cost) -> None:
        lo, hi = self.control(s.start, env), self.control(s.end, env)
        if lo is None or hi is None:
            raise _Unknown(f"the bounds of `for {s.var}` at line {s.span.line} are not known")
        trips = max(0, hi - lo)
        self.expr(fn, s.start, env, cost)
        self.expr(fn, s.end, env, cost)
        inner = {k: v for k, v in env.items() if k not in H.assigned_vars(s.body) and k != s.vid}
        body = Cost()
        try:
            self.block(fn, s.body, dict(inner), body)
            cost.add(body, trips)
        except _Unknown as e:
            if trips > MAX_ITERATIONS:
                raise _Unknown(
                    f"{e}, and `for {s.var}` at line {s.span.line} runs {trips} times "
                    f"(more than {MAX_ITERATIONS} to walk one by one)"
                ) from None
            for i in range(lo, hi):  # the body's cost depends on the loop variable
                self.block(fn, s.body, {**inner, s.vid: i}, cost)

    def branch(self, fn: str, s: H.If, env: dict, cost: Cost) -> None:
        self.expr(fn, s.cond, env, cost)
        cond = self.control(s.cond, env)
        arms = [s.then, s.orelse] if cond is None else [s.then if cond else s.orelse]
        costs = []
        for arm in arms:
            c = Cost()
            self.block(fn, arm, dict(env), c)
            costs.append(c)
        chosen = max(costs, key=Cost.total)
        cost.add(chosen)
        cost.bound |= len(costs) > 1 and any(c.total() != chosen.total() for c in costs)

    def expr(self, fn: str, e: H.Expr | None, env: dict, cost: Cost) -> None:
        if e is None:
            return
        for sub in H.expr_children(e):
            self.expr(fn, sub, env, cost)
        if isinstance(e, H.Transfer):
            self.transfer(fn, e, env, cost)
        elif tile_form(e, self.functions) is not None:
            self.tile_flops(e, cost)
        elif isinstance(e, H.Call):
            self.call(fn, e, env, cost)

    def tile_flops(self, e: H.Expr, cost: Cost) -> None:
        """One FLOP per element the form computes (a reduction: per element it reads)."""
        t = _tensor(e.obj.ty) if isinstance(e, H.MethodCall) else _tensor(e.ty)
        n = 1
        for d in t.dims:
            n *= self.dim(d)
        cost.flops += n

    def transfer(self, fn: str, e: H.Transfer, env: dict, cost: Cost) -> None:
        placed = self.plan.node(fn, e)
        if placed is None or not placed.hops:
            return
        size = placed.bytes if placed.bytes is not None else self.tensor_bytes(e.ty)
        for hop in placed.hops:
            key = f"{hop.src} -> {hop.dst}"
            cost.edges[key] = cost.edges.get(key, 0) + size
            cost.moves[key] = cost.moves.get(key, 0) + 1

    def tensor_bytes(self, ty: T.Type | None) -> int:
        t = _tensor(ty)
        if t is None:
            raise ReportError(f"a transfer of `{ty.show() if ty else '?'}` has no tensor size")
        n = T.SCALARS[t.elem]
        for d in t.dims:
            n *= d if isinstance(d, int) else self.sizes.get(d)
        return n

    def call(self, fn: str, e: H.Call, env: dict, cost: Cost) -> None:
        callee = self.functions.get(e.callee)
        if callee is None:
            if e.callee == "matmul_acc":
                self.matmul(e, cost)
            return
        if callee.is_extern:
            cost.externs[e.callee] = cost.externs.get(e.callee, 0) + 1
            return
        inner: dict[object, int] = {}
        for p, a in zip(callee.params, e.args, strict=False):
            known = self.value(a, env)
            if known is not None:
                inner[p.vid] = known
            elif ("len", _vid(a)) in env:
                inner[("len", p.vid)] = env[("len", _vid(a))]
        self.helpers.setdefault(e.callee)
        cost.add(self.function(e.callee, inner))

    def matmul(self, e: H.Call, cost: Cost) -> None:
        acc, a, b = (_tensor(x.ty) for x in e.args)
        if acc is None or a is None or b is None:
            return
        m, k = (self.dim(d) for d in a.dims[-2:])
        n = self.dim(b.dims[-1])
        cost.flops += 2 * m * n * k
        cost.matmuls += 1
        self.elements.update((a.elem, b.elem))

    def dim(self, d: int | str) -> int:
        return d if isinstance(d, int) else self.sizes.get(d)

    def control(self, e: H.Expr, env: dict) -> int | None:
        """The value of a loop bound or a condition: where it depends on `instance()`, the
        instances' costs may differ, and each one is walked (`_launch_cost`)."""
        self._touched = False
        v = self.value(e, env)
        self.reads_instance |= self._touched
        return v

    def value(self, e: H.Expr, env: dict) -> int | None:
        """The integer value of a scalar expression, or None when it is not known."""
        match e:
            case H.IntLit():
                return e.value
            case H.Name():
                self._touched |= ("instance", e.vid) in env
                return env.get(e.vid)
            case H.MethodCall(method="len"):
                return env.get(("len", _vid(e.obj)))
            case H.Call(callee="instances", args=[]) if e.callee not in self.functions:
                return self.instances
            case H.Call(callee="instance", args=[]) if e.callee not in self.functions:
                self._touched = True
                return self.instance
            case H.Unary(op="-"):
                v = self.value(e.operand, env)
                return None if v is None else -v
            case H.Binary():
                return _binary(e.op, self.value(e.lhs, env), self.value(e.rhs, env))
        return None


def _binary(op: str, a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    if op in ("/", "%") and b == 0:
        return None
    table = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "/": lambda: int(a / b),  # Vx divides toward zero, as C and Rust do
        "%": lambda: a - b * int(a / b),
        "<": lambda: int(a < b),
        "<=": lambda: int(a <= b),
        ">": lambda: int(a > b),
        ">=": lambda: int(a >= b),
        "==": lambda: int(a == b),
        "!=": lambda: int(a != b),
    }
    f = table.get(op)
    return f() if f else None


def _deref(ty: T.Type | None) -> T.Type | None:
    while isinstance(ty, T.RefT):
        ty = ty.inner
    return ty


def _is_int(ty: T.Scalar) -> bool:
    return ty.name[0] in "iu"


def _vid(e: H.Expr) -> int:
    while isinstance(e, H.Borrow):
        e = e.operand
    return e.vid if isinstance(e, H.Name) else -1


def _device_memory(machine: Machine) -> tuple[str, int]:
    """The memory whose bandwidth bounds a kernel: the one that declares a bandwidth
    (the device memory); the first declared when several do; ("", 0) when none."""
    for name, mem in machine.memories.items():
        if mem.bandwidth:
            return name, mem.bandwidth
    return "", 0


def kernel_reports(
    plan: TargetPlan,
    functions: dict[str, Function],
    given: dict[str, int],
    instances: int | None = None,
) -> list[KernelReport]:
    """One report per kernel entry, in declaration order. Sizes not given, and the grid
    when `instances` is None, are chosen to satisfy the kernel's `where` clauses."""
    memory, bandwidth = _device_memory(plan.machine)
    topo_peaks = {t.name: t.peak_gflops for t in plan.machine.topologies.values()}
    out = []
    for name in entries(functions):
        launch = _launch(plan, functions, name, given, instances)
        sizes = Sizes(dict(launch.sizes))
        walk = _Walk(plan, functions, sizes, launch.instances)
        cost, flops = _launch_cost(walk, name, launch.instances)
        fn = functions[name]
        peak = topo_peaks.get(fn.topology or "", 0) or max(topo_peaks.values(), default=0)
        touched = sum(b for k, b in cost.edges.items() if memory in k.split(" -> "))
        rings = [
            RingRow(f, r.id, r.space, r.slots, r.slot_bytes, len(r.tiles), _ring_names(r, bound))
            for f in [name, *walk.helpers]
            for bound in [_bound_names(functions[f].decl.body)]
            for r in plan.functions[f].rings
        ]
        out.append(
            KernelReport(
                name,
                plan.target,
                launch.instances,
                cost,
                rings,
                dict(sorted(sizes.used.items())),
                peak * 1e9,
                memory,
                float(bandwidth),
                touched,
                tuple(sorted(walk.elements)),
                (min(flops), max(flops)),
                walk.reads_instance and launch.instances > 1,
            )
        )
    return out


def _bound_names(block: H.Block | None, out: dict[int, str] | None = None) -> dict[int, str]:
    """HIR node id of each value a `let` or an assignment binds -> the variable's name."""
    out = {} if out is None else out
    for s in block.stmts if block else []:
        if isinstance(s, H.Let | H.Assign):
            out.setdefault(s.value.nid, s.name)
        for inner in (
            getattr(s, "body", None),
            getattr(s, "then", None),
            getattr(s, "orelse", None),
        ):
            if isinstance(inner, H.Block):
                _bound_names(inner, out)
    return out


def _ring_names(ring, bound: dict[int, str]) -> tuple[str, ...]:
    """What a ring's tiles are, each once in program order: the variable a tile is bound
    to (`next`), else what makes it and where (a staging hop of a route, a tile inside
    an expression: `transfer at line 12`)."""
    names = (
        f"`{bound[t.node]}`" if t.final and t.node in bound else f"{t.label} at line {t.span.line}"
        for t in ring.tiles
    )
    return tuple(dict.fromkeys(names))


def _launch_cost(walk: _Walk, name: str, instances: int) -> tuple[Cost, list[int]]:
    """The launch's cost (the sum over its instances) and each instance's FLOPs. Instance
    0 is walked first; only if that walk read `instance()` are the others walked too
    (a grid whose instances split the work evenly costs N times one)."""
    first = walk.entry(name)
    total = Cost()
    if not walk.reads_instance or instances <= 1:
        total.add(first, max(instances, 1))
        return total, [first.flops]
    if instances > MAX_INSTANCES:
        raise ReportError(
            f"`{name}`: its cost depends on `instance()` and the launch has {instances} "
            f"instances, more than the {MAX_INSTANCES} this report walks one by one; "
            "give smaller sizes or `--instances`"
        )
    total.add(first)
    flops = [first.flops]
    for i in range(1, instances):
        walk.instance = i
        cost = walk.entry(name)
        total.add(cost)
        flops.append(cost.flops)
    return total, flops


def _launch(
    plan: TargetPlan,
    functions: dict[str, Function],
    name: str,
    given: dict[str, int],
    instances: int | None,
) -> LaunchSizes:
    """The sizes and grid the report counts for kernel `name`: a launch its `where`
    clauses allow (a default of 1024 for every size would break `n == h * s`)."""
    try:
        launch = where_sizes(
            functions[name], plan.machine, functions, given, DEFAULT_SIZE, instances
        )
    except Undecided as u:
        raise ReportError(
            f"`{name}`: z3 could not choose sizes its `where` clauses allow ({u.reason}); "
            "give them with --size NAME=N"
        ) from None
    if launch is None:
        shown = ", ".join(f"{k}={v}" for k, v in given.items())
        grid = f" and --instances {instances}" if instances is not None else ""
        raise ReportError(
            f"`{name}`: its `where` clauses rule out the launch given ({shown or 'no sizes'}"
            f"{grid}): no instance of it could run"
        )
    return launch


def flop_rate(x: float) -> str:
    """FLOP/s in decimal units, as vendors quote peaks: 1.97e14 -> `197 TFLOP/s`."""
    for unit, scale in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if x >= scale:
            return f"{_sig(x / scale)} {unit}"
    return f"{_sig(x)} FLOP/s"


def byte_rate(x: float) -> str:
    """B/s in the binary units the machine models use (LANGUAGE.md 1): `819 GB/s`."""
    for unit, scale in (("TB/s", 1 << 40), ("GB/s", 1 << 30), ("MB/s", 1 << 20)):
        if x >= scale:
            return f"{_sig(x / scale)} {unit}"
    return f"{_sig(x)} B/s"


def seconds(x: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if x >= scale:
            return f"{_sig(x / scale)} {unit}"
    return f"{_sig(x / 1e-9)} ns"


def _sig(x: float) -> str:
    """Three significant digits, no exponent, no trailing zeros: 562.1 -> `562`."""
    text = f"{x:.3g}" if x < 1000 else f"{x:.0f}"
    if "e" in text:
        text = f"{x:.0f}"
    return text


def _grouped(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def render(reports: list[KernelReport], source: str) -> str:
    """The table, one block per kernel: what `vxc report` prints."""
    return "\n".join(_render_one(r, source) for r in reports)


def _render_one(r: KernelReport, source: str) -> str:
    sizes = ", ".join(f"{k} = {v}" for k, v in r.sizes.items()) or "none"
    grid = f"{r.instances} instance" + ("s" if r.instances != 1 else "")
    how = "each walked: its cost depends on `instance()`" if r.per_instance else ""
    if not how and r.instances > 1:
        how = f"{r.instances} x one instance's cost"
    rows = [
        f"{r.kernel} ({source}) on {r.target}: a launch of {grid}"
        + (f" ({how})" if how else "")
        + f"; runtime sizes: {sizes}"
    ]
    upper = " (upper bound: an `if` on a runtime value counted as its costlier branch)"
    rows.append(
        "  edge                  transfers            bytes" + (upper if r.cost.bound else "")
    )
    for edge in sorted(r.cost.edges):
        b = r.cost.edges[edge]
        rows.append(
            f"  {edge:<20}{_grouped(r.cost.moves[edge]):>11}  {_grouped(b):>15} B  ({human(b)})"
        )
    if not r.cost.edges:
        rows.append("  (no transfers)")
    ops = f"{_grouped(r.cost.matmuls)} matmul_acc"
    if r.elements:
        ops += f", {'/'.join(r.elements)} operands"
    rows.append(f"  FLOPs               {_grouped(r.cost.flops):>27}  ({ops})")
    if r.per_instance:
        lo, hi = r.instance_flops
        rows.append(f"  per instance        {_grouped(lo):>13} to {_grouped(hi)} FLOPs")
    for name, calls in sorted(r.cost.externs.items()):
        rows.append(f"  extern {name}: {_grouped(calls)} calls, their FLOPs and bytes not counted")
    mem = r.memory or "device memory"
    rows.append(f"  {mem + ' traffic':<20}{_grouped(r.memory_bytes):>27} B")
    rows.append(f"  intensity           {_intensity(r)}")
    rows.append(f"  roofline            {_roofline(r)}")
    if r.seconds is not None:
        rows.append(f"  time bound          {seconds(r.seconds)} for the launch")
    for ring in r.rings:
        rows.append(
            f"  {_ring_name(r.kernel, ring):<19} {ring.space}: {ring.slots} slot"
            + ("s" if ring.slots != 1 else "")
            + f" in flight x {human(ring.slot_bytes)} ({ring.tiles} tile"
            + ("s" if ring.tiles != 1 else "")
            + (f": {', '.join(ring.names)}" if ring.names else "")
            + ")"
        )
    return "\n".join(rows) + "\n"


def _ring_name(kernel: str, ring: RingRow) -> str:
    where = "" if ring.function == kernel else f" of {ring.function}"
    return f"ring #{ring.ring}{where}"


def _intensity(r: KernelReport) -> str:
    ridge = f" (ridge {_sig(r.ridge)} FLOP/B)" if r.ridge else ""
    if r.intensity is None:
        return f"- (no {r.memory or 'device memory'} traffic){ridge}"
    return f"{_sig(r.intensity)} FLOP/B{ridge}"


def _roofline(r: KernelReport) -> str:
    if not r.peak_flops:
        return "- (the machine model declares no `peak_gflops`)"
    if not r.cost.flops:
        return "- (no FLOPs counted: not a point of the roofline)"
    bw = f", {r.memory} {byte_rate(r.bandwidth)}" if r.bandwidth else ", no bandwidth declared"
    share = 100 * r.attainable / r.peak_flops
    return (
        f"{r.bound_by}-bound: {flop_rate(r.attainable)} of {flop_rate(r.peak_flops)} peak "
        f"({share:.0f} %){bw}"
    )
