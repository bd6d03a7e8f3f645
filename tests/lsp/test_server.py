"""`vxc lsp` answering a real LSP client (pygls's) over stdio: diagnostics as the document
changes, a syntax error mid-edit, the client's target, hover, definitions, a client
that goes away."""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

import pytest
from lspclient import ROOT, Session
from lsprotocol import types as T

from vxc import api

STREAM = (ROOT / "kernels/stream.vx").read_text()
LINES = STREAM.split("\n")
URI = "file:///work/doc/stream.vx"


def _find(text: str, line_has: str, word: str | None = None) -> tuple[int, int]:
    """0-based (line, column) of `word` (default: `line_has`) on the first line holding
    `line_has`."""
    lines = text.split("\n")
    n = next(i for i, line in enumerate(lines) if line_has in line)
    return n, lines[n].index(word or line_has, lines[n].index(line_has) if word is None else 0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))


def test_diagnostics_follow_the_document():
    async def go():
        s = Session()
        assert await s.begin(URI, STREAM) == []
        # Drop the last wait: E6011 at the binding of `last`'s token, with note and help.
        n, c = _find(STREAM, "let last = wait(inflight);", "wait(inflight)")
        s.change(URI, 2, [Session.replace(n, c, c + len("wait(inflight)"), "inflight")])
        diags = await s.diagnostics(URI, 2)
        assert sorted(d.code for d in diags) == ["E6004", "E6011"]  # read unwaited, dropped
        d = next(d for d in diags if d.code == "E6011")
        assert d.source == "vxc"
        assert d.severity == T.DiagnosticSeverity.Error
        col = LINES[n].index("last")  # `last` now holds the token and drops it
        assert (d.range.start.line, d.range.start.character) == (n, col)
        assert (d.range.end.line, d.range.end.character) == (n, col + len("last"))
        assert "note: it is" in d.message and "help: bind the result of `wait(" in d.message
        assert d.data["help"].startswith("bind the result") and d.data["notes"]
        # The fix clears it.
        s.change(URI, 3, [Session.replace(n, c, c + len("inflight"), "wait(inflight)")])
        assert await s.diagnostics(URI, 3) == []
        assert await s.close() == 0

    run(go())


def test_typing_through_a_syntax_error():
    """`let x = 2 + 3;` typed one character at a time inside the loop: every version gets
    its diagnostics (E0002 while the statement is incomplete), the server stays up, and
    the finished line is checked as a program again."""

    async def go():
        s = Session()
        await s.begin(URI, STREAM)
        n, _ = _find(STREAM, "matmul_acc(&mut acc, &cur, &wv);")
        s.change(URI, 2, [Session.insert(n, 0, "\n")])
        typed = "    let x = 2 + 3;"
        for i, ch in enumerate(typed):
            s.change(URI, 3 + i, [Session.insert(n, i, ch)])
        broken = 0
        for i in range(len(typed)):
            got = await s.diagnostics(URI, 3 + i)
            text = "\n".join(LINES[:n] + [typed[: i + 1]] + LINES[n:])
            want = api.check([api.Source("/work/doc/stream.vx", text.encode())]).diagnostics
            assert [(d.code, d.range.start.line + 1, d.range.start.character + 1) for d in got] == [
                (d.code, d.span.line, d.span.column) for d in want
            ], typed[: i + 1]
            broken += any(d.code == "E0002" for d in got)
        assert broken >= 5  # `    let`, `    let x`, ... `    let x = 2 + 3` (no `;` yet)
        assert got == []  # `let x = 2 + 3;`: a program again
        hover = await s.hover(URI, n, typed.index("x"))
        assert "let x: i32" in hover.contents.value
        assert await s.close() == 0

    run(go())


def test_hover_shows_placed_types_for_the_clients_target():
    async def go():
        s = Session()
        await s.begin(URI, STREAM, init={"target": "b200"})
        n, c = _find(STREAM, "let wv", "wv")
        assert "let wv: Tensor<f32, [128, 128]> @ VMEM" in (await s.hover(URI, n, c)).contents.value
        n, c = _find(STREAM, "let cur = wait(inflight)", "inflight")
        h = await s.hover(URI, n, c + 2)
        assert "Token<Tensor<f32, [128, 128]>, Memory::VMEM>" in h.contents.value
        assert (h.range.start.line, h.range.start.character) == (n, c)
        n, c = _find(STREAM, "let mut acc", "acc")
        assert (
            "Memory::ACC is Memory::TMEM on this target"
            in (await s.hover(URI, n, c)).contents.value
        )
        # The client switches to cpu: ACC is VMEM there.
        s.client.workspace_did_change_configuration(
            T.DidChangeConfigurationParams(settings={"vx": {"target": "cpu"}})
        )
        await s.diagnostics(URI, 1)
        assert (
            "Memory::ACC is Memory::VMEM on this target"
            in (await s.hover(URI, n, c)).contents.value
        )
        # Hover on a path shows its declaration in the target's model.
        n, c = _find(STREAM, "transfer(w, Memory::VMEM)", "VMEM")
        assert "Memory VMEM { within: Memory::CPU_DRAM" in (await s.hover(URI, n, c)).contents.value
        assert await s.close() == 0

    run(go())


