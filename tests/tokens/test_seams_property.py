"""Property test of the seam engine's path sensitivity (LANGUAGE.md section 6): random
programs move buffers across a relaxed edge or a synchronizing one, rotate them between
variables, branch on *shared* conditions (so some paths are infeasible) and loop; the
E6004 lines must equal those of a brute force written here, independently.

The reference: for every assignment of the boolean parameters, simulate the program
(each buffer fresh or stale; a loop runs any number of times: its head states are
explored until none is new); a read is E6004 when some assignment reaches it stale.
The relaxed edge itself is always W1027.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxc import api

# The spaces are caches: this test is about seams, not scratchpad rotation (an explicit
# space, the default, would also get the allocator's E6010 for non-FIFO rotations).
PRELUDE = """\
Memory Far { capacity: 1 MB, managed: cached }
Memory Near { capacity: 1 MB, managed: cached }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed,
  transfer Memory::HBM -> Memory::Near : 10
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
"""
W1027_LINE = 7
CONDS = ("c0", "c1")


@dataclass
class Fresh:  # x = transfer(t, Memory::Near);             (synchronizing edge)
    var: str


@dataclass
class Stale:  # x = transfer(transfer(u, Memory::Far), Memory::Near);   (relaxed hop)
    var: str


@dataclass
class Rotate:  # x = y; y = transfer(t, Memory::Near);
    dst: str
    src: str


@dataclass
class Read:  # consume(&x);
    var: str


@dataclass
class Return:
    pass


@dataclass
class If:
    cond: str
    negated: bool
    then: list
    orelse: list | None


@dataclass
class Loop:
    body: list


@dataclass
class Program:
    bufs: list[str]
    body: list
    lines: dict[int, int] = field(default_factory=dict)
    text: str = ""


@st.composite
def programs(draw, max_depth: int = 3):
    bufs = [f"b{i}" for i in range(draw(st.integers(1, 3)))]
    in_loop = [False]

    def block(depth: int) -> list:
        stmts = []
        for _ in range(draw(st.integers(0 if depth else 1, 4))):
            kinds = ["fresh", "stale", "stale", "read", "read", "read", "return"]
            kinds += ["rotate"] * 2 if len(bufs) > 1 else []
            kinds += ["if", "if"] if depth < max_depth else []
            kinds += ["loop"] if depth < max_depth and not in_loop[0] else []
            kind = draw(st.sampled_from(kinds))
            if kind == "fresh":
                stmts.append(Fresh(draw(st.sampled_from(bufs))))
            elif kind == "stale":
                stmts.append(Stale(draw(st.sampled_from(bufs))))
            elif kind == "read":
                stmts.append(Read(draw(st.sampled_from(bufs))))
            elif kind == "rotate":
                dst, src = draw(st.permutations(bufs))[:2]
                stmts.append(Rotate(dst, src))
            elif kind == "if":
                cond, neg = draw(st.sampled_from(CONDS)), draw(st.booleans())
                then = block(depth + 1)
                orelse = block(depth + 1) if draw(st.booleans()) else None
                stmts.append(If(cond, neg, then, orelse))
            elif kind == "loop":
                in_loop[0] = True
                stmts.append(Loop(block(depth + 1)))
                in_loop[0] = False
            else:
                stmts.append(Return())
                break
        return stmts

    prog = Program(bufs, block(0))
    render(prog)
    return prog


def render(prog: Program) -> None:
    out = PRELUDE.splitlines()
    out.append(
        "fn f(t: &Tensor<f32, [16, 16]>, u: &Tensor<f32, [16, 16]>, c0: bool, c1: bool, "
        "n: i64) -> void on Topology::Mover {"
    )
    out += [f"  let mut {b} = transfer(t, Memory::Near);" for b in prog.bufs]

    def emit(stmts: list, ind: str) -> None:
        for s in stmts:
            if isinstance(s, Fresh):
                out.append(f"{ind}{s.var} = transfer(t, Memory::Near);")
            elif isinstance(s, Stale):
                out.append(f"{ind}{s.var} = transfer(transfer(u, Memory::Far), Memory::Near);")
            elif isinstance(s, Rotate):
                out.append(f"{ind}{s.dst} = {s.src}; {s.src} = transfer(t, Memory::Near);")
            elif isinstance(s, Read):
                out.append(f"{ind}consume(&{s.var});")
            elif isinstance(s, Return):
                out.append(f"{ind}return;")
            elif isinstance(s, Loop):
                out.append(f"{ind}for i{len(out)} in 0..n {{")
                emit(s.body, ind + "  ")
                out.append(f"{ind}}}")
                continue
            else:
                out.append(f"{ind}if {'!' if s.negated else ''}{s.cond} {{")
                prog.lines[id(s)] = len(out)
                emit(s.then, ind + "  ")
                if s.orelse is not None:
                    out.append(f"{ind}}} else {{")
                    emit(s.orelse, ind + "  ")
                out.append(f"{ind}}}")
                continue
            prog.lines[id(s)] = len(out)

    emit(prog.body, "  ")
    out.append("}")
    prog.text = "\n".join(out) + "\n"


def brute_force(prog: Program) -> set[tuple[str, int]]:
    found = {("W1027", W1027_LINE)}

    def run(stmts: list, state: dict, env: dict):
        """Every (state, returned) at the end of `stmts` under one condition assignment."""
        if not stmts:
            yield state, False
            return
        s, rest = stmts[0], stmts[1:]
        state = dict(state)
        if isinstance(s, Return):
            yield state, True
            return
        if isinstance(s, Fresh):
            state[s.var] = "fresh"
        elif isinstance(s, Stale):
            state[s.var] = "stale"
        elif isinstance(s, Rotate):
            state[s.dst], state[s.src] = state[s.src], "fresh"
        elif isinstance(s, Read):
            if state[s.var] == "stale":
                found.add(("E6004", prog.lines[id(s)]))
        elif isinstance(s, If):
            taken = env[s.cond] != s.negated
            arm = s.then if taken else (s.orelse or [])
            for st_, returned in run(arm, state, env):
                if returned:
                    yield st_, True
                else:
                    yield from run(rest, st_, env)
            return
        elif isinstance(s, Loop):
            seen = {tuple(sorted(state.items()))}
            frontier = list(seen)
            while frontier:
                new = []
                for head in frontier:
                    for st_, returned in run(s.body, dict(head), env):
                        key = tuple(sorted(st_.items()))
                        if returned:
                            yield st_, True
                        elif key not in seen:
                            seen.add(key)
                            new.append(key)
                frontier = new
            for head in seen:
                yield from run(rest, dict(head), env)
            return
        yield from run(rest, state, env)

    for values in itertools.product((False, True), repeat=len(CONDS)):
        env = dict(zip(CONDS, values, strict=True))
        for _ in run(prog.body, {b: "fresh" for b in prog.bufs}, env):
            pass
    return found


def checker(prog: Program) -> set[tuple[str, int]]:
    checked = api.check([api.Source("seams.vx", prog.text.encode())], "tpu")
    return {(d.code, d.span.line) for d in checked.diagnostics}


def _numbered(text: str) -> str:
    return "\n".join(f"{n:3} {line}" for n, line in enumerate(text.splitlines(), 1))


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@settings(max_examples=100, **COMMON)
@given(programs())
def test_seam_verdict_matches_brute_force(prog):
    assert checker(prog) == brute_force(prog), _numbered(prog.text)


@pytest.mark.slow
@settings(max_examples=1000, **COMMON)
@given(programs(max_depth=4))
def test_seam_verdict_matches_brute_force_many(prog):
    assert checker(prog) == brute_force(prog), _numbered(prog.text)


def _prog(body: list, bufs=("b0", "b1", "b2")) -> Program:
    p = Program(list(bufs), body)
    render(p)
    return p


# line 12 is `fn f(...)`, 13-15 declare b0..b2, the body starts at line 16
@pytest.mark.parametrize(
    ("body", "reads"),
    [
        ([Read("b0")], set()),
        ([Stale("b0"), Read("b0")], {17}),
        ([If("c0", False, [Stale("b0")], None), If("c0", True, [Read("b0")], None)], set()),
        ([If("c0", False, [Stale("b0")], None), If("c1", True, [Read("b0")], None)], {20}),
        ([Loop([Read("b0"), Rotate("b0", "b1"), Rotate("b1", "b2"), Stale("b2")])], {17}),
        ([Loop([Read("b0"), Rotate("b0", "b1"), Fresh("b2")]), Read("b0")], set()),
        ([If("c0", False, [Return()], None), Stale("b1"), Read("b1")], {20}),
        # code after `if c0 { return; }` runs only where !c0
        (
            [If("c0", False, [Stale("b0")], None), If("c0", False, [Return()], None), Read("b0")],
            set(),
        ),
        # a loop body that always returns never reaches the code after the loop stale
        ([Loop([Stale("b0"), Return()]), Read("b0")], set()),
        # an iteration that returned does not carry its state to the next one
        (
            [
                If("c0", False, [Stale("b1")], None),
                Loop([Read("b0"), Rotate("b0", "b1"), If("c0", False, [Return()], None)]),
            ],
            set(),
        ),
    ],
)
def test_brute_force_and_checker_on_known_programs(body, reads):
    prog = _prog(body)
    want = {("W1027", W1027_LINE)} | {("E6004", line) for line in reads}
    assert brute_force(prog) == want, _numbered(prog.text)
    assert checker(prog) == want, _numbered(prog.text)
