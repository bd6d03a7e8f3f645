"""The Vx fuzzer: mutants of the project's own programs plus grammar-aware generation,
run in-process through the path the CLI and the Bazel worker take (vxc.api).

Per input (`run_input`), a program and, for `--machine` mutants, a machine model:

1. ``api.analyze`` (parse, resolve, types, ownership);
2. the ``.vxhir`` round trip (``Analysis.to_bytes`` / ``from_bytes``), as Bazel's HIR
   action and build action do, whenever the analysis is clean;
3. ``api.check_target`` for every target, with both renderings (human, JSON);
4. ``api.build`` of the round-tripped analysis for **every** target that checked
   clean: the artifact where the target's backend module imports, ``--emit vx-mlir``
   otherwise.

Two kinds of failure:

- an *internal error*: any exception that is not a documented user error
  (``USER_ERRORS``: ``vxc.errors.Unsupported`` and its subclasses) outside a build,
  and any diagnostic without a known code or with a span outside its file;
- a *check ≢ build* finding: a target checked clean and its build then failed — with
  an exception (internal), with an error diagnostic whose code belongs to the checks
  (the check should have said it), with no outputs, or with a refusal that is not
  allowed (``classify_build``).

**Refusals** (the policy, docs/PERFORMANCE.md "Fuzzing"). A backend may refuse a valid
program it cannot lower — a documented backend limitation, not a bug. A *coded*
refusal is a build error diagnostic whose code is in ``CODES`` (so docs/CODES.md and
``vxc explain`` document it) and is not one of the checks' own codes (the E70xx of
issue 19's backend contract)
(``REFUSAL_CODES``: the table's codes that no front-half module emits); it is allowed
and counted as ``refused:<target>:<code>``. An *uncoded* refusal is a bare
``Unsupported`` escaping ``api.build``: once the tree has coded refusals (issue 19;
``REFUSAL_CODES`` not empty) it is a finding, like any other failure after a clean
check; before that it is how every backend refuses, so it is counted
(``refused:<target>``, with its message class in ``Outcome.refusals``) and fails the
run only under ``strict`` (``--strict-refusals``). Everything is deterministic given
the seed.
"""

from __future__ import annotations

import importlib.util
import random
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compiler"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # forms, machines

import forms  # noqa: E402
import machines  # noqa: E402

from vxc import api  # noqa: E402
from vxc.diagnostics.codes import CODES  # noqa: E402
from vxc.errors import Unsupported  # noqa: E402
from vxc.targets import TARGETS  # noqa: E402

USER_ERRORS: tuple[type[BaseException], ...] = (Unsupported,)
STAGES = ("parsed", "analysed", "checked_clean", "built")
FILE = "fuzz.vx"
MACHINE_FILE = "machine.vx"
SEEDS = Path(__file__).resolve().parent / "seeds"
# The modules of the front half (parse, HIR, plan, checks): the codes they emit are the
# checks' own; a build that reports one of them disagrees with its clean check.
FRONT_HALF = ("frontend", "hir", "checks", "plan", "api.py")


