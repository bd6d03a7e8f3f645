"""The checked HIR <-> protobuf (.vxhir), generically over the compiler's dataclasses.

Only classes registered here can be decoded, so a cache file is data, never code.
"""

from __future__ import annotations

import dataclasses

from vxc.diagnostics import Diagnostic, Span
from vxc.frontend import ast as A
from vxc.hir import program as P
from vxc.hir import types as T
from vxc.hir import vxhir_pb2 as pb

FORMAT = 1  # bump when any registered dataclass changes shape


class CacheError(Exception):
    """A .vxhir that is corrupt, of another format, or names an unknown record."""


def _registry() -> dict[str, type]:
    classes: list[type] = [Span, Diagnostic]
    for module in (A, T, P):
        classes += [
            c
            for c in vars(module).values()
            if isinstance(c, type)
            and dataclasses.is_dataclass(c)
            and c.__module__ == module.__name__
        ]
    return {c.__name__: c for c in classes}


REGISTRY = _registry()


def encode(obj: object) -> pb.Value:
    v = pb.Value()
    if obj is None:
        v.none = True
    elif isinstance(obj, bool):
        v.b = obj
    elif isinstance(obj, int):
        v.i = obj
    elif isinstance(obj, float):
        v.f = obj
    elif isinstance(obj, str):
        v.s = obj
    elif isinstance(obj, list | tuple):
        v.seq.kind = "tuple" if isinstance(obj, tuple) else "list"
        v.seq.items.extend(encode(x) for x in obj)
    elif isinstance(obj, dict):
        v.seq.kind = "dict"
        for key, value in obj.items():
            v.seq.items.extend([encode(key), encode(value)])
    elif dataclasses.is_dataclass(obj) and type(obj).__name__ in REGISTRY:
        v.record.kind = type(obj).__name__
        for f in dataclasses.fields(obj):
            v.record.fields.add(name=f.name, value=encode(getattr(obj, f.name)))
    else:
        raise TypeError(f"cannot serialise {type(obj).__name__} into the HIR cache")
    return v


def decode(v: pb.Value) -> object:
    which = v.WhichOneof("v")
    if which == "none" or which is None:
        return None
    if which in ("b", "i", "f", "s"):
        return getattr(v, which)
    if which == "seq":
        items = [decode(x) for x in v.seq.items]
        if v.seq.kind == "dict":
            return dict(zip(items[::2], items[1::2], strict=True))
        return tuple(items) if v.seq.kind == "tuple" else items
    cls = REGISTRY.get(v.record.kind)
    if cls is None:
        raise CacheError(f"unknown record kind {v.record.kind!r}")
    try:
        return cls(**{f.name: decode(f.value) for f in v.record.fields})
    except TypeError as e:
        raise CacheError(f"record {v.record.kind} does not match this compiler: {e}") from e


def dump(obj: object, key: str, version: str) -> bytes:
    msg = pb.HirCache(format=FORMAT, compiler_version=version, key=key)
    msg.analysis.CopyFrom(encode(obj).record)
    return msg.SerializeToString(deterministic=True)


def load(data: bytes, key: str, version: str) -> object:
    msg = pb.HirCache()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError, and others on garbage
        raise CacheError(f"not a HIR cache: {e}") from e
    if msg.format != FORMAT or msg.compiler_version != version:
        raise CacheError(f"HIR cache of format {msg.format} / vxc {msg.compiler_version}")
    if msg.key != key:
        raise CacheError("HIR cache of other sources")
    value = pb.Value()
    value.record.CopyFrom(msg.analysis)
    return decode(value)
