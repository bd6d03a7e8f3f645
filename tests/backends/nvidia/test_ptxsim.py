"""The generated PTX, run by a functional simulator of one CTA (ptxsim.py), against
numpy: the TMA boxes and swizzle, the ring slots and mbarrier phases, the
descriptors, the transposed B copy, the MMA accumulation and both epilogues. Inputs
are small integers, exact in tf32 / bf16 with an f32 accumulator, so results must
match exactly. Mutated PTX (a wrong swizzle, a wrong phase, a wrong box) must fail."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import ptxsim  # beside this file (pytest puts the directory on sys.path)
import pytest

from vxc import api
from vxc.backends.nvidia import ptx_text
from vxc.ir.from_hir import lower_program
from vxc.targets import TARGETS

ROOT = Path(__file__).resolve().parents[3]


def _ptx(target: str, name: str):
    src = ROOT / "kernels" / f"{name}.vx"
    checked = api.check_target(api.analyze([api.Source(str(src), src.read_bytes())]), target)
    _, ptx, kernels = ptx_text(
        lower_program(checked.analysis.program, checked.plan), TARGETS[checked.target]
    )
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
    _, ptx, (k,) = ptx_text(
        lower_program(checked.analysis.program, checked.plan), TARGETS[checked.target]
    )
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
