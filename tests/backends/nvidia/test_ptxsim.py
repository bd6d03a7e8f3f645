"""The generated PTX, run by a functional simulator of one CTA (ptxsim.py), against
numpy: the TMA boxes and swizzle, the ring slots and mbarrier phases, the
descriptors, the transposed B copy, the MMA accumulation and both epilogues. Inputs
are small integers, exact in tf32 / bf16 with an f32 accumulator, so results must
match exactly. Mutated PTX (a wrong swizzle, a wrong phase, a wrong box) must fail."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from vxc import api
from vxc.backends.nvidia import ptx_text, ptxsim
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[3]


def _ptx(target: str, name: str):
    src = ROOT / "kernels" / f"{name}.vx"
    checked = api.check_target(api.analyze([api.Source(str(src), src.read_bytes())]), target)
    _, ptx, kernels = ptx_text(api.backend_module(checked), TARGETS[checked.target])
    return ptx, kernels[0]


def _inputs(kernel: dict, n: int, seed: int):
    p = next(p for p in kernel["params"] if p.get("arg") == "tiles" and p["kind"] == "tensormap")
    rows, cols = p["tile"]
    rng = np.random.default_rng(seed)
    tiles = rng.integers(-3, 4, (n, rows, cols)).astype(np.float32)
    w = rng.integers(-3, 4, (cols, 128)).astype(np.float32)
    if p["dtype"] == "bf16":
        import ml_dtypes

        return tiles.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)
    return tiles, w


def _expected(tiles, w, instances: int, grid: bool) -> np.ndarray:
    t, w = tiles.astype(np.float64), w.astype(np.float64)
    if not grid:  # every instance computes the whole sum
        return np.stack([t.sum(0) @ w] * instances)
    per = len(t) // instances
    return np.stack([t[k * per : (k + 1) * per].sum(0) @ w for k in range(instances)])


def _run(target, name, n, instances, mutate=None, seed=0):
    ptx, k = _ptx(target, name)
    if mutate:
        ptx = mutate(ptx)
    tiles, w = _inputs(k, n, seed)
    (out,) = ptxsim.run_kernel(ptx, k, [tiles, w], instances)
    return out, _expected(tiles, w, instances, name.startswith("stream_grid"))


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_stream_kernel_computes_the_sum(target):
    out, ref = _run(target, "stream", 3, 1)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["h100", "b200"])
@pytest.mark.parametrize(
    ("name", "n", "instances"),
    [("stream_grid", 7, 3), ("stream_triple", 5, 1), ("stream_blocking", 2, 2), ("stream", 1, 1)],
)
def test_kernels_compute_their_sums(target, name, n, instances):
    out, ref = _run(target, name, n, instances, seed=n)
    np.testing.assert_array_equal(out, ref)


def _bad(target, name, n, mutate):
    try:
        out, ref = _run(target, name, n, 1, mutate)
    except ptxsim.SimError as e:
        return str(e)
    assert not np.array_equal(out, ref), "the mutated kernel still computes the right sum"
    return "mismatch"


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_the_simulator_catches_a_wrong_swizzle_in_the_transposed_b_copy(target):
    # Drop the XOR of the transposing copy: B lands unswizzled, the MMA reads garbage.
    def mutate(ptx: str) -> str:
        lines = ptx.splitlines()
        i = next(i for i, x in enumerate(lines) if "xor.b32" in x and "tcopy" not in x)
        return "\n".join(lines[:i] + lines[i + 1 :]) + "\n"

    assert _bad(target, "stream", 2, mutate)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["h100", "b200"])
def test_the_simulator_catches_a_wrong_phase_and_a_wrong_box(target):
    # Every TMA wait's parity forced to 0: from the third tile on, a wait passes on the
    # phase its slot completed two tiles earlier and reads the old tile.
    def phase(ptx: str) -> str:
        lines = ptx.splitlines()
        regs = {x.split(",")[-1].strip(" ;") for x in lines if "mbarrier.try_wait.parity" in x}
        for j, x in enumerate(lines):
            parts = x.split()
            if parts[:1] == ["and.b32"] and parts[1].rstrip(",") in regs and x.endswith(", 1;"):
                lines[j] = x.replace(", 1;", ", 0;")
        return "\n".join(lines) + "\n"

    assert _bad(target, "stream", 5, phase)

    # The second box of each A tile loaded from the first box's columns.
    def box(ptx: str) -> str:
        return ptx.replace("[%rd1, {32,", "[%rd1, {0,")

    assert _bad(target, "stream", 2, box)


@pytest.mark.parametrize("target", ["b200"])
def test_more_instances_than_tiles_is_the_where_status(target):
    ptx, k = _ptx(target, "stream_grid")
    tiles, w = _inputs(k, 1, 0)
    with pytest.raises(ptxsim.SimError, match="status word 7"):
        ptxsim.run_kernel(ptx, k, [tiles, w], 2)


BF16_N256 = """
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


