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


# ---- structural freshness, no protoc needed ------------------------------------------
# The digest test above trusts the header line; this one reads the .proto itself and
# compares every message, field, number, type, label and oneof with the descriptor the
# committed module builds, so a module left behind by a .proto edit fails here even
# where grpcio-tools cannot be installed.

_SCALARS = {
    "double": "TYPE_DOUBLE", "float": "TYPE_FLOAT", "int64": "TYPE_INT64",
    "uint64": "TYPE_UINT64", "int32": "TYPE_INT32", "uint32": "TYPE_UINT32",
    "sint32": "TYPE_SINT32", "sint64": "TYPE_SINT64", "bool": "TYPE_BOOL",
    "string": "TYPE_STRING", "bytes": "TYPE_BYTES",
}  # fmt: skip


def _proto_schema(path: str) -> tuple[str, dict]:
    """(package, {message: {field: (number, type, repeated, oneof)}}) of a simple proto3
    file: messages with scalar, message and repeated fields and oneofs (what ours use)."""
    import re

    text = re.sub(r"//[^\n]*", "", open(path, encoding="utf-8").read())
    package = re.search(r"\bpackage\s+([\w.]+)\s*;", text).group(1)
    messages: dict[str, dict] = {}
    for m in re.finditer(r"\bmessage\s+(\w+)\s*\{((?:[^{}]|\{[^{}]*\})*)\}", text):
        fields: dict[str, tuple] = {}
        body = m.group(2)
        spans = []
        for o in re.finditer(r"\boneof\s+(\w+)\s*\{([^{}]*)\}", body):
            spans.append(o.span())
            for f in re.finditer(r"(\w+)\s+(\w+)\s*=\s*(\d+)\s*;", o.group(2)):
                fields[f.group(2)] = (int(f.group(3)), f.group(1), False, o.group(1))
        outside = "".join(
            body[a:b]
            for a, b in zip(
                [0] + [e for _, e in spans], [s for s, _ in spans] + [None], strict=True
            )
        )
        for f in re.finditer(r"(repeated\s+)?(\w+)\s+(\w+)\s*=\s*(\d+)\s*;", outside):
            fields[f.group(3)] = (int(f.group(4)), f.group(2), bool(f.group(1)), None)
        messages[m.group(1)] = fields
    return package, messages


def _descriptor_schema(module) -> tuple[str, dict]:
    from google.protobuf.descriptor import FieldDescriptor as FD

    names = {getattr(FD, v): k for k, v in _SCALARS.items()}
    fd = module.DESCRIPTOR
    messages = {}
    for name, msg in fd.message_types_by_name.items():
        fields = {}
        for f in msg.fields:
            kind = f.message_type.name if f.type == FD.TYPE_MESSAGE else names[f.type]
            repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == FD.LABEL_REPEATED
            oneof = f.containing_oneof.name if f.containing_oneof else None
            fields[f.name] = (f.number, kind, repeated, oneof)
        messages[name] = fields
    return fd.package, messages


@pytest.mark.parametrize(
    "proto,module",
    [(PROTO, "vxc.worker.vx_worker_protocol_pb2"), (HIR_PROTO, "vxc.hir.vxhir_pb2")],
    ids=["worker", "vxhir"],
)
def test_pb2_schema_matches_the_proto(proto, module):
    import importlib

    assert _descriptor_schema(importlib.import_module(module)) == _proto_schema(proto), (
        "stale: run tools/bazel_gen_proto.sh"
    )
