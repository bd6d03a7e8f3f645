"""Targets, emit kinds, CPU levels and element types are each defined once, in Python
(vxc/targets.py, vxc/elements.py); the CLI reads them, and the Bazel rules' copies of
the lists (Starlark cannot import Python) must not drift from them."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from vxc import cli
from vxc.backends.cpu import abi, codegen
from vxc.elements import BY_MLIR, ELEMENTS
from vxc.hir import types as HT
from vxc.stages import AFTER, PASSES
from vxc.targets import CPU_LEVELS, EMITS, TARGET_NAMES
from vxc.worker import action

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "vx_rules"


def _bzl_list(path: Path, pattern: str) -> list[str]:
    m = re.search(pattern + r"\s*=\s*(\[[^\]]*\])", path.read_text())
    assert m, f"{pattern} not found in {path}"
    return ast.literal_eval(m.group(1))


def test_vx_rules_targets_match_the_target_table():
    flag = RULES / "private" / "target_flag.bzl"
    assert _bzl_list(flag, r"(?m)^TARGETS") == list(TARGET_NAMES)
    assert _bzl_list(RULES / "defs.bzl", r"vx_multi_kernel\(name, kernel, targets") == list(
        TARGET_NAMES
    )


def test_vx_rules_cpu_levels_match_the_table():
    bzl = _bzl_list(RULES / "private" / "target_flag.bzl", r"(?m)^CPUS")
    assert sorted(bzl) == sorted(CPU_LEVELS)
    default = re.search(
        r'name = "cpu",.*?build_setting_default = "([^"]+)"',
        (RULES / "BUILD.bazel").read_text(),
        re.S,
    )
    assert default and default.group(1) in CPU_LEVELS
    # The cpu backend knows the features of every named level.
    assert set(codegen.X86_LEVELS) == set(CPU_LEVELS) - {"native"}


def test_vx_rules_emit_kinds_match_the_table():
    assert sorted(_bzl_list(RULES / "private" / "kernel.bzl", r"values")) == sorted(EMITS)


def _action(parser, command: str, option: str) -> argparse.Action:
    """The action of `option` of sub-command `command` of an argparse parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices[command]._actions if option in a.option_strings)


def _choices(parser, command: str, option: str) -> tuple:
    """The choices of `option` of sub-command `command` of an argparse parser."""
    return tuple(_action(parser, command, option).choices)


def test_the_cli_and_the_worker_read_the_tables():
    parser = cli._parser()
    assert _choices(parser, "build", "--target") == TARGET_NAMES
    assert _choices(parser, "check", "--target") == TARGET_NAMES
    # `vxc build --emit` takes the table's kinds and `vx-mlir:after=` each named pass.
    emit = _action(parser, "build", "--emit").type
    assert all(emit(e) == e for e in (*EMITS, *(f"{AFTER}{p}" for p in PASSES)))
    for bad in ("object", f"{AFTER}nope"):
        with pytest.raises(argparse.ArgumentTypeError):
            emit(bad)
    assert _choices(parser, "build", "--cpu") == CPU_LEVELS
    assert _choices(action.PARSER, "build", "--emit") == EMITS
    assert _choices(action.PARSER, "build", "--cpu") == CPU_LEVELS


def test_element_maps_derive_from_the_element_table():
    assert HT.SCALARS == {e.name: e.bytes for e in ELEMENTS}
    assert HT.FLOATS == {"f16", "bf16", "f32", "f64"}
    assert {m for m in abi.C_TYPES if m != "index"} == set(BY_MLIR)
    assert abi.ELEMENT_BYTES == {**{e.mlir: e.bytes for e in ELEMENTS}, "index": 8}


def _flags(parser, command: str) -> dict[str, object]:
    """`--flag` -> default of sub-command `command` of an argparse parser."""
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        s: a.default
        for a in sub.choices[command]._actions
        for s in a.option_strings
        if s[:2] == "--"
    }


