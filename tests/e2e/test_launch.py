"""Launch instances (LANGUAGE.md section 4.1) end to end: kernels/stream_grid.vx checked,
lowered with the launch ops, built for the CPU and run as N instances against numpy;
bad launches give a status from C and an exception in Python, never a crash."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from vxc import api, runtime
from vxc.ir import parse_module, print_module
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "kernels" / "stream_grid.vx"
BF16 = ml_dtypes.bfloat16


def _src(text: bytes | None = None, name: str = "kernels/stream_grid.vx") -> api.Source:
    return api.Source(name, GRID.read_bytes() if text is None else text)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    result = api.build(api.analyze([_src()]), "cpu")
    assert result.ok, api.render(result.diagnostics, [_src()])
    out = tmp_path_factory.mktemp("grid")
    return runtime.load_outputs(result.outputs, out), out, result.outputs


def _data(n: int, seed: int = 0):
    """bf16 tiles of small integers: every product and partial sum is exact in f32."""
    rng = np.random.default_rng(seed)
    tiles = rng.integers(-3, 4, (n, 128, 128)).astype(BF16)
    w = rng.integers(-3, 4, (128, 128)).astype(BF16)
    return tiles, w


def expected(tiles, w, instances: int) -> np.ndarray:
    """What stream_grid computes: instance k sums tiles[k*per, k*per + per) @ w with
    per = len // instances; tiles past instances*per are in no instance's share."""
    tf, wf = tiles.astype(np.float64), w.astype(np.float64)
    per = len(tiles) // instances
    return np.stack(
        [tf[k * per : k * per + per].sum(axis=0) @ wf for k in range(instances)]
    ).astype(np.float32)


@pytest.mark.parametrize(
    ("tiles", "instances"),
    [(8, 1), (8, 2), (14, 7), (9, 2), (10, 7), (7, 7)],  # 9/2 and 10/7 leave tiles over
)
def test_grid_matches_numpy(built, tiles, instances):
    art, _, _ = built
    t, w = _data(tiles, seed=tiles * 10 + instances)
    out = art.stream_grid.launch(t, w, instances=instances)
    assert out.shape == (instances, 128, 128) and out.dtype == np.float32
    np.testing.assert_array_equal(out, expected(t, w, instances))


def test_grid_random_data_and_f32_accumulation(built):
    art, _, _ = built
    rng = np.random.default_rng(3)
    t = rng.standard_normal((11, 128, 128), dtype=np.float32).astype(BF16)
    w = rng.standard_normal((128, 128), dtype=np.float32).astype(BF16)
    ref = expected(t, w, 3)
    np.testing.assert_allclose(art.stream_grid.launch(t, w, instances=3), ref, rtol=1e-4, atol=1e-3)


def test_single_instance_form_is_instance_0_of_1(built):
    art, _, _ = built
    t, w = _data(5, seed=1)
    np.testing.assert_array_equal(art.stream_grid(t, w), expected(t, w, 1)[0])
    np.testing.assert_array_equal(
        art.stream_grid(t, w), art.stream_grid.launch(t, w, instances=1)[0]
    )


def test_thread_count_does_not_change_the_result(built, monkeypatch):
    art, _, _ = built
    t, w = _data(12, seed=2)
    ref = art.stream_grid.launch(t, w, threads=1, instances=4)
    for threads in (0, 2, 64):
        assert art.stream_grid.launch(t, w, threads=threads, instances=4).tobytes() == ref.tobytes()
    monkeypatch.setenv("VX_NUM_THREADS", "2")  # read at each launch
    assert art.stream_grid.launch(t, w, instances=4).tobytes() == ref.tobytes()


def test_the_count_first_spelling_is_deprecated_and_runs_the_same(built):
    """One launch spelling (issue 36): `launch(*args, instances=N)`, as `vxc.Kernel` takes
    it; the runtime's older `launch(N, *args)` still runs for a release, with a warning."""
    art, _, _ = built
    t, w = _data(6, seed=4)
    with pytest.warns(DeprecationWarning, match=r"launch\(\*args, instances=N\)"):
        old = art.stream_grid.launch(3, t, w)
    np.testing.assert_array_equal(old, art.stream_grid.launch(t, w, instances=3))
    with pytest.raises(runtime.ArgumentError, match="needs `instances=N`"):
        art.stream_grid.launch()


def test_raw_bf16_bits_are_accepted(built):
    art, _, _ = built
    t, w = _data(4, seed=4)
    got = art.stream_grid.launch(t.view(np.uint16), w.view(np.uint16), instances=2)
    np.testing.assert_array_equal(got, expected(t, w, 2))


