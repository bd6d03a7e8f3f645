"""`--machine` mutants: the shipped machine models (compiler/vxc/machines/*.vx) with
their facets mutated, passed as the machine model of a kernel, as `vxc build
--machine M.vx` and the worker's `--machine` do.

A mutant changes one to three facets of a model: a capacity or granule (huge, zero,
negative, a granule past its space), a `within` (another space, itself, one not
declared), a bandwidth, an edge (dropped, reversed, relaxed, a cost that is huge,
zero or negative, to an undeclared space), the topology's `memory` and `visible`, an
`alias`. The kernel is one of the corpus's programs (every kernels/*.vx, the seeds),
so the checks and the back ends see real code against an odd machine.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "compiler" / "vxc" / "machines").glob("*.vx"))

# Numbers at the edges of what the checks and the IR's integer types hold.
NUMBERS = [
    "0",
    "1",
    "3",
    "-1",
    "-4096",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "1" + "0" * 30,
]
UNITS = ["B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"]
SIZES = ["1 B", "64 B", "1 KB", "228 KB", "1 MB", "128 MiB", "16 GB", "8388607 TB"]
SPACES = ["HBM", "VMEM", "SMEM", "ACC", "TMEM", "L2", "CPU_DRAM", "Nowhere"]
RATES = ["0 B/s", "1 B/s", "819 GB/s", "1e400 B/s", "-5 GB/s", "128 B/cyc", "0.5 B/cyc"]

FACET = re.compile(rb"\b(capacity|granule|bandwidth|within|alias|managed|scope)\s*:\s*([^,}\n]+)")
EDGE = re.compile(
    rb"transfer\s+Memory::(\w+)\s*->\s*Memory::(\w+)\s*:\s*(-?\d+)(\s+(?:relaxed|sync))?"
)
MEMORY_DECL = re.compile(rb"^Memory\s+(\w+)\s*\{[^}]*\}", re.M)
TOPO_FACET = re.compile(rb"\b(memory|visible)\s*:\s*(Memory::\w+|\[[^\]]*\])")


def _size(rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return rng.choice(SIZES).encode()
    return f"{rng.choice(NUMBERS)} {rng.choice(UNITS)}".encode()


def _value(rng: random.Random, facet: bytes) -> bytes:
    if facet in (b"capacity", b"granule"):
        return _size(rng)
    if facet == b"bandwidth":
        return rng.choice(RATES).encode()
    if facet in (b"within", b"alias"):
        return b"Memory::" + rng.choice(SPACES).encode()
    if facet == b"managed":
        return rng.choice([b"cached", b"explicit", b"sometimes"])
    return rng.choice([b"device", b"sm", b"thread", b"subcore", b"galaxy"])


def _replace(data: bytes, m: re.Match, group: int, new: bytes) -> bytes:
    return data[: m.start(group)] + new + data[m.end(group) :]


def facet(rng: random.Random, data: bytes) -> bytes:
    """A memory facet's value for another of its kind (a size, a space, a rate)."""
    hits = list(FACET.finditer(data))
    if not hits:
        return data
    m = rng.choice(hits)
    return _replace(data, m, 2, _value(rng, m.group(1)))


def granule_past_capacity(rng: random.Random, data: bytes) -> bytes:
    """A space whose granule exceeds its capacity (or equals it, or is zero)."""
    decls = [m for m in MEMORY_DECL.finditer(data) if b"capacity" in m.group()]
    if not decls:
        return data
    m = rng.choice(decls)
    cap = re.search(rb"capacity\s*:\s*([^,}\n]+)", m.group()).group(1).strip()
    gran = rng.choice([cap, b"0 B", b"1 TB", b"9223372036854775807 B", b"3 B"])
    body = m.group()
    if b"granule" in body:
        body = re.sub(rb"granule\s*:\s*[^,}\n]+", b"granule: " + gran, body)
    else:
        body = body[:-1].rstrip() + b", granule: " + gran + b" }"
    return data[: m.start()] + body + data[m.end() :]


def add_facet(rng: random.Random, data: bytes) -> bytes:
    """A facet a declaration lacks (a within on HBM, a capacity on an alias, ...)."""
    decls = list(MEMORY_DECL.finditer(data))
    if not decls:
        return data
    m = rng.choice(decls)
    name = rng.choice([b"capacity", b"granule", b"within", b"bandwidth", b"alias", b"managed"])
    body = m.group()[:-1].rstrip() + b", " + name + b": " + _value(rng, name) + b" }"
    return data[: m.start()] + body + data[m.end() :]


def edge(rng: random.Random, data: bytes) -> bytes:
    """One edge dropped, reversed, relaxed, re-costed or pointed at another space."""
    hits = list(EDGE.finditer(data))
    if not hits:
        return data
    m = rng.choice(hits)
    op = rng.randrange(5)
    if op == 0:  # drop it (and the comma after it, if any)
        end = m.end() + (1 if data[m.end() : m.end() + 1] == b"," else 0)
        return data[: m.start()] + data[end:]
    if op == 1:
        return _replace(data, m, 3, rng.choice(NUMBERS).encode())
    if op == 2:
        new = b"transfer Memory::%s -> Memory::%s : %s" % (m.group(2), m.group(1), m.group(3))
        return data[: m.start()] + new + data[m.end() :]
    if op == 3:
        kind = rng.choice([b" relaxed", b" sync", b""])
        return data[: m.end(3)] + kind + data[m.end() :]
    return _replace(data, m, rng.choice([1, 2]), rng.choice(SPACES).encode())


def add_edge(rng: random.Random, data: bytes) -> bytes:
    """A new edge, possibly a self loop, a parallel edge or one to an undeclared space."""
    close = data.rfind(b"}")
    if close < 0 or b"Topology" not in data:
        return data
    a, b = rng.choice(SPACES), rng.choice(SPACES)
    new = f",\n  transfer Memory::{a} -> Memory::{b} : {rng.choice(NUMBERS)}".encode()
    body = data[:close].rstrip()
    body = body[:-1] if body.endswith(b",") else body
    return body + new + b"\n" + data[close:]


def topology(rng: random.Random, data: bytes) -> bytes:
    """The core's home memory or its visible list for other spaces."""
    hits = list(TOPO_FACET.finditer(data))
    if not hits:
        return data
    m = rng.choice(hits)
    if m.group(1) == b"memory":
        new = b"Memory::" + rng.choice(SPACES).encode()
    else:
        chosen = rng.sample(SPACES, rng.randint(0, 3))
        new = b"[" + b", ".join(b"Memory::" + s.encode() for s in chosen) + b"]"
    return _replace(data, m, 2, new)


def drop_decl(rng: random.Random, data: bytes) -> bytes:
    """A memory declaration removed: the kernel names a space the model lacks."""
    decls = list(MEMORY_DECL.finditer(data))
    if not decls:
        return data
    m = rng.choice(decls)
    return data[: m.start()] + data[m.end() :]


MUTATORS = [facet, facet, facet, granule_past_capacity, add_facet, edge, edge, add_edge]
MUTATORS += [topology, drop_decl]


def load_models() -> list[bytes]:
    return [p.read_bytes() for p in MODELS]


def mutant(rng: random.Random, models: list[bytes]) -> tuple[str, bytes]:
    """(how, a mutated shipped model)."""
    i = rng.randrange(len(models))
    data, how = models[i], f"machine:{MODELS[i].stem}"
    for _ in range(rng.randint(1, 3)):
        m = rng.choice(MUTATORS)
        data = m(rng, data)
        how += "+" + m.__name__
    return how, data
