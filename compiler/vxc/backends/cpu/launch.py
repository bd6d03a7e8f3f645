"""The exported entry points of a CPU kernel: one instance, or N on a thread pool.

Every defined Vx function lowers to an internal *body* that takes the C
parameters, the output pointers and two trailing `int64_t`s, the instance's
index and the instance count (LANGUAGE.md section 4.1; `vx.instance` and
`vx.instances` read them, and calls pass them on to helpers). A kernel entry
`K` exports two C functions around its body:

    int32_t K(<params>, <outputs>);                          /* one instance   */
    int32_t K_launch(int64_t instances, int32_t threads,
                     <params>, <outputs>);                  /* N instances    */

`K` runs instance 0 of 1, exactly the function of earlier compiler versions.
`K_launch` runs instances 0..N-1. Each output points at N results stacked
along a new leading axis (instance i writes bytes [i*size, (i+1)*size)).
`threads` = 0 takes the `VX_NUM_THREADS` environment variable if it is a
positive integer, else one thread per core the process may run on
(`sched_getaffinity`); the pool never has more threads than that core count
nor than N. The calling thread is one of the pool; the other threads are
created for the call and joined before it returns (no global state: the
object is safe to call from several threads at once). Instances are handed
out in order from an atomic counter. The status is VX_OK, or the status of
the lowest-numbered instance that failed (so it does not depend on the
schedule); VX_ERR_LAUNCH for N < 1 or threads < 0, VX_ERR_NULL for a null
output pointer or a null input of non-zero size, VX_ERR_SHAPE for a negative
length, VX_ERR_SHAPE_PARAM for a tensor whose size differs from its shape
parameter, VX_ERR_WHERE for a launch that breaks the kernel's `where` clauses
(evaluated by `K__vx_where`: once, or per instance when a clause reads
instance()), then VX_ERR_ALIAS for a written argument whose bytes overlap
another argument's (LANGUAGE.md section 7, distinct arguments; an output's bytes
are N results), all before any instance runs.
"""

from __future__ import annotations

from typing import Protocol

from llvmlite import ir as ll

from vxc.backends.cpu import abi
from vxc.backends.cpu.errors import STATUS
from vxc.backends.cpu.loops import I64, counted_loop

I8, I32 = ll.IntType(8), ll.IntType(32)
PTR = ll.PointerType()
NONE_BAD = (1 << 64) - 1  # no instance failed (an unsigned minimum's identity)
ENV = "VX_NUM_THREADS"
MAX_CPUS = 1024  # the affinity mask the pool reads (bits)


def _c(n: int, ty: ll.IntType = I64) -> ll.Constant:
    return ll.Constant(ty, n)


def _status(name: str) -> ll.Constant:
    return ll.Constant(I32, STATUS[name])


def _decl(mod: ll.Module, name: str, ret: ll.Type, args: list[ll.Type]) -> ll.Function:
    if name in mod.globals:
        return mod.globals[name]
    return ll.Function(mod, ll.FunctionType(ret, args), name=name)


def result_bytes(r: abi.Param) -> int:
    """Bytes one instance writes through a result pointer (a bool travels as a byte)."""
    size = abi.ELEMENT_BYTES[r.dtype]
    for d in r.shape:
        size *= d
    return size


def _tensor_args(
    fn: ll.Function, sig: abi.Signature, first: int
) -> tuple[list[tuple[ll.Value, list[ll.Value]]], list[ll.Value]]:
    """The C arguments from `first` on: each tensor's (pointer, dynamic dims), the outputs."""
    args = iter(fn.args[first:])
    tensors = []
    for p in sig.params:
        ptr = next(args)
        if p.kind == "tensor":
            tensors.append((ptr, [next(args) for _ in p.dynamic_dims]))
    return tensors, list(args)


def _check_lengths(b: ll.IRBuilder, fn: ll.Function, sig: abi.Signature, first: int, fail) -> None:
    """VX_ERR_SHAPE for a negative length or dimension: the body's checks compare indices
    unsigned against it (`i >= len`), which a negative length would pass."""
    bad = ll.Constant(ll.IntType(1), 0)
    for _, dims in _tensor_args(fn, sig, first)[0]:
        for d in dims:
            bad = b.or_(bad, b.icmp_signed("<", d, _c(0)))
    fail(bad, "VX_ERR_SHAPE")