def _codes_in(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            found.update(re.findall(r"[\"']([EW]\d{4})[\"']", f.read_text()))
    return found


CHECK_CODES = frozenset(_codes_in([ROOT / "compiler" / "vxc" / m for m in FRONT_HALF]) & set(CODES))
REFUSAL_CODES = frozenset(set(CODES) - CHECK_CODES)


def corpus_files() -> list[Path]:
    """The project's own programs: every kernel, the golden cases, the shipped machine
    models and the fuzzer's seeds of the newer language forms (tests/fuzz/seeds)."""
    return [
        *sorted((ROOT / "kernels").glob("*.vx")),
        *sorted((ROOT / "tests" / "golden" / "cases").glob("*.vx")),
        *sorted((ROOT / "compiler" / "vxc" / "machines").glob("*.vx")),
        *sorted(SEEDS.glob("*.vx")),
    ]


def load_corpus() -> list[bytes]:
    return [p.read_bytes() for p in corpus_files()]


def backend_imports(target: str) -> bool:
    """Whether `target`'s backend module exists in this checkout (the tpu and nvidia
    backends land separately); the fuzzer builds artifacts for exactly those."""
    name = f"vxc.backends.{TARGETS[target].family}"
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


# ---- running one input ------------------------------------------------------------


@dataclass
class Outcome:
    stages: set[str] = field(default_factory=set)
    error: str | None = None  # an internal error or a check ≢ build finding
    refusals: list[str] = field(default_factory=list)  # "<target>: <message class>"

    @property
    def ok(self) -> bool:
        return self.error is None


class BadDiagnostic(Exception):
    """A diagnostic the user could not act on: unknown code or a span outside the input."""


class CheckBuildMismatch(Exception):
    """A target checked clean and its build failed (see `classify_build`)."""


def _validate(diags, sources: list) -> None:
    lines = {s.path: s.data.count(b"\n") + 1 for s in sources}
    for d in diags:
        if d.code not in CODES:
            raise BadDiagnostic(f"unknown diagnostic code {d.code!r}: {d.message}")
        s = d.span
        if s.file in lines and not 1 <= s.line <= lines[s.file]:
            raise BadDiagnostic(f"{d.code} span line {s.line} outside {s.file}: {d.message}")


def _render(diags, sources, machine) -> None:
    """Both renderings, through the function the CLI and the worker call."""
    for fmt in ("human", "json"):
        api.render(diags, sources, machine, fmt)


def _build_emit(target: str) -> str:
    return "artifact" if target == "cpu" or backend_imports(target) else "vx-mlir"


def refusal_class(message: str) -> str:
    """A refusal message without its locations, names and numbers: one line per kind."""
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"\S+:\d+:\d+: |line \d+: ", "", first)
    first = re.sub(r"`[^`]*`", "`_`", first)
    return re.sub(r"\d+", "N", first)[:120]


def classify_build(target: str, result, outcome: Outcome) -> None:
    """check ≡ build for one target that checked clean: returns when the build is
    allowed (built, or a coded refusal), raises CheckBuildMismatch otherwise."""
    errors = [d for d in result.diagnostics if d.severity == "error"]
    if not errors:
        if not result.outputs:
            raise CheckBuildMismatch(f"[{target}] a clean build produced no outputs")
        return
    owned = sorted({d.code for d in errors} - REFUSAL_CODES)
    if owned:
        first = next(d for d in errors if d.code in owned)
        raise CheckBuildMismatch(
            f"[{target}] the build reports {', '.join(owned)} that the clean check did not: "
            f"{first.message[:200]}"
        )
    outcome.stages.add(f"refused:{target}")
    for d in errors:
        outcome.stages.add(f"refused:{target}:{d.code}")


def _build_one(
    loaded, target: str, strict: bool, outcome: Outcome, sources, emit: str | None = None
) -> None:
    emit = emit or _build_emit(target)
    try:
        result = api.build(loaded, target, emit, cpu="x86-64-v3")
    except USER_ERRORS as e:
        if strict or REFUSAL_CODES:
            raise CheckBuildMismatch(
                f"[{target}] uncoded refusal after a clean check: "
                f"{type(e).__name__}: {str(e)[:300]}"
            ) from None
        # How every backend refuses before issue 19's coded refusals: counted, and its
        # message class kept, so the gaps of each back end show in the figures.
        outcome.stages.add(f"refused:{target}")
        outcome.refusals.append(f"{target}: {refusal_class(str(e))}")
        return
    except RecursionError:
        raise
    except Exception as e:  # noqa: BLE001 - which target failed is half the report
        raise CheckBuildMismatch(f"[{target}] {_describe(e)}") from None
    _validate(result.diagnostics, sources)
    classify_build(target, result, outcome)
    if result.ok:
        outcome.stages.add(f"{'built' if emit == 'artifact' else 'lowered'}:{target}")
        if target == "cpu":
            outcome.stages.add("built")


