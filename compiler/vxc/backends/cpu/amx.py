"""`acc += a @ b` for bf16 operands on Intel AMX (AMX-TILE + AMX-BF16) as LLVM functions.

One `tdpbf16ps tmm_c, tmm_a, tmm_b` multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile
of B into a 16 x 16 f32 tile of C: 16 384 multiply-adds, about 1 024 FLOP per core and
cycle against 64 for two f32 FMAs (issue 34). The kernel here:

- configures the tiles once per call (`ldtilecfg`, palette 1: every tile 16 rows of 64
  bytes) and releases them at its end (`tilerelease`), so the tile state is not live
  between calls (the OS saves less at a context switch, and code between calls that
  does not know AMX never sees a configured state);
- keeps a 32 x 32 block of C in four accumulator tiles (tmm0-3) across the whole K loop,
  each K step of 32 loading two A tiles (tmm4-5, read in place with A's row stride: a
  row of 32 bf16 is 64 contiguous bytes) and two B tiles (tmm6-7), four `tdpbf16ps`;
- reads B in the VNNI pair layout `[K/2, N, 2]` (`matmul.define_pack`, once per call):
  `tdpbf16ps` takes row p of a B tile as 16 pairs (B[2p, j], B[2p+1, j]), so the 32 x 16
  tile at (k0, j0) is 16 rows of 64 bytes at pair row k0/2, column j0, stride 4N bytes.

The tile registers are named (the fixed-register intrinsics): the kernel's tile program is
small and fixed, so there is nothing for LLVM's tile register allocation to do.

Linux enables the tile data state per process only on request (`arch_prctl
(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); until then the first tile instruction
faults. `define_amx_ready` asks once per process (from whichever entry point runs a
matmul first: the C entry and `vxc.runtime` alike) and each call site branches on the
answer, so a refusal (an older kernel, a hypervisor that hides the state) runs the
vector path instead. `K__vx_amx()` tells the caller which one runs.
"""

from __future__ import annotations

from typing import Protocol

from llvmlite import ir as ll

from vxc.backends.cpu.loops import I64, counted_loop
from vxc.backends.cpu.matmul import matmul_function
from vxc.manifest import AMX_SUFFIX

I1, I8, I32 = ll.IntType(1), ll.IntType(8), ll.IntType(32)
PTR = ll.PointerType()
NAME = "__vx_matmul_acc_amx"
BLOCK = 32  # the C block of 2 x 2 tiles, and the K step (one tile of A is 16 x 32 bf16)
TILE_ROWS, TILE_BYTES = 16, 64  # every tile of the kernel (palette 1's largest)
C_TILES, A_TILES, B_TILES = (0, 1, 2, 3), (4, 5), (6, 7)  # C tile 2r + c is rows r, cols c
SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18
VARIANT_ENV = "VX_CPU_VARIANT"  # `amx` opts in to the AMX path; unset or else: the vector path
READY = "__vx_amx_ready"


def amx_fits(m: int, n: int, k: int) -> bool:
    """Whether a static `acc[m, n] += a[m, k] @ b[k, n]` is made of whole 32 x 32 blocks of C
    and whole K steps (edges run the vector path: a masked tile config per edge is not
    worth its code for the shapes kernels use)."""
    return m > 0 and n > 0 and k > 0 and m % BLOCK == 0 and n % BLOCK == 0 and k % BLOCK == 0


class TileOps(Protocol):
    """The tile instructions the kernel is written in; `AmxTiles` emits the real ones."""

    def configure(self, b: ll.IRBuilder) -> None: ...
    def load(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value) -> None: ...
    def dot(self, b: ll.IRBuilder, c: int, a: int, bt: int) -> None: ...
    def store(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value) -> None: ...
    def release(self, b: ll.IRBuilder) -> None: ...


def _declare(module: ll.Module, name: str, args: list[ll.Type]) -> ll.Function:
    if name in module.globals:
        return module.globals[name]
    return ll.Function(module, ll.FunctionType(ll.VoidType(), args), name=name)


def _tile_config(module: ll.Module) -> ll.GlobalVariable:
    """The 64-byte `ldtilecfg` operand: palette 1, then colsb (u16) of tiles 0-15 at byte 16,
    rows (u8) at byte 48; the kernel's eight tiles are all 16 rows of 64 bytes."""
    name = "__vx_amx_tilecfg"
    if name in module.globals:
        return module.globals[name]
    cfg = bytearray(64)
    cfg[0] = 1
    for t in C_TILES + A_TILES + B_TILES:
        cfg[16 + 2 * t : 18 + 2 * t] = TILE_BYTES.to_bytes(2, "little")
        cfg[48 + t] = TILE_ROWS
    ty = ll.ArrayType(I8, 64)
    var = ll.GlobalVariable(module, ty, name=name)
    var.initializer = ll.Constant(ty, cfg)
    var.global_constant = True
    var.linkage = "internal"
    var.align = 64
    return var


