#!/usr/bin/env bash
# Creates .venv/ at the repository root with vxc and its locked dependencies.
# Idempotent: a stamp holding the digest of the lock and pyproject's [project] makes a
# second run take well under a second.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

pick_python() {
  for py in "${VX_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$py" ] || continue
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$py"; return 0
    fi
  done
  return 1
}

# Only the locks and the [project] table (deps, scripts) decide what .venv holds.
stamp_now="$( { cat requirements.lock requirements-frameworks.lock; sed -n '/^\[project\]/,/^\[tool/p' pyproject.toml; } | sha256sum | cut -d' ' -f1)"
if [ -x .venv/bin/vxc ] && [ "$(cat .venv/.vx-stamp 2>/dev/null)" = "$stamp_now" ]; then
  exit 0
fi

if ! py="$(pick_python)"; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing python3 and python3-venv with apt-get" >&2
    apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
    py="$(pick_python)" || { echo "setup: need Python >= 3.11" >&2; exit 2; }
  else
    echo "setup: need Python >= 3.11 with the venv module" >&2; exit 2
  fi
fi

# Say what is coming before the download starts (a fresh .venv is about 2 GB).
echo "setup: creating .venv with $py and installing vxc's locked dependencies:" >&2
echo "setup: about 2 GB (jax, jaxlib, libtpu, the CUDA compiler wheels, z3, llvmlite)," >&2
echo "setup: a few minutes on a fast connection" >&2
rm -rf .venv
"$py" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
# torch for Kernel.to_torch() (not in the Bazel toolchain's environment: requirements-frameworks.in)
.venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes \
  -r requirements-frameworks.lock
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
echo "$stamp_now" > .venv/.vx-stamp
echo "setup: ready (.venv/bin/vxc)" >&2
