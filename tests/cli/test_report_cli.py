"""`vxc report` on the command line: the table on stdout, the files with -o, bad input."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from clirun import KERNELS, run_vxc


def test_report_prints_the_table_and_writes_the_svg(tmp_path):
    r = run_vxc(
        "report",
        str(KERNELS / "stream.vx"),
        "--target",
        "b200",
        "--size",
        "tiles.len()=8",
        "-o",
        str(tmp_path),
    )
    assert r.rc == 0, r.err
    assert "stream (stream.vx) on b200" in r.out and "tiles.len() = 8" in r.out
    assert "memory-bound" in r.out
    svg = tmp_path / "stream.b200.roofline.svg"
    ET.parse(svg)
    assert (tmp_path / "stream.b200.report.txt").read_text() == r.out
    assert f"wrote {svg}" in r.err


def test_report_without_out_writes_nothing(tmp_path):
    r = run_vxc("report", str(KERNELS / "stream.vx"), cwd=tmp_path)
    assert r.rc == 0 and "on cpu" in r.out and list(tmp_path.iterdir()) == []


def test_a_bad_size_is_a_usage_error():
    r = run_vxc("report", str(KERNELS / "stream.vx"), "--size", "tiles.len()")
    assert r.rc == 2 and "--size wants NAME=N" in r.err


def test_a_bad_instance_count_is_a_usage_error():
    r = run_vxc("report", str(KERNELS / "stream.vx"), "--instances", "0")
    assert r.rc == 2 and "--instances must be at least 1" in r.err


def test_a_program_error_is_exit_1_with_the_diagnostic(tmp_path):
    bad = tmp_path / "bad.vx"
    bad.write_text(
        "fn k(x: &Tensor<f32, [256, 256]>) -> Tensor<f32, [256, 256]> on Topology::TensorCore {\n"
        "  return transfer(transfer(x, Memory::VMEM), Memory::HBM);\n}\n"
    )
    r = run_vxc("report", str(bad), "--target", "h100", "-o", str(tmp_path / "out"))
    assert r.rc == 1 and "E6009" in r.err and not (tmp_path / "out").exists()


def test_build_emit_report_writes_the_same_files(tmp_path):
    r = run_vxc(
        "build",
        str(KERNELS / "stream.vx"),
        "--target",
        "tpu",
        "--emit",
        "report",
        "-o",
        str(tmp_path),
    )
    assert r.rc == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "stream.tpu.report.txt",
        "stream.tpu.roofline.svg",
    ]


def test_a_model_without_a_peak_writes_the_table_and_says_why_there_is_no_picture(tmp_path):
    model = tmp_path / "m.vx"
    model.write_text(
        "Topology TensorCore {\n  memory: Memory::VMEM,\n  visible: [Memory::VMEM, Memory::CPU_DRAM],\n"
        "  transfer Memory::CPU_DRAM -> Memory::VMEM : 1,\n  transfer Memory::VMEM -> Memory::CPU_DRAM : 1\n}\n"
    )
    out = tmp_path / "out"
    r = run_vxc("report", str(KERNELS / "stream.vx"), "--machine", str(model), "-o", str(out))
    assert r.rc == 0, r.err
    assert "declares no `peak_gflops`" in r.out and "no roofline picture" in r.err
    assert [p.name for p in out.iterdir()] == ["stream.cpu.report.txt"]