def _check_pointers(b: ll.IRBuilder, fn: ll.Function, sig: abi.Signature, first: int, fail) -> None:
    """VX_ERR_NULL for a null output, or a null input tensor that holds elements."""
    bad = ll.Constant(ll.IntType(1), 0)
    tensors, outs = _tensor_args(fn, sig, first)
    for ptr, dims in tensors:
        is_null = b.icmp_unsigned("==", ptr, ll.Constant(PTR, None))
        if dims:  # an empty Vec may be passed as NULL
            nonempty = ll.Constant(ll.IntType(1), 1)
            for d in dims:
                nonempty = b.and_(nonempty, b.icmp_signed("!=", d, _c(0)))
            is_null = b.and_(is_null, nonempty)
        bad = b.or_(bad, is_null)
    for out in outs:
        bad = b.or_(bad, b.icmp_unsigned("==", out, ll.Constant(PTR, None)))
    fail(bad, "VX_ERR_NULL")


def _check_shapes(b: ll.IRBuilder, fn: ll.Function, sig: abi.Signature, first: int, fail) -> None:
    """VX_ERR_SHAPE_PARAM when a tensor's size differs from the shape parameter that names
    it (`a: &Tensor<bf16, [m, k]>` with `m`): checked before any instance runs."""
    args = iter(fn.args[first:])
    scalars: dict[str, ll.Value] = {}
    sizes: list[tuple[str, ll.Value]] = []
    for p in sig.params:
        if p.kind != "tensor":
            scalars[p.name] = next(args)
            continue
        next(args)
        dyn = {i: next(args) for i in p.dynamic_dims}
        for i, name in enumerate(p.dim_names):
            if name:
                sizes.append((name, dyn[i] if i in dyn else _c(p.shape[i])))
    bad = ll.Constant(ll.IntType(1), 0)
    for name, size in sizes:
        if name in scalars and isinstance(scalars[name].type, ll.IntType):
            want = scalars[name]
            if want.type.width != 64:
                want = b.sext(want, I64)
            bad = b.or_(bad, b.icmp_signed("!=", size, want))
    fail(bad, "VX_ERR_SHAPE_PARAM")


def _byte_ranges(
    b: ll.IRBuilder, fn: ll.Function, sig: abi.Signature, first: int, instances: ll.Value
) -> list[tuple[ll.Value, ll.Value, bool]]:
    """Each pointer argument's bytes as (start address, size, written): a tensor or Vec
    (one contiguous block: its elements, the dynamic dimensions read from the call) and
    each output, which holds `instances` results. Written: a non-const pointer (a `&mut`
    the body writes) or an output."""
    args = iter(fn.args[first:])
    ranges = []
    for p in sig.params:
        ptr = next(args)
        if p.kind != "tensor":
            continue
        dyn = {i: next(args) for i in p.dynamic_dims}
        size: ll.Value = _c(abi.ELEMENT_BYTES[p.dtype])
        for i, d in enumerate(p.shape):
            size = b.mul(size, dyn[i] if d is None else _c(d))
        ranges.append((b.ptrtoint(ptr, I64), size, not p.const))
    for r, ptr in zip(sig.results, args, strict=True):
        ranges.append((b.ptrtoint(ptr, I64), b.mul(instances, _c(result_bytes(r))), True))
    return ranges


