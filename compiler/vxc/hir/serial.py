"""The checked HIR <-> protobuf (.vxhir), generically over the compiler's dataclasses.

Only classes registered here can be decoded, so a cache file is data, never code.
The value graph is stored as a flat node list (children first, each record once), so
neither encoding nor decoding recurses: any nesting the parser accepts (E0004's 200
levels) round-trips, where nested messages hit protobuf's decode depth at 27 levels.
"""

from __future__ import annotations

import dataclasses

from vxc.diagnostics import Diagnostic, Span
from vxc.frontend import ast as A
from vxc.hir import nodes as H
from vxc.hir import program as P
from vxc.hir import types as T
from vxc.hir import vxhir_pb2 as pb

FORMAT = 7  # bump when any registered dataclass or the node layout changes shape


class CacheError(Exception):
    """A .vxhir that is corrupt, of another format, or names an unknown record."""


def _registry() -> dict[str, type]:
    classes: list[type] = [Span, Diagnostic]
    for module in (A, H, T, P):
        classes += [
            c
            for c in vars(module).values()
            if isinstance(c, type)
            and dataclasses.is_dataclass(c)
            and c.__module__ == module.__name__
        ]
    return {_kind(c): c for c in classes}


def _kind(cls: type) -> str:
    """A record's name in the cache: module and class (the AST and the HIR share form
    names: `frontend.ast.Name` is not `hir.nodes.Name`)."""
    return f"{cls.__module__.removeprefix('vxc.')}.{cls.__qualname__}"


REGISTRY = _registry()


RECORD = "Record:"
I64 = (-(1 << 63), (1 << 63) - 1)


class _Nodes:
    """Builds the flat node list: children first, each record once (by identity)."""

    def __init__(self):
        self.nodes: list[pb.Node] = []
        self.seen: dict[int, int] = {}  # id(record) -> its node index
        self.keep: list[object] = []  # keeps ids stable while encoding

    def add(self, obj: object) -> int:
        """Appends `obj` and everything under it; returns its index. Iterative, so
        nesting depth costs no Python stack."""
        # (object, expanded?) pairs: an object is emitted after its children.
        stack: list[tuple[object, bool]] = [(obj, False)]
        done: list[int] = []  # indices of the objects emitted, in emission order
        while stack:
            o, expanded = stack.pop()
            if not expanded and _is_record(o) and id(o) in self.seen:
                done.append(self.seen[id(o)])
                continue
            children = _children(o)
            if children and not expanded:
                stack.append((o, True))
                stack.extend((c, False) for c in reversed(children))
                continue
            items = [done.pop() for _ in children][::-1] if children else []
            done.append(self._emit(o, items))
        return done[-1]

    def _emit(self, o: object, items: list[int]) -> int:
        n = pb.Node()
        if o is None:
            n.none = True
        elif isinstance(o, bool):
            n.b = o
        elif isinstance(o, int):
            if I64[0] <= o <= I64[1]:
                n.i = o
            else:
                n.big = str(o)
        elif isinstance(o, float):
            n.f = o
        elif isinstance(o, str):
            n.s = o
        elif isinstance(o, tuple | list | dict):
            n.kind = "tuple" if isinstance(o, tuple) else "list" if isinstance(o, list) else "dict"
        else:
            n.kind = RECORD + _kind(type(o))
            n.names.extend(f.name for f in dataclasses.fields(o))
        n.items.extend(items)
        self.nodes.append(n)
        index = len(self.nodes) - 1
        if _is_record(o):
            self.seen[id(o)] = index
            self.keep.append(o)
        return index


def _is_record(o: object) -> bool:
    return dataclasses.is_dataclass(o) and not isinstance(o, type)


def _children(o: object) -> list:
    if o is None or isinstance(o, bool | int | float | str):
        return []
    if isinstance(o, list | tuple):
        return list(o)
    if isinstance(o, dict):
        return [x for kv in o.items() for x in kv]
    if _is_record(o) and _kind(type(o)) in REGISTRY:
        return [getattr(o, f.name) for f in dataclasses.fields(o)]
    raise TypeError(f"cannot serialise {type(o).__name__} into the HIR cache")


def decode_nodes(nodes) -> object:
    """The value of the last node. Children precede their parents, so one pass in
    order decodes everything without recursion; a record reached twice is one object."""
    values: list[object] = []
    for index, n in enumerate(nodes):
        which = n.WhichOneof("v")
        if any(i >= index for i in n.items):
            raise CacheError(f"node {index} names a later node")
        if which in (None, "none"):
            values.append(None)
        elif which in ("b", "i", "f", "s"):
            values.append(getattr(n, which))
        elif which == "big":
            try:
                values.append(int(n.big))
            except ValueError as e:
                raise CacheError(f"node {index}: not an integer") from e
        else:
            values.append(_compound(n, [values[i] for i in n.items], index))
    if not values:
        raise CacheError("HIR cache holds no nodes")
    return values[-1]


def _compound(n, items: list, index: int) -> object:
    kind = n.kind
    if kind == "dict":
        if len(items) % 2:
            raise CacheError(f"node {index}: a dict of odd length")
        try:
            return dict(zip(items[::2], items[1::2], strict=True))
        except TypeError as e:  # an unhashable key
            raise CacheError(f"node {index}: {e}") from e
    if kind in ("list", "tuple"):
        return tuple(items) if kind == "tuple" else items
    cls = REGISTRY.get(kind.removeprefix(RECORD)) if kind.startswith(RECORD) else None
    if cls is None:
        raise CacheError(f"unknown record kind {kind!r}")
    if len(n.names) != len(items):
        raise CacheError(f"record {kind} of {len(n.names)} names and {len(items)} values")
    try:
        return cls(**dict(zip(n.names, items, strict=True)))
    except TypeError as e:
        raise CacheError(f"record {kind} does not match this compiler: {e}") from e


def dump(obj: object, key: str, version: str) -> bytes:
    nodes = _Nodes()
    nodes.add(obj)
    msg = pb.HirCache(format=FORMAT, compiler_version=version, key=key)
    msg.nodes.extend(nodes.nodes)
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
    return decode_nodes(msg.nodes)
