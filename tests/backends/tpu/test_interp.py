"""The Mosaic interpreter: every kernel's numbers match numpy; a deleted `tpu.wait_dma2`
is a stale read naming the op; a doubled wait and a DMA never waited are reported; the
trace shows tile i+1's DMA issued before tile i's matmul."""

from __future__ import annotations

import numpy as np
import pytest
from tpu_kernels import KERNELS, ROOT, inputs, reference

from vxc.backends.tpu.interp import InterpError, run

STREAM = ROOT / "kernels" / "stream.vx"


def _inputs(kernel, n: int, seed: int = 0):
    return inputs(kernel, n, seed)


@pytest.mark.parametrize("path", KERNELS, ids=[p.stem for p in KERNELS])
@pytest.mark.parametrize("n", [2, 5])
def test_numbers_match_numpy(path, n, built):
    b = built(path)
    args = _inputs(b.kernel, n)
    r = run(b.mosaic, args, [p.name for p in b.kernel.inputs])
    np.testing.assert_array_equal(r.outputs[0], reference(b.kernel, args))


@pytest.mark.parametrize("instances,n", [(1, 3), (2, 4), (3, 7)])
def test_launch_grid_stacks_each_instance_share(instances, n, built):
    """stream_grid built for N instances: iteration_bounds = [N], each program id streams
    its share and writes its slice of the stacked result."""
    b = built(ROOT / "kernels" / "stream_grid.vx", instances)
    assert f"iteration_bounds = array<i64: {instances}>" in b.mosaic
    args = _inputs(b.kernel, n)
    r = run(b.mosaic, args, ["tiles", "w"])
    assert r.outputs[0].shape == (instances, 128, 128)
    np.testing.assert_array_equal(r.outputs[0], reference(b.kernel, args))
    assert [e[1] for e in r.trace if e[0] == "instance"] == list(range(instances))


def _without_line(text: str, k: int) -> str:
    return "\n".join(line for i, line in enumerate(text.splitlines()) if i != k)


def test_every_deleted_wait_is_reported(built):
    text = built(STREAM).mosaic
    args = _inputs(built(STREAM).kernel, 4)
    waits = [i for i, line in enumerate(text.splitlines()) if "tpu.wait_dma2" in line]
    assert len(waits) == 4  # w; tile i in the loop; the last tile; the result
    for k in waits:
        with pytest.raises(InterpError) as e:
            run(_without_line(text, k), args, ["tiles", "w"])
        msg = str(e.value)
        assert msg.startswith(("stale read:", "semaphore left signalled:")), msg
        assert "tpu.enqueue_dma" in msg


def test_deleted_loop_wait_is_a_stale_read_naming_the_load(built):
    text = built(STREAM).mosaic
    lines = text.splitlines()
    loop = next(i for i, line in enumerate(lines) if "scf.for" in line)
    k = next(i for i in range(loop, len(lines)) if "tpu.wait_dma2" in lines[i])
    with pytest.raises(InterpError) as e:
        run(_without_line(text, k), _inputs(built(STREAM).kernel, 4), ["tiles", "w"])
    msg = str(e.value)
    assert msg.startswith("stale read: `vector.load`")
    assert "tiles[0] -> %arg6[0]" in msg  # the DMA of tile 0 into ring slot 0


def test_doubled_wait_is_reported(built):
    text = built(STREAM).mosaic
    lines = text.splitlines()
    k = max(i for i, line in enumerate(lines) if "tpu.wait_dma2" in line)
    doubled = "\n".join(lines[: k + 1] + [lines[k]] + lines[k + 1 :])
    with pytest.raises(InterpError, match="semaphore waited twice: `tpu.wait_dma2`"):
        run(doubled, _inputs(built(STREAM).kernel, 3), ["tiles", "w"])


def test_trace_issues_tile_i_plus_1_before_tile_i_matmul(built):
    b = built(STREAM)
    n = 6
    r = run(b.mosaic, _inputs(b.kernel, n), ["tiles", "w"])
    start = {e[1]: k for k, e in enumerate(r.trace) if e[0] == "dma_start"}
    matmul = {e[1]: k for k, e in enumerate(r.trace) if e[0] == "matmul"}
    assert sorted(matmul) == sorted(f"tiles[{i}]" for i in range(n))
    for i in range(n - 1):
        assert start[f"tiles[{i + 1}]"] < matmul[f"tiles[{i}]"]
    # ...and only two slots: tile i+2's DMA waits for tile i's matmul to free the slot.
    for i in range(n - 2):
        assert matmul[f"tiles[{i}]"] < start[f"tiles[{i + 2}]"]


def test_blocking_kernel_never_overlaps(built):
    b = built(ROOT / "kernels" / "stream_blocking.vx")
    r = run(b.mosaic, _inputs(b.kernel, 3), ["tiles", "w"])
    kinds = [e[0] for e in r.trace]
    for k, kind in enumerate(kinds):
        if kind == "dma_start":
            assert kinds[k + 1] == "dma_wait"


def test_interpreter_has_a_rule_for_every_op_the_backend_emits(built):
    import re

    from vxc.backends.tpu.interp import RULES

    structural = {"func.func", "func.return", "scf.yield", "builtin.module"}
    for path in KERNELS:
        for instances in (0, 2) if path.stem == "stream_grid" else (0,):
            text = built(path, instances).mosaic
            ops = set(re.findall(r"\b((?:arith|tpu|vector|memref|scf|func)\.[a-z_0-9]+)\b", text))
            ops -= {o for o in ops if o.startswith("tpu.memory_space") or o.startswith("tpu.dim")}
            ops -= {"tpu.core_type", "tpu.dma_semaphore", "tpu.dot_dimension_numbers"}
            ops -= {"tpu.contract_precision"}  # an attribute of tpu.matmul, not an op
            ops -= {o for o in ops if o.startswith("tpu.dynamic_dimension_mapping")}
            missing = sorted(o for o in ops - structural if o not in RULES)
            assert not missing, f"{path.name}: no interpreter rule for {missing}"


def test_signed_division_truncates_like_arith():
    from vxc.backends.tpu.interp import _divsi, _remsi

    assert _divsi(np.int32(-7), np.int32(2)) == -3 and _remsi(np.int32(-7), np.int32(2)) == -1
    assert _divsi(np.int32(7), np.int32(-2)) == -3 and _remsi(np.int32(7), np.int32(-2)) == 1


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_f32_matmul_precision_is_stated_and_modelled(precision):
    """Inputs that are not exact in bf16 tell the two f32 matmul modes apart: the default
    (Mosaic's fp32 contract precision) matches numpy's f32 product to f32 rounding, the
    one-pass mode (`--tpu-matmul-precision bf16`) is off by bf16's rounding of the inputs."""
    from vxc import api

    src = api.Source("kernels/stream.vx", STREAM.read_bytes())
    result = api.build(api.analyze([src]), "tpu", "target-ir", tpu_matmul_precision=precision)
    assert result.ok, result.diagnostics
    (text,) = (v.decode() for k, v in result.outputs.items() if k.endswith(".mosaic.mlir"))
    assert ("contract_precision<fp32>" in text) == (precision == "f32")
    rng = np.random.default_rng(3)
    tiles = rng.standard_normal((3, 128, 128)).astype(np.float32)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    (out,) = run(text, [tiles, w], ["tiles", "w"]).outputs
    ref = tiles.astype(np.float64).sum(0) @ w.astype(np.float64)
    err = np.abs(out - ref).max() / np.abs(ref).max()
    if precision == "f32":
        assert err < 1e-6, err
    else:
        assert 1e-4 < err < 3e-2, err
