#!/usr/bin/env bash
# Recompiles requirements.lock (exact pins with hashes) from requirements.in with pip-tools.
# Existing pins are kept unless requirements.in asks otherwise; pass --upgrade to move them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check pip-tools
"$tmp/venv/bin/pip-compile" -q --generate-hashes --allow-unsafe --strip-extras \
  --no-emit-index-url --no-emit-find-links -o requirements.lock "$@" requirements.in
# The frameworks' extras (.venv only), pinned where requirements.lock already pins
"$tmp/venv/bin/pip-compile" -q --generate-hashes --allow-unsafe --strip-extras \
  --no-emit-index-url --no-emit-find-links -c requirements.lock \
  -o requirements-frameworks.lock "$@" requirements-frameworks.in
