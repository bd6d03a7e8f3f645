#!/usr/bin/env bash
# The Hopper GPU check, one command (< 5 minutes): builds the h100 stream_grid kernel
# (bf16 tiles, f32 accumulator) and its blocking twin, runs both on 132 instances x 256
# tiles of 128x128, checks the sums against numpy, prints TB/s and TFLOP/s for each.
# Without a Hopper GPU it says so in one line and exits 2. Extra arguments go to
# benchmarks/nvidia/gpu_check.py (--instances, --tiles, --repeat).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
[ -x .venv/bin/python ] || tools/setup.sh >/dev/null
exec timeout 290 .venv/bin/python benchmarks/nvidia/gpu_check.py "$@"
