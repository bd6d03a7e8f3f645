"""The vx dialect: the seed kernel verifies, prints/parses stably, builders
produce the contract form, and every op's verifier rejects type errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, func, scf

from vxc.ir import (
    OPS,
    BuildError,
    IRParseError,
    IRVerificationError,
    docs,
    make_context,
    parse_module,
    print_module,
    verify_module,
)
from vxc.ir import builders as B
from vxc.ir import types as T

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
SEED = (DATA / "stream.vx.mlir").read_text()


def test_seed_verifies():
    module = parse_module(SEED, verify=False)
    assert verify_module(module) == []


@pytest.mark.parametrize("fixture", ["stream.vx.mlir", "stream_blocking.vx.mlir"])
def test_round_trip_is_stable(fixture):
    text = print_module(parse_module((DATA / fixture).read_text()))
    again = print_module(parse_module(text))
    assert again == text
    assert '"vx.transfer_async"' in text or '"vx.transfer"' in text
    assert 'vx.target = "cpu"' in text


def test_round_trip_with_locations():
    module = parse_module(SEED)
    text = print_module(module, debug_info=True)
    assert "loc(" in text
    assert print_module(parse_module(text), debug_info=True) == text


def _attrs(**kw):
    base = dict(within="HBM", capacity=2097152, granule=4096, scope="device", edge_cost=50)
    base.update(kw)
    return base


def build_seed() -> str:
    """The seed kernel through the Python builders; must print as the fixture does."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["vx.target"] = ir.StringAttr.get("cpu")
        tile = T.memref_type([128, 128], "f32", "HBM")
        vec = T.memref_type([None, 128, 128], "f32", "HBM")
        vtile = T.memref_type([128, 128], "f32", "VMEM")
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("stream", ([vec, tile], [tile]))
            f.attributes["vx.topology"] = ir.StringAttr.get("TensorCore")
            f.arg_attrs = ir.ArrayAttr.get(
                [ir.DictAttr.get({"vx.name": ir.StringAttr.get(n)}) for n in ("tiles", "w")]
            )
            entry = f.add_entry_block()
        tiles, w = entry.arguments
        ring0 = _attrs(space="VMEM", offset=0, slots=2, ring=0)
        with ir.InsertionPoint(entry):
            wv = B.transfer(w, **_attrs(space="VMEM", offset=131072, ring=1)).result
            acc = B.zeros(vtile, offset=196608, ring=2, slot_bytes=65536).result
            c0 = arith.ConstantOp(ir.IndexType.get(), 0).result
            c1 = arith.ConstantOp(ir.IndexType.get(), 1).result
            t0 = B.element(tiles, c0).result
            tok0 = B.transfer_async(t0, **ring0).result
            n = B.len_(tiles).result
            loop = scf.ForOp(c1, n, c1, [tok0])
            with ir.InsertionPoint(loop.body):
                ti = B.element(tiles, loop.induction_variable).result
                nxt = B.transfer_async(ti, **ring0).result
                cur = B.wait(loop.inner_iter_args[0]).result
                B.matmul_acc(acc, cur, wv)
                scf.YieldOp([nxt])
            last = B.wait(loop.results[0]).result
            B.matmul_acc(acc, last, wv)
            out = B.transfer(acc, **_attrs(space="HBM", within="", capacity=0, granule=0)).result
            func.ReturnOp([out])
        assert verify_module(module) == []
        return print_module(module)


def test_builders_produce_the_contract_form():
    assert build_seed() == print_module(parse_module(SEED))


def test_every_op_has_a_builder_helper():
    helpers = {"vx.len": B.len_, "vx.zeros": B.zeros}
    for name in OPS:
        helper = helpers.get(name) or getattr(B, name.split(".", 1)[1])
        assert callable(helper) and helper.__doc__


def test_builder_rejects_bad_calls():
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("f", ([T.memref_type([4, 4], "f32", "HBM")], []))
            entry = f.add_entry_block()
        with ir.InsertionPoint(entry):
            with pytest.raises(BuildError, match="unknown attribute"):
                B.transfer(entry.arguments[0], space="VMEM", colour="red")
            with pytest.raises(BuildError, match="expects 1 operand"):
                B.build("vx.transfer", [], space="VMEM")
            with pytest.raises(BuildError, match="unknown vx op"):
                B.build("vx.nope", [])