def test_a_save_shows_what_the_targets_backend_refuses():
    """kernels/seed.vx checks clean for the tpu, but its build refuses the extern call
    (E7002). After a save the editor shows that refusal where `vxc build` puts it; it
    stays, one line lower, while a line above is inserted, and goes when the client
    switches to the cpu, whose backend builds the program."""
    seed = (ROOT / "kernels/seed.vx").read_text()
    uri, path = "file:///work/doc/seed.vx", "/work/doc/seed.vx"

    async def go():
        s = Session()
        assert await s.begin(uri, seed, init={"target": "tpu"}) == []
        s.save(uri)
        got = await s.publication(uri, 1, 2)
        built = api.build(api.analyze([api.Source(path, seed.encode())]), "tpu", "target-ir")
        want = [(d.code, d.span.line, d.span.column) for d in built.diagnostics]
        assert want and want[0][0] == "E7002", want
        assert [(d.code, d.range.start.line + 1, d.range.start.character + 1) for d in got] == (
            want
        )
        assert got[0].severity == T.DiagnosticSeverity.Error
        s.change(uri, 2, [Session.insert(0, 0, "\n")])  # the kernel's part is not edited
        moved = await s.diagnostics(uri, 2)
        assert [(d.code, d.range.start.line + 1) for d in moved] == [("E7002", want[0][1] + 1)]
        s.client.workspace_did_change_configuration(
            T.DidChangeConfigurationParams(settings={"vx": {"target": "cpu"}})
        )
        assert await s.publication(uri, 2, 2) == []  # the check for the cpu
        assert await s.publication(uri, 2, 3) == []  # then its lowering: nothing refused
        assert await s.close() == 0

    run(go())


def test_definitions_reach_the_targets_shipped_model_and_the_document():
    own = "Memory STAGE { within: Memory::HBM, capacity: 64 KB, managed: explicit, scope: sm }\n"
    doc = own + STREAM.replace("transfer(w, Memory::VMEM)", "transfer(w, Memory::STAGE)")

    async def go():
        s = Session()
        await s.begin(URI, doc, "--target", "h100")
        n, c = _find(doc, "transfer_async(tiles[0], Memory::VMEM)", "VMEM")
        loc = await s.definition(URI, n, c)
        model = (ROOT / "compiler/vxc/machines/h100.vx").resolve()
        assert Path(loc.uri.removeprefix("file://")).resolve() == model
        decl_line = next(
            i for i, x in enumerate(model.read_text().split("\n")) if x.startswith("Memory VMEM")
        )
        assert loc.range.start.line == decl_line and loc.range.start.character == len("Memory ")
        n, c = _find(doc, "fn stream", "TensorCore")
        loc = await s.definition(URI, n, c)
        assert (
            loc.uri.endswith("/h100.vx")
            and "Topology TensorCore" in model.read_text().split("\n")[loc.range.start.line]
        )
        # The document's own declaration wins over the model's.
        n, c = _find(doc, "Memory::STAGE", "STAGE")
        loc = await s.definition(URI, n, c)
        assert loc.uri == URI and (loc.range.start.line, loc.range.start.character) == (0, 7)
        # A variable's use jumps to its binding.
        n, c = _find(doc, "let cur = wait(inflight)", "inflight")
        loc = await s.definition(URI, n, c)
        assert (loc.range.start.line, loc.range.start.character) == _find(
            doc, "let mut inflight", "inflight"
        )
        assert await s.close() == 0

    run(go())


def _many(n: int) -> str:
    body = STREAM[STREAM.index("fn stream") :]
    return "\n".join(body.replace("fn stream(", f"fn stream{i}(") for i in range(n))


