"""Issue 25: programs that checked clean and then failed to build with an internal error.

Each reproducer is now a diagnostic of `vxc check`, on every target, and `vxc build` (which
checks first) refuses it with the same code and exit 1: check and build agree (a clean check
that does not build would be a failure of this test)."""

from __future__ import annotations

import re

import pytest

from vxc import cli

TARGETS = ("cpu", "tpu", "b200", "h100")
STREAM = "kernels/stream.vx"

TOKEN_READ = (
    "fn f(tiles: Vec<Tensor<f32,[32,32]>>, w: Tensor<f32,[32,32]>) -> void "
    "on Topology::TensorCore {where} {{ let mut acc = Tensor<f32>([32,32]); "
    "let wv = transfer(w, Memory::VMEM); let cur = transfer_async(tiles[0], Memory::VMEM); "
    "{read} let done = wait(cur); }}\n"
)
MOVER = (
    "Memory S {{ within: Memory::HBM, capacity: 228 KB, granule: {granule} }}\n"
    "Topology Mover {{ memory: Memory::S, visible: [Memory::S, Memory::HBM], "
    "transfer Memory::HBM -> Memory::S : 1 }}\n"
    "extern fn use(a: &Tensor<f32, [{n}]>) -> void on Topology::Mover;\n"
    "fn f(a: &Tensor<f32, [{n}]>) -> void on Topology::Mover "
    "{{ let x = transfer(a, Memory::S); use(&x); }}\n"
)

# name -> (program, --machine model or None, the code check and build must report)
CASES = {
    "zero_size_tile": (
        "fn z(w: &Tensor<f32, [8, 128]>) -> void on Topology::TensorCore {\n"
        "  let m = transfer(Tensor<f32>([0, 128]), Memory::VMEM);\n}\n",
        None,
        "E0402",
    ),
    "zero_size_parameter": ("fn z(w: &Tensor<f32, [128, 0]>) -> void { }\n", None, "E0402"),
    "zero_size_const_instance": (
        "fn g<const N: i64>() -> void { let t = Tensor<f32>([N, 8]); }\n"
        "fn f() -> void { g::<0>(); }\n",
        None,
        "E0402",
    ),
    "negative_const_instance": (
        "fn g<const N: i64>() -> void { let t = Tensor<f32>([N, 8]); }\n"
        "fn f() -> void { g::<-3>(); }\n",
        None,
        "E0402",
    ),
    "granule_over_capacity": (
        STREAM,
        "Memory VMEM{within:Memory::CPU_DRAM,capacity:228KB,granule:1MB}\n",
        "E6013",
    ),
    "granule_i64_max": (
        STREAM,
        "Memory VMEM{within:Memory::CPU_DRAM,capacity:228KB,granule:9223372036854775807B}\n",
        "E6013",
    ),
    "granule_without_capacity_past_i64": (
        STREAM,
        "Memory VMEM{within:Memory::CPU_DRAM,granule:4611686018427387904B}\n",
        "E6014",
    ),
    # 210 KiB fits 228 KiB, but the 200 KiB granule rounds its slot up to 400 KiB.
    "granule_rounds_a_tile_past_capacity": (
        MOVER.format(granule="200 KB", n=210 * 256),
        None,
        "E6009",
    ),
    "where_false": (
        TOKEN_READ.format(where="where false", read="matmul_acc(&mut acc, cur, wv);"),
        None,
        "E0403",
    ),
    "where_one_above_two": (
        TOKEN_READ.format(where="where 1 > 2", read="matmul_acc(&mut acc, &wv, &wv);"),
        None,
        "E0403",
    ),
    "where_no_instances": (
        TOKEN_READ.format(where="where instances() < 1", read="matmul_acc(&mut acc, &wv, &wv);"),
        None,
        "E0403",
    ),
    "where_negative_length": (
        TOKEN_READ.format(
            where="where instances() <= 4, tiles.len() < 0",
            read="matmul_acc(&mut acc, &wv, &wv);",
        ),
        None,
        "E0403",
    ),
    "where_i8_out_of_range": (
        "fn f(x: i8) -> void where x > 200 { }\n",
        None,
        "E0403",
    ),
    # The read is on a path the solver proves infeasible: no E6004, still never a tensor.
    "token_read_on_an_infeasible_path": (
        TOKEN_READ.format(
            where="where tiles.len() <= 512",
            read="if tiles.len() > 600 { matmul_acc(&mut acc, cur, wv); }",
        ),
        None,
        "E0404",
    ),
}


def _run(args: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli.main(args)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_check_and_build_report_the_same_code(name, target, tmp_path, capsys):
    program, model, code = CASES[name]
    if program == STREAM:
        from clirun import ROOT

        src = ROOT / STREAM
    else:
        src = tmp_path / f"{name}.vx"
        src.write_text(program)
    extra = []
    if model is not None:
        (tmp_path / "model.vx").write_text(model)
        extra = ["--machine", str(tmp_path / "model.vx")]
    rc, err = _run(["check", "--target", target, *extra, str(src)], capsys)
    assert (rc, code) == (1, *re.findall(rf"error\[({code})\]", err)[:1]), err[-3000:]
    out = tmp_path / "out"
    rc, err = _run(["build", "--target", target, *extra, str(src), "-o", str(out)], capsys)
    assert rc == 1 and f"error[{code}]" in err, err[-3000:]
    assert not out.exists() or not any(out.iterdir())