@pytest.mark.slow
def test_b200_bf16_with_n_256_and_k_64():
    import ml_dtypes

    checked = api.check_target(api.analyze([api.Source("mm.vx", BF16_N256.encode())]), "b200")
    _, ptx, (k,) = ptx_text(api.backend_module(checked), TARGETS[checked.target])
    rng = np.random.default_rng(5)
    tiles = rng.integers(-3, 4, (3, 128, 64)).astype(ml_dtypes.bfloat16)
    w = rng.integers(-3, 4, (64, 256)).astype(ml_dtypes.bfloat16)
    (out,) = ptxsim.run_kernel(ptx, k, [tiles, w], 1)
    ref = tiles.astype(np.float64).sum(0) @ w.astype(np.float64)
    np.testing.assert_array_equal(out[0], ref)


# -- ordering: mutations that ptxas accepts and hardware would get wrong ---------------------
# Each deletes or changes what the PTX ISA requires for asynchronous work; the simulator
# must refuse each (a SimError naming the rule) or compute a wrong result.


def _drop(*prefixes: str):
    def mutate(ptx: str) -> str:
        keep = [x for x in ptx.splitlines() if not x.strip().startswith(prefixes)]
        return "\n".join(keep) + "\n"

    return mutate


def _drop_wait_loop(label: str):
    """Delete every `$L_<label>_N:` spin loop (the try_wait and its branch back)."""

    def mutate(ptx: str) -> str:
        out, lines, i = [], ptx.splitlines(), 0
        while i < len(lines):
            if lines[i].startswith(f"$L_{label}_"):
                i += 3  # label, try_wait, branch back
                continue
            out.append(lines[i])
            i += 1
        return "\n".join(out) + "\n"

    return mutate


def _sub(pattern: str, repl, count: int = 0):
    def mutate(ptx: str) -> str:
        new, n = re.subn(pattern, repl, ptx, count=count, flags=re.M)
        assert n, f"the mutation {pattern!r} matched nothing"
        return new

    return mutate


def _idesc(change):
    """Rewrite the tcgen05 instruction descriptor constant (`mov.b32 %r, IDESC;` right
    before the MMAs) with `change(value)`."""
    from vxc.backends.nvidia.encoders import tcgen05_idesc

    consts = {tcgen05_idesc(t, 128, 128) for t in ("f32", "bf16", "f16")}
    consts |= {tcgen05_idesc(t, 128, 128, transpose_b=True) for t in ("bf16", "f16")}
    return _sub(
        r"mov\.b32 (%r\d+), (\d+);",
        lambda m: (
            f"mov.b32 {m.group(1)}, {change(int(m.group(2)))};"
            if int(m.group(2)) in consts
            else m.group(0)
        ),
    )


