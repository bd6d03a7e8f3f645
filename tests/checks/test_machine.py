"""Machine models: the `within` tree (E6006) and the shipped models' `managed` facets."""

from __future__ import annotations

import pytest

from vxc.diagnostics import DiagnosticSink
from vxc.frontend import ast as A
from vxc.frontend.parser import parse_source
from vxc.machines.model import build_machine
from vxc.targets import TARGETS, model_source


def machine_of(src: str, target: str | None = None):
    sink = DiagnosticSink()
    decls: list[A.Node] = []
    if target is not None:
        path, data = model_source(target)
        decls += parse_source(data, path, sink).items
    decls += parse_source(src.encode(), "m.vx", sink).items
    return build_machine(decls, sink), sink.items


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_shipped_models_are_clean_and_say_which_spaces_are_caches(target):
    """LANGUAGE.md section 2: `managed` defaults to `explicit`, so a model must declare its
    caches; every space with a capacity says which it is."""
    machine, diags = machine_of("", target)
    assert [d for d in diags if d.severity == "error"] == []
    path, data = model_source(target)
    sink = DiagnosticSink()
    for d in parse_source(data, path, sink).items:
        if isinstance(d, A.MemoryDecl) and not any(f.name == "alias" for f in d.facets):
            names = {f.name for f in d.facets}
            assert "managed" in names, f"{target}: `{d.name}` does not declare `managed`"
    assert machine.memories[machine.space("HBM")].managed == "cached"
    assert machine.memories[machine.space("VMEM")].managed == "explicit"


def test_a_program_space_without_managed_is_explicit():
    machine, _ = machine_of("Memory S { capacity: 1 MB }")
    assert machine.memories["S"].managed == "explicit"


def test_a_three_space_cycle_is_reported_once_at_the_closing_declaration():
    src = (
        "Memory A { within: Memory::C }\n"
        "Memory B { within: Memory::A }\n"
        "Memory C { within: Memory::B }\n"
        "Memory D { within: Memory::C }\n"
    )
    _, diags = machine_of(src)
    (d,) = diags
    assert (d.code, d.span.line) == ("E6006", 3)
    assert d.message == "`C` is within itself: `C` within `B` within `A` within `C`"
    assert d.notes == [
        "`B` is declared within `A` at m.vx:2",
        "`A` is declared within `C` at m.vx:1",
    ]


def test_two_cycles_two_diagnostics_and_a_redeclaration_counts_where_it_stands():
    src = (
        "Memory A { within: Memory::B }\n"
        "Memory B { within: Memory::A }\n"
        "Memory X { within: Memory::X }\n"
        "Memory A { capacity: 1 MB }\n"  # replaces A: the first cycle is gone
        "Memory Y { within: Memory::Z }\n"
        "Memory Z { within: Memory::Y }\n"
    )
    _, diags = machine_of(src)
    assert [(d.code, d.span.line) for d in diags] == [("E6006", 3), ("E6006", 6)]


def test_cycle_through_an_alias_of_the_model():
    """On b200 SMEM is an alias of VMEM: `VMEM within S`, `S within SMEM` is a cycle."""
    src = (
        "Memory S { within: Memory::SMEM, capacity: 64 KB }\n"
        "Memory VMEM { within: Memory::S, capacity: 64 KB, granule: 1 KB }\n"
    )
    _, diags = machine_of(src, "b200")
    assert [(d.code, d.span.line) for d in diags if d.severity == "error"] == [("E6006", 2)]


@pytest.mark.parametrize(
    "target, peak", [("cpu", 460), ("tpu", 197_000), ("b200", 2_250_000), ("h100", 989_000)]
)
def test_shipped_models_declare_their_peak(target, peak):
    machine, diags = machine_of("", target)
    assert machine.topologies["TensorCore"].peak_gflops == peak and diags == []


@pytest.mark.parametrize(
    "facet, message",
    [
        ("peak_gflops: 0", "`peak_gflops` must be positive, not 0"),
        ("peak_gflops: 1 MB", "invalid Topology facet `peak_gflops`"),
        ("peak_gflops: Memory::HBM", "invalid Topology facet `peak_gflops`"),
        ("peak_flops: 10", "invalid Topology facet `peak_flops`"),
    ],
)
def test_a_bad_peak_is_e0205(facet, message):
    machine, diags = machine_of(f"Topology T {{ memory: Memory::CPU_DRAM, {facet} }}")
    assert [(d.code, d.message) for d in diags] == [("E0205", message)]
    assert machine.topologies["T"].peak_gflops == 0


def test_a_program_may_declare_its_own_peak():
    machine, diags = machine_of(
        "Topology TensorCore { memory: Memory::VMEM, peak_gflops: 123 }", "cpu"
    )
    assert diags == [] and machine.topologies["TensorCore"].peak_gflops == 123
