"""The backend contract (vxc/backends/__init__.py, walk.py; vxc/ir/ops.py's views):

- every op of the vx op table is lowered or refused (with a code) by every backend,
- a backend is handed its `Target` record and its family's options dataclass,
- a refusal is a coded diagnostic at the op's source line (exit 1), never exit 2,
- the typed views and the ring layout read the op table's attributes,
- no backend rule compares a target's name: the arch record says what differs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vxc import api, cli
from vxc.backends import Backend, RefusalEntry, backend
from vxc.diagnostics.codes import CODES
from vxc.ir import OPS, parse_module, verify_module
from vxc.ir.ops import VIEWS, OpDef, TransferAsyncOp, TransferOp, ring_layout
from vxc.targets import OPTIONS, TARGETS

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = sorted({t.family for t in TARGETS.values()})


def uncovered(ops: dict[str, OpDef], backends: list[Backend]) -> list[tuple[str, str]]:
    """(backend family, op) pairs where the backend neither lowers nor refuses the op."""
    return [(b.family, name) for b in backends for name in ops if not b.covers(name)]


def test_every_op_is_lowered_or_refused_by_every_backend():
    backends = [backend(f) for f in FAMILIES]
    assert [b.family for b in backends] == FAMILIES
    assert uncovered(OPS, backends) == []
    for b in backends:
        for name, entry in b.refusals.items():
            assert isinstance(entry, RefusalEntry) and entry.code in CODES, (b.family, name)


def test_a_new_op_without_a_rule_or_refusal_is_reported(monkeypatch):
    """Adding an OPS row is not done until each backend has a rule or a refusal entry."""
    new = OpDef("vx.fresh", "a new op", (), (), (), lambda op: [], lambda ts, a: [], "none")
    ops = {**OPS, new.name: new}
    backends = [backend(f) for f in FAMILIES]
    assert uncovered(ops, backends) == [(f, "vx.fresh") for f in FAMILIES]
    tpu = backend("tpu")
    monkeypatch.setitem(tpu.refusals, "vx.fresh", RefusalEntry("E7001", "not on the tpu"))
    assert ("tpu", "vx.fresh") not in uncovered(ops, backends)


def test_each_backend_takes_its_family_options():
    for family in FAMILIES:
        b = backend(family)
        assert b.options is OPTIONS[family]
        with pytest.raises(TypeError, match=f"{b.options.__name__}"):
            b.emit(None, TARGETS["cpu"], object(), "k", "target-ir")


def test_the_nvidia_arch_record_is_what_differs():
    h, b = TARGETS["h100"].arch, TARGETS["b200"].arch
    assert (h.acc_space, h.mma, h.sm) == ("REG", "wgmma", "sm_90a")
    assert (b.acc_space, b.mma, b.sm) == ("TMEM", "tcgen05", "sm_100a")
    assert h.capability == (9, 0) and b.capability == (10, 0)
    assert h.mma_sass in h.sass and b.mma_sass in b.sass


def test_no_backend_rule_compares_target_names():
    names = "|".join(TARGETS)
    pattern = re.compile(rf"""(target|\.name)\s*[!=]=\s*["']({names})["']""")
    bad = []
    for path in sorted((ROOT / "compiler" / "vxc" / "backends").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert bad == []


def _build_json(path: Path, target: str, capsys) -> tuple[int, list[dict]]:
    capsys.readouterr()
    rc = cli.main(["build", str(path), "--target", target, "--error-format", "json"])
    err = capsys.readouterr().err
    return rc, [json.loads(line) for line in err.splitlines() if line]


@pytest.mark.parametrize("target", ["tpu", "h100"])
def test_seed_extern_call_is_a_json_diagnostic_at_the_call(target, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    rc, diags = _build_json(Path("kernels/seed.vx"), target, capsys)
    assert rc == 1
    (d,) = diags
    assert d["code"] == "E7002" and d["severity"] == "error"
    assert (d["file"], d["line"], d["column"]) == ("kernels/seed.vx", 10, 5)
    assert "call to" in d["message"] and "matmul_acc" in d["message"]
    assert not re.match(r"\S+:\d+:\d+: ", d["message"]), "the span is data, not text"


def test_a_refusal_is_a_diagnostic_of_api_build():
    src = api.Source("kernels/seed.vx", (ROOT / "kernels" / "seed.vx").read_bytes())
    result = api.build(api.analyze([src]), "tpu", emit="target-ir")
    assert not result.ok and result.outputs == {}
    (d,) = result.diagnostics
    assert (d.code, d.span.line) == ("E7002", 10)
    text = api.render(result.diagnostics, [src])
    assert "error[E7002]" in text and "10 |     matmul_acc(cur);" in text


def test_a_module_is_built_only_for_the_target_it_was_planned_for():
    from vxc.backends import emit_target
    from vxc.ir.from_hir import lower_program

    src = api.Source("kernels/stream.vx", (ROOT / "kernels" / "stream.vx").read_bytes())
    checked = api.check_target(api.analyze([src]), "tpu")
    module = lower_program(checked.analysis.program, checked.plan)
    with pytest.raises(ValueError, match="planned for `tpu` handed to the `cpu` build"):
        emit_target("cpu", module, "stream", "target-ir", {})
    assert emit_target("tpu", module, "stream", "target-ir", {})  # its own target builds


def test_vxc_explain_knows_the_refusal_codes(capsys):
    for code in (c for c in CODES if c.startswith("E70")):
        assert cli.main(["explain", code]) == 0
        assert capsys.readouterr().out.startswith(f"{code} (error): {CODES[code].title}")


MODULE = """module attributes {vx.target = "cpu"} {
  func.func @k(%a: memref<4xf32, "HBM"> {vx.name = "a"}) -> memref<4xf32, "HBM"> {
    %t = "vx.transfer_async"(%a) {space = "VMEM", from = "HBM", within = "", capacity = 0,
      granule = 0, offset = 64, slots = 2, slot_bytes = 16, ring = 3, scope = "sm",
      edge_cost = 1} : (memref<4xf32, "HBM">) -> !vx.token<memref<4xf32, "VMEM">>
    %v = "vx.wait"(%t) : (!vx.token<memref<4xf32, "VMEM">>) -> memref<4xf32, "VMEM">
    %h = "vx.transfer"(%v) {space = "HBM", from = "VMEM", within = "", capacity = 0,
      granule = 0, offset = 0, slots = 1, slot_bytes = 16, ring = -1, scope = "device",
      edge_cost = 1} : (memref<4xf32, "VMEM">) -> memref<4xf32, "HBM">
    return %h : memref<4xf32, "HBM">
  }
}"""


def _ops(module, name):
    out = []
    module.operation.walk(lambda op: (out.append(op) if op.name == name else None) or 0)
    return out


def test_typed_views_read_the_table_attributes():
    module = parse_module(MODULE)
    with module.context:
        (op,) = _ops(module, "vx.transfer_async")
        t = TransferAsyncOp(op)
        assert (t.space, t.from_, t.slots, t.offset, t.ring, t.scope) == (
            "VMEM", "HBM", 2, 64, 3, "sm",
        )  # fmt: skip
        assert t.src == op.operands[0] and t.token == op.results[0]
        lay = ring_layout(op)
        assert (lay.ring, lay.space, lay.end, lay.shared) == (3, "VMEM", 96, True)
        assert set(VIEWS) == set(OPS)
        with pytest.raises(TypeError, match="views vx.transfer, not vx.transfer_async"):
            TransferOp(op)


CALL = """module attributes {{vx.target = "cpu"}} {{
  func.func private @h(%a: memref<4xf32, "HBM">) -> memref<4xf32, "VMEM">
  func.func @k(%a: memref<4xf32, "HBM">) {{
    %r = func.call @h(%a) {{{attrs}}} : (memref<4xf32, "HBM">) -> memref<4xf32, "VMEM">
    return
  }}
}}"""


def test_call_placement_attributes_are_verified():
    """`func.call`'s placement attributes are in the op table and checked: all or none,
    and the slot holds the result."""
    full = 'space = "VMEM", ring = 0, offset = 0, slots = 2, slot_bytes = 16'
    assert verify_module(parse_module(CALL.format(attrs=full), verify=False)) == []
    assert verify_module(parse_module(CALL.format(attrs=""), verify=False)) == []
    partial = verify_module(
        parse_module(CALL.format(attrs='space = "VMEM", ring = 0'), verify=False)
    )
    assert any("all or none" in e.message for e in partial), partial
    small = full.replace("slot_bytes = 16", "slot_bytes = 8")
    errs = verify_module(parse_module(CALL.format(attrs=small), verify=False))
    assert any("smaller than the tensor" in e.message for e in errs), errs


def test_a_rule_sees_only_its_backends_rule_surface(monkeypatch):
    """Rules get a RuleContext, not the lowering: a rule that reaches for a planning or
    driving member (here the cpu function lowering's `run`) fails naming it."""
    from vxc.backends.cpu import lower as cpu_lower
    from vxc.backends.nvidia.lower import FunctionLowering as Nvidia
    from vxc.backends.tpu.lower import FunctionLowering as Tpu

    for cls in (cpu_lower.FunctionLowering, Tpu, Nvidia):
        assert cls.rule_surface and not {"run", "plan_op", "declare", "prologue"} & (
            cls.rule_surface
        ), cls

    def bad(ctx, op):
        ctx.run()

    monkeypatch.setitem(cpu_lower.RULES, "vx.len", bad)
    src = api.Source("kernels/stream.vx", (ROOT / "kernels" / "stream.vx").read_bytes())
    with pytest.raises(AttributeError, match=r"may not use `run`: it is not in the rule surface"):
        api.build(api.analyze([src]), "cpu", emit="target-ir")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_member_a_rule_uses_is_in_its_rule_surface(family):
    """Read statically from each backend's rules (the functions in its RULES table): a
    member a rule reads off its context must be in the backend's rule_surface, or the
    rule fails the first time a kernel reaches it."""
    import ast
    import importlib

    lowering = importlib.import_module(f"vxc.backends.{family}.lower").FunctionLowering
    names = {getattr(r, "__name__", "") for r in lowering.rules.values()} | {"_arith"}
    path = ROOT / "compiler" / "vxc" / "backends" / family / "lower.py"
    used = set()
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, ast.FunctionDef) and fn.name in names and fn.args.args:
            ctx = fn.args.args[0].arg
            used |= {
                n.attr
                for n in ast.walk(fn)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == ctx
            }  # fmt: skip
    assert used - lowering.rule_surface - {"lower_block"} == set()


UNARY_KERNEL = """fn k(m: i64, x: &Tensor<{e}, [m, 128]>, y: &mut Tensor<{e}, [m, 128]>) -> void
    on Topology::TensorCore where m % 8 == 0, instances() == m / 8 {{
  let r = instance() * 8;
  let a = transfer(x[r .. r + 8, 0 .. 128], Memory::VMEM);
  transfer({f}, y[r .. r + 8, 0 .. 128]);
}}
"""


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
@pytest.mark.parametrize("elem", ["f32", "bf16"])
def test_every_unary_kind_is_lowered_by_every_backend(target, elem):
    """vx.unary's kinds (one table, TILE_FNS) each build on every target, f32 and bf16:
    a kind a backend neither lowers nor refuses with a code would fail here, not in a
    user's build."""
    from vxc.ir.ops import TILE_FNS

    spelled = {"neg": "-a", "not": "select(!(a > 0.0), a, 0.0)"}  # `!` is on bool tiles
    for fn in TILE_FNS["vx.unary"]:
        expr = spelled.get(fn, f"{fn}(a)")
        src = api.Source("k.vx", UNARY_KERNEL.format(e=elem, f=expr).encode())
        result = api.build(api.analyze([src]), target, emit="target-ir")
        assert result.ok, (fn, [(d.code, d.message) for d in result.diagnostics])


def test_the_unary_tables_of_the_tpu_and_nvidia_name_every_kind():
    from vxc.backends.nvidia import tiles as nvidia_tiles
    from vxc.backends.tpu import vregs
    from vxc.ir.ops import TILE_FNS

    kinds = set(TILE_FNS["vx.unary"])
    assert set(vregs.UNARY) == kinds and set(nvidia_tiles.UNARY) == kinds
