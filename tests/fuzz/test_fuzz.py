"""The fuzzer in the suite: a fixed seed and a fixed count of mutants and generated
programs through the whole pipeline (see vxfuzz.py), with zero internal errors. The
long run is `python -m tests.fuzz --count N` (docs/PERFORMANCE.md)."""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter

import pytest
import vxfuzz

# About a minute on CI's two cores (~30 ms of CPU an input, a fifth of them built).
SUITE_COUNT = 2000
SUITE_SEED = 20261130


@pytest.mark.slow
def test_fuzz_fixed_seed_no_internal_errors():
    stages: Counter = Counter()
    errors = []
    slowest = 0.0
    for i, (how, data) in enumerate(itertools.islice(vxfuzz.inputs(SUITE_SEED), SUITE_COUNT)):
        t0 = time.perf_counter()
        out = vxfuzz.run_input(data)
        slowest = max(slowest, time.perf_counter() - t0)
        stages.update(out.stages)
        if out.error:
            errors.append((i, how, out.error, data[:2000]))
    assert errors == []
    # The fuzzer reaches every stage, the back end included.
    assert all(stages[s] > 0 for s in vxfuzz.STAGES), stages
    assert stages["built"] >= SUITE_COUNT // 20, stages
    assert slowest < 20, slowest  # the benchmark holds inputs to 5 s on a quiet machine


@pytest.mark.parametrize("mutator", list(dict.fromkeys(vxfuzz.MUTATORS)), ids=lambda m: m.__name__)
def test_each_mutator_changes_input_and_compiles_without_internal_error(mutator):
    corpus = vxfuzz.load_corpus()
    rng = random.Random(7)
    changed = 0
    for _ in range(8):
        src = rng.choice(corpus)
        mutant = mutator(rng, src, corpus)
        changed += mutant != src
        out = vxfuzz.run_input(mutant, build=False)
        assert out.error is None, out.error
    assert changed >= 3


def test_generated_programs_reach_the_back_end():
    rng = random.Random(3)
    stages: Counter = Counter()
    for _ in range(12):
        out = vxfuzz.run_input(vxfuzz.Gen(rng).program())
        assert out.error is None, out.error
        stages.update(out.stages)
    assert stages["built"] >= 2, stages


def test_input_stream_is_deterministic():
    a = list(itertools.islice(vxfuzz.inputs(11), 50))
    b = list(itertools.islice(vxfuzz.inputs(11), 50))
    assert a == b


def test_corpus_is_the_projects_own_programs():
    names = {p.parent.name for p in vxfuzz.corpus_files()}
    assert names == {"kernels", "cases", "machines"}


def test_a_diagnostic_outside_the_input_is_an_internal_error():
    from vxc import api
    from vxc.diagnostics import Diagnostic, Span

    src = [api.Source(vxfuzz.FILE, b"fn f() {}\n")]
    vxfuzz._validate([Diagnostic("E0002", "fine", Span(vxfuzz.FILE, 1, 1))], src)
    with pytest.raises(vxfuzz.BadDiagnostic):
        vxfuzz._validate([Diagnostic("E0002", "past the end", Span(vxfuzz.FILE, 9, 1))], src)


# The benchmark forks its child (fast, and the parent has nothing to share); under
# pytest the parent has threads of its own, which Python warns about on fork.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_benchmark_mode_runs_a_count_in_a_child_and_reports_stages(tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "vxfuzz_bench", Path(vxfuzz.__file__).with_name("__main__.py")
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.run(seed=5, count=12, timeout=5.0, save=tmp_path, build=False, progress=0)
    assert r["count"] == 12 and r["stages"]["inputs"] == 12
    assert r["errors"] == [] and r["hangs"] == []
    assert r["stages"].get("parsed", 0) > 0
    assert 0 < r["worst_cpu_s"] < 5
