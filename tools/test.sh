#!/usr/bin/env bash
# The whole test suite: sets up .venv (idempotent), then lint and pytest, slow tests included.
# Extra arguments go to pytest (e.g. `tools/test.sh -m "not slow"` for a quick run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools/setup.sh
.venv/bin/ruff check compiler tests benchmarks tools
.venv/bin/python -m pytest -q "$@"
