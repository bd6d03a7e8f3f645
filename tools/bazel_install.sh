#!/usr/bin/env bash
# Prints the path of a usable bazel, installing Debian's bazel-bootstrap (Bazel
# 4.2.3 on bookworm) with apt-get when there is none. Used by ./bazelw and by the
# Bazel integration tests; $VX_BAZEL overrides the lookup.
set -euo pipefail
if [ -n "${VX_BAZEL:-}" ]; then
  command -v "$VX_BAZEL" || { echo "bazel_install: VX_BAZEL=$VX_BAZEL is not executable" >&2; exit 2; }
  exit 0
fi
if command -v bazel >/dev/null 2>&1; then
  command -v bazel
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bazel_install: no bazel found. Install Bazel 4.2.3+ (Debian: apt-get install bazel-bootstrap)" >&2
  echo "               or Bazel 7, put it on PATH, or set VX_BAZEL=/path/to/bazel." >&2
  exit 2
fi
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
echo "bazel_install: no bazel found; installing Debian's bazel-bootstrap with apt-get (about 1 min)" >&2
"${sudo[@]}" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq bazel-bootstrap >&2
command -v bazel
