#!/usr/bin/env bash
# The main job: set up, check the stream kernel for every target, build it for the CPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools/setup.sh
for t in cpu tpu b200 h100; do
  .venv/bin/vxc check kernels/stream.vx --target "$t"
  echo "vxc check kernels/stream.vx --target $t: ok"
done
.venv/bin/vxc build kernels/stream.vx --target cpu -o out/cpu