@pytest.mark.slow
def test_ten_thousand_lines_recheck_per_keystroke_in_milliseconds():
    text = _many(10_000 // STREAM[STREAM.index("fn stream") :].count("\n") + 1)
    assert text.count("\n") >= 10_000
    uri = "file:///work/doc/big.vx"

    async def go():
        s = Session()
        await s.begin(uri, text)
        lines = text.split("\n")
        hits = [i for i, x in enumerate(lines) if "let last = wait(inflight);" in x]
        n = hits[len(hits) // 2]  # a function in the middle of the document
        line = lines[n]
        c = line.index("wait(inflight)")
        latencies = []
        version = 1
        # Delete `wait(` and `)` around inflight one keystroke at a time, then type them back.
        edits = [Session.replace(n, c, c + 1, "")] * len("wait(")
        for e in edits:
            version += 1
            sent = asyncio.get_running_loop().time()
            s.change(uri, version, [e])
            await s.diagnostics(uri, version)
            latencies.append(s.arrival(uri, version) - sent)
        last = await s.diagnostics(uri, version)
        # `let last = inflight);` is a syntax error; the `)` goes too: E6011.
        version += 1
        s.change(
            uri, version, [Session.replace(n, c + len("inflight"), c + len("inflight") + 1, "")]
        )
        codes = [d.code for d in await s.diagnostics(uri, version)]
        assert sorted(codes) == ["E6004", "E6011"], codes
        assert [d.code for d in last] == ["E0002"]
        print(
            f"\nper-keystroke re-check of a {text.count(chr(10)) + 1}-line document: "
            f"median {statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
        )
        assert statistics.median(latencies) < 0.5
        assert await s.close() == 0

    run(go())


def test_a_client_that_disconnects_ends_the_server():
    """The client dies without shutdown/exit (its end of the pipe closes): the server
    notices end of input and exits instead of lingering."""

    async def go():
        s = Session()
        await s.begin(URI, STREAM)
        s.process.stdin.close()
        rc = await asyncio.wait_for(s.process.wait(), 30)
        await s.client.stop()
        # And one that goes away while a document is being checked.
        s2 = Session()
        await s2.start()
        s2.open("file:///work/doc/many.vx", _many(60))
        s2.process.stdin.close()
        rc2 = await asyncio.wait_for(s2.process.wait(), 120)
        await s2.client.stop()
        return rc, rc2

    assert run(go()) == (0, 0)


KEYSTROKE_GOAL_S = 0.100  # issue 25: a keystroke in a 5 000-function document


@pytest.mark.slow
def test_a_keystroke_in_five_thousand_functions_rechecks_only_its_function():
    """Past the 4 096 entries the component cache once had, every keystroke re-checked
    every function (4 200 functions: 37-70 s a keystroke). Typing into one function of
    5 000 (75 000 lines, 3.4 MB) re-checks that one: each version's diagnostics arrive
    within the goal (median; a loaded machine may stretch one or two), and a line
    inserted above half the document moves them without re-checking."""
    text = _many(5000)
    uri = "file:///work/doc/huge.vx"

    async def go():
        s = Session()
        assert await s.begin(uri, text, timeout=800) == []
        lines = text.split("\n")
        hits = [i for i, x in enumerate(lines) if "matmul_acc(&mut acc, &last, &wv);" in x]
        n = hits[len(hits) // 2]
        note = next(i for i in range(n, 0, -1) if "// issue before consuming" in lines[i])
        col = len(lines[note])
        latencies = []
        typed = ", then wait"  # typed into a comment: every version is clean
        for k, ch in enumerate(typed):
            sent = asyncio.get_running_loop().time()
            s.change(uri, 2 + k, [Session.insert(note, col + k, ch)])
            assert await s.diagnostics(uri, 2 + k) == []
            latencies.append(s.arrival(uri, 2 + k) - sent)
        v = 2 + len(typed)
        # Break the function (the read of an unwaited token) and mend it.
        c = lines[n - 1].index("wait(inflight)")
        for edit, want in (("inflight", ["E6004", "E6011"]), ("wait(inflight)", [])):
            sent = asyncio.get_running_loop().time()
            old = len("wait(inflight)") if edit == "inflight" else len("inflight")
            s.change(uri, v, [Session.replace(n - 1, c, c + old, edit)])
            assert sorted(d.code for d in await s.diagnostics(uri, v)) == want
            latencies.append(s.arrival(uri, v) - sent)
            v += 1
        sent = asyncio.get_running_loop().time()
        s.change(uri, v, [Session.insert(n, 0, "\n")])
        assert await s.diagnostics(uri, v) == []
        latencies.append(s.arrival(uri, v) - sent)
        ms = sorted(x * 1000 for x in latencies)
        print(
            f"\nper keystroke, 5 000 functions ({len(lines)} lines): median "
            f"{statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms ({len(ms)} keystrokes)"
        )
        assert statistics.median(latencies) <= KEYSTROKE_GOAL_S
        assert await s.close() == 0

    asyncio.run(asyncio.wait_for(go(), 900))