class AmxTiles:
    """The AMX instructions, on fixed tile registers."""

    def __init__(self, module: ll.Module):
        self.module = module

    def configure(self, b: ll.IRBuilder) -> None:
        b.call(_declare(self.module, "llvm.x86.ldtilecfg", [PTR]), [_tile_config(self.module)])

    def load(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value) -> None:
        fn = _declare(self.module, "llvm.x86.tileloadd64", [I8, PTR, I64])
        b.call(fn, [ll.Constant(I8, tile), ptr, stride])

    def dot(self, b: ll.IRBuilder, c: int, a: int, bt: int) -> None:
        fn = _declare(self.module, "llvm.x86.tdpbf16ps", [I8, I8, I8])
        b.call(fn, [ll.Constant(I8, c), ll.Constant(I8, a), ll.Constant(I8, bt)])

    def store(self, b: ll.IRBuilder, tile: int, ptr: ll.Value, stride: ll.Value) -> None:
        fn = _declare(self.module, "llvm.x86.tilestored64", [I8, PTR, I64])
        b.call(fn, [ll.Constant(I8, tile), ptr, stride])

    def release(self, b: ll.IRBuilder) -> None:
        b.call(_declare(self.module, "llvm.x86.tilerelease", []), [])


def _c(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


def _byte(b: ll.IRBuilder, base: ll.Value, offset: ll.Value) -> ll.Value:
    return b.gep(base, [offset], inbounds=True, source_etype=I8)


def _block(b: ll.IRBuilder, fn: ll.Function, ops: TileOps, i0: ll.Value, j0: ll.Value) -> None:
    """C[i0:i0+32, j0:j0+32] += A[i0:i0+32, :] @ B[:, j0:j0+32], C in tmm0-3 throughout."""
    acc, a, bp, _m, n, k = fn.args
    c_stride, a_stride = b.mul(n, _c(4)), b.mul(k, _c(2))  # f32 rows of C; bf16 rows of A
    b_stride = c_stride  # a pair row of B: N pairs of two bf16

    def c_at(r: int, col: int) -> ll.Value:
        row = b.add(i0, _c(16 * r))
        return _byte(b, acc, b.mul(b.add(b.mul(row, n), b.add(j0, _c(16 * col))), _c(4)))

    for t in C_TILES:
        ops.load(b, t, c_at(t // 2, t % 2), c_stride)

    def step(kk: ll.Value, _carried: list) -> list:
        for r, t in enumerate(A_TILES):  # rows i0 + 16r, elements kk .. kk + 32
            row = b.add(i0, _c(16 * r))
            ops.load(b, t, _byte(b, a, b.mul(b.add(b.mul(row, k), kk), _c(2))), a_stride)
        pair_row = b.sdiv(kk, _c(2))
        for col, t in enumerate(B_TILES):  # pair rows kk/2 .. kk/2 + 16, columns j0 + 16col
            word = b.add(b.mul(pair_row, n), b.add(j0, _c(16 * col)))
            ops.load(b, t, _byte(b, bp, b.mul(word, _c(4))), b_stride)
        for t in C_TILES:
            ops.dot(b, t, A_TILES[t // 2], B_TILES[t % 2])
        return []

    counted_loop(b, _c(0), k, _c(BLOCK), step, name="amx.k")
    for t in C_TILES:
        ops.store(b, t, c_at(t // 2, t % 2), c_stride)


def define_matmul_amx(
    module: ll.Module, ops: TileOps | None = None, name: str = NAME
) -> ll.Function:
    """void name(ptr acc_f32, ptr a_bf16, ptr b_pairs, i64 M, i64 N, i64 K), internal: A
    [M, K] row-major, B packed in pairs (`matmul.define_pack`), M, N and K `amx_fits`."""
    if name in module.globals:
        return module.globals[name]
    ops = ops or AmxTiles(module)
    fn, b = matmul_function(module, name)
    _acc, _a, _b, m, n, _k = fn.args
    ops.configure(b)

    def rows(i0: ll.Value, _c0: list) -> list:
        def cols(j0: ll.Value, _c1: list) -> list:
            _block(b, fn, ops, i0, j0)
            return []

        counted_loop(b, _c(0), n, _c(BLOCK), cols, name="amx.j")
        return []

    counted_loop(b, _c(0), m, _c(BLOCK), rows, name="amx.i")
    ops.release(b)
    b.ret_void()
    return fn


# ---- the OS permission -------------------------------------------------------------------
def _cstring(module: ll.Module, name: str, text: str) -> ll.GlobalVariable:
    if name in module.globals:
        return module.globals[name]
    data = bytearray(text.encode() + b"\0")
    var = ll.GlobalVariable(module, ll.ArrayType(I8, len(data)), name=name)
    var.initializer = ll.Constant(ll.ArrayType(I8, len(data)), data)
    var.global_constant = True
    var.linkage = "internal"
    return var


def _callee(module: ll.Module, name: str, ret: ll.Type, args: list[ll.Type], var_arg=False):
    if name in module.globals:
        return module.globals[name]
    return ll.Function(module, ll.FunctionType(ret, args, var_arg=var_arg), name=name)


GRANTED, REFUSED, FORCED_OFF = 1, 2, 3  # the process's answer, kept once asked (0: not yet)


def _wants_amx(b: ll.IRBuilder, module: ll.Module) -> ll.Value:
    """i1: VX_CPU_VARIANT says `amx`. The AMX path is opt-in until it has run on AMX
    hardware (it was written and checked on hosts without AMX, through the instructions'
    documented semantics: tests/e2e/test_amx.py); unset or any other value keeps the
    vector path, which is measured and tested everywhere."""
    getenv = _callee(module, "getenv", PTR, [PTR])
    value = b.call(getenv, [_cstring(module, "__vx_variant_env", VARIANT_ENV)])
    unset = b.icmp_unsigned("==", value, ll.Constant(PTR, None))
    before = b.block
    compare = b.append_basic_block("variant.set")
    join = b.append_basic_block("variant.known")
    b.cbranch(unset, join, compare)
    b.position_at_end(compare)
    strcmp = _callee(module, "strcmp", I32, [PTR, PTR])
    same = b.call(strcmp, [value, _cstring(module, "__vx_variant_amx", "amx")])
    named = b.icmp_signed("==", same, ll.Constant(I32, 0))
    b.branch(join)
    b.position_at_end(join)
    wants = b.phi(I1)
    wants.add_incoming(ll.Constant(I1, 0), before)
    wants.add_incoming(named, compare)
    return wants


def _ask(b: ll.IRBuilder, module: ll.Module) -> ll.Value:
    """GRANTED or REFUSED, the OS's answer to the tile data request; FORCED_OFF without
    asking when VX_CPU_VARIANT names another variant."""
    wants = _wants_amx(b, module)
    before = b.block
    request = b.append_basic_block("request")
    join = b.append_basic_block("answered")
    b.cbranch(wants, request, join)
    b.position_at_end(request)
    syscall = _callee(module, "syscall", I64, [I64], var_arg=True)
    rc = b.call(syscall, [_c(SYS_ARCH_PRCTL), _c(ARCH_REQ_XCOMP_PERM), _c(XFEATURE_XTILEDATA)])
    granted = b.icmp_signed("==", rc, _c(0))
    os_answer = b.select(granted, ll.Constant(I32, GRANTED), ll.Constant(I32, REFUSED))
    b.branch(join)
    b.position_at_end(join)
    answer = b.phi(I32)
    answer.add_incoming(ll.Constant(I32, FORCED_OFF), before)
    answer.add_incoming(os_answer, request)
    return answer


def _state(b: ll.IRBuilder, module: ll.Module) -> ll.Value:
    """The process's answer (GRANTED, REFUSED, FORCED_OFF), asked for on first use."""
    state = module.globals.get("__vx_amx_state")
    if state is None:
        state = ll.GlobalVariable(module, I32, name="__vx_amx_state")
        state.initializer = ll.Constant(I32, 0)
        state.linkage = "internal"
    known = b.load_atomic(state, "monotonic", 4, typ=I32)
    entry = b.block
    ask = b.append_basic_block("ask")
    done = b.append_basic_block("known")
    b.cbranch(b.icmp_signed("==", known, ll.Constant(I32, 0)), ask, done)
    b.position_at_end(ask)
    answer = _ask(b, module)
    b.store_atomic(answer, state, "monotonic", 4)
    asked = b.block
    b.branch(done)
    b.position_at_end(done)
    result = b.phi(I32)
    result.add_incoming(known, entry)
    result.add_incoming(answer, asked)
    return result


def define_amx_ready(module: ll.Module) -> ll.Function:
    """i1 READY(void), internal: whether this process runs tile instructions. Asked once per
    process (two threads racing to ask get the same answer: the request is idempotent);
    the answer is kept in an atomic word."""
    if READY in module.globals:
        return module.globals[READY]
    fn = ll.Function(module, ll.FunctionType(I1, []), name=READY)
    fn.linkage = "internal"
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.icmp_signed("==", _state(b, module), ll.Constant(I32, GRANTED)))
    return fn


def define_kernel_query(module: ll.Module, kernel: str) -> ll.Function:
    """int32_t K__vx_amx(void), exported: 1 if kernel K's AMX sites run on AMX in this
    process, 0 if the OS refused the tile state, -1 if VX_CPU_VARIANT chose another path
    (the vector path runs for both); asks first if nothing has."""
    fn = ll.Function(module, ll.FunctionType(I32, []), name=kernel + AMX_SUFFIX)
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    state = _state(b, module)
    code = b.select(
        b.icmp_signed("==", state, ll.Constant(I32, REFUSED)),
        ll.Constant(I32, 0),
        ll.Constant(I32, -1),
    )
    b.ret(
        b.select(b.icmp_signed("==", state, ll.Constant(I32, GRANTED)), ll.Constant(I32, 1), code)
    )
    return fn
