"""Issue 25: what Vx integer arithmetic means (docs/DESIGN.md, "Integer arithmetic"), the
same on every target: `+ - *` and unary `-` wrap (two's complement, modulo 2^bits);
`/` truncates and `%` takes the dividend's sign; division is total: `x / 0 == 0`,
`x % 0 == x`, `x / -1 == 0 - x` (so `MIN / -1 == MIN`), `x % -1 == 0`. The cpu runs it
natively, the tpu through the Mosaic interpreter, nvidia by the PTX it emits; the z3
model wraps too (tests/tokens: "products wrap")."""

from __future__ import annotations

import json
import random
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
    """The extreme values against each other, then seeded random ones of every size."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    xs = [lo, lo + 1, -7, -1, 0, 1, 7, hi - 1, hi]
    extreme = [(x, d) for x in xs for d in (lo, -2, -1, 0, 1, 2, hi)]
    rng = random.Random(bits)
    width = [rng.randrange(1, bits) for _ in range(40)]
    drawn = [(rng.randrange(-(1 << w), 1 << w), rng.randrange(-(1 << w), 1 << w)) for w in width]
    return extreme + [(max(lo, min(hi, x)), max(lo, min(hi, d))) for x, d in drawn]


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


CALLS = [[f"{name}_i{bits}", x, d] for bits in (32, 64) for name in OPS for x, d in _cases(bits)]


def test_cpu_wraps_and_divides_totally(tmp_path):
    calls = CALLS
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


def test_the_proofs_model_is_the_generated_codes():
    """Issue 30, S2: the z3 terms the checker builds for each operation (checks/seams.py
    `_int`) over arguments it knows only by facts (`x == X`, `d == D`) admit the value
    the generated code computes (the definition's: the cpu test above runs the code), and
    only that value once the division facts are pinned (`_precise`, the form reported
    counterexamples use). Literal operands fold to the same value. The model said 2^63
    for `MIN / -1`, so a branch the machine takes was read as dead."""
    import z3

    from vxc.checks.seams import SeamChecker
    from vxc.checks.solver import Solver
    from vxc.diagnostics import DiagnosticSink
    from vxc.hir import nodes as H
    from vxc.machines.model import Machine
    from vxc.plan.placement import FnPlacement

    analysis = api.analyze([api.Source("ints.vx", KERNELS.encode())])
    fns = analysis.program.functions
    for name, x, d in CALLS:
        want = reference(name.rsplit("_i", 1)[0], x, d, int(name.rsplit("_i", 1)[1]))
        fn = fns[name]
        (ret,) = [s for s in H.walk_stmts(fn.decl.body) if isinstance(s, H.Return)]
        for literal in (False, True):
            checker = SeamChecker(fn, Machine(), fns, FnPlacement(name), Solver(), DiagnosticSink())
            xp, dp = fn.params
            known = []
            for p, v in ((xp, x), (dp, d)):
                checker.ints[p.vid] = z3.IntVal(v) if literal else z3.Int(p.name)
                known.append(checker.ints[p.vid] == v)
            term = checker._int(ret.value)
            one = z3.Solver()
            one.add(*checker.assume, *known)
            assert one.check(term == want) == z3.sat, (name, x, d, want, literal)
            one.add(*checker.pinned)
            assert one.check(term != want) == z3.unsat, (name, x, d, want, literal)