def _check_alias(
    b: ll.IRBuilder, fn: ll.Function, sig: abi.Signature, first: int, instances: ll.Value, fail
) -> None:
    """VX_ERR_ALIAS when a written argument (a `&mut` tensor or Vec the body writes, or an
    output) shares a byte with another pointer argument: the proofs assume distinct
    arguments (LANGUAGE.md section 7). Byte ranges [ptr, ptr + size) are compared,
    empty ones never overlap; called after the length checks, so sizes are not
    negative."""
    ranges = _byte_ranges(b, fn, sig, first, instances)
    bad = ll.Constant(ll.IntType(1), 0)
    zero = _c(0)
    for i, (start_i, size_i, written_i) in enumerate(ranges):
        for start_j, size_j, written_j in ranges[i + 1 :]:
            if not (written_i or written_j):
                continue
            nonempty = b.and_(
                b.icmp_unsigned("!=", size_i, zero), b.icmp_unsigned("!=", size_j, zero)
            )
            meet = b.and_(
                b.icmp_unsigned("<", start_i, b.add(start_j, size_j)),
                b.icmp_unsigned("<", start_j, b.add(start_i, size_i)),
            )
            bad = b.or_(bad, b.and_(nonempty, meet))
    fail(bad, "VX_ERR_ALIAS")


class _Guards:
    """Early returns with a status from a function being built."""

    def __init__(self, b: ll.IRBuilder):
        self.b = b

    def __call__(self, bad: ll.Value, code: str) -> None:
        self.status(bad, _status(code))

    def status(self, bad: ll.Value, status: ll.Value) -> None:
        fail = self.b.append_basic_block("fail")
        ok = self.b.append_basic_block("ok")
        self.b.cbranch(bad, fail, ok)
        self.b.position_at_end(fail)
        self.b.ret(status)
        self.b.position_at_end(ok)


def define_single(mod: ll.Module, sig: abi.Signature, fnty: ll.FunctionType, body: ll.Function):
    """`K(<params>, <outputs>)`: instance 0 of 1."""
    fn = ll.Function(mod, fnty, name=sig.name)
    fn.attributes.add("nounwind")
    _name_args(fn, sig, 0)
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    _check_pointers(b, fn, sig, 0, _Guards(b))
    _check_lengths(b, fn, sig, 0, _Guards(b))
    _check_shapes(b, fn, sig, 0, _Guards(b))
    _check_alias(b, fn, sig, 0, _c(1), _Guards(b))
    b.ret(b.call(body, [*fn.args, _c(0), _c(1)]))
    return fn


def _name_args(fn: ll.Function, sig: abi.Signature, first: int) -> None:
    names = [n.split()[-1].lstrip("*") for p in sig.params for n in p.c_params()]
    names += [r.name for r in sig.results]
    for arg, name in zip(fn.args[first:], names, strict=True):
        arg.name = abi.local_name(name)


def _helper(mod: ll.Module, name: str) -> tuple[ll.Function, ll.IRBuilder | None]:
    """An internal `int64 name(void)`, and a builder at its entry if it is new."""
    if name in mod.globals:
        return mod.globals[name], None
    fn = ll.Function(mod, ll.FunctionType(I64, []), name=name)
    fn.linkage = "internal"
    return fn, ll.IRBuilder(fn.append_basic_block("entry"))


def _cores(mod: ll.Module) -> ll.Function:
    """int64 __vx_cores(void): CPUs in this thread's affinity mask (1 if unknown)."""
    fn, b = _helper(mod, "__vx_cores")
    if b is None:
        return fn
    words = MAX_CPUS // 64
    mask = b.alloca(ll.ArrayType(I64, words), name="mask")
    memset = _decl(mod, "llvm.memset.p0.i64", ll.VoidType(), [PTR, I8, I64, ll.IntType(1)])
    b.call(memset, [mask, _c(0, I8), _c(words * 8), _c(0, ll.IntType(1))])
    affinity = _decl(mod, "sched_getaffinity", I32, [I32, I64, PTR])
    rc = b.call(affinity, [_c(0, I32), _c(words * 8), mask])
    ctpop = _decl(mod, "llvm.ctpop.i64", I64, [I64])
    total = _c(0)
    for w in range(words):
        word = b.load(b.gep(mask, [_c(0), _c(w)], inbounds=True))  # a typed alloca
        total = b.add(total, b.call(ctpop, [word]))
    failed = b.or_(b.icmp_signed("!=", rc, _c(0, I32)), b.icmp_signed("<", total, _c(1)))
    b.ret(b.select(failed, _c(1), total))
    return fn