ORDERING_MUTATIONS = {
    # b200 (tcgen05)
    "b200 without any fence or tcgen05.wait": (
        "b200",
        "stream",
        _drop("fence", "tcgen05.fence", "tcgen05.wait"),
        "not ordered|tcgen05.ld|tcgen05.st|mismatch|TMA wait",
    ),
    "b200 without the MMA-completion wait (write-after-read)": (
        "b200",
        "stream",
        _drop_wait_loop("mma_wait"),
        "may still read|still writes|changed before",
    ),
    "b200 without the fence between the TMA wait and the MMA": (
        "b200",
        "stream",
        _sub(r"^\s*tcgen05\.fence::after_thread_sync;\n(?=\s*@!%p0 bra \$L_mma_issued)", ""),
        "follows a TMA wait",
    ),
    "b200 with B as f16 in a bf16 MMA's instruction descriptor": (
        "b200",
        "stream_grid",
        _idesc(lambda x: x & ~(7 << 10)),
        "mismatch",
    ),
    "b200 with B as bf16 in a tf32 MMA's instruction descriptor": (
        "b200",
        "stream",
        _idesc(lambda x: (x & ~(7 << 10)) | (1 << 10)),
        "B format",
    ),
    "b200 with an f16 D in the instruction descriptor": (
        "b200",
        "stream",
        _idesc(lambda x: x & ~(3 << 4)),
        "mismatch",
    ),
    "b200 without fence.proxy.async": ("b200", "stream", _drop("fence.proxy.async"), "mismatch"),
    "b200 reading TMEM from the wrong lane quadrant": (
        "b200",
        "stream",
        _sub(r"(shl\.b32 %r\d+, %r1), 21;", r"\1, 16;"),
        "lane",
    ),
    "b200 assuming TMEM column 0": (
        "b200",
        "stream",
        _sub(r"add\.u32 (%r\d+), (%r\d+), (%r12);", r"add.u32 \1, \2, 0;", count=1),
        "not allocated|not ordered",
    ),
    "b200 without tcgen05.dealloc": (
        "b200",
        "stream",
        _drop("tcgen05.dealloc"),
        "TMEM columns allocated",
    ),
    # h100 (wgmma)
    "h100 without wgmma.fence": (
        "h100",
        "stream",
        _drop("wgmma.fence"),
        "since its last wgmma.fence",
    ),
    "h100 without wgmma.commit_group": (
        "h100",
        "stream",
        _drop("wgmma.commit_group"),
        "not yet waited|not waited|may still read",
    ),
    "h100 without wgmma.wait_group": (
        "h100",
        "stream",
        _drop("wgmma.wait_group"),
        "not yet waited|not waited|may still read",
    ),
    "h100 without the bar.sync after wgmma.wait_group": (
        "h100",
        "stream",
        _sub(r"(wgmma\.wait_group\.sync\.aligned 0;\n)\s*bar\.sync 0;\n", r"\1"),
        "threads have not passed its wgmma.wait_group",
    ),
    "h100 without fence.proxy.async": ("h100", "stream", _drop("fence.proxy.async"), "mismatch"),
    "h100 with a wrong leading byte offset": (
        "h100",
        "stream",
        _sub(
            r"or\.b64 (%rd\d+), (%rd\d+), (\d+);",
            lambda m: m.group(0).replace(m.group(3), str(int(m.group(3)) + (1 << 16))),
            count=1,
        ),
        "leading byte offset",
    ),
}


def _refused(case: str) -> None:
    target, name, mutate, expect = ORDERING_MUTATIONS[case]
    got = _bad(target, name, 3, mutate)
    assert re.search(expect, got), got


FAST = {"b200 without the MMA-completion wait (write-after-read)", "h100 without wgmma.wait_group"}


@pytest.mark.parametrize("case", sorted(FAST))
def test_the_simulator_refuses_an_ordering_mutation(case):
    _refused(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(set(ORDERING_MUTATIONS) - FAST))
def test_the_simulator_refuses_each_ordering_mutation(case):
    _refused(case)


# -- views and stores: kernels/gemm.vx (TMA at the views' coordinates, B by TMA MN-major, the
# result by a TMA store into the `&mut` output) -----------------------------------------------