# --- verifier: one type error per op ------------------------------------------------

_SIG = (
    '%t: memref<128x128xf32, "HBM">, %v: memref<128x128xf32, "VMEM">, '
    '%s: memref<128x128xf32, "SMEM">, %vec: memref<?x128x128xf32, "HBM">, '
    '%h: memref<128x128xf16, "VMEM">, %x: memref<64x32xf32, "VMEM">, '
    '%tok: !vx.token<memref<128x128xf32, "VMEM">>, %i: index, %j: i64, %flag: i1, '
    '%big: memref<?x?xf32, "HBM">, %f: f32, %small: memref<100x128xf32, "HBM">'
)
_ALLOC = "offset = 0 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = 0 : i64"
_XFER = (
    'from = "HBM", within = "HBM", capacity = 2097152 : i64, granule = 4096 : i64, '
    'scope = "device", edge_cost = 50 : i64'
)
_T = 'memref<128x128xf32, "HBM">'
_BIG = 'memref<?x?xf32, "HBM">'
_STORE = 'space = "HBM", from = "VMEM", edge_cost = 50 : i64, proved = 1 : i64, disjoint = 1 : i64, edge_view = 0 : i64'
_STORE_SMEM = _STORE.replace('space = "HBM"', 'space = "SMEM"')
_V = 'memref<128x128xf32, "VMEM">'
_TILE = "offset = 0 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = -1 : i64"
_TOK = f"!vx.token<{_V}>"


def _module(body: str) -> ir.Module:
    text = f"""module attributes {{vx.target = "cpu"}} {{
  func.func @k({_SIG}) attributes {{vx.topology = "TensorCore"}} {{
    {body}
    return
  }}
}}"""
    return parse_module(text, verify=False)


def _xfer(space: str, alloc: str = _ALLOC, xfer: str = _XFER) -> str:
    return f'space = "{space}", {xfer}, {alloc}'


