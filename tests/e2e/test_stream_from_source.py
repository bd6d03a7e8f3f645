"""End to end from Vx source: kernels/stream*.vx -> checks -> vx IR -> CPU object -> numbers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from vxc import api, runtime
from vxc.ir import parse_module, print_module

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"


def _source(name: str) -> api.Source:
    path = KERNELS / name
    return api.Source(f"kernels/{name}", path.read_bytes())


def _build(name: str, target: str = "cpu", emit: str = "artifact") -> api.BuildResult:
    result = api.build(api.analyze([_source(name)]), target, emit)
    assert result.ok, api.render(result.diagnostics, [_source(name)])
    return result


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    out = {}
    for name in ("stream.vx", "stream_blocking.vx", "stream_triple.vx"):
        outputs = _build(name).outputs
        out[name[:-3]] = runtime.load_outputs(outputs, tmp_path_factory.mktemp(name[:-3]))
    return out


def _data(n: int, k: int, exact: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    if exact:  # small integers: every partial sum is exact in f32
        tiles = rng.integers(-2, 3, (n, 128, k)).astype(np.float32)
        w = rng.integers(-2, 3, (k, 128)).astype(np.float32)
    else:
        tiles = rng.standard_normal((n, 128, k), dtype=np.float32)
        w = rng.standard_normal((k, 128), dtype=np.float32)
    ref = np.einsum("nik,kj->ij", tiles.astype(np.float64), w.astype(np.float64))
    return tiles, w, ref


@pytest.mark.parametrize("n", [1, 2, 3, 64])
@pytest.mark.parametrize("exact", [True, False])
def test_stream_matches_numpy(kernels, n, exact):
    tiles, w, ref = _data(n, 128, exact, seed=n)
    out = kernels["stream"].stream(tiles, w)
    if exact:
        np.testing.assert_array_equal(out, ref.astype(np.float32))
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_blocking_and_async_agree_bit_for_bit(kernels, n):
    tiles, w, _ = _data(n, 128, exact=False, seed=100 + n)
    async_out = kernels["stream"].stream(tiles, w)
    blocking_out = kernels["stream_blocking"].stream_blocking(tiles, w)
    np.testing.assert_array_equal(async_out, blocking_out)


@pytest.mark.parametrize("n", [2, 3, 64])
def test_triple_buffering_matches_numpy(kernels, n):
    tiles, w, ref = _data(n, 64, exact=True, seed=200 + n)
    np.testing.assert_array_equal(
        kernels["stream_triple"].stream_triple(tiles, w), ref.astype(np.float32)
    )


def test_shape_mismatch_is_a_clear_error(kernels):
    tiles, w, _ = _data(2, 128, exact=True)
    with pytest.raises(runtime.ArgumentError, match="w"):
        kernels["stream"].stream(tiles, w[:64])


def test_seed_vx_mlir_has_two_async_transfers_two_waits_and_a_ping_pong_ring():
    text = _build("seed.vx", "tpu", "vx-mlir").outputs["seed.tpu.mlir"].decode()
    assert text.count('"vx.transfer_async"') == 2
    assert text.count('"vx.wait"') == 2
    asyncs = [line for line in text.splitlines() if '"vx.transfer_async"' in line]
    for line in asyncs:  # one ring of two 64 KiB slots at VMEM offset 0: offsets 0 and 65536
        for attr in (
            "offset = 0 :",
            "slots = 2 :",
            "slot_bytes = 65536 :",
            "ring = 0 :",
            'space = "VMEM"',
            'from = "HBM"',
            "granule = 4096 :",
        ):
            assert attr in line, (attr, line)
    assert "scf.for" in text and "iter_args" in text
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("target", ["cpu", "tpu", "b200", "h100"])
def test_vx_mlir_round_trips_for_every_target(target):
    for name in ("stream.vx", "stream_triple.vx"):
        text = _build(name, target, "vx-mlir").outputs[f"{name[:-3]}.{target}.mlir"].decode()
        assert f'vx.target = "{target}"' in text
        assert print_module(parse_module(text)) == text


def test_b200_accumulates_in_tmem_through_smem():
    text = _build("stream.vx", "b200", "vx-mlir").outputs["stream.b200.mlir"].decode()
    assert 'space = "TMEM"' in text  # zero tile staged VMEM -> TMEM, result TMEM -> VMEM -> HBM
    assert text.count('from = "TMEM"') == 1


def test_builds_are_byte_identical():
    first = _build("stream.vx").outputs
    second = _build("stream.vx").outputs
    assert sorted(first) == ["stream.cpu.h", "stream.cpu.json", "stream.cpu.o", "stream.cpu.so"]
    for name in first:
        assert first[name] == second[name], name


def test_a_c_program_links_the_object_and_calls_the_kernel(tmp_path):
    outputs = _build("stream.vx").outputs
    for name, data in outputs.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "stream.cpu.h"\n'
        "static float tiles[2][128][128], w[128][128], out[128][128];\n"
        "int main(void) {\n"
        "  for (int i = 0; i < 128; i++) { w[i][i] = 2.0f; tiles[0][i][i] = 1.0f;"
        " tiles[1][i][i] = 3.0f; }\n"
        "  int status = stream(&tiles[0][0][0], 2, &w[0][0], &out[0][0]);\n"
        '  printf("%d %g %g\\n", status, out[5][5], out[5][6]);\n'
        "  return status;\n}\n"
    )
    exe = tmp_path / "main"
    subprocess.run(
        [
            "cc",
            "-O1",
            "-o",
            str(exe),
            str(tmp_path / "main.c"),
            str(tmp_path / "stream.cpu.o"),
            "-lm",
        ],
        check=True,
        cwd=tmp_path,
    )
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["0", "8", "0"]  # (1 + 3) * 2 on the diagonal


def test_hir_cache_round_trip_builds_the_same_artifact():
    src = [_source("stream.vx")]
    analysis = api.analyze(src)
    data = analysis.to_bytes()
    assert data == api.analyze(src).to_bytes()  # the cache itself is deterministic
    loaded = api.Analysis.from_bytes(data, src)
    assert api.build(loaded, "cpu").outputs == api.build(analysis, "cpu").outputs


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b"\x00garbage" + b,  # corrupt
        lambda b: b"",  # empty
    ],
)
def test_corrupt_hir_cache_is_refused(mangle):
    src = [_source("stream.vx")]
    data = api.analyze(src).to_bytes()
    with pytest.raises(api.StaleCache):
        api.Analysis.from_bytes(mangle(data), src)


def test_hir_cache_of_other_sources_is_refused():
    data = api.analyze([_source("stream.vx")]).to_bytes()
    with pytest.raises(api.StaleCache, match="other sources"):
        api.Analysis.from_bytes(data, [_source("stream_blocking.vx")])


def test_named_cpu_level_is_recorded_runs_and_is_deterministic(tmp_path):
    """x86-64-v3 is what Bazel builds by default: the same object on every build machine."""
    build = lambda: api.build(api.analyze([_source("stream.vx")]), "cpu", cpu="x86-64-v3")  # noqa: E731
    first, second = build(), build()
    assert first.ok and first.outputs == second.outputs
    assert '"cpu": "x86-64-v3"' in first.outputs["stream.cpu.json"].decode()
    kernel = runtime.load_outputs(first.outputs, tmp_path).stream
    tiles, w, ref = _data(3, 128, exact=True, seed=7)
    np.testing.assert_array_equal(kernel(tiles, w), ref.astype(np.float32))


def test_unknown_cpu_level_is_a_plain_error():
    with pytest.raises(api.Unsupported, match="unknown --cpu `zen4`"):
        api.build(api.analyze([_source("stream.vx")]), "cpu", cpu="zen4")


GUARDED = b"""\
fn guarded(tiles: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>, k: i64) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let mut acc = Tensor<f32>([128, 128]);
  if k == 0 {
    return transfer(acc, Memory::HBM);
  }
  let wv = transfer(w, Memory::VMEM);
  let cur = wait(transfer_async(tiles[0], Memory::VMEM));
  if k > 1 {
    matmul_acc(&mut acc, &cur, &wv);
  }
  matmul_acc(&mut acc, &cur, &wv);
  return transfer(acc, Memory::HBM);
}
"""


def test_guard_returns_lower_to_scf_if_and_run(tmp_path):
    src = api.Source("guarded.vx", GUARDED)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    kernel = runtime.load_outputs(result.outputs, tmp_path).guarded
    tiles = np.ones((1, 128, 128), np.float32)
    w = np.eye(128, dtype=np.float32)
    assert [kernel(tiles, w, k)[0, 0] for k in (0, 1, 2)] == [0.0, 1.0, 2.0]


TOKEN_HELPERS = b"""\
fn start(x: &Vec<Tensor<f32, [128, 128]>>, i: i64) -> Token<Tensor<f32, [128, 128]>, Memory::VMEM> on Topology::TensorCore {
  return transfer_async(x[i], Memory::VMEM);
}
fn finish(t: Token<Tensor<f32, [128, 128]>, Memory::VMEM>, acc: &mut Tensor<f32, [128, 128]>, w: &Tensor<f32, [128, 128]>) -> void on Topology::TensorCore {
  let v = wait(t);
  matmul_acc(acc, &v, w);
}
fn pipeline(x: &Vec<Tensor<f32, [128, 128]>>, w: &Tensor<f32, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let wv = transfer(w, Memory::VMEM);
  let mut acc = Tensor<f32>([128, 128]);
  let mut t = start(x, 0);
  for i in 1..x.len() {
    let next = start(x, i);
    finish(t, &mut acc, &wv);
    t = next;
  }
  finish(t, &mut acc, &wv);
  return transfer(acc, Memory::HBM);
}
"""


def test_tokens_through_helper_functions_build_and_run(tmp_path):
    src = api.Source("helpers.vx", TOKEN_HELPERS)
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    art = runtime.load_outputs(result.outputs, tmp_path)
    assert list(art.kernels) == ["pipeline"]  # helpers stay out of the header and manifest
    assert "start" not in result.outputs["helpers.cpu.h"].decode()
    tiles, w, ref = _data(5, 128, exact=True, seed=11)
    np.testing.assert_array_equal(art.pipeline(tiles, w), ref.astype(np.float32))


def test_a_kernel_entry_cannot_return_a_token():
    src = api.Source("entry.vx", TOKEN_HELPERS.split(b"fn finish")[0])
    # Instances' results are stacked for the caller: a token does not stack (E0401).
    result = api.build(api.analyze([src]), "cpu")
    assert not result.ok
    assert [d.code for d in result.diagnostics] == ["E0401"]
