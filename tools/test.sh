#!/usr/bin/env bash
# The whole test suite: sets up .venv (idempotent), then lint and pytest, slow tests included.
# Extra arguments go to pytest (e.g. `tools/test.sh -m "not slow"` for a quick run); they come
# after ours, so `-n 0` or another `-n` there wins.
# pytest runs on every core (VX_TEST_WORKERS overrides it; 0 runs the tests in pytest's own
# process) with pytest-xdist's --dist loadfile: a test file is one unit, so its module and
# session fixtures are built once, and tests/conftest.py makes tests/bazel/ one unit (one
# worker runs the Bazel tests one after another). --no-loadscope-reorder keeps the units in
# collection order, which starts the long ones (tests/backends, tests/bazel) first instead
# of the files with the most tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools/setup.sh
.venv/bin/ruff check compiler tests benchmarks tools
workers="${VX_TEST_WORKERS:-$(nproc)}"
.venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
