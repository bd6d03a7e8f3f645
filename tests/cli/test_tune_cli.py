"""`vxc tune` (issue 33, vxc/tune/): candidates from `--space`, each checked as `vxc check`
checks it (a rejected one is recorded with its codes and message), the rest scored with
the target's own signal (cpu: measured time; tpu: libtpu's schedule; b200/h100: a model
that says so), the best written to `KERNEL.tune.json`, which a build then reads, and
whose staleness warning names the command that wrote it."""

from __future__ import annotations

import json

import pytest
from clirun import assert_no_crash, run_vxc

from vxc import tuning

# A K loop over 8 x BK tiles: BK = 128 and 256 both fit; the checker rejects tiles that
# overflow the target's VMEM (cpu: 2 MB, so BK = 65536 with its ring, E6010; tpu: 128 MiB,
# a tile of BK = 8388608 alone, E6009).
ROWS = """\
fn rows<const BK: i64 = 128>(n: i64, x: &Tensor<f32, [8, n]>, o: &mut Tensor<f32, [8, n]>)
    -> void on Topology::TensorCore where instances() == 1, n % BK == 0, n <= 65536 {
  for j in 0 .. n / BK {
    let t = transfer(x[0 .. 8, j * BK .. (j + 1) * BK], Memory::VMEM);
    transfer(t * 2.0, o[0 .. 8, j * BK .. (j + 1) * BK]);
  }
}
"""
# A view that leaves its tensor for BK > 256: the bounds proof rejects that candidate.
HEAD = """\
fn head<const BK: i64 = 128>(x: &Tensor<f32, [8, 256]>, o: &mut Tensor<f32, [8, BK]>)
    -> void on Topology::TensorCore where instances() == 1 {
  let t = transfer(x[0 .. 8, 0 .. BK], Memory::VMEM);
  transfer(t * 2.0, o[0 .. 8, 0 .. BK]);
}
"""


def _tune(path, target: str, *flags: str):
    r = run_vxc("tune", str(path), "--target", target, *flags, timeout=300)
    assert_no_crash(r)
    return r


def _entry(path, target: str) -> dict:
    return json.loads(tuning.table_path(path).read_text())["targets"][target]


def _built_width(path, target: str) -> int:
    """The tile width the build instantiated, from the vx IR it emits."""
    r = run_vxc("build", str(path), "--target", target, "--emit", "vx-mlir")
    assert r.rc == 0, r.err
    widths = {m.split("x")[0] for m in r.out.split("memref<8x")[1:]}
    return min(int(w) for w in widths if w.isdigit())  # the tile's (the tensor's is `?`)


def test_cpu_measures_the_checked_candidates_and_records_the_rejected(write):
    src = write("rows.vx", ROWS)
    r = _tune(src, "cpu", "--space", "BK=128,256,65536", "--shapes", "n=65536", "--runs", "3")
    assert r.rc == 0, r.err
    e = _entry(src, "cpu")
    by = {c["consts"]["BK"]: c for c in e["candidates"]}
    assert list(by) == [128, 256, 65536]  # every candidate, in the space's order
    assert by[65536]["status"] == "rejected" and by[65536]["codes"] == ["E6010"]
    assert "working set of `VMEM`" in by[65536]["why"]
    scored = [c for c in e["candidates"] if c["status"] == "scored"]
    assert len(scored) == 2 and all(c["score"] > 0 for c in scored)
    best = min(scored, key=lambda c: c["score"])  # the first of equal scores
    assert e["consts"] == best["consts"] and e["score"]["value"] == best["score"]
    assert e["score"]["unit"] == "us" and "interleaved" in e["score"]["method"]
    assert (
        e["inputs"]["source_sha256"]
        == json.loads(tuning.table_path(src).read_text())["source_sha256"]
    )
    assert best["launch"] == {"instances": 1, "sizes": {"n": 65536}}
    # the table is what the next build reads, without measuring anything
    assert _built_width(src, "cpu") == best["consts"]["BK"]
    assert "BK=" in r.out and "rejected (E6010)" in r.out


def test_an_out_of_bounds_candidate_is_rejected_with_the_proofs_code(write):
    src = write("head.vx", HEAD)
    r = _tune(src, "cpu", "--space", "BK=128,512", "--runs", "1")
    assert r.rc == 0, r.err
    e = _entry(src, "cpu")
    rejected = e["candidates"][1]
    assert rejected["consts"] == {"BK": 512} and rejected["status"] == "rejected"
    check = run_vxc("check", str(src), "--const", "BK=512", "--no-tune")
    assert check.rc == 1 and all(code in check.err for code in rejected["codes"])
    assert e["consts"] == {"BK": 128}