def compile_input(
    data: bytes,
    outcome: Outcome,
    build: bool = True,
    machine: bytes | None = None,
    strict: bool = False,
) -> None:
    """The pipeline; raises whatever the compiler raises (the caller classifies it)."""
    sources = [api.Source(FILE, data)]
    model = api.Source(MACHINE_FILE, machine) if machine is not None else None
    files = [*sources, *([model] if model else [])]
    analysis = api.analyze(sources, model)
    if analysis.program is not None:
        outcome.stages.add("parsed")
    _validate(analysis.diagnostics, files)
    _render(analysis.diagnostics, sources, model)
    if analysis.ok:
        outcome.stages.add("analysed")
        blob = analysis.to_bytes()
        loaded = api.Analysis.from_bytes(blob, sources, model)
        if loaded.diagnostics != analysis.diagnostics:
            raise BadDiagnostic(".vxhir round trip changed the diagnostics")
    else:
        loaded = analysis
    for target in TARGETS:
        checked = api.check_target(analysis, target)
        _validate(checked.diagnostics, files)
        _render(checked.diagnostics, sources, model)
        if not checked.ok:
            continue
        outcome.stages.add(f"clean:{target}")
        if target == "cpu":
            outcome.stages.add("checked_clean")
        if build:
            _build_one(loaded, target, strict, outcome, files)


