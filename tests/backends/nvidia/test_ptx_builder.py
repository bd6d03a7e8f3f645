"""The typed PTX builder: deterministic names, typed operands, per-arch refusals."""

from __future__ import annotations

import pytest

from vxc.backends.nvidia.ptx import Addr, Imm, Kernel, Module, PtxError, Sym, Vec


def test_registers_labels_and_params_print_deterministically():
    k = Kernel("k", "sm_90a", 128)
    tmap = k.param("t", "tensormap")
    k.param("n", "u64")
    a, b = k.reg("b32"), k.reg("b32")
    k.ins("add.u32", a, b, Imm(4))
    lab = k.label("loop")
    k.place(lab)
    k.bra(lab, pred=k.setp("eq", "u32", a, Imm(0)), negate=True)
    k.ins("mov.b64", k.reg("b64"), tmap)
    k.ins("st.shared.v2.f32", Addr(a, 8), Vec((k.reg("f32"), k.reg("f32"))))
    k.ins("mov.f32", k.reg("f32"), Imm(1.0))
    text = k.text()
    assert ".param .align 64 .b8 t[128]" in text and ".param .u64 n" in text
    assert ".reg .b32 %r<2>;" in text and ".reg .pred %p<1>;" in text
    assert "\tadd.u32 %r0, %r1, 4;" in text
    assert "$L_loop_0:" in text and "@!%p0 bra $L_loop_0;" in text
    assert "st.shared.v2.f32 [%r0+8], {%f0, %f1};" in text
    assert "mov.f32 %f2, 0f3F800000;" in text
    assert Module("sm_90a", [k]).text() == Module("sm_90a", [k]).text()


def test_hopper_instructions_are_refused_on_blackwell_and_the_reverse():
    with pytest.raises(PtxError, match="sm_90a instruction; this kernel targets sm_100a"):
        Kernel("k", "sm_100a", 128).ins("wgmma.fence.sync.aligned")
    with pytest.raises(PtxError, match="sm_100a instruction; this kernel targets sm_90a"):
        Kernel("k", "sm_90a", 128).ins("tcgen05.fence::before_thread_sync")


def test_operands_are_typed():
    k = Kernel("k", "sm_90a", 128)
    with pytest.raises(PtxError, match="not a PTX operand"):
        k.ins("mov.u32", k.reg("b32"), "%r9")
    with pytest.raises(PtxError, match="not a predicate"):
        k.ins("bra", Sym("x"), pred=k.reg("b32"))
    with pytest.raises(PtxError, match="declared twice"):
        k.param("x", "u64")
        k.param("x", "u64")
