"""Programs the b200 / h100 backends cannot lower, found by fuzzing (tests/fuzz): each
is a coded refusal (a diagnostic at the .vx line: exit 1), never an exception escaping
the backend."""

from __future__ import annotations

import pytest

from vxc import api, cli

TARGETS = ("b200", "h100")


def _build(target: str, name: str, text: str):
    return api.build(api.analyze([api.Source(name, text.encode())]), target)


def _refusal(target: str, name: str, text: str) -> str:
    result = _build(target, name, text)
    assert not result.ok and not result.outputs
    (d,) = result.diagnostics
    assert d.code == "E7004", d
    return f"{d.span.file}:{d.span.line}:{d.span.column}: {d.message}"


NEW_RESULT = """\
fn k() -> Tensor<{elem}, [{dims}]> on Topology::TensorCore {{
  let z = transfer(Tensor<{elem}>([{dims}]), Memory::VMEM);
  return transfer(z, Memory::HBM);
}}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("elem", ["f32", "bool"])
def test_returned_tile_that_is_not_2d_is_refused(target, elem):
    """A new 1-D tensor stored to HBM: the result's tensor map read `shape[1]`
    (IndexError) before any rule said the backends move 2-D tiles only."""
    msg = _refusal(target, "one_d.vx", NEW_RESULT.format(elem=elem, dims="128"))
    assert msg.startswith("one_d.vx:3:10: ") and "2-D static tiles" in msg, msg


@pytest.mark.parametrize("target", TARGETS)
def test_returned_tile_of_an_element_type_without_tma_is_refused_by_name(target):
    msg = _refusal(target, "i8.vx", NEW_RESULT.format(elem="i8", dims="8, 128"))
    assert msg.startswith("i8.vx:3:10: ") and "tiles of i8 are not supported" in msg, msg


def test_cli_prints_the_refusal_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "one_d.vx"
    path.write_text(NEW_RESULT.format(elem="f32", dims="128"))
    rc = cli.main(["build", str(path), "--target", "b200", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("error[E7004]: ") and f"  --> {path}:3:10\n" in err, err
    assert "Traceback" not in err and "internal compiler error" not in err, err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["vx.view", "vx.store"])
def test_a_region_the_checker_did_not_prove_is_refused(target, op):
    """proved = 0 (IR.md): the cpu checks the region at run time; a TMA box outside its
    tensor would be zero-filled or clipped silently, so the GPU backends refuse it."""
    from pathlib import Path

    from jaxlib.mlir import ir

    from vxc.backends.nvidia import ptx_text
    from vxc.backends.nvidia.lower import NvidiaError
    from vxc.targets import TARGETS as ALL

    src = Path(__file__).resolve().parents[3] / "kernels" / "gemm.vx"
    checked = api.check_target(api.analyze([api.Source(str(src), src.read_bytes())]), target)
    module = api.backend_module(checked)
    with module.context:
        hits = []
        module.operation.walk(lambda o: (hits.append(o) if o.name == op else None,
                                         ir.WalkResult.ADVANCE)[1])  # fmt: skip
        hits[-1].attributes["proved"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
    with pytest.raises(NvidiaError, match="could not prove inside its tensor") as e:
        ptx_text(module, ALL[target])
    assert e.value.code == "E7005"
