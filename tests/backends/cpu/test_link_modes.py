"""`link="none"` (what Bazel asks for: its C++ toolchain links the shared library) gives
the same object, header and manifest bytes as the CLI's `link="cc"`, and no library."""

from __future__ import annotations

from pathlib import Path

import pytest

from vxc import api

STREAM = Path(__file__).resolve().parents[3] / "kernels" / "stream.vx"


def test_link_none_leaves_the_library_to_the_caller():
    analysis = api.analyze([api.Source("stream.vx", STREAM.read_bytes())])
    cc = api.build(analysis, "cpu", cpu="x86-64-v3", link="cc").outputs
    none = api.build(analysis, "cpu", cpu="x86-64-v3", link="none").outputs
    assert sorted(cc) == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o", "stream.cpu.so"]
    assert sorted(none) == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o"]
    assert all(none[name] == cc[name] for name in none)
    assert b'"shared_library": "stream.cpu.so"' in none["stream.cpu.json"]


def test_an_unknown_link_mode_is_refused():
    from vxc.backends.cpu import CpuOptionError

    analysis = api.analyze([api.Source("stream.vx", STREAM.read_bytes())])
    with pytest.raises(CpuOptionError, match="unknown link mode"):
        api.build(analysis, "cpu", link="ld")
