#!/usr/bin/env bash
# The bzlmod smoke test: Bazel 7 (Debian sid's bazel-bootstrap 7.7.1, in a
# debootstrap chroot) builds and tests examples/, a second workspace that consumes
# this repository's MODULE.bazel through bazel_dep + local_path_override, offline.
#
#   tools/bzlmod_smoke.sh            create/reuse the chroot, run the smoke test
#
# Cache (outside the repository): ${VX_CACHE_DIR:-$HOME/.cache/vx-bazel}
#   sid-chroot/        debootstrap --variant=minbase sid + bazel-bootstrap + gcc
#   bzlmod-offline/    the implicit modules Bazel 7 cannot fetch offline
#                      (buildozer, protobuf, zlib, apple_support), as local modules
#   pyenv/             the locked Python environment (shared with Bazel 4 builds)
# Exit: 0 passed, or skipped because Debian sid's bazel-bootstrap could not be
# fetched (printed plainly); non-zero on any real incompatibility.
# Needs root (debootstrap, chroot, mount namespaces); CI runs as root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${VX_CACHE_DIR:-${HOME:-/root}/.cache/vx-bazel}"
chroot_dir="$cache/sid-chroot"
mirror="${VX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
jobs="${VX_BAZEL_JOBS:-2}"
apt_opts=(-o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -qq)

skip() {
  echo "SKIP bzlmod smoke test: $*" >&2
  echo "SKIP: Debian sid's bazel-bootstrap (Bazel 7) could not be fetched; the bzlmod smoke test did not run." >&2
  exit 0
}

make_chroot() {
  if [ -x "$chroot_dir/usr/bin/bazel" ] && [ -x "$chroot_dir/usr/bin/gcc" ]; then
    return 0
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    echo "bzlmod_smoke: installing debootstrap" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap) >/dev/null 2>&1 ||
      skip "debootstrap is not installed and could not be installed"
  fi
  local tmp="$chroot_dir.partial"
  rm -rf "$tmp"
  mkdir -p "$cache"
  echo "bzlmod_smoke: debootstrap sid into $tmp (about 20 s)" >&2
  if ! debootstrap --variant=minbase sid "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    tail -5 "$cache/debootstrap.log" >&2
    rm -rf "$tmp"
    skip "debootstrap of Debian sid from $mirror failed (log: $cache/debootstrap.log)"
  fi
  cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
  echo "bzlmod_smoke: apt-get install bazel-bootstrap gcc in the chroot (about 1 min)" >&2
  if ! unshare -m sh -c "mount -t proc proc '$tmp/proc' && mount --rbind /dev '$tmp/dev' &&
      DEBIAN_FRONTEND=noninteractive chroot '$tmp' sh -c 'apt-get ${apt_opts[*]} update &&
      apt-get ${apt_opts[*]} install -y bazel-bootstrap gcc libc6-dev'" >"$cache/sid-apt.log" 2>&1; then
    tail -5 "$cache/sid-apt.log" >&2
    if grep -qE "Unable to locate package bazel-bootstrap|Failed to fetch|Temporary failure resolving|Could not resolve|Unable to fetch" "$cache/sid-apt.log"; then
      rm -rf "$tmp"
      skip "apt-get could not fetch bazel-bootstrap from sid (log: $cache/sid-apt.log)"
    fi
    echo "bzlmod_smoke: installing bazel-bootstrap in the sid chroot failed (log: $cache/sid-apt.log)" >&2
    exit 1
  fi
  rm -rf "$chroot_dir"
  mv "$tmp" "$chroot_dir"
}

# Local modules for what bazel_tools' MODULE.bazel depends on and Debian's
# /etc/bazel/bazelrc does not override. Nothing in a Vx build uses them; the one
# extension that bazel_tools names (buildozer_binary, for `bazel mod tidy`) gives
# a buildozer that says it is unavailable.
make_offline_modules() {
  local d="$cache/bzlmod-offline"
  local spec name version
  for spec in buildozer:7.1.2 protobuf:3.19.6 zlib:1.3.1.bcr.3 apple_support:1.23.1; do
    name="${spec%%:*}"
    version="${spec#*:}"
    mkdir -p "$d/$name"
    printf 'module(name = "%s", version = "%s")\n' "$name" "$version" >"$d/$name/MODULE.bazel"
    : >"$d/$name/BUILD.bazel"
    : >"$d/$name/WORKSPACE"
  done
  cat >"$d/buildozer/buildozer_binary.bzl" <<'BZL'
def _unavailable_impl(rctx):
    rctx.file("BUILD.bazel", 'exports_files(["buildozer"])\n')
    rctx.file("buildozer", "#!/bin/sh\necho 'buildozer is not available offline' >&2\nexit 1\n", executable = True)

_unavailable = repository_rule(implementation = _unavailable_impl)

def _buildozer_binary_impl(mctx):
    _unavailable(name = "buildozer_binary")

buildozer_binary = module_extension(implementation = _buildozer_binary_impl)
BZL
  echo "$d"
}