def _env_threads(mod: ll.Module) -> ll.Function:
    """int64 __vx_env_threads(void): VX_NUM_THREADS if a positive integer, else 0."""
    fn, b = _helper(mod, "__vx_env_threads")
    if b is None:
        return fn
    text = bytearray(ENV.encode() + b"\0")
    var = ll.GlobalVariable(mod, ll.ArrayType(I8, len(text)), name="__vx_env_name")
    var.initializer = ll.Constant(ll.ArrayType(I8, len(text)), text)
    var.global_constant = True
    var.linkage = "internal"
    value = b.call(_decl(mod, "getenv", PTR, [PTR]), [var])
    have = b.append_basic_block("have")
    none = b.append_basic_block("none")
    b.cbranch(b.icmp_unsigned("==", value, ll.Constant(PTR, None)), none, have)
    b.position_at_end(have)
    n = b.call(
        _decl(mod, "strtol", I64, [PTR, PTR, I32]), [value, ll.Constant(PTR, None), _c(10, I32)]
    )
    b.ret(b.select(b.icmp_signed(">", n, _c(0)), n, _c(0)))
    b.position_at_end(none)
    b.ret(_c(0))
    return fn


def define_launch(
    mod: ll.Module,
    sig: abi.Signature,
    fnty: ll.FunctionType,
    body: ll.Function,
    where: WhereCheck | None = None,
) -> ll.Function:
    """`K_launch(instances, threads, <params>, <outputs>)` and its pool worker; with the
    kernel's `where` check, the clauses are evaluated before the pool starts."""
    flat = list(fnty.args)
    nres = len(sig.results)
    # The shared launch record: next instance, count, lowest (instance << 8 | status) that
    # failed, then the kernel's C arguments.
    ctx_ty = ll.LiteralStructType([I64, I64, I64, *flat])
    worker = _worker(mod, sig, ctx_ty, body, len(flat), nres)

    launch = ll.Function(
        mod, ll.FunctionType(I32, [I64, I32, *flat]), name=sig.name + abi.LAUNCH_SUFFIX
    )
    launch.attributes.add("nounwind")
    n, threads = launch.args[0], launch.args[1]
    n.name, threads.name = "vx_instances", "vx_threads"
    _name_args(launch, sig, 2)
    b = ll.IRBuilder(launch.append_basic_block("entry"))
    guard = _Guards(b)
    guard(
        b.or_(b.icmp_signed("<", n, _c(1)), b.icmp_signed("<", threads, _c(0, I32))),
        "VX_ERR_LAUNCH",
    )
    _check_pointers(b, launch, sig, 2, guard)
    _check_lengths(b, launch, sig, 2, guard)
    _check_shapes(b, launch, sig, 2, guard)
    if where is not None:
        _check_where(b, where, launch.args[2:], n)
    # After the `where` clauses, which may bound N: each output's range is N results.
    _check_alias(b, launch, sig, 2, n, guard)

    ctx = b.alloca(ctx_ty, name="launch")

    def field(k: int) -> ll.Value:
        return b.gep(ctx, [_c(0, I32), _c(k, I32)], inbounds=True)  # a typed alloca

    b.store(_c(0), field(0))
    b.store(n, field(1))
    b.store(_c(NONE_BAD), field(2))
    for k, arg in enumerate(launch.args[2:]):
        b.store(arg, field(3 + k))

    # Pool size: the argument, else VX_NUM_THREADS, else the cores; at most the cores and N.
    cores = b.call(_cores(mod), [])
    asked = b.sext(threads, I64)
    env = b.call(_env_threads(mod), [])
    asked = b.select(b.icmp_signed("==", asked, _c(0)), env, asked)
    asked = b.select(b.icmp_signed("==", asked, _c(0)), cores, asked)
    size = b.select(b.icmp_signed("<", asked, cores), asked, cores)
    size = b.select(b.icmp_signed("<", size, n), size, n)

    extra = b.sub(size, _c(1))
    tids = b.alloca(I64, size=extra, name="tids")
    create = _decl(mod, "pthread_create", I32, [PTR, PTR, PTR, PTR])
    join = _decl(mod, "pthread_join", I32, [I64, PTR])

    def spawn(j: ll.Value, _c0: list) -> list:
        slot = b.gep(tids, [j], inbounds=True, source_etype=I64)
        rc = b.call(create, [slot, ll.Constant(PTR, None), worker, ctx])
        # A thread that could not be created is skipped: the others run its instances.
        b.store(b.select(b.icmp_signed("==", rc, _c(0, I32)), b.load(slot, typ=I64), _c(0)), slot)
        return []

    counted_loop(b, _c(0), extra, _c(1), spawn, name="spawn")
    b.call(worker, [ctx])

    def reap(j: ll.Value, _c0: list) -> list:
        tid = b.load(b.gep(tids, [j], inbounds=True, source_etype=I64), typ=I64)
        created = b.append_basic_block("join")
        after = b.append_basic_block("joined")
        b.cbranch(b.icmp_unsigned("!=", tid, _c(0)), created, after)
        b.position_at_end(created)
        b.call(join, [tid, ll.Constant(PTR, None)])
        b.branch(after)
        b.position_at_end(after)
        return []

    counted_loop(b, _c(0), extra, _c(1), reap, name="reap")
    bad = b.load(field(2), typ=I64)
    status = b.trunc(b.and_(bad, _c(0xFF)), I32)
    b.ret(b.select(b.icmp_unsigned("==", bad, _c(NONE_BAD)), _status("VX_OK"), status))
    return launch