def run_input(
    data: bytes, build: bool = True, machine: bytes | None = None, strict: bool = False
) -> Outcome:
    outcome = Outcome()
    try:
        compile_input(data, outcome, build, machine, strict)
    except CheckBuildMismatch as e:
        outcome.error = f"check≢build {e}"
    except USER_ERRORS:
        pass
    except RecursionError as e:  # report without walking 10 000 frames
        outcome.error = f"RecursionError: {e}"
    except Exception as e:  # noqa: BLE001 - classifying every escape is the point
        outcome.error = _describe(e)
    return outcome


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the linker): what a hang is
    measured in, so a machine shared with other jobs does not count its load."""
    import resource

    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _describe(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)[-4:]
    where = "; ".join(f"{_short(f.filename)}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(e).__name__}: {str(e)[:300]} (at {where})"


def _short(filename: str) -> str:
    """`backends/tpu/lower.py`, not `lower.py`: which module failed, at a glance."""
    parts = Path(filename).parts
    return "/".join(parts[parts.index("vxc") + 1 :]) if "vxc" in parts else Path(filename).name


# ---- mutation ----------------------------------------------------------------------

TOKEN = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_.eE]*|->|::|\.\.|[&|=!<>]=?|\S")
VOCAB = [
    *(
        b"fn let mut for in if else return on spawn where const Memory Topology transfer "
        b"relaxed sync true false extern transfer_async wait Tensor Vec Token matmul_acc assert "
        b"f32 bf16 f16 i64 i32 bool void len VMEM HBM SMEM ACC TMEM TensorCore capacity "
        b"granule memory visible within alias managed scope bandwidth"
    ).split(),
    *b"( ) { } [ ] < > , ; : . & * + - / % = ! :: -> .. == != <= >= && || 0 1 2 128 -1".split(),
]
HUGE = [
    b"9" * 4301,
    b"1" + b"0" * 5000,
    b"18446744073709551616",
    b"9223372036854775807",
    b"9223372036854775808",
    b"4294967296",
    b"1e400",
    b"1.7976931348623157e308",
    b"0",
    b"00000000000000000000001",
]


def _tokens(data: bytes) -> list[re.Match]:
    return list(TOKEN.finditer(data))


def flip_bytes(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        b[i] = b[i] ^ (1 << rng.randrange(8)) if rng.random() < 0.7 else rng.randrange(256)
    return bytes(b)


def edit_token(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    toks = _tokens(data)
    if not toks:
        return data + rng.choice(VOCAB)
    for _ in range(rng.randint(1, 3)):
        toks = _tokens(data)
        if not toks:
            break
        t = rng.choice(toks)
        op = rng.random()
        if op < 0.3:
            new = b""  # delete
        elif op < 0.5:
            new = t.group() + b" " + t.group()  # duplicate
        elif op < 0.6:
            other = rng.choice(_tokens(rng.choice(corpus)) or toks)
            new = other.group()  # a token of another program
        else:
            new = rng.choice(VOCAB)
        data = data[: t.start()] + new + data[t.end() :]
    return data


def splice_lines(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    lines = data.split(b"\n")
    donor = rng.choice(corpus).split(b"\n")
    n = rng.randint(1, 4)
    start = rng.randrange(len(donor))
    chunk = donor[start : start + n]
    at = rng.randrange(len(lines) + 1)
    if rng.random() < 0.3 and lines:  # replace instead of insert
        del lines[at : at + len(chunk)]
    lines[at:at] = chunk
    return b"\n".join(lines)


def _nest(rng: random.Random, depth: int) -> tuple[bytes, bytes]:
    kind = rng.randrange(5)
    if kind == 0:
        return b"(" * depth, b")" * depth
    if kind == 1:
        return b"&" * depth, b""
    if kind == 2:
        return b"-" * depth, b""
    if kind == 3:
        return b"1 + " * depth, b""
    return b"{ " * depth, b" }" * depth


def deep_nesting(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    depth = rng.choice([rng.randint(1, 40), rng.randint(190, 210), rng.randint(210, 3000)])
    toks = _tokens(data)
    kind = rng.randrange(3)
    if kind == 0 and toks:  # around an expression-ish token
        t = rng.choice(toks)
        pre, post = _nest(rng, depth)
        return data[: t.start()] + pre + t.group() + post + data[t.end() :]
    if kind == 1:  # a reference type nested `depth` deep in a parameter
        ty = b"&" * depth + b"Tensor<f32, [4, 4]>"
        return data + b"\nfn deep_%d(x: %s) -> void { }\n" % (depth, ty)
    body = b"1" + b" + 1" * depth if rng.random() < 0.5 else b"(" * depth + b"1" + b")" * depth
    return data + b"\nfn deep_%d() -> i64 { return %s; }\n" % (depth, body)


def huge_literal(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    nums = [t for t in _tokens(data) if t.group()[:1].isdigit()]
    lit = rng.choice(HUGE)
    if not nums:
        return data + b"\nfn big() -> i64 { return " + lit + b"; }\n"
    t = rng.choice(nums)
    return data[: t.start()] + lit + data[t.end() :]


def long_name(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    names = [t for t in _tokens(data) if t.group()[:1].isalpha() and t.group() not in VOCAB]
    if not names:
        return data
    t = rng.choice(names)
    new = t.group() * rng.choice([2, 100, 1100])
    return data.replace(t.group(), new[:5000])


SWAPS = [
    [b"f32", b"bf16", b"f16", b"f64", b"i32", b"i64", b"i8", b"u8", b"bool"],
    [b"VMEM", b"HBM", b"ACC", b"SMEM", b"TMEM", b"CPU_DRAM"],
    [b"1", b"0", b"2", b"3", b"7", b"64", b"127", b"128", b"129", b"4096", b"65536"],
    [b"transfer", b"transfer_async"],
    [b"relaxed", b"sync"],
    [b"KB", b"B", b"MB", b"GiB", b"TB"],
]


def swap_word(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A type, space, dimension or unit for another of its kind: mutants that still
    parse and often check, so they reach placement, seams and the back end."""
    for _ in range(rng.randint(1, 3)):
        # A group the input has words of (a group it lacks changed nothing).
        present = [g for g in SWAPS if any(t.group() in g for t in _tokens(data))]
        group = rng.choice(present) if present else rng.choice(SWAPS)
        hits = [t for t in _tokens(data) if t.group() in group]
        if hits:
            t = rng.choice(hits)
            # Another word of the group: swapping a word for itself was a wasted mutant.
            others = [w for w in group if w != t.group()] or list(group)
            data = data[: t.start()] + rng.choice(others) + data[t.end() :]
    return data


