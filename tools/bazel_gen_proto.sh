#!/usr/bin/env bash
# Regenerates compiler/vxc/worker/vx_worker_protocol_pb2.py and
# compiler/vxc/hir/vxhir_pb2.py from proto/*.proto with grpcio-tools, installed into a throwaway
# venv (default /tmp/toolvenv) so the project's locked environment stays as it
# is. The generated file records the digest of its .proto on its first line;
# tests/worker/test_pb2_current.py checks those digests (and, when grpcio-tools
# is importable, regenerates and compares byte for byte).
#   tools/bazel_gen_proto.sh           regenerate in place
#   tools/bazel_gen_proto.sh --check   exit 1 if a committed file is stale
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
toolvenv="${VX_TOOLVENV:-/tmp/toolvenv}"
cd "$root"
if ! "$toolvenv/bin/python" -c 'import grpc_tools' 2>/dev/null; then
  python3 -m venv "$toolvenv"
  # grpcio-tools must generate for the protobuf runtime pinned in requirements.lock.
  pb="$(grep -E '^protobuf==' requirements.lock | sed -E 's/^protobuf==([^ ]+).*/\1/')"
  "$toolvenv/bin/pip" install -q --disable-pip-version-check grpcio-tools "protobuf==$pb"
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
stale=0
# proto file -> generated module: the worker protocol, and the .vxhir cache.
for pair in "vx_worker_protocol:compiler/vxc/worker" "vxhir:compiler/vxc/hir"; do
  name="${pair%%:*}"
  proto="proto/$name.proto"
  dest="${pair#*:}/${name}_pb2.py"
  "$toolvenv/bin/python" -m grpc_tools.protoc -Iproto --python_out="$tmp" "$proto"
  digest="$(sha256sum "$proto" | cut -d' ' -f1)"
  { echo "# vx-proto-sha256: $digest (regenerate with tools/bazel_gen_proto.sh)"; cat "$tmp/${name}_pb2.py"; } > "$tmp/out.py"
  if [ "${1:-}" = "--check" ]; then
    if cmp -s "$tmp/out.py" "$dest"; then echo "$dest is current"; else echo "$dest is stale: run tools/bazel_gen_proto.sh" >&2; stale=1; fi
  else
    mv "$tmp/out.py" "$dest"
    echo "wrote $dest"
  fi
done
exit "$stale"
