#!/usr/bin/env bash
# The GPU check on a device machine (no network, none of this repo's environment):
#   here:   .venv/bin/python tools/gpu_build.py            # fatbins + manifests -> build/gpu/
#   there:  bash tools/gpu_check.sh                         # (the device tool: carry build/gpu)
# Runs tools/gpu_check.py with the device's own python3 (numpy, ml_dtypes, cuda-python),
# unbuffered, every launch under a 10 s watchdog; the JSON log goes to $OUT (or
# gpu_check_out/). Exit 0 all match numpy, 1 mismatch, 2 no usable GPU, 3 a hang.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
[ -f build/gpu/index.json ] || { echo "gpu_check: build/gpu/ is missing: run tools/gpu_build.py here first" >&2; exit 2; }
export PYTHONUNBUFFERED=1 PYTHONPATH="$root/compiler${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 290 python3 tools/gpu_check.py --artifacts build/gpu --out "${OUT:-gpu_check_out}" "$@"
