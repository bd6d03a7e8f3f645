"""The tuning table beside a kernel (LANGUAGE.md 3, vxc/tuning.py): a generic entry's const
values come from `--const`, then `KERNEL.tune.json`'s entry for the build's target, then
the default; a stale table warns (W1041) and is still read as written; a value for no
const parameter warns (W1040); a malformed table is a usage error (exit 2); and a value
that breaks a check is that check's diagnostic naming the value."""

from __future__ import annotations

import json

import numpy as np
from clirun import assert_no_crash, run_vxc

import vxc

ROWS = """\
fn rows<const BK: i64 = 64>(x: &Tensor<f32, [8, 2 * BK]>, o: &mut Tensor<f32, [8, 2 * BK]>)
    -> void on Topology::TensorCore where instances() == 1 {
  let t = transfer(x, Memory::VMEM);
  transfer(t - t.sum(1), o[0 .. 8, 0 .. 2 * BK]);
}
"""


def _kernel(tmp_path, table: dict | str | None):
    src = tmp_path / "rows.vx"
    src.write_text(ROWS)
    if table is not None:
        text = table if isinstance(table, str) else json.dumps(table)
        (tmp_path / "rows.tune.json").write_text(text)
    return src


def _width(tmp_path, *flags: str, target: str = "cpu") -> int:
    """The tile width the build instantiated (from the vx IR it emits)."""
    r = run_vxc("build", str(tmp_path / "rows.vx"), "--target", target, "--emit", "vx-mlir", *flags)
    assert_no_crash(r)
    assert r.rc == 0, r.err
    (shape,) = {
        line.split("memref<8x")[1].split("x")[0]
        for line in r.out.splitlines()
        if "memref<8x" in line
    }
    return int(shape)


def _table(**per_target: dict) -> dict:
    return {"format": 1, "targets": {t: {"consts": c} for t, c in per_target.items()}}


def test_const_flag_then_the_table_for_the_target_then_the_default(tmp_path):
    _kernel(tmp_path, _table(cpu={"BK": 256}, tpu={"BK": 128}))
    assert _width(tmp_path) == 512  # the table's cpu entry
    assert _width(tmp_path, target="tpu") == 256  # its tpu entry
    assert _width(tmp_path, "--const", "BK=16") == 32  # --const over the table
    assert _width(tmp_path, "--no-tune") == 128  # the default
    assert _width(tmp_path, target="b200") == 128  # no b200 entry: the default


def test_an_explicit_table_is_read_instead(tmp_path):
    _kernel(tmp_path, _table(cpu={"BK": 256}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_table(cpu={"BK": 32})))
    assert _width(tmp_path, "--tune", str(other)) == 64


def test_a_stale_table_warns_and_is_read_as_written(tmp_path):
    table = {**_table(cpu={"BK": 256}), "source_sha256": "0" * 64}
    _kernel(tmp_path, table)
    r = run_vxc("check", str(tmp_path / "rows.vx"), "--target", "cpu", "--error-format", "json")
    assert r.rc == 0, r.err
    [d] = [json.loads(x) for x in r.err.splitlines() if x.startswith("{")]
    assert d["code"] == "W1041" and "another version" in d["message"]
    assert "vxc tune" in d["help"] and d["notes"] == ["its cpu values: BK = 256"]
    assert _width(tmp_path) == 512


def test_a_fresh_table_does_not_warn_and_an_unknown_name_does(tmp_path):
    import hashlib

    table = {
        **_table(cpu={"BK": 32, "BQ": 4}),
        "source_sha256": hashlib.sha256(ROWS.encode()).hexdigest(),
    }
    _kernel(tmp_path, table)
    r = run_vxc("check", str(tmp_path / "rows.vx"), "--target", "cpu", "--error-format", "json")
    assert r.rc == 0, r.err
    codes = [json.loads(x)["code"] for x in r.err.splitlines() if x.startswith("{")]
    assert codes == ["W1040"]


def test_a_malformed_table_is_a_usage_error_naming_it(tmp_path):
    for text, words in (
        ("{", "is not JSON"),
        ('{"format": 2}', "not of format 1"),
        (json.dumps(_table(cpu={"BK": "64"})), "must map const names to integers"),
    ):
        _kernel(tmp_path, text)
        r = run_vxc("check", str(tmp_path / "rows.vx"), "--target", "cpu")
        assert_no_crash(r)
        assert r.rc == 2 and "rows.tune.json" in r.err and words in r.err, r.err


def test_a_table_value_that_breaks_a_check_is_that_checks_diagnostic(tmp_path):
    _kernel(tmp_path, _table(cpu={"BK": 0}))
    r = run_vxc("check", str(tmp_path / "rows.vx"), "--target", "cpu")
    assert r.rc == 1 and "error[E0110]" in r.err and "with BK = 0" in r.err, r.err


def test_vxc_compile_reads_the_table_beside_a_path(tmp_path):
    src = _kernel(tmp_path, _table(cpu={"BK": 32}))
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    o = np.zeros_like(x)
    vxc.compile(src).launch(x, o, instances=1)  # BK = 32 from the table: [8, 64] tiles
    np.testing.assert_array_equal(o, x - x.sum(1, keepdims=True))
    wide = np.zeros((8, 128), np.float32)
    vxc.compile(src, tune=False).launch(np.ones_like(wide), wide, instances=1)  # the default
    np.testing.assert_array_equal(wide, np.full_like(wide, -127.0))
