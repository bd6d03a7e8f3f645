"""The run-side contract (vxc/backends/__init__.py, `Runner`): one runner per backend
family, the format its backend writes is the one `vxc.runtime.load` knows it by, its
code resolves, and the drivers of the run side (`vxc.pyapi`, `vxc.runtime`) ask it
instead of comparing target names (issue 31)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from vxc import api, pyapi, runtime
from vxc.backends import FORMATS, RUNNERS, _resolve
from vxc.targets import OPTIONS, TARGETS

ROOT = Path(__file__).resolve().parents[2]
VXC = ROOT / "compiler" / "vxc"
FAMILIES = {t.family for t in TARGETS.values()}
# The drivers that must not branch on a target's (or family's) name.
RUN_SIDE = ("pyapi.py", "runtime.py")
MATMUL = ROOT / "examples" / "hello" / "matmul.vx"


def named_compares(source: str) -> list[str]:
    """Each comparison (`==`, `!=`, `in`, `not in`) of something with a target's or a
    family's name, a literal or in a literal tuple, list or set: "line: code"."""
    names = set(TARGETS) | FAMILIES

    def literal_names(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(literal_names(e) for e in node.elts)
        return False

    eq = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
    return [
        f"{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Compare)
        and any(isinstance(op, eq) for op in node.ops)
        and any(literal_names(e) for e in [node.left, *node.comparators])
    ]


def test_the_finder_finds_target_branches():
    """The forms the drivers had before the runners (so the test below can fail)."""
    old = """
if self.target == "cpu": pass
if self.target != "cpu" and self.interpret: pass
x = fmt if self.manifest.get("target") != "cpu" else 0
if family in ("tpu", "nvidia"): pass
if "b200" == t: pass
"""
    assert sorted(int(f.split(":")[0]) for f in named_compares(old)) == [2, 3, 4, 5, 6]
    assert named_compares('if self.runner.exports: pass\nd = RUNNERS["cpu"]\n') == []


@pytest.mark.parametrize("name", RUN_SIDE)
def test_the_run_side_asks_the_runner_not_the_target_name(name):
    assert named_compares((VXC / name).read_text()) == []


def test_one_runner_per_family_with_distinct_formats():
    assert set(RUNNERS) == FAMILIES
    assert all(r.family == f for f, r in RUNNERS.items())
    assert len(FORMATS) == len(RUNNERS)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_runners_code_resolves_and_its_options_exist(family):
    r = RUNNERS[family]
    assert callable(_resolve(r.loader))
    for way in (r.device, r.interpreter):
        if way is not None:
            assert callable(_resolve(way).call) and callable(_resolve(way).launch)
    if r.grid_option is not None:  # a build option of its family, which vxc.compile takes
        assert r.grid_option in {f.name for f in OPTIONS[family].__dataclass_fields__.values()}
        assert r.grid_option in pyapi._build_options()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_each_backend_writes_its_runners_format(target):
    analysis = api.analyze([api.Source(str(MATMUL), MATMUL.read_bytes())], None, {})
    result = api.build(analysis, target, "artifact")
    assert result.ok, result.diagnostics
    (doc,) = (
        json.loads(blob) for n, blob in result.outputs.items() if n.endswith(f".{target}.json")
    )
    assert FORMATS[doc["format"]] is RUNNERS[TARGETS[target].family]


def test_load_refuses_a_format_no_runner_knows(tmp_path):
    p = tmp_path / "k.cpu.json"
    p.write_text(json.dumps({"format": "vx-unknown-9"}))
    with pytest.raises(runtime.ArgumentError, match="vxc writes " + ", ".join(FORMATS)):
        runtime.load(p)
    with pytest.raises(runtime.ArgumentError, match="externs= applies to cpu artifacts only"):
        runtime.load(p, externs=[tmp_path / "x.so"])


def test_the_formats_are_written_once():
    """The backends' manifest writers and the loaders read the runner table's formats."""
    holders = sorted(
        p.relative_to(VXC).as_posix()
        for p in VXC.rglob("*.py")
        if any(
            isinstance(n, ast.Constant) and n.value in FORMATS
            for n in ast.walk(ast.parse(p.read_text()))
        )
    )
    assert holders == ["backends/__init__.py"]
