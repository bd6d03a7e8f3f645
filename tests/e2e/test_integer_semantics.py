"""Issue 25: what Vx integer arithmetic means (docs/DESIGN.md, "Integer arithmetic"), the
same on every target: `+ - *` and unary `-` wrap (two's complement, modulo 2^bits);
`/` truncates and `%` takes the dividend's sign; division is total: `x / 0 == 0`,
`x % 0 == x`, `x / -1 == 0 - x` (so `MIN / -1 == MIN`), `x % -1 == 0`. The cpu runs it
natively, the tpu through the Mosaic interpreter, nvidia by the PTX it emits; the z3
model wraps too (tests/tokens: "products wrap")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vxc import api

ROOT = Path(__file__).resolve().parents[2]
OPS = {"add1": "x + 1", "sub1": "x - 1", "mul3": "x * 3", "neg": "-x", "div": "x / d",
       "rem": "x % d"}  # fmt: skip
KERNELS = "".join(
    f"fn {name}_{t}(x: {t}, d: {t}) -> {t} {{ return {expr}; }}\n"
    for t in ("i32", "i64")
    for name, expr in OPS.items()
)


def reference(name: str, x: int, d: int, bits: int) -> int:
    """The definition, on Python's integers."""
    lo, size = -(1 << (bits - 1)), 1 << bits
    if name == "div":
        exact = 0 if d == 0 else abs(x) // abs(d) * (1 if (x < 0) == (d < 0) else -1)
    elif name == "rem":
        exact = x if d == 0 else x - d * (abs(x) // abs(d) * (1 if (x < 0) == (d < 0) else -1))
    else:
        exact = {"add1": x + 1, "sub1": x - 1, "mul3": x * 3, "neg": -x}[name]
    return (exact - lo) % size + lo


def _cases(bits: int) -> list[tuple[int, int]]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    xs = [lo, lo + 1, -7, -1, 0, 1, 7, hi - 1, hi]
    return [(x, d) for x in xs for d in (lo, -2, -1, 0, 1, 2, hi)]


# Runs in a child process: before the fix `MIN / -1` was x86's SIGFPE, which would have
# taken the test runner down with it.
CHILD = """
import json, sys
from pathlib import Path
from vxc import api, runtime
src = api.Source("ints.vx", sys.argv[1].encode())
result = api.build(api.analyze([src]), "cpu")
assert result.ok, api.render(result.diagnostics, [src])
art = runtime.load_outputs(result.outputs, Path(sys.argv[2]))
out = {}
for name, x, d in json.loads(sys.argv[3]):
    out[f"{name} {x} {d}"] = int(getattr(art, name)(x, d))
print(json.dumps(out))
"""


def test_cpu_wraps_and_divides_totally(tmp_path):
    calls = [
        [f"{name}_i{bits}", x, d] for bits in (32, 64) for name in OPS for x, d in _cases(bits)
    ]
    p = subprocess.run(
        [sys.executable, "-c", CHILD, KERNELS, str(tmp_path), json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    for name, x, d in calls:
        op, bits = name.rsplit("_i", 1)
        assert got[f"{name} {x} {d}"] == reference(op, x, d, int(bits)), (name, x, d)


PICK = b"""
fn pick(tiles: &Vec<Tensor<f32, [8, 128]>>) -> Tensor<f32, [8, 128]> on Topology::TensorCore {
  let i = 1 / (tiles.len() - 1);
  let t = transfer(tiles[i], Memory::VMEM);
  return transfer(t, Memory::HBM);
}
"""


def _built(target: str, emit: str = "artifact"):
    src = api.Source("pick.vx", PICK)
    result = api.build(api.analyze([src]), target, emit)
    assert result.ok, api.render(result.diagnostics, [src])
    return result.outputs


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tpu_divides_by_zero_as_defined(n):
    """One tile: `1 / 0 == 0` picks tiles[0] (the interpreter's Python division raised
    ZeroDivisionError on the unguarded divsi; Mosaic leaves it undefined)."""
    from vxc.backends.tpu.interp import run

    mosaic = _built("tpu")["pick.tpu.mosaic.mlir"].decode()
    tiles = np.arange(n * 8 * 128, dtype=np.float32).reshape(n, 8, 128)
    r = run(mosaic, [tiles], ["tiles"])
    np.testing.assert_array_equal(r.outputs[0], tiles[reference("div", 1, n - 1, 64)])


def test_the_ir_never_divides_by_zero_or_minus_one():
    """Every divsi's divisor is a select that replaces 0 and -1 by 1 (the results for
    those divisors are selected after): so no target meets its undefined case."""
    text = _built("cpu", "vx-mlir")["pick.cpu.mlir"].decode()
    (div,) = re.findall(r"arith\.divsi %\w+, (%\w+)", text)
    assert re.search(rf"{div} = arith\.select %\w+, %c1_i64\w*, %\w+", text), text


def test_nvidia_ptx_guards_the_division_and_wraps():
    """The PTX: the divisor of `div.s64` is a `selp` (never 0 or -1), and the integer
    adds are `add.s64`/`sub.s64`, which PTX defines as wrapping."""
    ptx = _built("b200", "target-ir")
    text = next(v.decode() for k, v in ptx.items() if k.endswith(".ptx"))
    (div,) = re.findall(r"div\.s64 %rd\d+, %rd\d+, (%rd\d+);", text)
    assert re.search(rf"selp\.b64 {re.escape(div)},", text), text
    assert "sub.s64" in text
