"""The committed vx_worker_protocol_pb2.py and vxhir_pb2.py match their .proto files."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(ROOT, "proto", "vx_worker_protocol.proto")
PB2 = os.path.join(ROOT, "compiler", "vxc", "worker", "vx_worker_protocol_pb2.py")


HIR_PROTO = os.path.join(ROOT, "proto", "vxhir.proto")
HIR_PB2 = os.path.join(ROOT, "compiler", "vxc", "hir", "vxhir_pb2.py")


@pytest.mark.parametrize("proto,pb2", [(PROTO, PB2), (HIR_PROTO, HIR_PB2)], ids=["worker", "vxhir"])
def test_pb2_records_digest_of_current_proto(proto, pb2):
    with open(pb2, encoding="utf-8") as f:
        first = f.readline()
    with open(proto, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert first.startswith("# vx-proto-sha256: "), first
    assert first.split()[2] == digest, "stale: run tools/bazel_gen_proto.sh"


def test_pb2_fields_match_bazel_worker_protocol():
    from vxc.worker.vx_worker_protocol_pb2 import WorkRequest, WorkResponse

    req = {f.name: f.number for f in WorkRequest.DESCRIPTOR.fields}
    resp = {f.name: f.number for f in WorkResponse.DESCRIPTOR.fields}
    assert req == {
        "arguments": 1,
        "inputs": 2,
        "request_id": 3,
        "cancel": 4,
        "verbosity": 5,
        "sandbox_dir": 6,
    }
    assert resp == {"exit_code": 1, "output": 2, "request_id": 3, "was_cancelled": 4}


@pytest.mark.skipif(
    not os.path.exists(os.environ.get("VX_TOOLVENV", "/tmp/toolvenv") + "/bin/python"),
    reason="grpcio-tools venv absent; the digest test above still guards staleness",
)
def test_regenerated_pb2_is_byte_identical():
    subprocess.run([os.path.join(ROOT, "tools", "bazel_gen_proto.sh"), "--check"], check=True)