class WhereCheck(Protocol):
    """A kernel's `where` clauses as a function of the body's arguments (lower.py)."""

    fn: ll.Function
    per_instance: bool  # the clauses read instance(): check every instance, not one


def _check_where(b: ll.IRBuilder, where: WhereCheck, args: list, n: ll.Value) -> None:
    """Refuse the launch with the lowest failing instance's status before any instance
    runs. Clauses that do not read instance() are the same for every instance: once."""
    if not where.per_instance:
        status = b.call(where.fn, [*args, _c(0), n])
        _Guards(b).status(b.icmp_signed("!=", status, _c(0, I32)), status)
        return

    def check(i: ll.Value, _c0: list) -> list:
        status = b.call(where.fn, [*args, i, n])
        _Guards(b).status(b.icmp_signed("!=", status, _c(0, I32)), status)
        return []

    counted_loop(b, _c(0), n, _c(1), check, name="where")


def _worker(
    mod: ll.Module,
    sig: abi.Signature,
    ctx_ty: ll.LiteralStructType,
    body: ll.Function,
    nflat: int,
    nres: int,
) -> ll.Function:
    """ptr worker(ptr launch): run instances from the shared counter until none are left."""
    fn = ll.Function(mod, ll.FunctionType(PTR, [PTR]), name=f"{sig.name}__vx_worker")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    ctx = fn.args[0]
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("next")
    run = fn.append_basic_block("run")
    done = fn.append_basic_block("done")
    b = ll.IRBuilder(entry)

    def field(k: int) -> ll.Value:
        return b.gep(ctx, [_c(0, I32), _c(k, I32)], inbounds=True, source_etype=ctx_ty)

    n = b.load(field(1), typ=I64)
    args = [b.load(field(3 + k), typ=ctx_ty.elements[3 + k]) for k in range(nflat)]
    b.branch(loop)
    b.position_at_end(loop)
    i = b.atomic_rmw("add", field(0), _c(1), "monotonic")
    b.cbranch(b.icmp_signed("<", i, n), run, done)
    b.position_at_end(run)
    outs = []
    for r, out in zip(sig.results, args[nflat - nres :], strict=True):
        offset = b.mul(i, _c(result_bytes(r)))
        outs.append(b.gep(out, [offset], inbounds=True, source_etype=I8))
    status = b.call(body, [*args[: nflat - nres], *outs, i, n])
    failed = b.append_basic_block("failed")
    b.cbranch(b.icmp_signed("!=", status, _c(0, I32)), failed, loop)
    b.position_at_end(failed)
    key = b.or_(b.shl(i, _c(8)), b.zext(b.and_(status, _c(0xFF, I32)), I64))
    b.atomic_rmw("umin", field(2), key, "monotonic")
    b.branch(loop)
    b.position_at_end(done)
    b.ret(ll.Constant(PTR, None))
    return fn
