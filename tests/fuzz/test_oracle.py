"""The checker's view, race and in-flight proofs (E6041, E6042, E6043) against a
brute-force oracle (oracle.py) that runs each kernel for small launches (issue 30 item 6).

Soundness: whatever the oracle finds in a launch, the checker must report; a kernel the
checker accepts that the oracle rejects is a bug in compiler/vxc/checks. One exception,
by design: the race proof (E6042) runs only once every view is proved in bounds
(checks/seams.py `run`), so an E6041 report stands for a race the oracle also sees.
The other way round (the checker rejects what the oracle's launches never break) is
imprecision, or a launch the oracle did not try: counted and printed, not failed.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import oracle
import oracle_gen
import pytest

from vxc import api

ROOT = Path(__file__).resolve().parents[2]
CODES = ("E6041", "E6042", "E6043")
GEN_SEED = 20300601
QUICK = 40  # generated kernels in the unmarked test
BIG = 300  # in the slow one
OTHER_TARGET_EVERY = 10  # one generated kernel in this many is also checked for tpu


def missed(found: set[str], reported: set[str]) -> set[str]:
    """The codes the oracle found that the checker's errors do not account for."""
    out = {c for c in found if c not in reported}
    if "E6041" in reported:
        out.discard("E6042")  # races are proved only once every view is in bounds
    return out


def compare(name: str, data: bytes, target: str = "cpu") -> dict | None:
    """The oracle's and the checker's verdicts on one program, None where the program
    does not type-check (no oracle then)."""
    src = api.Source(name, data)
    verdict = oracle.oracle([src])
    if verdict is None:
        return None
    errors = {d.code for d in api.check([src], target).diagnostics if d.severity == "error"}
    return {
        "verdict": verdict,
        "errors": errors,
        "missed": missed(verdict.found, errors),
        "accepted": not errors,
        # the checker reports a code of ours that no launch of the oracle showed
        "stricter": {c for c in errors & set(CODES) if c not in verdict.found}
        if verdict.codes is not None
        else set(),
    }


def _cpu_cases() -> list[Path]:
    golden = [
        p
        for p in sorted((ROOT / "tests" / "golden" / "cases").glob("*.vx"))
        if "cpu" in p.read_bytes().split(b"\n", 1)[0].decode(errors="replace").split()
    ]
    return golden + sorted((ROOT / "kernels").glob("*.vx"))


