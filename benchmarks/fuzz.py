"""The fuzzer's benchmark mode (the same as `python -m tests.fuzz`):

    nice -n 10 .venv/bin/python benchmarks/fuzz.py --count 100000 --seed 100001

Runs --count inputs (mutants of the project's programs and generated programs) through
the CLI's and the worker's path, with a per-input CPU-time limit (hang), and prints the
counts per stage, internal errors, hangs and the rate. See tests/fuzz/__main__.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "vxfuzz_main", Path(__file__).resolve().parents[1] / "tests" / "fuzz" / "__main__.py"
)
_main = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_main)

if __name__ == "__main__":
    sys.exit(_main.main())
