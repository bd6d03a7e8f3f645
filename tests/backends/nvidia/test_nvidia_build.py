"""The b200 / h100 backends end to end on this machine: vx -> PTX (golden), ptxas -v
(no spills, registers and shared memory within limits), fatbinary, cuobjdump -sass
(TMA, mbarrier and the architecture's MMA), manifest, determinism, and the
programs the backends refuse with a plain message. ptxas, fatbinary and cuobjdump
are the real tools from the wheels in requirements.lock."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from vxc import api
from vxc.backends.nvidia import ptx_text, toolchain
from vxc.backends.nvidia.manifest import Manifest
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("VX_UPDATE_GOLDEN") == "1"
ARCH = {"h100": "sm_90a", "b200": "sm_100a"}
KERNELS = ["stream", "stream_blocking", "stream_triple", "stream_grid", "stream_grid_blocking"]
SOURCE = {k: ROOT / "kernels" / f"{k}.vx" for k in KERNELS}
SOURCE["stream_grid_blocking"] = ROOT / "benchmarks" / "nvidia" / "stream_grid_blocking.vx"


def _analysis(path: Path | str, text: str | None = None) -> api.Analysis:
    data = text.encode() if text is not None else Path(path).read_bytes()
    return api.analyze([api.Source(str(path), data)])


def _build(target: str, path, text: str | None = None, emit: str = "artifact") -> dict[str, bytes]:
    result = api.build(_analysis(path, text), target, emit)
    assert result.ok, [d.message for d in result.diagnostics]
    return result.outputs


def refused(result: api.BuildResult, code: str | None = None) -> str:
    """The one backend refusal of a failed build, as `file:line:col: message`."""
    assert not result.ok and not result.outputs
    (d,) = [d for d in result.diagnostics if d.severity == "error"]
    assert d.code.startswith("E70") and (code is None or d.code == code), d
    return f"{d.span.file}:{d.span.line}:{d.span.column}: {d.message}"


@pytest.fixture(scope="session")
def artifacts() -> dict[tuple[str, str], dict[str, bytes]]:
    """Every kernel of kernels/ built for both targets once per session."""
    out = {}
    for target in ARCH:
        for name in KERNELS:
            out[(target, name)] = _build(target, SOURCE[name])
    return out


@pytest.mark.parametrize("target", ARCH)
def test_golden_ptx_of_the_stream_kernel(target):
    ptx = _build(target, "kernels/stream.vx", (ROOT / "kernels/stream.vx").read_text(), "target-ir")
    text = ptx[f"stream.{target}.ptx"].decode()
    golden = GOLDEN / f"stream.{target}.ptx"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text(), "regenerate with VX_UPDATE_GOLDEN=1 and review the diff"


@pytest.mark.parametrize("target", ARCH)
@pytest.mark.parametrize("name", KERNELS)
def test_ptxas_sass_and_manifest(artifacts, target, name):
    arch = ARCH[target]
    files = artifacts[(target, name)]
    assert sorted(files) == [f"{name}.{target}.fatbin", f"{name}.{target}.json"]
    fatbin = files[f"{name}.{target}.fatbin"]
    images = toolchain.list_images(fatbin)
    assert f"sm_{arch[3:]}.cubin" in images and f"sm_{arch[3:]}.ptx" in images, images
    sass = toolchain.sass(fatbin)
    assert toolchain.missing_sass(sass, arch) == [], sass[:2000]
    other = "HGMMA" if target == "b200" else "UTCHMMA"
    assert other not in sass
    m = Manifest.from_bytes(files[f"{name}.{target}.json"])
    assert (m.target, m.arch, m.fatbin) == (target, arch, f"{name}.{target}.fatbin")
    (k,) = m.kernels
    assert k["name"] == name and k["block"] == [128, 1, 1] and k["grid"][0] == "instances"
    assert 0 < k["registers"] <= 255
    assert k["dynamic_smem"] <= TARGETS[target].arch.smem_limit
    assert k["tmem_columns"] == (128 if target == "b200" else 0)
    kinds = [p["kind"] for p in k["params"]]
    w = next(p for p in k["params"] if p.get("arg") == "w")
    if w["dtype"] == "bf16":  # tiles, w (MN-major) and the result by TMA
        assert kinds.count("tensormap") == 3 and "pointer" not in kinds
        assert not re.search(r"\bLDG\b", sass)  # no scalar loads of B
    else:  # tiles in, result out; w (tf32) copied transposed: wgmma reads tf32 K-major
        assert kinds.count("tensormap") == 2 and w["kind"] == "pointer"
    tiles = next(p for p in k["params"] if p["kind"] == "tensormap" and p["source"] == "arg")
    assert tiles["swizzle"] == "128B" and tiles["box"][1] == 128
    assert tiles["box"][0] * {"f32": 4, "bf16": 2}[tiles["dtype"]] == 128


def test_stream_manifest_fields(artifacts):
    m = Manifest.from_bytes(artifacts[("b200", "stream")]["stream.b200.json"])
    (k,) = m.kernels
    assert k["args"] == ["tiles", "w"]
    names = [p["name"] for p in k["params"]]
    assert names == ["tiles_tmap", "tiles_len", "w_ptr", "result0_tmap"]
    out = k["params"][-1]
    assert (out["box"], out["swizzle"], out["tile"]) == ([128, 128], "none", [128, 128])
    # Three 64 KiB rings (w, the two in-flight tiles); barriers for the two TMA slots and
    # the MMA; the TMEM address; 1 KiB to align the base at run time.
    lay = k["smem_layout"]
    assert lay["tiles"] == 3 * 65536 and lay["barrier_count"] == 3
    assert k["dynamic_smem"] == lay["bytes"] + 1024
    assert k["results"] == [{"dtype": "f32", "index": 0, "shape": [128, 128], "stacked": True}]


def test_manifest_round_trip(artifacts):
    for files in artifacts.values():
        raw = next(v for n, v in files.items() if n.endswith(".json"))
        m = Manifest.from_bytes(raw)
        assert m.to_bytes() == raw
        assert json.loads(raw)["format"] == "vx-nvidia-1"
    with pytest.raises(ValueError, match="not a vx-nvidia-1 manifest"):
        Manifest.from_bytes(b'{"format": "vx-cpu-artifact"}')


@pytest.mark.parametrize("target", ARCH)
def test_fatbin_is_byte_identical_run_to_run(artifacts, target):
    again = _build(target, ROOT / "kernels" / "stream_grid.vx")
    assert again == artifacts[(target, "stream_grid")]


def test_stream_grid_reads_its_share_and_checks_its_where_clause(artifacts):
    m = Manifest.from_bytes(artifacts[("h100", "stream_grid")]["stream_grid.h100.json"])
    (k,) = m.kernels
    assert k["requires"] == ["instances() <= tiles.len()"]
    assert k["params"][-1]["kind"] == "status" and k["status"]["VX_ERR_WHERE"] == 7
    _, ptx, _ = ptx_text_of("h100", "stream_grid")
    assert "%ctaid.x" in ptx and "%nctaid.x" in ptx and "VX" not in ptx.split("{", 1)[0]
    tiles = next(p for p in k["params"] if p.get("arg") == "tiles" and p["kind"] == "tensormap")
    assert tiles["dtype"] == "bf16" and tiles["box"] == [64, 128]


def ptx_text_of(target: str, name: str):

    checked = api.check_target(_analysis(ROOT / "kernels" / f"{name}.vx"), target)
    return ptx_text(api.backend_module(checked), TARGETS[checked.target])


@pytest.mark.parametrize("target", ARCH)
def test_tensor_maps_are_converted_with_cvta_param(target):
    _, ptx, _ = ptx_text_of(target, "stream")
    lines = ptx.splitlines()
    for name in ("tiles_tmap", "result0_tmap"):
        (i,) = [
            n for n, line in enumerate(lines) if "mov.b64" in line and line.endswith(f"{name};")
        ]
        reg = lines[i].split()[1].rstrip(",")
        assert "cvta.param.u64" in lines[i + 1] and lines[i + 1].endswith(f"{reg};")
    assert ".param .align 64 .b8 tiles_tmap[128]" in ptx


@pytest.mark.parametrize(("target", "other"), [("h100", "sm_100a"), ("b200", "sm_90a")])
def test_one_architectures_mma_is_rejected_by_ptxas_for_the_other(target, other):
    _, ptx, kernels = ptx_text_of(target, "stream")
    retargeted = ptx.replace(f".target {ARCH[target]}", f".target {other}")
    with pytest.raises(toolchain.ToolchainError) as e:
        toolchain.ptxas(retargeted, other, [k["name"] for k in kernels])
    mma = "wgmma" if target == "h100" else "tcgen05"
    assert mma in str(e.value) and "not supported on .target" in str(e.value)


def test_ptxas_spills_are_refused():
    # A kernel that needs more live registers than ptxas may use at 128 threads x 255.
    body = "\n".join(f"\tld.global.f32 %f{i}, [%rd0+{4 * i}];" for i in range(300))
    body += "\n" + "\n".join(f"\tst.global.f32 [%rd0+{4 * i}], %f{i};" for i in range(300))
    ptx = (
        textwrap.dedent(
            """\
        .version 8.7
        .target sm_90a
        .address_size 64
        .visible .entry spill(.param .u64 p)
        .maxntid 1024, 1, 1
        {
        \t.reg .b64 %rd<1>;
        \t.reg .f32 %f<300>;
        \tld.param.u64 %rd0, [p];
        """
        )
        + body
        + "\n\tret;\n}\n"
    )
    with pytest.raises(toolchain.ToolchainError, match="spilled registers"):
        toolchain.ptxas(ptx, "sm_90a", ["spill"])


def test_the_tools_come_from_the_installed_wheels():
    d = toolchain.bin_dir()
    assert "site-packages" in str(d) and (d / "ptxas").is_file() and (d / "nvdisasm").is_file()


BF16_K64 = """
fn mm(tiles: &Vec<Tensor<bf16, [128, 64]>>, w: &Tensor<bf16, [64, 256]>) -> Tensor<f32, [128, 256]> on Topology::TensorCore {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 256]), Memory::ACC);
  for i in 0..tiles.len() {
    let cur = transfer(tiles[i], Memory::VMEM);
    matmul_acc(&mut acc, &cur, &wv);
  }
  return transfer(acc, Memory::HBM);
}
"""


def test_bf16_operands_with_n_256_on_b200_use_kind_f16():
    files = _build("b200", "mm.vx", BF16_K64)
    sass = toolchain.sass(files["mm.b200.fatbin"])
    assert "UTCHMMA" in sass
    _, ptx, _ = ptx_of_text("b200", BF16_K64)
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    k = Manifest.from_bytes(files["mm.b200.json"]).kernels[0]
    assert k["tmem_columns"] == 256


def test_n_256_does_not_fit_hopper_registers_and_says_so():
    msg = refused(api.build(_analysis("mm.vx", BF16_K64), "h100"), "E7007")
    assert re.search(r"N = 256: N must be a multiple of 16 in \[16, 128\] on sm_90a", msg)


def ptx_of_text(target: str, text: str):

    checked = api.check_target(_analysis("t.vx", text), target)
    assert checked.ok, [d.message for d in checked.diagnostics]
    return ptx_text(api.backend_module(checked), TARGETS[checked.target])


@pytest.mark.parametrize("target", ARCH)
def test_seed_extern_matmul_acc_needs_a_device_library(target):
    msg = refused(api.build(_analysis(ROOT / "kernels" / "seed.vx"), target), "E7002")
    assert "call to extern `matmul_acc`" in msg
    assert "extern device functions need a linkable device library" in msg


ASYNC_B = """
fn f(tiles: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let t = transfer_async(w, Memory::VMEM);
  let wv = wait(t);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let cur = transfer(tiles[0], Memory::VMEM);
  matmul_acc(&mut acc, &cur, &wv);
  return transfer(acc, Memory::HBM);
}
"""


def test_async_b_operand_is_refused_plainly():
    assert "TMA cannot transpose" in refused(api.build(_analysis("f.vx", ASYNC_B), "h100"))


@pytest.mark.parametrize("target", ARCH)
def test_tma_box_limits_are_a_diagnostic_before_ptxas(target):
    text = (ROOT / "tests/golden/cases/E6012_box_dimension_over_256.vx").read_text()
    result = api.build(_analysis("tall.vx", text), target)
    assert not result.ok and not result.outputs
    codes = {d.code for d in result.diagnostics}
    assert codes == {"E6012"}
    assert any("512" in d.message and "256" in d.message for d in result.diagnostics)


@pytest.mark.parametrize("target", ARCH)
def test_validate_passes_a_built_artifact_and_names_a_wrong_one(artifacts, target, tmp_path):
    from vxc.backends.nvidia.validate import check_artifact

    for name, data in artifacts[(target, "stream")].items():
        (tmp_path / name).write_bytes(data)
    assert check_artifact(tmp_path, target) == []
    # The other architecture's fatbin under this target's name: caught by ptxas / SASS.
    other = "b200" if target == "h100" else "h100"
    (tmp_path / f"stream.{target}.fatbin").write_bytes(
        artifacts[(other, "stream")][f"stream.{other}.fatbin"]
    )
    problems = check_artifact(tmp_path, target)
    assert problems and all(p.startswith(f"stream.{target}.fatbin") for p in problems), problems


HELPER = """
fn acc_into(acc: &mut Tensor<f32, [128, 128]>, x: &Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>) on Topology::TensorCore {
  matmul_acc(acc, x, w);
}
fn uses_helpers(x: &Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  acc_into(&mut acc, &xv, &wv);
  return transfer(acc, Memory::HBM);
}
"""

HELPER_WITH_TILES = """
fn load(x: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let v = transfer(x, Memory::VMEM);
  return transfer(v, Memory::HBM);
}
fn k(x: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  return load(x);
}
"""


@pytest.mark.parametrize("target", ARCH)
def test_a_helper_is_inlined_into_the_kernel(target, tmp_path):
    from vxc.backends.nvidia.validate import check_artifact

    files = _build(target, "uses_helpers.vx", HELPER)
    m = Manifest.from_bytes(files[f"uses_helpers.{target}.json"])
    assert [k["name"] for k in m.kernels] == ["uses_helpers"]  # the helper is no entry
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert check_artifact(tmp_path, target) == []  # its matmul_acc is in the SASS


@pytest.mark.parametrize("target", ARCH)
def test_a_helper_with_tiles_of_its_own_is_inlined_with_its_frame(target, tmp_path):
    """Was E7002 ("places tiles of its own in a scratchpad"): the inlining pass before
    the backends (vxc/ir/passes/inline.py) stacks the helper's rings above the kernel's, so its
    tile is one more ring of the CTA's shared-memory layout (tests/e2e/test_inline.py
    runs such helpers in the PTX simulator)."""
    from vxc.backends.nvidia.validate import check_artifact

    files = _build(target, "k.vx", HELPER_WITH_TILES)
    (k,) = Manifest.from_bytes(files[f"k.{target}.json"]).kernels
    assert k["smem_layout"]["tiles"] == 65536
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert check_artifact(tmp_path, target) == []


FOUR_TILES = """
fn k(a: &Tensor<f32, [128, 128]>, b: &Tensor<f32, [128, 128]>, c: &Tensor<f32, [128, 128]>, d: &Tensor<f32, [128, N]>) -> Tensor<f32, [128, N]> on Topology::TensorCore {
  let mut acc = transfer(Tensor<f32>([128, N]), Memory::ACC);
  let av = transfer(a, Memory::VMEM);
  let bv = transfer(b, Memory::VMEM);
  let cv = transfer(c, Memory::VMEM);
  let dv = transfer(d, Memory::VMEM);
  matmul_acc(&mut acc, &av, &dv);
  matmul_acc(&mut acc, &bv, &dv);
  matmul_acc(&mut acc, &cv, &dv);
  return transfer(acc, Memory::HBM);
}
"""


@pytest.mark.parametrize("target", ARCH)
def test_a_layout_the_model_accepts_fits_the_shared_memory_the_backend_has(target):
    """The models' VMEM is the shared memory a CTA's tiles get (the opt-in limit less the
    backend's alignment and barriers): 3 x 64 KiB + 36 KiB of tiles fit the models' old
    228 KB and checked clean, then the build was refused (232 448 bytes with barriers and
    alignment). Now the check says so (E6010), and a layout at the limit builds."""
    over = api.check_target(_analysis("k.vx", FOUR_TILES.replace("N", "72")), target)
    assert [d.code for d in over.diagnostics] == ["E6010"]
    files = _build(target, "k.vx", FOUR_TILES.replace("N", "64"))  # 224 KiB of tiles
    (k,) = Manifest.from_bytes(files[f"k.{target}.json"]).kernels
    assert k["smem_layout"]["tiles"] == 3 * 65536 + 32768 <= TARGETS[target].arch.smem_tiles
    assert k["dynamic_smem"] <= TARGETS[target].arch.smem_limit


# kernels/gemm.vx and gemm_3stage.vx: views of A and B at the instance's coordinates, the
# result stored into the `&mut` output C (LANGUAGE.md 4.2). Per K tile: two TMA boxes of A
# and two of B (64 columns of 128 bytes each under the 128-byte swizzle); per matmul_acc:
# 8 K steps (k16), two m64 halves on Hopper.
GEMM_LOADS = {"gemm": 8, "gemm_3stage": 12}  # issue sites: the prologue's tiles + the loop's


@pytest.mark.parametrize("target", ARCH)
@pytest.mark.parametrize("name", sorted(GEMM_LOADS))
def test_gemm_builds_with_tma_views_and_a_tma_store(target, name):
    files = _build(target, ROOT / "kernels" / f"{name}.vx")
    sass = toolchain.sass(files[f"{name}.{target}.fatbin"])
    assert toolchain.missing_sass(sass, ARCH[target]) == []
    count = lambda op: len(re.findall(rf"\b{op}\b", sass))  # noqa: E731
    assert count("UTMALDG.2D") == GEMM_LOADS[name] and count("UTMASTG.2D") == 1
    assert count("LDG") == 0  # B comes by TMA, not by scalar loads
    sites = GEMM_LOADS[name] // 4  # matmul_acc sites: the loop's and the tail's
    if target == "b200":
        assert count("UTCHMMA") == 8 * sites
    else:
        assert count("HGMMA.64x128x16.F32.BF16") == 16 * sites
    (k,) = Manifest.from_bytes(files[f"{name}.{target}.json"]).kernels
    names = ["m", "n", "k", "a_tmap", "b_tmap_mn", "c_tmap_rm", "vx_status"]  # status: `where`
    assert [p["name"] for p in k["params"]] == names
    a, b, c = k["params"][3:6]
    assert all(p["view"] for p in (a, b, c)) and [p["mut"] for p in (a, b, c)] == [0, 0, 1]
    assert (a["box"], b["box"], a["swizzle"], b["swizzle"]) == (
        [64, 128],
        [64, 128],
        "128B",
        "128B",
    )
    assert (c["box"], c["swizzle"], c["dtype"]) == ([128, 128], "none", "f32")
    assert k["results"] == [] and 0 < k["registers"] <= 255


# The tile-arithmetic kernels (backends/nvidia/tiles.py): what their SASS must hold.
# gemm_epilogue: gemm's loads (8) plus the bias row's; the epilogue straight from the
# accumulator (TMEM / fragment registers), bf16 pairs packed into 32-bit stores.
# softmax: two TMA loads (one per pass), a TMA store, ex2 on the MUFU, shfl butterflies.
TILE_SASS = {
    "gemm_epilogue": {"UTMALDG.2D": 9, "UTMASTG.2D": 1, "STS.U16": 0, "LDG": 0, "MUFU.EX2": 0},
    "softmax": {"UTMALDG.2D": 2, "UTMASTG.2D": 1, "SHFL.BFLY": 20, "LDG": 0},
}


@pytest.mark.parametrize("target", ARCH)
@pytest.mark.parametrize("name", sorted(TILE_SASS))
def test_tile_kernels_build_with_their_sass(target, name):
    files = _build(target, ROOT / "kernels" / f"{name}.vx")
    sass = toolchain.sass(files[f"{name}.{target}.fatbin"])
    count = lambda op: len(re.findall(rf"\b{re.escape(op)}\b", sass))  # noqa: E731
    assert {op: count(op) for op in TILE_SASS[name]} == TILE_SASS[name]
    if name == "softmax":
        assert count("MUFU.EX2") > 0 and count("HGMMA") + count("UTCHMMA") == 0
    else:
        assert toolchain.missing_sass(sass, ARCH[target]) == []
        mma = "UTCHMMA" if target == "b200" else "HGMMA.64x128x16.F32.BF16"
        assert count(mma) == (16 if target == "b200" else 32)
    (k,) = Manifest.from_bytes(files[f"{name}.{target}.json"]).kernels
    assert 0 < k["registers"] <= 255  # ptxas -v: the build refuses any spill
    assert k["dynamic_smem"] <= TARGETS[target].arch.smem_limit


# A fuzz finding (check clean, build failed): ptxas 13.5 aborts with "double free or
# corruption" on this module of two entries, a b200 GEMM followed by a kernel without
# tcgen05, though each assembles alone. The toolchain assembles the entries one by one then
# and links them into one cubin (toolchain._ptxas_apart).
COPY_AFTER_GEMM = """
fn k(x: &Tensor<f32, [8, 128]>) -> Tensor<f32, [8, 128]> on Topology::TensorCore {
  let v = transfer(x, Memory::VMEM);
  for i in 0..4 { }
  return transfer(v, Memory::HBM);
}
"""


@pytest.mark.parametrize("target", ARCH)
def test_a_module_ptxas_aborts_on_is_assembled_entry_by_entry(target):
    text = (ROOT / "kernels" / "gemm_3stage.vx").read_text() + COPY_AFTER_GEMM
    outputs = _build(target, "two.vx", text)
    fatbin = outputs[f"two.{target}.fatbin"]
    functions = re.findall(r"Function : (\w+)", toolchain.sass(fatbin))
    assert {"gemm3", "k"} <= set(functions), functions
    assert not toolchain.missing_sass(toolchain.sass(fatbin), ARCH[target])
    assert _build(target, "two.vx", text) == outputs  # byte-identical on the second path
