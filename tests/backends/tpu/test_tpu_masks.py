"""Bool, integer and index tiles on the TPU (backends/tpu/vregs.py): comparisons, `select`,
`iota`, `& | !`, i32 arithmetic, `.argmax/.argmin` and casts, run in the Mosaic
interpreter against numpy and compiled by libtpu for v5e and v6e (no TPU needed); the
forms of the Mosaic text the rules promise (masks in vregs, a bool tile's VMEM slot as
i8 0/1, no unordered `cmpf`) and the refusals (i64 tiles, bool tensors in HBM).
tests/e2e/test_tile_masks.py checks the same ops on every target."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import vxc
from vxc import api
from vxc.backends.tpu.interp import InterpError, run

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

ROWS, COLS = 64, 128
OUT = f"[0 .. {ROWS}, 0 .. {COLS}]"
HEAD = "fn k({args}) -> void on Topology::TensorCore where instances() == 1 {{\n{body}\n}}\n"
F = f"Tensor<f32, [{ROWS}, {COLS}]>"
N = f"Tensor<i32, [{ROWS}, {COLS}]>"

# The brief's kernel: a mask of a comparison and an iota selects; argmax into [64, 1].
EXAMPLE = HEAD.format(
    args=f"x: &{F}, o: &mut {F}, a: &mut Tensor<i32, [{ROWS}, 1]>",
    body=f"""  let t = transfer(x, Memory::VMEM);
  let col = iota::<i32>([{ROWS}, {COLS}], 1);
  transfer(select((t > 0.0) & (col < 100), t, -1.0), o{OUT});
  transfer(t.argmax(1), a[0 .. {ROWS}, 0 .. 1]);""",
)


def _build(src: str, **kw):
    return api.build(api.analyze([api.Source("k.vx", src.encode())]), "tpu", **kw)


def _mosaic(src: str) -> str:
    r = _build(src, emit="target-ir")
    assert r.ok, [d.message for d in r.diagnostics]
    return r.outputs["k.tpu.mosaic.mlir"].decode()


def _kernel(args: str, body: str):
    return vxc.compile(HEAD.format(args=args, body=body), target="tpu", interpret=True)


def _data(seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((ROWS, COLS)).astype(np.float32)
    x[1, 7] = x[1, 9] = np.nan
    x[2, :] = 0.5  # ties
    x[3, 3], x[3, 100] = np.inf, -np.inf
    x[:, 50] = x[:, 51]
    return x


def test_the_example_kernel_matches_numpy_with_a_64x1_index_result():
    x = _data(0)
    o, a = np.zeros_like(x), np.zeros((ROWS, 1), np.int32)
    vxc.compile(EXAMPLE, target="tpu", interpret=True).launch(x, o, a, instances=1)
    col = np.arange(COLS)[None, :]
    np.testing.assert_array_equal(o, np.where((x > 0) & (col < 100), x, np.float32(-1)))
    np.testing.assert_array_equal(a[:, 0], np.argmax(x, axis=1))


def test_masks_stay_in_vregs_and_no_unordered_predicate_is_emitted():
    """libtpu lowers no `uno`/`une` cmpf: `!=` and isnan are a negated `oeq`."""
    src = HEAD.format(
        args=f"x: &{F}, o: &mut {F}",
        body=f"""  let t = transfer(x, Memory::VMEM);
  transfer(cast::<f32>((t != 1.0) | !(t == t)) + cast::<f32>(t.argmin(0)), o{OUT});""",
    )
    text = _mosaic(src)
    assert "vector<64x128xi1>" in text and "tpu.iota" in text
    assert "arith.xori" in text and "memref<64x128xi1" not in text
    assert " uno," not in text and " une," not in text
    assert "vector.multi_reduction <minsi>" in text


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_each_comparison_of_bf16_tiles_and_f32_scalars_nan_included(op):
    args = f"x: &Tensor<bf16, [{ROWS}, {COLS}]>, y: &Tensor<bf16, [{ROWS}, {COLS}]>, o: &mut {F}"
    body = f"""  let a = transfer(x, Memory::VMEM);
  let b = transfer(y, Memory::VMEM);
  transfer(cast::<f32>(a {op} b) + cast::<f32>(a {op} 0.5) * 2.0, o{OUT});"""
    x = _data(1).astype(ml_dtypes.bfloat16)
    y = np.roll(_data(2), 1, axis=1).astype(ml_dtypes.bfloat16)
    y[::3] = x[::3]
    o = np.zeros((ROWS, COLS), np.float32)
    _kernel(args, body).launch(x, y, o, instances=1)
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    f = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
         "==": np.equal, "!=": np.not_equal}[op]  # fmt: skip
    want = f(xf, yf).astype(np.float32) + f(xf, np.float32(0.5)).astype(np.float32) * 2
    np.testing.assert_array_equal(o, want)


def test_select_with_scalar_and_tile_branches_and_a_broadcast_condition():
    args = f"x: &{F}, o: &mut {F}, p: &mut {F}"
    body = f"""  let t = transfer(x, Memory::VMEM);
  let row = iota::<i32>([{ROWS}, {COLS}], 0);
  let c = t.sum(1) > 0.0;
  transfer(select(c, 3.0, t), o{OUT});
  transfer(select((row >= 8) & !(row == 20), select(c, t, -t), 7.0), p{OUT});"""
    x = _data(3)
    x[1] = 1.0  # finite row sums everywhere but row 3 (inf - inf)
    o, p = np.zeros_like(x), np.zeros_like(x)
    _kernel(args, body).launch(x, o, p, instances=1)
    with np.errstate(invalid="ignore"):  # row 3: inf - inf
        c = x.sum(1, keepdims=True, dtype=np.float32) > 0
    row = np.arange(ROWS)[:, None]
    np.testing.assert_array_equal(o, np.where(c, np.float32(3), x))
    keep = (row >= 8) & (row != 20)
    np.testing.assert_array_equal(p, np.where(keep, np.where(c, x, -x), np.float32(7)))


def test_i32_tiles_wrap_and_reduce_in_i32():
    args = f"x: &{N}, o: &mut {N}, s: &mut Tensor<i32, [1, {COLS}]>"
    body = f"""  let v = transfer(x, Memory::VMEM);
  transfer(-(v * 3 + 5) + select(v < 0, -v, v) - max(v, iota::<i32>([{ROWS}, {COLS}], 1)), o{OUT});
  transfer(v.sum(0) + v.min(0) - v.max(0) + v.argmax(0), s[0 .. 1, 0 .. {COLS}]);"""
    rng = np.random.default_rng(4)
    x = rng.integers(-(2**31), 2**31, (ROWS, COLS), dtype=np.int64).astype(np.int32)
    x[:4, :8] = [[-(2**31)], [2**31 - 1], [0], [-1]]
    x[10:12, 100] = 2**31 - 1  # a tie for the column's max
    o, s = np.zeros_like(x), np.zeros((1, COLS), np.int32)
    _kernel(args, body).launch(x, o, s, instances=1)
    with np.errstate(over="ignore"):
        col = np.arange(COLS, dtype=np.int32)[None, :]
        want = -(x * np.int32(3) + np.int32(5)) + np.abs(x) - np.maximum(x, col)
        red = (x.sum(0, dtype=np.int32) + x.min(0) - x.max(0) + np.argmax(x, 0)).astype(np.int32)
    np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(s[0], red)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argmax_and_argmin_take_the_first_extreme_or_the_first_nan(fn, axis):
    shape = f"[{ROWS}, 1]" if axis == 1 else f"[1, {COLS}]"
    region = f"[0 .. {ROWS}, 0 .. 1]" if axis == 1 else f"[0 .. 1, 0 .. {COLS}]"
    args = f"x: &{F}, r: &mut Tensor<i32, {shape}>"
    body = f"""  let t = transfer(x, Memory::VMEM);
  transfer(t.{fn}({axis}), r{region});"""
    x = _data(5)
    x[40:, 60] = np.nan
    x[:, 70] = -np.inf
    x[:, 71] = np.inf
    r = np.zeros((ROWS, 1) if axis == 1 else (1, COLS), np.int32)
    _kernel(args, body).launch(x, r, instances=1)
    np.testing.assert_array_equal(r.ravel(), getattr(np, fn)(x, axis=axis))


def test_casts_saturate_truncate_and_give_nan_zero():
    args = f"x: &{F}, i: &mut {N}, f: &mut {F}"
    body = f"""  let t = transfer(x, Memory::VMEM);
  transfer(cast::<i32>(t), i{OUT});
  transfer(cast::<f32>(t >= 0.0) + cast::<f32>(cast::<i32>(t)), f{OUT});"""
    x = _data(6) * np.float32(1e9)
    x[7, :8] = [3.0e9, -3.0e9, 2.5, -2.5, 2.0**31, -(2.0**31), np.inf, -np.inf]
    x[8, :2] = [2147483520.0, -2147483520.0]
    i, f = np.zeros((ROWS, COLS), np.int32), np.zeros((ROWS, COLS), np.float32)
    _kernel(args, body).launch(x, i, f, instances=1)
    v = np.nan_to_num(x.astype(np.float64), nan=0.0)
    want = np.trunc(np.clip(v, -(2.0**31), 2.0**31 - 1)).astype(np.int32)
    np.testing.assert_array_equal(i, want)
    np.testing.assert_array_equal(f, (x >= 0).astype(np.float32) + want.astype(np.float32))


def test_i64_tiles_and_bool_tensors_in_hbm_are_refused_with_e7004():
    i64 = HEAD.format(
        args=f"o: &mut {F}",
        body=f"  transfer(cast::<f32>(iota::<i64>([{ROWS}, {COLS}], 1) * 2), o{OUT});",
    )
    r = _build(i64, emit="target-ir")
    assert [d.code for d in r.diagnostics] == ["E7004"], [d.message for d in r.diagnostics]
    assert "i64" in r.diagnostics[0].message
    hbm = HEAD.format(
        args=f"x: &{F}, o: &mut Tensor<bool, [{ROWS}, {COLS}]>",
        body=f"  let t = transfer(x, Memory::VMEM);\n  transfer(t > 0.0, o{OUT});",
    )
    r = _build(hbm, emit="target-ir")
    assert [d.code for d in r.diagnostics] == ["E7004"], [d.message for d in r.diagnostics]
    assert "bool" in r.diagnostics[0].message


def test_the_interpreter_reports_an_fptosi_out_of_range():
    """`arith.fptosi` of NaN or an out-of-range value is undefined: the rules saturate
    first, and the interpreter holds any other emitter to it."""
    text = """module {
  func.func @k(%arg0: i32, %arg1: memref<8x128xf32, #tpu.memory_space<vmem>>,
               %arg2: memref<8x128xi32, #tpu.memory_space<vmem>>) attributes {
      dimension_semantics = [#tpu.dimension_semantics<parallel>],
      iteration_bounds = array<i64: 1>, scalar_prefetch = 0 : i64, scratch_operands = 0 : i64,
      tpu.core_type = #tpu.core_type<tc>, window_params = [{}, {}]} {
    %c0 = arith.constant 0 : index
    %0 = vector.load %arg1[%c0, %c0] : memref<8x128xf32, #tpu.memory_space<vmem>>, vector<8x128xf32>
    %1 = arith.fptosi %0 : vector<8x128xf32> to vector<8x128xi32>
    tpu.vector_store %arg2[%c0, %c0], %1 {strides = array<i32>} : memref<8x128xi32, #tpu.memory_space<vmem>>, vector<8x128xi32>,
    return
  }
}
"""
    x = np.zeros((8, 128), np.float32)
    x[0, 0] = 3e9
    with pytest.raises(InterpError, match="out of the i32 range"):
        run(text, [x], ["x"])


@pytest.mark.slow
@pytest.mark.parametrize("topo", ["v5e", "v6e"])
def test_libtpu_compiles_comparisons_select_iota_argmax_and_casts(topo):
    """What libtpu accepts: the example kernel, and one with every new form (bf16 and
    i32 compares, and/or/not, a broadcast mask, integer reductions, argmin over rows,
    the saturating cast, a bool tile's i8 slot)."""
    r = _build(EXAMPLE, tpu_aot=topo)
    assert r.ok, [d.message for d in r.diagnostics]
    every = HEAD.format(
        args=f"x: &{F}, y: &Tensor<bf16, [{ROWS}, {COLS}]>, o: &mut {F}, p: &mut {N}",
        body=f"""  let t = transfer(x, Memory::VMEM);
  let b = transfer(y, Memory::VMEM);
  let row = iota::<i32>([{ROWS}, {COLS}], 0);
  let c = (t.max(1) >= 0.0) | !(b != 0.5);
  let n = cast::<i32>(t * 1e9) * 3 + row;
  transfer(select(c, cast::<f32>(b <= 1.0), t) + cast::<f32>(n.argmin(0)), o{OUT});
  transfer(-n + n.sum(1) + n.max(0) - n.min(1) + t.argmax(1), p{OUT});""",
    )
    r = _build(every, tpu_aot=topo)
    assert r.ok, [d.message for d in r.diagnostics]


# -- vx IR the frontend does not write (yet): `abs` of an i32 tile, a bool scalar, a
# select between bool tiles, and a bool tile a DMA reads (a VMEM-to-VMEM copy), whose
# ring slot is i8 0/1.


def _hbm(shape: str, e: str) -> str:
    return f'memref<{shape}x{e}, "HBM">'


def _vmem(shape: str, e: str) -> str:
    return f'memref<{shape}x{e}, "VMEM">'


def _ir_kernel(params: list[tuple[str, str, str, bool]], body: str) -> str:
    args = ", ".join(
        f'%{n}: {_hbm(s, e)} {{{"vx.mut, " if m else ""}vx.name = "{n}"}}' for n, s, e, m in params
    )
    return f"""module attributes {{vx.target = "tpu"}} {{
  func.func @k({args}) attributes {{vx.launch = "instances", vx.topology = "TensorCore"}} {{
    %i0 = "vx.instances"() : () -> i64
    %c1_i64 = arith.constant 1 : i64
    %i1 = arith.cmpi eq, %i0, %c1_i64 : i64
    "vx.require"(%i1) {{clause = "instances() == 1"}} : (i1) -> ()
    %c0 = arith.constant 0 : index
{body}    return
  }}
}}
"""


class _Rings:
    def __init__(self):
        self.n = 10

    def __call__(self, nbytes: int = 32768, **kw) -> str:
        self.n += 1
        extra = "".join(f"{k} = {v}, " for k, v in kw.items())
        return (
            f"{{{extra}offset = 0 : i64, ring = {self.n} : i64, slot_bytes = {nbytes} : i64, "
            'slots = 1 : i64, space = "VMEM"}'
        )


def _copy(dst: str, src: str, t: str, ring: int, nbytes: int, src_t: str | None = None) -> str:
    within = "HBM" if src_t else "VMEM"
    return (
        f'    %{dst} = "vx.transfer"(%{src}) {{capacity = 134217728 : i64, edge_cost = 50 : i64, '
        f'from = "{within}", granule = 4096 : i64, offset = 0 : i64, ring = {ring} : i64, '
        f'scope = "subcore", slot_bytes = {nbytes} : i64, slots = 1 : i64, space = "VMEM", '
        f'within = "{within}"}} : ({src_t or t}) -> {t}\n'
    )


def _store(v: str, shape: str, e: str, arg: str) -> str:
    return (
        f'    "vx.store"(%{v}, %{arg}, %c0, %c0) {{disjoint = 1 : i64, edge_cost = 50 : i64, '
        "edge_view = 0 : i64, "
        f'from = "VMEM", proved = 1 : i64, space = "HBM"}} : ({_vmem(shape, e)}, '
        f"{_hbm(shape, e)}, index, index) -> ()\n"
    )


def _ir_every_form() -> str:
    S = "64x128"
    F, B, N, BF = (_vmem(S, e) for e in ("f32", "i1", "i32", "bf16"))
    B1, R, C = _vmem("64x1", "i1"), _vmem("1x128", "i32"), _vmem("64x1", "f32")
    A = _Rings()
    params = [("x", S, "f32", False), ("y", S, "i32", False), ("o", S, "f32", True),
              ("p", S, "i32", True), ("q", "1x128", "i32", True)]  # fmt: skip
    body = _copy("x0", "x", F, 0, 32768, _hbm(S, "f32"))
    body += _copy("y0", "y", N, 1, 32768, _hbm(S, "i32"))
    body += f"""    %k3 = arith.constant 3 : i32
    %s1 = "vx.binary"(%y0, %k3) {A(fn='"mul"')} : ({N}, i32) -> {N}
    %s2 = "vx.binary"(%s1, %y0) {A(fn='"add"')} : ({N}, {N}) -> {N}
    %s3 = "vx.unary"(%s2) {A(fn='"abs"')} : ({N}) -> {N}
    %s4 = "vx.binary"(%s3, %y0) {A(fn='"max"')} : ({N}, {N}) -> {N}
    %s5 = "vx.unary"(%s4) {A(fn='"neg"')} : ({N}) -> {N}
    %xs = "vx.reduce"(%x0) {A(fn='"max"', axis="1 : i64")} : ({F}) -> {C}
    %zc = arith.constant 0.0 : f32
    %rowpos = "vx.compare"(%xs, %zc) {A(fn='"ge"')} : ({C}, f32) -> {B1}
    %ne = "vx.compare"(%x0, %x0) {A(fn='"ne"')} : ({F}, {F}) -> {B}
    %nn = "vx.unary"(%ne) {A(fn='"not"')} : ({B}) -> {B}
    %fa = arith.constant false
    %m3 = "vx.binary"(%nn, %fa) {A(fn='"or"')} : ({B}, i1) -> {B}
    %bsel = "vx.select"(%rowpos, %m3, %ne) {A(8192)} : ({B1}, {B}, {B}) -> {B}
"""
    body += _copy("mc", "bsel", B, 50, 8192)
    body += f"""    %mf = "vx.cast"(%mc) {A()} : ({B}) -> {F}
    %xi = "vx.cast"(%x0) {A()} : ({F}) -> {N}
    %dif = "vx.binary"(%xi, %s5) {A(fn='"sub"')} : ({N}, {N}) -> {N}
    %yb = "vx.cast"(%y0) {A()} : ({N}) -> {BF}
    %cb = arith.constant 2.0 : f32
    %yc = "vx.compare"(%yb, %cb) {A(fn='"le"')} : ({BF}, f32) -> {B}
    %yi = "vx.cast"(%yc) {A()} : ({B}) -> {N}
    %tot = "vx.binary"(%dif, %yi) {A(fn='"add"')} : ({N}, {N}) -> {N}
    %ib = "vx.cast"(%yi) {A()} : ({N}) -> {F}
    %of = "vx.binary"(%mf, %ib) {A(fn='"add"')} : ({F}, {F}) -> {F}
    %amn = "vx.reduce"(%y0) {A(fn='"argmin"', axis="0 : i64")} : ({N}) -> {R}
    %io0 = "vx.iota"() {A(axis="0 : i64")} : () -> {N}
    %ssum = "vx.reduce"(%io0) {A(fn='"sum"', axis="0 : i64")} : ({N}) -> {R}
    %smin = "vx.reduce"(%y0) {A(fn='"min"', axis="0 : i64")} : ({N}) -> {R}
    %q1 = "vx.binary"(%amn, %ssum) {A(fn='"add"')} : ({R}, {R}) -> {R}
    %q2 = "vx.binary"(%q1, %smin) {A(fn='"add"')} : ({R}, {R}) -> {R}
    %tot2 = "vx.binary"(%tot, %io0) {A(fn='"add"')} : ({N}, {N}) -> {N}
"""
    body += _store("of", S, "f32", "o") + _store("tot2", S, "i32", "p")
    return _ir_kernel(params, body + _store("q2", "1x128", "i32", "q"))


def _compile_ir(text: str, aot: tuple[str, ...] = ()) -> str:
    from vxc.backends.tpu import compile_module
    from vxc.ir import parse_module
    from vxc.ir.context import make_context

    ctx = make_context()
    with ctx:  # (vx.reduce's verifier builds its i32 type from the default context)
        out = compile_module(parse_module(text, context=ctx), "k", aot=aot)
    return out["k.tpu.mosaic.mlir"].decode()


def test_every_form_from_vx_ir_incl_a_bool_tile_in_an_i8_vmem_slot():
    text = _compile_ir(_ir_every_form())
    # The copied bool tile: its slot (and the copy's) is i8 0/1, stored and read back.
    assert text.count("memref<64x128xi8, #tpu.memory_space<vmem>>") >= 2
    assert "arith.trunci" in text and "arith.extsi" in text
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((ROWS, COLS)) * 4e9).astype(np.float32)
    x[:3] *= 1e-9
    x[2, 5] = np.nan
    x[10] = -np.abs(x[10])
    y = rng.integers(-(2**31), 2**31, (ROWS, COLS), dtype=np.int64).astype(np.int32)
    y[:8] = rng.integers(-3, 6, (8, COLS))
    outs = [np.zeros((ROWS, COLS), np.float32), np.zeros((ROWS, COLS), np.int32)]
    r = run(text, [x, y, *outs, np.zeros((1, COLS), np.int32)], ["x", "y", "o", "p", "q"])
    o, p, q = r.outputs
    with np.errstate(all="ignore"):
        s5 = -np.maximum(np.abs(y * np.int32(3) + y), y)
        v = np.nan_to_num(x.astype(np.float64), nan=0.0)
        xi = np.trunc(np.clip(v, -(2.0**31), 2.0**31 - 1)).astype(np.int32)
        ne = np.isnan(x)
        bsel = np.where(np.max(x, 1, keepdims=True) >= 0, ~ne, ne)
        yb = y.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
        yi = (yb <= 2).astype(np.int32)
        row = np.broadcast_to(np.arange(ROWS, dtype=np.int32)[:, None], (ROWS, COLS))
        np.testing.assert_array_equal(o, bsel.astype(np.float32) + yi)
        np.testing.assert_array_equal(p, xi - s5 + yi + row)
        want = np.argmin(y, 0) + row.sum(0) + y.min(0)
        np.testing.assert_array_equal(q[0], want.astype(np.int32))


@pytest.mark.slow
@pytest.mark.parametrize("topo", ["v5e", "v6e"])
def test_libtpu_compiles_every_form_from_vx_ir(topo):
    assert "vector<64x128xi1>" in _compile_ir(_ir_every_form(), (topo,))


# An online argmax over column tiles: a mask, an i32 index and an f32 carried by a loop
# (Mosaic carries no i1 vector through scf.for: a mask crosses as i32 0/1).
LOOP = """fn k(x: &Tensor<f32, [8, 512]>, o: &mut Tensor<i32, [8, 128]>,
     p: &mut Tensor<f32, [8, 128]>) -> void on Topology::TensorCore where instances() == 1 {
  let mut best = Tensor<f32>([8, 1]) - 1e30;
  let mut arg = Tensor<i32>([8, 1]);
  let mut seen = Tensor<f32>([8, 128]) > 1.0;
  for c in 0 .. 4 {
    let t = transfer(x[0 .. 8, c * 128 .. c * 128 + 128], Memory::VMEM);
    let m = t.max(1);
    let better = m > best;
    arg = select(better, t.argmax(1) + cast::<i32>(c * 128), arg);
    best = select(better, m, best);
    seen = seen | (t > 2.0);
  }
  transfer(Tensor<i32>([8, 128]) + arg, o[0 .. 8, 0 .. 128]);
  transfer(cast::<f32>(seen), p[0 .. 8, 0 .. 128]);
}
"""


def test_a_loop_carries_a_mask_and_a_running_argmax():
    assert "vector<8x128xi32>" in _mosaic(LOOP)
    x = np.random.default_rng(8).standard_normal((8, 512)).astype(np.float32)
    x[3, 300] = x[3, 20] = 9.0  # a tie across tiles: the first one wins
    o, p = np.zeros((8, 128), np.int32), np.zeros((8, 128), np.float32)
    vxc.compile(LOOP, target="tpu", interpret=True).launch(x, o, p, instances=1)
    np.testing.assert_array_equal(o, np.broadcast_to(np.argmax(x, 1)[:, None], (8, 128)))
    np.testing.assert_array_equal(p, (x.reshape(8, 4, 128) > 2).any(1).astype(np.float32))


@pytest.mark.slow
def test_libtpu_compiles_the_loop_carrying_a_mask():
    r = _build(LOOP, tpu_aot="v5e")
    assert r.ok, [d.message for d in r.diagnostics]