@pytest.mark.parametrize(("instances", "threads"), [(0, 0), (-3, 0), (2, -1)])
def test_bad_counts_are_launch_errors(built, instances, threads):
    art, _, _ = built
    t, w = _data(4)
    with pytest.raises(runtime.LaunchError, match=r"VX_ERR_LAUNCH \(5\)"):
        art.stream_grid.launch(t, w, threads=threads, instances=instances)


def test_more_instances_than_tiles_breaks_the_where_clause(built):
    art, _, _ = built
    t, w = _data(3)
    with pytest.raises(runtime.LaunchError, match=r"VX_ERR_WHERE \(7\).*instances\(\) <= "):
        art.stream_grid.launch(t, w, instances=4)
    with pytest.raises(runtime.LaunchError, match="VX_ERR_WHERE"):
        art.stream_grid(t[:0], w)  # no tiles: even one instance has no share
    assert art.stream_grid.launch(t, w, instances=3).shape == (3, 128, 128)  # one tile each is fine


def test_c_status_codes(built):
    """The statuses themselves, through the C entry points (no Python checks between)."""
    art, _, _ = built
    status = art.manifest["status"]
    lib = ctypes.CDLL(str(art.library_path))
    launch, single = lib.stream_grid_launch, lib.stream_grid
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    launch.argtypes = [i64, ctypes.c_int32, p, i64, p, p]
    single.argtypes = [p, i64, p, p]
    launch.restype = single.restype = ctypes.c_int32
    t, w = _data(4)
    out = np.zeros((2, 128, 128), np.float32)
    tp, wp, op = (p(a.ctypes.data) for a in (t, w, out))
    assert launch(0, 0, tp, 4, wp, op) == status["VX_ERR_LAUNCH"]
    assert launch(2, -1, tp, 4, wp, op) == status["VX_ERR_LAUNCH"]
    assert launch(2, 0, tp, 4, wp, None) == status["VX_ERR_NULL"]
    assert single(tp, 4, wp, None) == status["VX_ERR_NULL"]
    assert launch(2, 0, None, 4, wp, op) == status["VX_ERR_NULL"]  # null tiles, 4 of them
    assert launch(2, 0, None, 0, wp, op) == status["VX_ERR_WHERE"]  # null and empty: fine
    assert launch(5, 0, tp, 4, wp, op) == status["VX_ERR_WHERE"]
    assert not out.any()  # nothing was written by the refused launches
    assert launch(2, 0, tp, 4, wp, op) == status["VX_OK"]
    np.testing.assert_array_equal(out, expected(t, w, 2))


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_callable_from_c(built, tmp_path):
    """A C program links the object and calls both entry points (the header's ABI)."""
    _, out_dir, _ = built
    main = tmp_path / "main.c"
    main.write_text(
        r"""
#include <stdio.h>
#include <string.h>
#include "stream_grid.cpu.h"
static uint16_t tiles[6][128][128], w[128][128];
static float one[128][128], many[3][128][128];
int main(void) {
  for (int i = 0; i < 128; i++) w[i][i] = 0x3f80;            /* bf16 1.0: w = identity */
  for (int t = 0; t < 6; t++) tiles[t][0][0] = 0x3f80 + (t << 7); /* 1, 2, 4, 8, ... */
  int s = stream_grid(&tiles[0][0][0], 6, &w[0][0], &one[0][0]);
  int l = stream_grid_launch(3, 0, &tiles[0][0][0], 6, &w[0][0], &many[0][0][0]);
  int bad = stream_grid_launch(0, 0, &tiles[0][0][0], 6, &w[0][0], &many[0][0][0]);
  printf("%d %d %d %g %g %g %g\n", s, l, bad, one[0][0], many[0][0][0], many[1][0][0],
         many[2][0][0]);
  return 0;
}
"""
    )
    exe = tmp_path / "main"
    cmd = ["cc", "-O1", "-I", str(out_dir), str(main), str(out_dir / "stream_grid.cpu.o")]
    subprocess.run([*cmd, "-o", str(exe)], check=True, capture_output=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    # tiles hold 1, 2, 4, 8, 16, 32 at [0][0]; 3 instances take two tiles each.
    assert got == ["0", "0", "5", "63", "3", "12", "48"]


def test_header_documents_the_launch(built):
    _, _, outputs = built
    h = outputs["stream_grid.cpu.h"].decode()
    assert "int32_t stream_grid(const uint16_t *tiles, int64_t tiles_dim0," in h
    assert "int32_t stream_grid_launch(int64_t vx_instances, int32_t vx_threads," in h
    assert "VX_NUM_THREADS" in h and "one per core" in h
    assert "requires: instances() <= tiles.len() (else VX_ERR_WHERE)" in h


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_vx_mlir_carries_the_launch_for_every_target(target):
    result = api.build(api.analyze([_src()]), target, "vx-mlir")
    assert result.ok, api.render(result.diagnostics, [_src()])
    (text,) = (v.decode() for k, v in result.outputs.items() if k.endswith(".mlir"))
    assert 'vx.launch = "instances"' in text
    assert '"vx.instance"() : () -> i64' in text and '"vx.instances"() : () -> i64' in text
    assert '"vx.require"' in text and 'clause = "instances() <= tiles.len()"' in text
    assert print_module(parse_module(text)) == text  # round-trips (and verifies)


def test_helpers_see_the_instance_of_their_caller(tmp_path):
    src = _src(
        b"""
fn offset(k: i64, n: i64) -> i64 on Topology::TensorCore where k < n {
  return instance() * 1000 + instances() * 10 + k;
}
fn ids(x: &Tensor<f32, [1, 1]>) -> i64 on Topology::TensorCore {
  return offset(instance(), instances());
}
""",
        "ids.vx",
    )
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render(result.diagnostics, [src])
    art = runtime.load_outputs(result.outputs, tmp_path)
    x = np.zeros((1, 1), np.float32)
    assert art.ids(x) == 10
    assert art.ids.launch(x, instances=3).tolist() == [30, 1031, 2032]


def _codes(text: bytes, target: str = "cpu") -> list[str]:
    checked = api.check([api.Source("k.vx", text)], target)
    return [d.code for d in checked.diagnostics]


HELPER = b"""
fn part(k: i64, n: i64) -> void on Topology::TensorCore where k < n, n >= 1 { }
fn k(x: &Tensor<f32, [1, 1]>) -> void on Topology::TensorCore {
  CALL;
}
"""


@pytest.mark.parametrize(
    ("call", "codes"),
    [
        (b"part(instance(), instances())", []),  # 0 <= instance() < instances()
        (b"part(instances() - 1, instances())", []),  # instances() >= 1
        (b"part(instances(), instances())", ["E6005"]),
        (b"part(instance(), 4)", ["E6005"]),  # instances() may exceed 4
    ],
)
def test_where_bounds_use_the_launch_facts(call, codes):
    assert _codes(HELPER.replace(b"CALL", call)) == codes


STALE = b"""
fn k(tiles: &Vec<Tensor<f32, [8, 8]>>) -> void on Topology::TensorCore {
  let tok = transfer_async(tiles[0], Memory::VMEM);
  let mut acc = Tensor<f32>([8, 8]);
  if COND {
    matmul_acc(&mut acc, &tok, &tok);
  }
  let t = wait(tok);
}
"""


@pytest.mark.parametrize(
    ("cond", "codes"),
    [
        # Infeasible: no stale state is reached (no E6004), but a token is never a tensor
        # (E0404, issue 25: these reads reached the backends as tokens).
        (b"instance() >= instances()", ["E0404", "E0404"]),
        (b"instances() < 1", ["E0404", "E0404"]),
        (b"instance() < 0", ["E0404", "E0404"]),
        (b"instance() == instances() - 1", ["E6004", "E6004"]),  # feasible: a and b
    ],
)
def test_branch_feasibility_uses_the_launch_facts(cond, codes):
    assert _codes(STALE.replace(b"COND", cond)) == codes


def test_intrinsics_take_no_arguments():
    assert _codes(HELPER.replace(b"CALL", b"part(instance(1), instances())")) == ["E0202"]


def test_entry_taking_a_token_is_e0401():
    src = b"""
fn k(t: Token<Tensor<f32, [8, 8]>, Memory::VMEM>) -> Tensor<f32, [8, 8]> on Topology::TensorCore {
  return transfer(wait(t), Memory::HBM);
}
"""
    assert _codes(src) == ["E0401"]


def test_a_failing_instance_is_a_status_and_the_others_still_finish(tmp_path):
    """Without a `where` clause, an instance that indexes past the Vec fails alone with
    VX_ERR_INDEX; the launch reports it (the lowest failing instance's status)."""
    src = api.Source(
        "pick.vx",
        b"""
fn pick(tiles: &Vec<Tensor<f32, [4, 4]>>) -> Tensor<f32, [4, 4]> on Topology::TensorCore {
  let t = transfer(tiles[instance()], Memory::VMEM);
  return transfer(t, Memory::HBM);
}
""",
    )
    result = api.build(api.analyze([src]), "cpu")
    assert result.ok, api.render_human(result.diagnostics, [src])
    art = runtime.load_outputs(result.outputs, tmp_path)
    tiles = np.arange(3 * 16, dtype=np.float32).reshape(3, 4, 4)
    np.testing.assert_array_equal(art.pick.launch(tiles, instances=3), tiles)
    with pytest.raises(runtime.KernelError, match="VX_ERR_INDEX") as e:
        art.pick.launch(tiles, instances=5)
    assert not isinstance(e.value, runtime.LaunchError)