make_chroot
offline="$(make_offline_modules)"

# The interpreter the locked environment is built from, made visible in the chroot
# at the same path (its prefix is bind-mounted), so both Bazel versions share one
# environment in $cache/pyenv.
py="${VX_PYTHON:-}"
if [ -z "$py" ]; then
  for cand in python3.13 python3.12 python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      py="$("$cand" -c 'import sys; print(sys.executable)')"; break
    fi
  done
fi
[ -n "$py" ] || { echo "bzlmod_smoke: need Python >= 3.11" >&2; exit 2; }
py_prefix="$("$py" -c 'import sys; print(sys.base_prefix)')"
py_real="$("$py" -c 'import os, sys; print(os.path.realpath(sys.executable))')"
mkdir -p "$cache/pyenv"

out_root="/root/.cache/bazel7-smoke"
bazel7_flags=(
  --lockfile_mode=off
  "--override_module=buildozer=$offline/buildozer"
  "--override_module=protobuf=$offline/protobuf"
  "--override_module=zlib=$offline/zlib"
  "--override_module=apple_support=$offline/apple_support"
  --jobs="$jobs"
  # No bazel-* convenience links: they would point into the chroot and replace the
  # links that the host's Bazel keeps in these workspaces.
  --symlink_prefix=/
  --color=no
  --curses=no
)
inner=$(cat <<INNER
set -euo pipefail
cd "$root/examples"
b() { bazel --output_user_root=$out_root --max_idle_secs=60 "\$@"; }
echo "== \$(bazel --version) (chroot: Debian sid), examples/ with bazel_dep(vx) + local_path_override"
trap 'b shutdown >/dev/null 2>&1 || true' EXIT
b build //... ${bazel7_flags[*]}
b build //hello:matmul ${bazel7_flags[*]} --config=cpu
b test //... ${bazel7_flags[*]}
testlogs="\$(b info ${bazel7_flags[*]} bazel-testlogs)"
bin="\$(b info ${bazel7_flags[*]} bazel-bin)"
for t in matmul_test matmul_cc_test matmul_py_test matmul_wide_py_test; do test -f "\$testlogs/hello/\$t/test.xml"; done
ls "\$bin/hello/matmul.cpu/"
# A cpu-only kernel (targets = ["cpu"]) is skipped, not failed, under another target.
b build //... ${bazel7_flags[*]} --config=b200
b shutdown
echo "== the main repository under bzlmod (its own MODULE.bazel)"
cd "$root"
b test //... ${bazel7_flags[*]}
testlogs="\$(b info ${bazel7_flags[*]} bazel-testlogs)"
for t in stream_test stream_cc_test stream_py_test; do test -f "\$testlogs/kernels/\$t/test.xml"; done
echo "bzlmod smoke test passed"
INNER
)

# A private mount namespace: the bind mounts vanish with the last process in it.
unshare -m bash -euo pipefail -c '
C="$1"; root="$2"; cache="$3"; prefix="$4"; offline="$5"
mount -t proc proc "$C/proc"
mount --rbind /dev "$C/dev"
# libtpu (tpu VxCompile actions) links tcmalloc, which counts CPUs through /sys: without
# it the compiler aborts with "CHECK in NumCPUs".
mkdir -p "$C/sys"
mount --rbind /sys "$C/sys"
for d in "$root" "$cache/pyenv" "$offline" "$prefix"; do
  mkdir -p "$C$d"
  mount --bind "$d" "$C$d"
done
exec chroot "$C" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 \
  VX_PYTHON="$6" VX_CACHE_DIR="$cache" bash -c "$7"
' smoke "$chroot_dir" "$root" "$cache" "$py_prefix" "$offline" "$py_real" "$inner"