def test_every_candidate_rejected_writes_nothing_and_exits_1(write):
    src = write("head.vx", HEAD)
    r = _tune(src, "cpu", "--space", "BK=512,1024")
    assert r.rc == 1 and "no table written" in r.err
    assert not tuning.table_path(src).exists()


@pytest.mark.slow
def test_tpu_scores_libtpus_schedule_and_is_deterministic(write):
    """Two libtpu compiles per run, each in its own process (~5 s each here)."""
    src = write("rows.vx", ROWS)
    flags = ("--space", "BK=128,256,8388608", "--shapes", "n=2048")
    assert _tune(src, "tpu", *flags).rc == 0
    first = tuning.table_path(src).read_bytes()
    assert _tune(src, "tpu", *flags).rc == 0
    assert tuning.table_path(src).read_bytes() == first  # same inputs, same bytes
    e = _entry(src, "tpu")
    c128, c256, big = e["candidates"]
    assert big["status"] == "rejected" and big["codes"] == ["E6009"]
    # one loop of n / BK trips: the schedule's own exit tests give them
    assert (c128["detail"]["trips"], c256["detail"]["trips"]) == ([16], [8])
    assert c256["score"] < c128["score"]  # half the trips of a loop of about the same body
    assert e["consts"] == {"BK": 256} and e["arch"] == "v5e" and e["score"]["unit"] == "bundles"
    assert e["inputs"]["libtpu"] and _built_width(src, "tpu") == 256


def test_nvidia_is_a_model_and_says_so(write):
    src = write("rows.vx", ROWS)
    r = _tune(src, "h100", "--space", "BK=128,256", "--shapes", "n=2048")
    assert r.rc == 0, r.err
    e = _entry(src, "h100")
    assert e["score"]["method"].startswith("a model, not a measurement")
    assert e["arch"] == "sm_90a" and e["score"]["unit"] == "model_us"
    for c in e["candidates"]:
        assert c["detail"]["registers"] > 0 and c["detail"]["ctas_per_sm"] >= 1
    again = _tune(src, "h100", "--space", "BK=128,256", "--shapes", "n=2048")
    assert again.rc == 0 and json.loads(tuning.table_path(src).read_text())["targets"]["h100"] == e


def test_a_stale_table_names_the_command_that_wrote_it(write):
    src = write("head.vx", HEAD)
    assert _tune(src, "cpu", "--space", "BK=64,128", "--runs", "1").rc == 0
    src.write_text(HEAD + "// edited\n")
    r = run_vxc("check", str(src), "--error-format", "json")
    (d,) = [json.loads(line) for line in r.err.splitlines() if '"W1041"' in line]
    assert f"vxc tune {src} --target cpu --arch native --space BK=64,128" in d["help"]


def test_retuning_another_target_keeps_the_fresh_entries_and_drops_stale_ones(write):
    src = write("head.vx", HEAD)
    assert _tune(src, "cpu", "--space", "BK=64,128", "--runs", "1").rc == 0
    assert _tune(src, "h100", "--space", "BK=64,128").rc == 0
    table = json.loads(tuning.table_path(src).read_text())
    assert sorted(table["targets"]) == ["cpu", "h100"]
    src.write_text(HEAD + "// edited\n")
    r = _tune(src, "h100", "--space", "BK=64,128")
    assert r.rc == 0 and "dropped the entries for cpu" in r.err
    assert sorted(json.loads(tuning.table_path(src).read_text())["targets"]) == ["h100"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ((), "give the candidates with --space"),
        (("--space", "BK=64,x"), "--space takes NAME=V1,V2"),
        (("--space", "BK=64", "--arch", "v9"), "--arch for cpu is one of native"),
        (("--space", "BK=64", "--shapes", "n"), "--shapes takes NAME=NUMBER"),
        (("--space", "BK=64", "--runs", "0"), "--runs must be at least 1"),
    ],
)
def test_bad_command_lines_are_one_line_usage_errors(write, flags, says):
    src = write("head.vx", HEAD)
    r = _tune(src, "cpu", *flags)
    assert r.rc == 2 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err
