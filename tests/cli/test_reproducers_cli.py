"""Issue 10's reproducers through `vxc check` and `vxc build` as a user runs them (the
CLI's main, in-process): each is exit 0 or 1 with diagnostics, never exit 2 with an
internal-error report. tests/fuzz/test_reproducers.py pins the diagnostics themselves."""

from __future__ import annotations

import pytest

from vxc import cli

SOURCES = {
    "huge_int": "fn f() -> i64 { return 1" + "0" * 4400 + "; }\n",
    "rate_inf": "Memory S { within: Memory::HBM, capacity: 2 MB, bandwidth: 1e400 B/s }\n",
    "size_64": "Memory S { within: Memory::HBM, capacity: 9223372036854775807 KB }\n",
    "deep_ref": "fn f(x: " + "&" * 27 + "Tensor<f32, [4, 4]>) -> void { }\n",
    "long_sum": "fn f() -> i64 { return 1" + " + 1" * 27 + "; }\n",
    "generic": "fn g<const N: i64>(x: &Tensor<f32, [N]>) -> void { let y = zz; }\n"
    "fn f(x: &Tensor<f32, [4]>) -> void { g(x); }\n",
    "where": "fn f() where i { }\n",
    "matmul": "fn f(x: &Tensor<f32, [4, 4]>) -> void { matmul_acc(&4, x, x); }\n",
    "rank0": "fn f() -> void { let z = Tensor<f32>([]); }\n",
    "bf16": "fn f(b: bf16) {}\n",
    "i64_attr": "fn f() -> void { let z = Tensor<f32>([4294967296, 4294967296]); }\n",
    "long_name": "fn f(" + "a" * 1100 + ": i64) -> i64 { return " + "a" * 1100 + "; }\n",
    "fnf": "fnf() -> void { }\n",
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_check_and_build_are_diagnostics_or_outputs(name, tmp_path, capsys):
    src = tmp_path / f"{name}.vx"
    src.write_text(SOURCES[name])
    rc = cli.main(["check", str(src)])
    err = capsys.readouterr().err
    assert rc in (0, 1) and "internal compiler error" not in err, err[-2000:]
    rc = cli.main(["build", str(src), "--target", "cpu", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc in (0, 1) and "internal compiler error" not in err, err[-2000:]
    if rc == 0:
        assert (tmp_path / "out" / f"{name}.cpu.so").is_file()
    else:
        assert "error[E" in err