def _report(title: str, stats: Counter, examples: dict) -> None:
    print(f"\n{title}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    for kind, (name, text) in examples.items():
        print(f"  e.g. {kind}: {name}\n    " + text.replace("\n", "\n    "))


def test_golden_cases_and_kernels_agree_with_the_oracle():
    t0 = time.perf_counter()
    stats: Counter = Counter()
    unsound, examples = [], {}
    for path in _cpu_cases():
        r = compare(path.name, path.read_bytes())
        if r is None:
            stats["not type-checked"] += 1
            continue
        v = r["verdict"]
        if v.codes is None:
            stats["not enumerable"] += 1
            if not v.found:
                continue
        else:
            stats["enumerable"] += 1
        for c in v.found:
            stats[f"oracle {c}"] += 1
        if r["missed"]:
            unsound.append((path.name, r["missed"], sorted(r["errors"]), v.witness))
        for c in r["stricter"]:
            stats[f"checker-only {c}"] += 1
            examples.setdefault(f"checker-only {c}", (path.name, ""))
    stats["seconds"] = round(time.perf_counter() - t0)
    _report("golden cases and kernels (cpu)", stats, examples)
    assert unsound == []
    # The oracle reaches the cases it is for: each code's rejections and acceptances.
    assert stats["enumerable"] >= 50, stats
    assert all(stats[f"oracle {c}"] >= 3 for c in CODES), stats


def _generated(count: int, seed: int) -> None:
    t0 = time.perf_counter()
    stats: Counter = Counter()
    unsound, examples = [], {}
    for i, text in enumerate(oracle_gen.kernels(seed, count)):
        targets = ["cpu", "tpu"] if i % OTHER_TARGET_EVERY == 0 else ["cpu"]
        for target in targets:
            r = compare(f"gen{i}.vx", text.encode(), target)
            assert r is not None, f"a generated kernel does not type-check:\n{text}"
            v = r["verdict"]
            stats[f"kernels {target}"] += 1
            if v.codes is None:
                stats["not enumerable"] += 1
                examples.setdefault("not enumerable", (f"gen{i}", v.kernels["k"].reason))
                continue
            if target == "cpu":
                for c in v.found or {"none"}:
                    stats[f"oracle {c}"] += 1
            if r["missed"]:
                unsound.append((f"gen{i}", target, r["missed"], sorted(r["errors"]), v.witness))
                examples.setdefault("UNSOUND", (f"gen{i}", text + "\n" + str(v.witness)))
            if not v.found and r["errors"]:
                stats[f"checker rejects, oracle accepts ({target})"] += 1
                examples.setdefault(f"imprecise {sorted(r['errors'])}", (f"gen{i} {target}", text))
            for c in r["stricter"]:
                stats[f"checker-only {c} ({target})"] += 1
    stats["seconds"] = round(time.perf_counter() - t0)
    _report(f"generated kernels (seed {seed})", stats, examples)
    assert unsound == [], unsound[:3]
    assert stats["not enumerable"] == 0, stats
    # The family reaches every code, and kernels with none.
    assert all(stats[f"oracle {c}"] > 0 for c in (*CODES, "none")), stats


def test_generated_kernels_agree_with_the_oracle_quick():
    _generated(QUICK, GEN_SEED)


@pytest.mark.slow
def test_generated_kernels_agree_with_the_oracle():
    _generated(BIG, GEN_SEED + 1)


def test_fuzzer_mutants_of_the_new_forms_agree_with_the_oracle():
    """The fuzzer's mutators of loop counters, output reads and in-flight destinations
    (forms.py) on the fuzzer's seeds: the checker reports what the oracle finds."""
    import random

    import forms

    progs = [p.read_bytes() for p in sorted((ROOT / "tests" / "fuzz" / "seeds").glob("*.vx"))]
    rng = random.Random(5)
    stats: Counter = Counter()
    unsound = []
    for mutator in (forms.loop_counter, forms.output_read, forms.inflight_read):
        for data in progs:
            mutant = mutator(rng, data, progs)
            r = compare(f"{mutator.__name__}.vx", mutant)
            if r is None or r["verdict"].codes is None:
                stats[f"{mutator.__name__} skipped"] += 1
                continue
            stats[f"{mutator.__name__} judged"] += 1
            for c in r["verdict"].found:
                stats[f"{mutator.__name__} oracle {c}"] += 1
            if r["missed"]:
                unsound.append((mutator.__name__, r["missed"], r["verdict"].witness, mutant))
    _report("fuzzer mutants (cpu)", stats, {})
    assert unsound == [], unsound[:2]
    assert stats["loop_counter oracle E6041"] and stats["inflight_read oracle E6043"], stats


# ---- the oracle itself --------------------------------------------------------------
def _one(text: str) -> oracle.ProgramVerdict:
    v = oracle.oracle([api.Source("t.vx", text.encode())])
    assert v is not None
    return v


HEAD = (
    "fn k(a: &Tensor<f32, [256, 128]>, c: &mut Tensor<f32, [256, 128]>{extra}) -> void "
    "on Topology::TensorCore where {where} {{\n{body}\n}}\n"
)


def test_integer_semantics_are_vxs():
    assert oracle.vx_div(-7, 2, "i64") == -3 and oracle.vx_rem(-7, 2, "i64") == -1
    assert oracle.vx_div(7, 0, "i64") == 0 and oracle.vx_rem(7, 0, "i64") == 7
    lo = -(1 << 63)
    assert oracle.vx_div(lo, -1, "i64") == lo and oracle.vx_rem(lo, -1, "i64") == 0
    assert oracle.wrap(1 << 31, "i32") == -(1 << 31)


def test_oracle_finds_each_code_and_accepts_a_clean_kernel():
    body = "  let r = instance() * 128;\n  let t = transfer(a[r .. r + 128, 0 .. 128], Memory::VMEM);\n"
    clean = body + "  transfer(t, c[r .. r + 128, 0 .. 128]);"
    assert _one(HEAD.format(extra="", where="instances() == 2", body=clean)).codes == set()
    past = _one(HEAD.format(extra="", where="instances() == 3", body=clean))
    assert past.codes == {"E6041"}, past.witness
    race = body + "  transfer(t, c[0 .. 128, 0 .. 128]);"
    assert _one(HEAD.format(extra="", where="instances() == 2", body=race)).codes == {"E6042"}
    flight = (
        body + "  let st = transfer_async(t, c[r .. r + 128, 0 .. 128]);\n"
        "  let u = transfer(c[r .. r + 128, 0 .. 128], Memory::VMEM);\n  wait(st);"
    )
    assert _one(HEAD.format(extra="", where="instances() == 1", body=flight)).codes == {"E6043"}


def test_oracle_runs_loop_carried_counters_and_both_bools():
    body = (
        "  let mut r = 0;\n  for i in 0 .. 4 {\n"
        "    let t = transfer(a[r .. r + 128, 0 .. 128], Memory::VMEM);\n"
        "    if flag { r = r + 64; }\n  }"
    )
    v = _one(HEAD.format(extra=", flag: bool", where="instances() == 1", body=body))
    assert v.codes == {"E6041"}
    assert "flag = true" in v.witness["E6041"], v.witness


def test_oracle_gives_up_on_a_float_compare():
    body = "  if x > 0.5 {\n    let t = transfer(a[0 .. 128, 0 .. 128], Memory::VMEM);\n  }"
    v = _one(HEAD.format(extra=", x: f32", where="instances() == 1", body=body))
    assert v.codes is None and "float" in v.kernels["k"].reason
