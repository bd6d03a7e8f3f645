"""The bf16 vector path is chosen by the host's microarchitecture (matmul.BF16_VECTOR_PATH,
keyed by CPUID's vendor, family and model), not by the AVX512_BF16 bit alone (issue 34
item 2): where `vdpbf16ps` issues at half the FMA rate the widening wins."""

from __future__ import annotations

import pytest

from vxc.backends.cpu import host_target
from vxc.backends.cpu.codegen import host_cpuid, parse_cpuinfo
from vxc.backends.cpu.matmul import BF16_VECTOR_PATH, blocking_for

AVX512_BF16 = "+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512bf16"
ZEN4, EMERALD_RAPIDS = ("AuthenticAMD", 25, 17), ("GenuineIntel", 6, 207)


@pytest.mark.parametrize(
    ("cpuid", "dot"),
    [(ZEN4, True), (EMERALD_RAPIDS, False), (("GenuineIntel", 6, 1), True), (None, True)],
    ids=["zen4", "emerald-rapids", "unlisted", "named-level"],
)
def test_the_table_picks_the_bf16_vector_path(cpuid, dot):
    assert blocking_for(AVX512_BF16, cpuid).bf16dot is dot


def test_no_avx512_bf16_widens_whatever_the_table_says():
    assert not blocking_for("+avx,+avx2,+fma,+avx512f", ZEN4).bf16dot
    assert set(BF16_VECTOR_PATH.values()) <= {"vdpbf16ps", "widen"}


def test_cpuinfo_gives_vendor_family_and_model():
    text = (
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
        "model name\t: Intel(R) Xeon(R)\n\nprocessor\t: 1\nvendor_id\t: Other\n"
    )
    assert parse_cpuinfo(text) == EMERALD_RAPIDS
    assert parse_cpuinfo("processor\t: 0\nvendor_id\t: ARM\n") is None  # no family: not x86


def test_a_native_target_carries_this_hosts_cpuid_and_a_named_level_none():
    from vxc.backends.cpu import cpu_target

    assert host_target().cpuid == host_cpuid()
    assert cpu_target("x86-64-v4").cpuid is None