def _gemm(target: str, name: str, m: int, n: int, k: int, mutate=None, seed: int = 0):
    """(C the kernel wrote, numpy's A @ B); C starts as NaN, so a tile never stored shows."""
    import ml_dtypes

    ptx, kern = _ptx(target, name)
    if mutate:
        ptx = mutate(ptx)
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, np.float32)
    assert ptxsim.run_kernel(ptx, kern, [m, n, k, a, b, c], (m // 128) * (n // 128)) == []
    return c, a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_gemm_matches_numpy(target):
    # Two instances side by side in N (the views' column coordinates), two K tiles (the
    # ring's two slots), B tiles other than the first (its view's row coordinate).
    c, ref = _gemm(target, "gemm", 128, 256, 256)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["h100", "b200"])
@pytest.mark.parametrize(
    ("name", "m", "n", "k"), [("gemm", 256, 256, 384), ("gemm_3stage", 256, 128, 640)]
)
def test_gemms_match_numpy_on_a_grid(target, name, m, n, k):
    # Both grid axes (instance / (n/128) and % (n/128)), the loop past the ring's
    # wrap-around (K tiles > slots, so a slot's barrier runs a second phase).
    c, ref = _gemm(target, name, m, n, k, seed=m + k)
    np.testing.assert_array_equal(c, ref)


def _gemm_bad(target: str, mutate) -> str:
    try:
        c, ref = _gemm(target, "gemm", 128, 256, 256, mutate)
    except ptxsim.SimError as e:
        return str(e)
    assert not np.array_equal(c, ref), "the mutated gemm still computes A @ B"
    return "mismatch"


def _before_store(pattern: str):
    """Delete the last line matching `pattern` before the TMA store (the epilogue's)."""

    def mutate(ptx: str) -> str:
        lines = ptx.splitlines()
        at = next(i for i, x in enumerate(lines) if "cp.async.bulk.tensor.2d.global" in x)
        i = max(j for j in range(at) if re.search(pattern, lines[j]))
        return "\n".join(lines[:i] + lines[i + 1 :]) + "\n"

    return mutate


GEMM_MUTATIONS = {
    # The accumulator tile is written by generic stores: the TMA store reads it through the
    # async proxy only after every thread's fence and the barrier that gathers them.
    "h100 without the fence before the TMA store": (
        "h100",
        _before_store(r"fence\.proxy\.async"),
        "mismatch",
    ),
    "b200 without the fence before the TMA store": (
        "b200",
        _before_store(r"fence\.proxy\.async"),
        "mismatch",
    ),
    "b200 without the barrier before the TMA store": (
        "b200",
        _before_store(r"^\s*bar\.sync"),
        "changed before|mismatch",
    ),
    "h100 storing at column 0 (the view's coordinate dropped)": (
        "h100",
        _sub(r"(bulk_group \[%rd\d+, \{)%r\d+", r"\g<1>0"),
        "mismatch",
    ),
    "b200 loading every B tile from K row 0": (
        "b200",
        _sub(r"(\[%rd3, \{%r\d+, )%r\d+(\}\])", r"\g<1>0\2"),
        "mismatch",
    ),
    # B lies MN-major: the transpose bit, the leading byte offset between its two 64-column
    # boxes and the second box's coordinate must all say so.
    "h100 with B read K-major (imm-trans-b 0)": (
        "h100",
        _sub(r", 1, 1, 0, 1;", ", 1, 1, 0, 0;"),
        "leading byte offset|mismatch",
    ),
    "b200 with B read K-major (transpose bit cleared)": (
        "b200",
        _idesc(lambda x: x & ~(1 << 16)),
        "leading byte offset|mismatch",
    ),
    # 8 KiB instead of 16 KiB between B's MN blocks: a plausible layout, the wrong columns.
    "b200 with a wrong leading byte offset for B": (
        "b200",
        _sub(
            r"or\.b64 (%rd\d+), (%rd\d+), (\d+);",
            lambda m: (
                m.group(0).replace(m.group(3), str(int(m.group(3)) - (512 << 16)))
                if (int(m.group(3)) >> 16) & 0x3FFF == 1024
                else m.group(0)
            ),
        ),
        "mismatch",
    ),
}


@pytest.mark.parametrize("case", sorted(GEMM_MUTATIONS))
def test_the_simulator_refuses_each_gemm_mutation(case):
    target, mutate, expect = GEMM_MUTATIONS[case]
    got = _gemm_bad(target, mutate)
    assert re.search(expect, got), got


# A loop that loads a row block into the one slot of its ring and stores it with
# `transfer_async`: the next load may only overwrite the slot once the store's bulk group
# has read it (the token's wait is `cp.async.bulk.wait_group.read`).
STORE_LOOP = """
fn copy(m: i64, a: &Tensor<f32, [m, 128]>, c: &mut Tensor<f32, [m, 128]>) -> void
    on Topology::TensorCore where m % 128 == 0, m >= 128, instances() == 1 {
  for i in 0 .. m / 128 {
    let t = transfer(a[i * 128 .. i * 128 + 128, 0 .. 128], Memory::VMEM);
    let s = transfer_async(t, c[i * 128 .. i * 128 + 128, 0 .. 128]);
    wait(s);
  }
}
"""


def _copy(target: str, mutate=None) -> tuple[np.ndarray, np.ndarray]:
    checked = api.check_target(api.analyze([api.Source("copy.vx", STORE_LOOP.encode())]), target)
    assert checked.ok, [d.message for d in checked.diagnostics]
    _, ptx, (k,) = ptx_text(api.backend_module(checked), TARGETS[checked.target])
    if mutate:
        ptx = mutate(ptx)
    a = np.arange(384 * 128, dtype=np.float32).reshape(384, 128)
    c = np.full_like(a, np.nan)
    ptxsim.run_kernel(ptx, k, [384, a, c], 1)
    return c, a


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_stores_into_an_output_at_the_views_rows(target):
    c, a = _copy(target)
    np.testing.assert_array_equal(c, a)


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_a_store_token_wait_without_its_read_wait_is_a_race(target):
    with pytest.raises(ptxsim.SimError, match="changed before it completed"):
        _copy(target, _drop("cp.async.bulk.wait_group.read"))


# One tensor read as both operands (`a @ a`): an A map (K-major boxes) and a B map
# (MN-major boxes) over the same argument, two parameters with two names. (The B map's
# name was the A map's: ptxas-bound PTX declared `a_tmap` twice, an internal error.)
SQUARE = """
fn sq(a: &Tensor<bf16, [128, 128]>, c: &mut Tensor<f32, [128, 128]>) -> void
    on Topology::TensorCore where instances() == 1 {
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  let t = transfer(a[0 .. 128, 0 .. 128], Memory::VMEM);
  let u = transfer(a[0 .. 128, 0 .. 128], Memory::VMEM);
  matmul_acc(&mut acc, &t, &u);
  transfer(acc, c[0 .. 128, 0 .. 128]);
}
"""


@pytest.mark.parametrize("target", ["h100", "b200"])
def test_one_tensor_as_both_operands(target):
    import ml_dtypes

    checked = api.check_target(api.analyze([api.Source("sq.vx", SQUARE.encode())]), target)
    assert checked.ok, [d.message for d in checked.diagnostics]
    _, ptx, (k,) = ptx_text(api.backend_module(checked), TARGETS[checked.target])
    assert [p["name"] for p in k["params"] if p["kind"] == "tensormap"] == [
        "a_tmap", "a_tmap_mn", "c_tmap_rm"
    ]  # fmt: skip
    a = np.random.default_rng(3).integers(-3, 4, (128, 128)).astype(ml_dtypes.bfloat16)
    c = np.full((128, 128), np.nan, np.float32)
    ptxsim.run_kernel(ptx, k, [a, c], 1)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ a.astype(np.float64))