ITEM = re.compile(
    rb"^(?:fn|extern|Memory|Topology)\b.*?(?=^(?:fn|extern|Memory|Topology)\b|\Z)", re.M | re.S
)


def splice_item(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A whole declaration (function, memory, topology) of another program, added or
    in place of one of this program's."""
    donor = ITEM.findall(rng.choice(corpus))
    if not donor:
        return data
    item = rng.choice(donor)
    own = list(ITEM.finditer(data))
    if own and rng.random() < 0.5:
        m = rng.choice(own)
        return data[: m.start()] + item + data[m.end() :]
    return data + b"\n" + item


MUTATORS: list[Callable[[random.Random, bytes, list[bytes]], bytes]] = [
    swap_word,
    swap_word,
    splice_item,
    flip_bytes,
    edit_token,
    edit_token,
    splice_lines,
    deep_nesting,
    huge_literal,
    long_name,
    *forms.MUTATORS,
]


# ---- grammar-aware generation --------------------------------------------------------

ELEMS = ["f32", "bf16", "f16", "i32", "i64", "bool"]
SPACES = ["VMEM", "HBM", "ACC", "SMEM", "TMEM"]


class Gen:
    """Random programs from the grammar, biased towards ones that check: tensors moved
    between spaces, matmul_acc accumulators, loops over Vecs, scalar arithmetic,
    helper calls and const generics."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def dim(self) -> str:
        return str(self.rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 4096, 0]))

    def tensor(self, elem: str | None = None) -> str:
        n = self.rng.choice([1, 2, 2, 2, 3])
        dims = ", ".join(self.dim() for _ in range(n))
        return f"Tensor<{elem or self.rng.choice(ELEMS)}, [{dims}]>"

    def scalar_expr(self, names: list[str], depth: int = 0) -> str:
        r = self.rng.random()
        if depth > 3 or r < 0.3:
            return self.rng.choice([*names, "1", "0", "7", "-3", "128"]) if names else "2"
        op = self.rng.choice(["+", "-", "*", "/", "%"])
        return f"({self.scalar_expr(names, depth + 1)} {op} {self.scalar_expr(names, depth + 1)})"

    def function(self, name: str) -> str:
        rng = self.rng
        m = rng.choice([8, 16, 32, 128])
        k = rng.choice([8, 16, 32, 128])
        n = rng.choice([8, 16, 32, 128])
        elem = rng.choice(["f32", "f32", "bf16", "f16"])
        kind = rng.randrange(4)
        if kind == 0:  # the seed's stream shape, with variations
            body = [
                f"  let wv = transfer(w, Memory::{rng.choice(['VMEM', 'VMEM', 'HBM'])});",
                f"  let mut acc = transfer(Tensor<f32>([{m}, {n}]), Memory::ACC);",
                "  for i in 0..tiles.len() {",
                f"    let cur = transfer(tiles[i], Memory::{rng.choice(['VMEM', 'VMEM', 'SMEM'])});",
                "    matmul_acc(&mut acc, &cur, &wv);",
                "  }",
                "  return transfer(acc, Memory::HBM);",
            ]
            if rng.random() < 0.5:
                body[2:6] = [
                    "  let mut inflight = transfer_async(tiles[0], Memory::VMEM);",
                    "  for i in 1..tiles.len() {",
                    "    let next = transfer_async(tiles[i], Memory::VMEM);",
                    "    let cur = wait(inflight);",
                    "    matmul_acc(&mut acc, &cur, &wv);",
                    "    inflight = next;",
                    "  }",
                    "  let last = wait(inflight);",
                    "  matmul_acc(&mut acc, &last, &wv);",
                ]
            params = f"tiles: &Vec<Tensor<{elem}, [{m}, {k}]>>, w: &Tensor<{elem}, [{k}, {n}]>"
            ret = f"Tensor<f32, [{m}, {n}]>"
            head = f"fn {name}({params}) -> {ret} on Topology::TensorCore"
        elif kind == 1:  # scalars
            body = ["  let mut s = a;"]
            for _ in range(rng.randint(1, 4)):
                c = rng.random()
                if c < 0.4:
                    body.append(f"  s = {self.scalar_expr(['s', 'a', 'b'])};")
                elif c < 0.7:
                    body.append(f"  if s > {rng.randint(-5, 5)} {{ s = s - b; }} else {{ s = b; }}")
                else:
                    body.append(f"  for j in 0..{rng.randint(0, 9)} {{ s = s + j; }}")
            body.append(f"  return {self.scalar_expr(['s', 'a'])};")
            t = rng.choice(["i64", "i32", "i64"])
            head = f"fn {name}(a: {t}, b: {t}) -> {t}"
        elif kind == 2:  # a const-generic helper and its caller
            body = [
                f"  let t = transfer(x, Memory::{rng.choice(SPACES)});",
                "  return transfer(t, Memory::HBM);",
            ]
            head = f"fn {name}(x: &{self.tensor('f32')}) -> {self.tensor('f32')}"
        else:  # tensors created and moved
            body = [
                f"  let z = Tensor<{rng.choice(ELEMS)}>([{self.dim()}, {self.dim()}]);",
                f"  let v = transfer(z, Memory::{rng.choice(SPACES)});",
                f"  let h = transfer(v, Memory::{rng.choice(SPACES)});",
            ]
            if rng.random() < 0.5:
                body.append("  assert(1 < 2);")
            head = f"fn {name}() -> void"
        return head + " {\n" + "\n".join(body) + "\n}\n"

    def machine(self) -> str:
        rng = self.rng
        cap = rng.choice(["64 KB", "2 MB", "16 MiB", "1 B", "0 B"])
        return (
            f"Memory SCR {{ within: Memory::{rng.choice(['HBM', 'VMEM', 'CPU_DRAM'])}, "
            f"capacity: {cap}, granule: {rng.choice(['64 B', '1 B', '4 KB'])} }}\n"
        )

    def program(self) -> bytes:
        if self.rng.random() < 0.4:  # the views, outputs and tile-arithmetic forms
            return forms.FormsGen(self.rng).program()
        parts = [self.function(f"k{i}") for i in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.2:
            parts.insert(0, self.machine())
        return "\n".join(parts).encode()


# ---- the input stream ---------------------------------------------------------------


class Case(NamedTuple):
    how: str  # how it was made: its origin and the mutators applied
    data: bytes  # the program
    machine: bytes | None = None  # a --machine model, for machine mutants


MACHINE_SHARE = 0.15  # of the inputs: a kernel with a mutated shipped model as --machine


def kernel_programs(corpus_paths: list[Path] | None = None) -> list[bytes]:
    """The programs a machine mutant is fed: every kernel and every seed."""
    paths = corpus_paths or corpus_files()
    return [p.read_bytes() for p in paths if p.parent.name in ("kernels", "seeds")]


def inputs(seed: int, corpus: list[bytes] | None = None) -> Iterator[Case]:
    """Cases, forever, deterministic in `seed`."""
    corpus = corpus if corpus is not None else load_corpus()
    kernels = kernel_programs()
    models = machines.load_models()
    rng = random.Random(seed)
    while True:
        r = rng.random()
        if r < MACHINE_SHARE:
            how, model = machines.mutant(rng, models)
            if rng.random() < 0.8:
                yield Case(how + "+kernel", rng.choice(kernels), model)
            else:
                yield Case(how + "+generated", Gen(rng).program(), model)
            continue
        if r < MACHINE_SHARE + 0.25:
            data, how = Gen(rng).program(), "generated"
        else:
            data, how = rng.choice(corpus), "corpus"
        for _ in range(rng.choice([0, 1, 1, 1, 2, 3]) if how == "corpus" else rng.randint(0, 1)):
            m = rng.choice(MUTATORS)
            data = m(rng, data, corpus)
            how += "+" + m.__name__
        yield Case(how, data)