BAD = {
    "transfer-space": ("vx.transfer", f'%r = "vx.transfer"(%t) {{{_xfer("SMEM")}}} : ({_T}) -> {_V}', "memory space"),
    "transfer-from": ("vx.transfer", f'%r = "vx.transfer"(%s) {{{_xfer("VMEM")}}} : (memref<128x128xf32, "SMEM">) -> {_V}', 'from "HBM"'),
    "transfer-shape": ("vx.transfer", f'%r = "vx.transfer"(%t) {{{_xfer("VMEM")}}} : ({_T}) -> memref<64x32xf32, "VMEM">', "shape and element type"),
    "transfer-slot": ("vx.transfer", f'%r = "vx.transfer"(%t) {{{_xfer("VMEM", _ALLOC.replace("65536", "4096"))}}} : ({_T}) -> {_V}', "slot_bytes 4096"),
    "transfer-granule": ("vx.transfer", f'%r = "vx.transfer"(%t) {{{_xfer("VMEM", _ALLOC.replace("offset = 0", "offset = 100"))}}} : ({_T}) -> {_V}', "granule"),
    "transfer-capacity": ("vx.transfer", f'%r = "vx.transfer"(%t) {{{_xfer("VMEM", _ALLOC.replace("slots = 1", "slots = 64"))}}} : ({_T}) -> {_V}', "exceeds the capacity"),
    "transfer-attr-type": ("vx.transfer", f'%r = "vx.transfer"(%t) {{{_xfer("VMEM").replace("edge_cost = 50 : i64", "edge_cost = 5.0 : f32")}}} : ({_T}) -> {_V}', "edge_cost"),
    "transfer-missing": ("vx.transfer", f'%r = "vx.transfer"(%t) {{space = "VMEM"}} : ({_T}) -> {_V}', "missing attribute"),
    "async-not-token": ("vx.transfer_async", f'%r = "vx.transfer_async"(%t) {{{_xfer("VMEM")}}} : ({_T}) -> {_V}', "token"),
    "async-space": ("vx.transfer_async", f'%r = "vx.transfer_async"(%t) {{{_xfer("SMEM")}}} : ({_T}) -> {_TOK}', "memory space"),
    "wait-operand": ("vx.wait", f'%r = "vx.wait"(%v) : ({_V}) -> {_V}', "operand 'token'"),
    "wait-result": ("vx.wait", f'%r = "vx.wait"(%tok) : ({_TOK}) -> memref<128x128xf32, "SMEM">', "token's tensor type"),
    "matmul-shape": ("vx.matmul_acc", f'"vx.matmul_acc"(%v, %x, %v) {{transpose = ""}} : ({_V}, memref<64x32xf32, "VMEM">, {_V}) -> ()', "do not agree"),
    "matmul-element": ("vx.matmul_acc", f'"vx.matmul_acc"(%v, %h, %v) {{transpose = ""}} : ({_V}, memref<128x128xf16, "VMEM">, {_V}) -> ()', "element type"),
    "matmul-acc-f16": ("vx.matmul_acc", f'"vx.matmul_acc"(%h, %v, %v) {{transpose = ""}} : (memref<128x128xf16, "VMEM">, {_V}, {_V}) -> ()', "f32"),
    "matmul-token": ("vx.matmul_acc", f'"vx.matmul_acc"(%v, %tok, %v) {{transpose = ""}} : ({_V}, {_TOK}, {_V}) -> ()', "operand 'a'"),
    "matmul-transpose": ("vx.matmul_acc", f'"vx.matmul_acc"(%v, %v, %v) {{transpose = "ba"}} : ({_V}, {_V}, {_V}) -> ()', "transpose must be one of"),
    "matmul-transposed-shape": ("vx.matmul_acc", f'"vx.matmul_acc"(%v, %x, %v) {{transpose = "a"}} : ({_V}, memref<64x32xf32, "VMEM">, {_V}) -> ()', "do not agree"),
    "zeros-space": ("vx.zeros", f'%r = "vx.zeros"() {{space = "SMEM", {_ALLOC}}} : () -> {_V}', "memory space"),
    "zeros-dynamic": ("vx.zeros", f'%r = "vx.zeros"() {{space = "VMEM", {_ALLOC}}} : () -> memref<?x128xf32, "VMEM">', "static shape"),
    "element-index": ("vx.element", f'%r = "vx.element"(%vec, %j) {{proved = 0 : i64}} : (memref<?x128x128xf32, "HBM">, i64) -> {_T}', "operand 'i'"),
    "element-tile": ("vx.element", f'%r = "vx.element"(%vec, %i) {{proved = 0 : i64}} : (memref<?x128x128xf32, "HBM">, index) -> {_V}', "one tile"),
    "len-token": ("vx.len", f'%r = "vx.len"(%tok) : ({_TOK}) -> index', "operand 'vec'"),
    "len-result": ("vx.len", '%r = "vx.len"(%vec) : (memref<?x128x128xf32, "HBM">) -> i64', "result 'n'"),
    "instance-type": ("vx.instance", '%r = "vx.instance"() : () -> i32', "result 'index'"),
    "instance-operand": ("vx.instance", '%r = "vx.instance"(%j) : (i64) -> i64', "expects 0 operand"),
    "instances-type": ("vx.instances", '%r = "vx.instances"() : () -> index', "result 'count'"),
    "instances-attr": ("vx.instances", '%r = "vx.instances"() {axis = 0 : i64} : () -> i64', "unknown attribute"),
    "require-type": ("vx.require", '"vx.require"(%j) {clause = "n < 4"} : (i64) -> ()', "operand 'cond'"),
    "require-clause": ("vx.require", '"vx.require"(%flag) : (i1) -> ()', "missing attribute 'clause'"),
    "view-offsets": ("vx.view", f'%r = "vx.view"(%big, %i) {{proved = 1 : i64}} : ({_BIG}, index) -> {_T}', "offset(s)"),
    "view-too-big": ("vx.view", f'%r = "vx.view"(%t, %i, %i) {{proved = 1 : i64}} : ({_T}, index, index) -> memref<256x128xf32, "HBM">', "exceeds"),
    "view-space": ("vx.view", f'%r = "vx.view"(%big, %i, %i) {{proved = 1 : i64}} : ({_BIG}, index, index) -> {_V}', "element type and space"),
    "view-proved": ("vx.view", f'%r = "vx.view"(%big, %i, %i) {{proved = 2 : i64}} : ({_BIG}, index, index) -> {_T}', "proved must be 0 or 1"),
    "edge-view-fill": ("vx.edge_view", f'%r = "vx.edge_view"(%big, %j, %i, %i) {{proved = 1 : i64}} : ({_BIG}, i64, index, index) -> {_T}', "the fill i64 must be the tensor's element type f32"),
    "edge-view-rank": ("vx.edge_view", f'%r = "vx.edge_view"(%big, %f, %i) {{proved = 1 : i64}} : ({_BIG}, f32, index) -> {_T}', "offset(s)"),
    "store-edge-view": ("vx.store", f'"vx.store"(%v, %big, %i, %i) {{{_STORE.replace("edge_view = 0", "edge_view = 2")}}} : ({_V}, {_BIG}, index, index) -> ()', "edge_view must be 0 or 1"),
    "store-past-the-end": ("vx.store", f'"vx.store"(%v, %small, %i, %i) {{{_STORE}}} : ({_V}, memref<100x128xf32, "HBM">, index, index) -> ()', "exceeds"),
    "store-space": ("vx.store", f'"vx.store"(%v, %big, %i, %i) {{{_STORE_SMEM}}} : ({_V}, {_BIG}, index, index) -> ()', "output memory space"),
    "store-from": ("vx.store", f'"vx.store"(%s, %big, %i, %i) {{{_STORE}}} : (memref<128x128xf32, "SMEM">, {_BIG}, index, index) -> ()', 'from "VMEM"'),
    "store-offset-type": ("vx.store", f'"vx.store"(%v, %big, %j, %i) {{{_STORE}}} : ({_V}, {_BIG}, i64, index) -> ()', "operand 'offsets'"),
    "store-element": ("vx.store", f'"vx.store"(%h, %big, %i, %i) {{{_STORE}}} : (memref<128x128xf16, "VMEM">, {_BIG}, index, index) -> ()', "element type"),
    "store-async-token": ("vx.store_async", f'%r = "vx.store_async"(%v, %big, %i, %i) {{{_STORE}}} : ({_V}, {_BIG}, index, index) -> {_TOK}', "the tile's region"),
    "binary-broadcast": ("vx.binary", f'%r = "vx.binary"(%v, %x) {{fn = "add", space = "VMEM", {_TILE}}} : ({_V}, memref<64x32xf32, "VMEM">) -> {_V}', "does not broadcast"),
    "binary-space": ("vx.binary", f'%r = "vx.binary"(%v, %s) {{fn = "add", space = "VMEM", {_TILE}}} : ({_V}, memref<128x128xf32, "SMEM">) -> {_V}', "E6044"),
    "binary-fn": ("vx.binary", f'%r = "vx.binary"(%v, %v) {{fn = "pow", space = "VMEM", {_TILE}}} : ({_V}, {_V}) -> {_V}', "fn must be one of"),
    "binary-no-tile": ("vx.binary", f'%r = "vx.binary"(%f, %f) {{fn = "add", space = "VMEM", {_TILE}}} : (f32, f32) -> {_V}', "at least one operand must be a tile"),
    "binary-element": ("vx.binary", f'%r = "vx.binary"(%h, %f) {{fn = "mul", space = "VMEM", {_TILE}}} : (memref<128x128xf16, "VMEM">, f32) -> {_V}', "element type f32"),
    "binary-fn-elements": ("vx.binary", f'%r = "vx.binary"(%v, %v) {{fn = "and", space = "VMEM", {_TILE}}} : ({_V}, {_V}) -> {_V}', "fn and takes bool elements"),
    "compare-result": ("vx.compare", f'%r = "vx.compare"(%v, %f) {{fn = "lt", space = "VMEM", {_TILE}}} : ({_V}, f32) -> {_V}', "must be an i1 tile"),
    "select-cond": ("vx.select", f'%r = "vx.select"(%v, %v, %f) {{space = "VMEM", {_TILE}}} : ({_V}, {_V}, f32) -> {_V}', "must be an i1 tile"),
    "iota-element": ("vx.iota", f'%r = "vx.iota"() {{axis = 0 : i64, space = "VMEM", {_TILE}}} : () -> {_V}', "i32 or i64 tile"),
    "reduce-argmax-index": ("vx.reduce", f'%r = "vx.reduce"(%v) {{fn = "argmax", axis = 1 : i64, space = "VMEM", {_TILE}}} : ({_V}) -> memref<128x1xf32, "VMEM">', "of i32"),
    "unary-shape": ("vx.unary", f'%r = "vx.unary"(%v) {{fn = "exp", space = "VMEM", {_TILE}}} : ({_V}) -> memref<64x32xf32, "VMEM">', "shape and element type"),
    "reduce-axis": ("vx.reduce", f'%r = "vx.reduce"(%v) {{fn = "sum", axis = 2 : i64, space = "VMEM", {_TILE}}} : ({_V}) -> memref<128x1xf32, "VMEM">', "axis 2"),
    "reduce-keeps-axis": ("vx.reduce", f'%r = "vx.reduce"(%v) {{fn = "max", axis = 1 : i64, space = "VMEM", {_TILE}}} : ({_V}) -> memref<1x128xf32, "VMEM">', "reduced to 1"),
    "cast-shape": ("vx.cast", f'%r = "vx.cast"(%v) {{space = "VMEM", {_TILE}}} : ({_V}) -> memref<64x32xf16, "VMEM">', "shape of"),
    "transpose-shape": ("vx.transpose", f'%r = "vx.transpose"(%x) {{space = "VMEM", {_TILE}}} : (memref<64x32xf32, "VMEM">) -> memref<64x32xf32, "VMEM">', "transposed"),
    "unknown-op": ("vx.frobnicate", f'"vx.frobnicate"(%v) : ({_V}) -> ()', "is not a vx op"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_verifier_rejects(case):
    op, body, fragment = BAD[case]
    errors = verify_module(_module(body))
    assert errors, f"{case}: no error"
    assert any(e.op == op for e in errors), errors
    text = "\n".join(str(e) for e in errors)
    assert fragment in text
    assert f"'{op}' op" in text and "loc(" in text  # names the op and its location


def test_every_op_has_a_negative_case():
    assert {op for op, _, _ in BAD.values()} >= set(OPS)


def test_good_ops_pass():
    body = "\n    ".join(
        [
            f'%a = "vx.transfer"(%t) {{{_xfer("VMEM")}}} : ({_T}) -> {_V}',
            f'%b = "vx.transfer_async"(%t) {{{_xfer("VMEM", _ALLOC.replace("ring = 0", "ring = 1"))}}} : ({_T}) -> {_TOK}',
            f'%c = "vx.wait"(%b) : ({_TOK}) -> {_V}',
            f'"vx.matmul_acc"(%a, %c, %v) {{transpose = ""}} : ({_V}, {_V}, {_V}) -> ()',
            f'%z = "vx.zeros"() {{space = "VMEM", {_ALLOC.replace("ring = 0", "ring = 2")}}} : () -> {_V}',
            f'%e = "vx.element"(%vec, %i) {{proved = 0 : i64}} : (memref<?x128x128xf32, "HBM">, index) -> {_T}',
            '%n = "vx.len"(%vec) : (memref<?x128x128xf32, "HBM">) -> index',
            '%k = "vx.instance"() : () -> i64',
            '%m = "vx.instances"() : () -> i64',
            '"vx.require"(%flag) {clause = "instances() <= 4"} : (i1) -> ()',
            f'%w = "vx.view"(%big, %i, %i) {{proved = 1 : i64}} : ({_BIG}, index, index) -> {_T}',
            f'"vx.store"(%v, %big, %i, %i) {{{_STORE}}} : ({_V}, {_BIG}, index, index) -> ()',
            # an `edge` view and an `edge` store may reach past the tensor's end
            f'%ev = "vx.edge_view"(%small, %f, %i, %i) {{proved = 1 : i64}} : (memref<100x128xf32, "HBM">, f32, index, index) -> {_T}',
            f'"vx.store"(%v, %small, %i, %i) {{{_STORE.replace("edge_view = 0", "edge_view = 1")}}} : ({_V}, memref<100x128xf32, "HBM">, index, index) -> ()',
            f'%st = "vx.store_async"(%v, %big, %i, %i) {{{_STORE}}} : ({_V}, {_BIG}, index, index) -> !vx.token<{_T}>',
            f'%t0 = "vx.binary"(%v, %f) {{fn = "max", space = "VMEM", {_TILE}}} : ({_V}, f32) -> {_V}',
            f'%t1 = "vx.reduce"(%t0) {{fn = "sum", axis = 1 : i64, space = "VMEM", {_TILE}}} : ({_V}) -> memref<128x1xf32, "VMEM">',
            f'%t2 = "vx.binary"(%t0, %t1) {{fn = "sub", space = "VMEM", {_TILE}}} : ({_V}, memref<128x1xf32, "VMEM">) -> {_V}',
            f'%t3 = "vx.unary"(%t2) {{fn = "exp", space = "VMEM", {_TILE}}} : ({_V}) -> {_V}',
            f'%t4 = "vx.cast"(%t3) {{space = "VMEM", {_TILE}}} : ({_V}) -> memref<128x128xbf16, "VMEM">',
            f'%t5 = "vx.transpose"(%x) {{space = "VMEM", {_TILE}}} : (memref<64x32xf32, "VMEM">) -> memref<32x64xf32, "VMEM">',
        ]
    )
    assert verify_module(_module(body)) == []


def test_ring_layout_must_agree():
    a = f'%a = "vx.transfer"(%t) {{{_xfer("VMEM")}}} : ({_T}) -> {_V}'
    b = f'%b = "vx.transfer"(%t) {{{_xfer("VMEM", _ALLOC.replace("offset = 0", "offset = 65536"))}}} : ({_T}) -> {_V}'
    errors = verify_module(_module(a + "\n    " + b))
    assert len(errors) == 1 and "ring 0 layout" in errors[0].message


def test_structural_errors_are_reported_not_raised():
    # MLIR's own verifier (here: func.return type mismatch) feeds verify_module.
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("k", ([T.memref_type([4], "f32", "VMEM")], [ir.IndexType.get()]))
            entry = f.add_entry_block()
        with ir.InsertionPoint(entry):
            func.ReturnOp([entry.arguments[0]])
        errors = verify_module(module)
    assert errors and errors[0].op == "func.return" and "result type" in errors[0].message


def test_structural_errors_in_text_are_parse_errors():
    # MLIR verifies while parsing: a mistyped scf.yield never becomes a module.
    text = f"""module {{
  func.func @k(%v: {_V}, %n: index) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %v) -> ({_V}) {{
      scf.yield %i : index
    }}
    return
  }}
}}"""
    with pytest.raises(IRParseError, match="scf.for"):
        parse_module(text)


def test_parse_error_is_clear():
    with pytest.raises(IRParseError, match="cannot parse vx-MLIR"):
        parse_module("module { func.func @f( }")


def test_docs_match_the_table():
    assert (ROOT / "docs" / "IR.md").read_text() == docs.render()
    for name, d in OPS.items():
        assert f"## `{name}`" in docs.render() and d.doc in docs.render()


def test_parse_module_raises_on_vx_errors():
    bad = SEED.replace(
        '"vx.wait"(%inflight) : (!vx.token', '"vx.wait"(%inflight) {x = 1} : (!vx.token'
    )
    assert bad != SEED
    with pytest.raises(IRVerificationError, match="'vx.wait' op unknown attribute 'x'") as info:
        parse_module(bad)
    assert len(info.value.errors) == 1


def test_ring_minus_one_ignores_offset():
    # With no ring the offset is meaningless, so a non-granule offset is no error.
    alloc = _ALLOC.replace("ring = 0", "ring = -1").replace("offset = 0", "offset = 100")
    body = f'%a = "vx.transfer"(%t) {{{_xfer("VMEM", alloc)}}} : ({_T}) -> {_V}'
    assert verify_module(_module(body)) == []


def test_mutated_modules_give_errors_never_crashes():
    # Swap types, attribute values and op names inside the seed at random: the
    # only outcomes allowed are a verified module or one of our two error types.
    rng = random.Random(1234)
    words = ["f32", "f16", "i64", "index", '"VMEM"', '"HBM"', '"SMEM"', "128", "?", "-1", "0"]
    lines = SEED.splitlines()
    outcomes = set()
    for _ in range(150):
        mutated = list(lines)
        i = rng.randrange(len(mutated))
        line = mutated[i]
        for w in rng.sample(words, 3):
            if w in line:
                line = line.replace(w, rng.choice(words), 1)
        mutated[i] = line
        try:
            parse_module("\n".join(mutated))
            outcomes.add("ok")
        except IRParseError:
            outcomes.add("parse")
        except IRVerificationError as e:
            assert all(err.op and err.location for err in e.errors)
            outcomes.add("verify")
    assert {"parse", "verify"} <= outcomes