def test_build_options_are_the_options_dataclasses():
    """The per-family options dataclasses (vxc/targets.py) are the one list of build
    options: the CLI's and the worker's flags and `api.build`'s keywords are generated from
    or checked against them, and the Bazel rules pass only those flags."""
    import inspect

    from vxc import api
    from vxc.targets import BAZEL_TPU_AOT, option_fields

    opts = option_fields()
    assert {o.flag: o.default for o in opts}.items() <= _flags(cli._parser(), "build").items()
    assert {o.flag: o.default for o in opts}.items() <= _flags(action.PARSER, "build").items()
    params = inspect.signature(api.build).parameters
    keywords = {n: p.default for n, p in params.items() if n not in ("analysis", "target", "emit")}
    assert keywords == {o.name: o.default for o in opts}
    bzl = (RULES / "private" / "kernel.bzl").read_text()
    option_flags = {o.flag for o in opts}
    passed = set(re.findall(r'args\.add\("(--[a-z-]+)"', bzl))
    # inputs, not build options: the sources, the machine model, the tuning table
    generic = {"--hir", "--src", "--machine", "--tune", "--target", "--emit", "--out", "--out-dir"}
    assert passed - generic <= option_flags, passed - generic - option_flags
    assert f'args.add("--tpu-aot", "{BAZEL_TPU_AOT}")' in bzl


COMPILER = ROOT / "compiler" / "vxc"


def _literal_dicts(skip: set[str]):
    """(file, line, {key: value}) of every dict literal with constant keys and values in
    the compiler's Python, outside the files in `skip` (paths relative to vxc/)."""
    for path in sorted(COMPILER.rglob("*.py")):
        rel = path.relative_to(COMPILER).as_posix()
        if rel in skip or rel.endswith("_pb2.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Dict)
                and node.keys
                and all(isinstance(k, ast.Constant) for k in node.keys)
            ):
                values = [v.value if isinstance(v, ast.Constant) else None for v in node.values]
                yield rel, node.lineno, dict(zip([k.value for k in node.keys], values, strict=True))


def test_element_sizes_are_defined_once():
    """Element sizes come from vxc/elements.py: a second literal table of them (three or
    more element names mapped to their sizes) anywhere else in the compiler fails."""
    sizes = {e.name: e.bytes for e in ELEMENTS} | {e.mlir: e.bytes for e in ELEMENTS}
    copies = [
        f"{rel}:{line}"
        for rel, line, d in _literal_dicts({"elements.py"})
        if sum(k in sizes and v == sizes[k] for k, v in d.items()) >= 3
    ]
    assert copies == []


def test_status_codes_are_defined_once():
    from vxc.status import STATUS

    copies = [
        f"{rel}:{line}"
        for rel, line, d in _literal_dicts({"status.py"})
        if any(
            isinstance(k, str) and k.startswith("VX_") and isinstance(v, int) for k, v in d.items()
        )
    ]
    assert copies == []
    from vxc.backends.cpu.errors import STATUS as CPU
    from vxc.backends.nvidia.lower import STATUS as NVIDIA

    assert CPU is STATUS and NVIDIA.items() <= STATUS.items()


def test_dma_limits_and_the_shared_memory_budget_are_defined_once():
    """The TMA limits are vxc/targets.py's (E6012 and the tensor-map encoder read them);
    each NVIDIA model's VMEM is the shared memory the backend gives a CTA's tiles."""
    from vxc.api import _model_decls
    from vxc.backends.nvidia import encoders
    from vxc.diagnostics import DiagnosticSink
    from vxc.machines.model import build_machine
    from vxc.targets import TARGETS, TMA

    assert (encoders.TMA_BOX_MAX, encoders.TMA_ROW_MULTIPLE) == (TMA.box_max, TMA.row_multiple)
    for t in (t for t in TARGETS.values() if t.arch is not None):
        assert t.dma is TMA
        machine = build_machine(list(_model_decls(t.name)), DiagnosticSink())
        assert machine.memories["VMEM"].capacity == t.arch.smem_tiles, t.name
    text = {p: p.read_text() for p in COMPILER.rglob("*.py")}
    holders = sorted(p.relative_to(COMPILER).as_posix() for p, s in text.items() if "232448" in s)
    assert holders == ["targets.py"]
