"""Property tests: on random straight-line and branching programs over a few tokens, the
checker's verdict equals a brute-force path enumeration written here, independently.

The reference semantics (LANGUAGE.md section 5), per path:
  - `let t = transfer_async(..)` / `t = transfer_async(..)` makes `t` live; overwriting a
    live token is E6011 at the token's binding line;
  - `wait(t)` moves `t`; waiting (or reading) a moved token is E0301 at that line;
  - reading `&t` while it is live is a read before wait, E6004 at that line;
  - `u = t;` moves `t` into `u` (E6011 if `u` was live);
  - a live token at the end of its block, or at a `return`, is E6011 at its binding line;
  - `for i in 0..n { .. }` runs its body any number of times (0, 1, 2, ...).
Every branch outcome is enumerated (each `if` tests its own parameter, so every path is
feasible), loops are unrolled until no new state reaches their head (so every iteration
count is covered), and the errors of all paths are united. As in `vxc.api.check_target`, the seam
checks (E6004) run only on programs without a use-after-move (E0301): a dropped token (E6011)
leaves them running, so a forgotten `wait` is E6004 at the read and E6011 at the binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxc import api

TRACKED = {"E6011", "E0301", "E6004"}
HEADER = (
    "fn f(tiles: &Vec<Tensor<f32, [32, 32]>>, w: &Tensor<f32, [32, 32]>{conds}) -> void "
    "on Topology::TensorCore {{"
)


# ---- program model -------------------------------------------------------------------------
@dataclass
class Start:  # let u = transfer_async(..);   (a token local to the enclosing block)
    var: str


@dataclass
class Restart:  # t = transfer_async(..);
    var: str


@dataclass
class Wait:  # let xN = wait(t);
    var: str


@dataclass
class Read:  # matmul_acc(&mut acc, &t, &wv);
    var: str


@dataclass
class Move:  # dst = src;
    dst: str
    src: str


@dataclass
class Return:
    pass


@dataclass
class If:
    cond: str
    then: list
    orelse: list | None


@dataclass
class Loop:  # for iN in 0..n { body }
    body: list


@dataclass
class Program:
    tokens: list[str]  # `let mut` at function level
    body: list
    lines: dict[int, int] = field(default_factory=dict)  # id(stmt) -> line
    decl: dict[str, int] = field(default_factory=dict)  # token -> binding line
    text: str = ""
    loops: bool = False


# ---- generation ------------------------------------------------------------------------------
@st.composite
def programs(draw, max_depth: int = 3, loops: bool = True):
    """A random program. In `careful` mode (half the draws) the generator keeps each
    token's status definite and waits what would leak, so the program is clean except
    for its reads before waits (E6004); otherwise it draws freely (mostly E6011/E0301)."""
    ntok = draw(st.integers(1, 3))
    tokens = [f"t{i}" for i in range(ntok)]
    careful = draw(st.booleans())
    counter = {"local": 0, "cond": 0, "loop": 0, "in_loop": 0}

    def pick(candidates: list[str]) -> str | None:
        return draw(st.sampled_from(candidates)) if candidates else None

    def block(depth: int, visible: list[str], state: dict[str, str], frozen=frozenset()):
        """(statements, every path returned, status of each token at the end). In careful
        mode the locals in `frozen` (declared outside the enclosing loop) are not consumed."""
        stmts: list = []
        visible = list(visible)
        mine: list[str] = []
        state = dict(state)

        def ok(v: str, status: str) -> bool:
            return not careful or (state[v] == status and v not in frozen)

        for _ in range(draw(st.integers(0 if depth else 1, 4))):
            kinds = ["wait", "wait", "read", "restart", "start", "move", "return"]
            kinds += ["read", "read"] if careful else []
            kinds += ["if", "if"] if depth < max_depth else []
            kinds += ["loop"] if loops and depth < max_depth and not counter["in_loop"] else []
            kind = draw(st.sampled_from(kinds))
            if kind == "read":
                v = pick([v for v in visible if not careful or state[v] == "live"])
                if v is not None:
                    stmts.append(Read(v))
            elif kind == "wait":
                v = pick([v for v in visible if ok(v, "live")])
                if v is not None:
                    stmts.append(Wait(v))
                    state[v] = "moved"
            elif kind == "restart":
                v = pick([v for v in tokens if ok(v, "moved")])
                if v is not None:
                    stmts.append(Restart(v))
                    state[v] = "live"
            elif kind == "start":
                name = f"u{counter['local']}"
                counter["local"] += 1
                stmts.append(Start(name))
                visible.append(name)
                mine.append(name)
                state[name] = "live"
            elif kind == "move":
                dst = pick([v for v in tokens if ok(v, "moved")])
                src = pick([v for v in visible if v != dst and ok(v, "live")])
                if dst is not None and src is not None:
                    stmts.append(Move(dst, src))
                    state[src], state[dst] = "moved", "live"
            elif kind == "loop":
                counter["in_loop"] = 1
                outer = frozenset(v for v in visible if v not in tokens)
                body, body_ret, end = block(depth + 1, visible, state, outer)
                counter["in_loop"] = 0
                counter["loop"] += 1
                if careful and not body_ret:
                    for v in tokens:  # every iteration must end as it began
                        if state[v] == "live" and end[v] == "moved":
                            body.append(Restart(v))
                        elif state[v] == "moved" and end[v] == "live":
                            body.append(Wait(v))
                stmts.append(Loop(body))
            elif kind == "if":
                cond = f"c{counter['cond']}"
                counter["cond"] += 1
                then, then_ret, then_state = block(depth + 1, visible, state)
                orelse, else_ret, else_state = None, False, dict(state)
                if draw(st.booleans()):
                    orelse, else_ret, else_state = block(depth + 1, visible, state)
                if careful and not then_ret and not else_ret:
                    for v in visible:  # make both arms agree: wait where still live
                        if then_state[v] != else_state[v]:
                            if then_state[v] == "live":
                                then.append(Wait(v))
                            else:
                                orelse = (orelse or []) + [Wait(v)]
                            then_state[v] = else_state[v] = "moved"
                stmts.append(If(cond, then, orelse))
                if then_ret and else_ret:
                    return stmts, True, state
                state = dict(else_state if then_ret else then_state)
            else:
                if careful:
                    stmts += [Wait(v) for v in state if state[v] == "live"]
                stmts.append(Return())
                return stmts, True, state  # nothing after a return in the same block
        if careful:
            stmts += [Wait(v) for v in mine if state[v] == "live"]
        for v in mine:
            del state[v]
        return stmts, False, state

    body, returned, state = block(0, tokens, {t: "live" for t in tokens})
    if not returned and (careful or draw(st.booleans())):
        body += [Wait(t) for t in tokens if not careful or state[t] == "live"]
    prog = Program(tokens, body, loops=counter["loop"] > 0)
    render(prog, counter["cond"])
    return prog


def render(prog: Program, nconds: int) -> None:
    conds = "".join(f", c{i}: bool" for i in range(nconds)) + (", n: i64" if prog.loops else "")
    out = [HEADER.format(conds=conds), "  let wv = transfer(w, Memory::VMEM);"]
    out.append("  let mut acc = Tensor<f32>([32, 32]);")
    for i, t in enumerate(prog.tokens):
        out.append(f"  let mut {t} = transfer_async(tiles[{i}], Memory::VMEM);")
        prog.decl[t] = len(out)
    waits = iter(range(10_000))

    def emit(stmts: list, indent: str) -> None:
        for s in stmts:
            if isinstance(s, Start):
                out.append(f"{indent}let {s.var} = transfer_async(tiles[0], Memory::VMEM);")
                prog.decl[s.var] = len(out)
            elif isinstance(s, Restart):
                out.append(f"{indent}{s.var} = transfer_async(tiles[1], Memory::VMEM);")
            elif isinstance(s, Wait):
                out.append(f"{indent}let x{next(waits)} = wait({s.var});")
            elif isinstance(s, Read):
                out.append(f"{indent}matmul_acc(&mut acc, &{s.var}, &wv);")
            elif isinstance(s, Move):
                out.append(f"{indent}{s.dst} = {s.src};")
            elif isinstance(s, Return):
                out.append(f"{indent}return;")
            elif isinstance(s, Loop):
                out.append(f"{indent}for i{len(out)} in 0..n {{")
                emit(s.body, indent + "  ")
                out.append(f"{indent}}}")
                continue
            else:
                out.append(f"{indent}if {s.cond} {{")
                prog.lines[id(s)] = len(out)
                emit(s.then, indent + "  ")
                if s.orelse is not None:
                    out.append(f"{indent}}} else {{")
                    emit(s.orelse, indent + "  ")
                out.append(f"{indent}}}")
                continue
            prog.lines[id(s)] = len(out)

    emit(prog.body, "  ")
    out.append("}")
    prog.text = "\n".join(out) + "\n"


# ---- the reference: brute-force path enumeration ----------------------------------------------
def enumerate_paths(prog: Program) -> set[tuple[str, int]]:
    ownership: set[tuple[str, int]] = set()
    reads: set[tuple[str, int]] = set()

    def run(stmts: list, state: dict[str, str]):
        """Yield (state, returned) for every path through `stmts`."""
        if not stmts:
            yield state, False
            return
        s, rest = stmts[0], stmts[1:]
        line = prog.lines.get(id(s))
        if isinstance(s, Loop):
            # Unroll until no new state reaches the head: every iteration count is covered.
            seen = {_freeze(state)}
            frontier = list(seen)
            while frontier:
                new = []
                for head in frontier:
                    for st_, returned in run_block(s.body, dict(head)):
                        if returned:
                            yield st_, True
                        elif _freeze(st_) not in seen:
                            seen.add(_freeze(st_))
                            new.append(_freeze(st_))
                frontier = new
            for head in seen:  # the loop may stop after any number of iterations
                yield from run(rest, dict(head))
            return
        if isinstance(s, If):
            then_paths = list(run_block(s.then, state))
            else_paths = (
                list(run_block(s.orelse, state)) if s.orelse is not None else [(dict(state), False)]
            )
            for st_, returned in then_paths + else_paths:
                if returned:
                    yield st_, True
                else:
                    yield from run(rest, st_)
            return
        state = dict(state)
        if isinstance(s, Return):  # abandons every token live on this path
            for v, status in state.items():
                if status == "live":
                    ownership.add(("E6011", prog.decl[v]))
            yield state, True
            return
        if isinstance(s, Start):
            state[s.var] = "live"
        elif isinstance(s, Restart):
            if state[s.var] == "live":
                ownership.add(("E6011", prog.decl[s.var]))
            state[s.var] = "live"
        elif isinstance(s, Wait):
            if state[s.var] == "moved":
                ownership.add(("E0301", line))
            state[s.var] = "moved"
        elif isinstance(s, Read):
            if state[s.var] == "moved":
                ownership.add(("E0301", line))
            else:
                reads.add(("E6004", line))
        elif isinstance(s, Move):
            if state[s.src] == "moved":
                ownership.add(("E0301", line))
            state[s.src] = "moved"
            if state[s.dst] == "live":
                ownership.add(("E6011", prog.decl[s.dst]))
            state[s.dst] = "live"
        yield from run(rest, state)

    def run_block(stmts: list, state: dict[str, str]):
        """Every path through a block; a local of the block still live at its end is E6011."""
        block_locals = [s.var for s in stmts if isinstance(s, Start)]
        for st_, returned in run(stmts, dict(state)):
            if not returned:
                for v in block_locals:
                    if st_.get(v) == "live":
                        ownership.add(("E6011", prog.decl[v]))
            st_ = {k: v for k, v in st_.items() if k not in block_locals}
            yield st_, returned

    start = {t: "live" for t in prog.tokens}
    for st_, returned in run_block(prog.body, start):
        if not returned:
            for t in prog.tokens:
                if st_.get(t) == "live":
                    ownership.add(("E6011", prog.decl[t]))
    if any(code == "E0301" for code, _ in ownership):
        return ownership
    return ownership | reads


def _freeze(state: dict[str, str]) -> tuple:
    return tuple(sorted(state.items()))


def checker_verdict(prog: Program) -> set[tuple[str, int]]:
    checked = api.check([api.Source("prop.vx", prog.text.encode())], "cpu")
    unexpected = [d for d in checked.diagnostics if d.code not in TRACKED]
    assert not unexpected, (prog.text, [(d.code, d.span.line, d.message) for d in unexpected])
    return {(d.code, d.span.line) for d in checked.diagnostics}


def _numbered(text: str) -> str:
    return "\n".join(f"{n:3} {line}" for n, line in enumerate(text.splitlines(), 1))


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@settings(max_examples=150, **COMMON)
@given(programs())
def test_checker_matches_path_enumeration(prog):
    assert checker_verdict(prog) == enumerate_paths(prog), _numbered(prog.text)


@pytest.mark.slow
@settings(max_examples=2000, **COMMON)
@given(programs(max_depth=4))
def test_checker_matches_path_enumeration_many(prog):
    assert checker_verdict(prog) == enumerate_paths(prog), _numbered(prog.text)


# ---- the generator and the reference themselves ------------------------------------------------
def _prog(body: list, tokens=("t0",), nconds: int = 1) -> Program:
    p = Program(list(tokens), body, loops=any(isinstance(s, Loop) for s in body))
    render(p, nconds)
    return p


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([Wait("t0")], set()),
        ([], {("E6011", 4)}),
        ([Read("t0"), Wait("t0")], {("E6004", 5)}),
        ([Read("t0")], {("E6004", 5), ("E6011", 4)}),
        ([Read("t0"), Wait("t0"), Wait("t0")], {("E0301", 7)}),
        ([Wait("t0"), Wait("t0")], {("E0301", 6)}),
        ([If("c0", [Wait("t0")], None)], {("E6011", 4)}),
        ([If("c0", [Wait("t0")], [Wait("t0")])], set()),
        ([If("c0", [Return()], None), Wait("t0")], {("E6011", 4)}),
        ([Restart("t0"), Wait("t0")], {("E6011", 4)}),
        ([If("c0", [Read("t0")], None), Wait("t0")], {("E6004", 6)}),
        ([If("c0", [Start("u0")], [Wait("t0")]), Wait("t0")], {("E6011", 6), ("E0301", 10)}),
        ([Loop([Wait("t0")])], {("E0301", 6), ("E6011", 4)}),
        ([Loop([Start("u0"), Wait("t0"), Move("t0", "u0")]), Wait("t0")], set()),
        (
            [Loop([Start("u0"), Wait("t0")]), Wait("t0")],
            {("E6011", 6), ("E0301", 7), ("E0301", 9)},
        ),
        ([Loop([Read("t0")]), Wait("t0")], {("E6004", 6)}),
    ],
)
def test_reference_on_known_programs(body, expected):
    """The brute force agrees with hand-derived verdicts, and so does the checker."""
    prog = _prog(body)
    assert enumerate_paths(prog) == expected, _numbered(prog.text)
    assert checker_verdict(prog) == expected, _numbered(prog.text)
