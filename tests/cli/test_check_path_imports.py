"""The check path stays light (`vxc check --no-lower` cold start, docs/PERFORMANCE.md):
checking a program, in process (`api.check`) or through the CLI with `--no-lower`, never
imports jax, jaxlib or llvmlite; z3 only when an obligation needs it (the seed raises
none), protobuf only for the .vxhir cache; never the LSP library (pygls is for `vxc lsp`
only). A plain `vxc check` lowers for its target (check ≡ build), which imports the vx
dialect's MLIR bindings and the target's backend: that is its cost, measured in
docs/PERFORMANCE.md ("Cold check"); for cpu it still imports no numpy (vxc/ir/mlir.py),
which was a fifth of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from clirun import KERNELS, ROOT

HEAVY = ("jax", "jaxlib", "llvmlite", "numpy", "z3", "google", "pygls", "lsprotocol")

PROBE = """
import json, sys
import vxc.api
checked = vxc.api.check(
    [vxc.api.Source("seed.vx", open(sys.argv[1], "rb").read())], sys.argv[2]
)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(json.dumps({{"ok": checked.ok, "heavy": heavy}}))
"""

CLI_PROBE = """
import json, sys
from vxc import cli
rc = cli.main(["check", "--target", sys.argv[2], "--no-lower", sys.argv[1]])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(json.dumps({{"rc": rc, "heavy": heavy}}))
"""


# A check that lowers: what `vxc check FILE --target T` runs, and what it printed.
LOWER_PROBE = """
import contextlib, io, json, sys
from vxc import cli
err = io.StringIO()
with contextlib.redirect_stderr(err):
    rc = cli.main(["check", "--target", sys.argv[2], "--error-format", "json", sys.argv[1]])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
codes = [json.loads(line)["code"] for line in err.getvalue().splitlines()]
print(json.dumps({{"rc": rc, "heavy": heavy, "codes": codes}}))
"""


def _run(code: str, target: str, src=KERNELS / "seed.vx") -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    p = subprocess.run(
        [sys.executable, "-c", code.format(heavy=HEAVY), str(src), target],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def test_api_check_imports_no_jax_or_llvmlite():
    for target in ("cpu", "tpu", "b200", "h100"):
        got = _run(PROBE, target)
        assert got == {"ok": True, "heavy": []}, target


def test_cli_check_imports_no_jax_or_llvmlite():
    got = _run(CLI_PROBE, "b200")
    assert got == {"rc": 0, "heavy": []}


def test_a_cpu_check_lowers_without_numpy():
    """The seed lowers for cpu (MLIR and llvmlite loaded) and numpy never loads: jaxlib's
    MLIR bindings import it only for attribute builders vxc does not use."""
    got = _run(LOWER_PROBE, "cpu")
    assert (got["rc"], got["codes"]) == (0, [])
    assert {"jaxlib", "llvmlite"} <= {m.split(".")[0] for m in got["heavy"]}
    assert not [m for m in got["heavy"] if m.split(".")[0] in ("numpy", "jax", "z3")]


def test_a_cpu_refusal_is_reported_without_numpy():
    """The lowering that loads no numpy still refuses what the cpu backend refuses."""
    src = ROOT / "tests/golden/cases/E7001_erf_of_an_f64_tile_on_cpu.vx"
    got = _run(LOWER_PROBE, "cpu", src)
    assert (got["rc"], got["codes"]) == (1, ["E7001"])
    assert "numpy" not in {m.split(".")[0] for m in got["heavy"]}


def test_numpy_loaded_first_keeps_jaxlibs_attribute_builders():
    """A process that has numpy (the runtime, a framework) gets MLIR as jaxlib makes it."""
    code = (
        "import numpy, vxc.ir\n"
        "from jaxlib.mlir import ir\n"
        "print(ir.AttrBuilder.contains('I64ElementsAttr'))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.stdout.split() == ["True"], p.stderr


def test_the_probe_can_see_a_heavy_import():
    """The probe itself works: importing llvmlite shows up in its report."""
    code = "import llvmlite\n" + PROBE
    got = _run(code, "cpu")
    assert "llvmlite" in got["heavy"]


def test_z3_is_imported_when_an_obligation_needs_it(tmp_path):
    """A program with a `where` bound to prove at a call does load z3 (and reports E6005)."""
    src = tmp_path / "bound.vx"
    src.write_text(
        "fn g(n: i64) -> void on Topology::TensorCore where n <= 8 {\n}\n"
        "fn f(m: i64) -> void on Topology::TensorCore {\n  g(m);\n}\n"
    )
    code = PROBE.replace('"seed.vx"', '"bound.vx"')
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    p = subprocess.run(
        [sys.executable, "-c", code.format(heavy=HEAVY), str(src), "cpu"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["ok"] is False  # E6005: `m` is unbounded
    assert "z3" in got["heavy"] and not {"jax", "jaxlib", "llvmlite"} & set(got["heavy"])


def test_vx_mlir_build_of_the_seed_needs_no_z3():
    """Lowering does not reach into the seam checker (show_expr lives with the AST)."""
    code = """
import json, sys
import vxc.api as api
a = api.analyze([api.Source("seed.vx", open(sys.argv[1], "rb").read())])
r = api.build(a, sys.argv[2], emit="vx-mlir")
print(json.dumps({"ok": r.ok, "z3": "z3" in sys.modules}))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    p = subprocess.run(
        [sys.executable, "-c", code, str(KERNELS / "seed.vx"), "tpu"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.splitlines()[-1]) == {"ok": True, "z3": False}
