"""LSP mode: the real language server (`python -m vxc lsp`, compiler/vxc/lsp/) driven
over stdio with mutated JSON-RPC messages — headers, bodies, params, ids, document
texts (lone surrogates, NULs, astral characters, long lines), edits (out of range,
reversed, negative) — asserting after each one that the process survives and
answers per protocol.

A session: `initialize`, `initialized`, a document opened, then steps; after every
step a probe (a `textDocument/hover` request) that must be answered; at the end
`shutdown` (answered) and `exit` (the process ends with 0). A step that breaks the
framing (a huge, negative or missing Content-Length) ends its session: the server
must still be alive two seconds later.

A finding is one of (`Finding.kind`): `died`, `no-answer` (a request, the probe
included, not answered within the deadline), `protocol` (an answer without the
request's id, a malformed request answered with a result instead of an error, a
request with malformed params answered with an error other than -32602),
`no-diagnostics` (a well-formed open or change of a document not followed by
diagnostics for that version), `internal` (the server logged an internal error).
"""

from __future__ import annotations

import json
import queue
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from child import Child, Finding  # noqa: E402

CORPUS = sorted((ROOT / "kernels").glob("*.vx")) + sorted(
    (ROOT / "tests" / "fuzz" / "seeds").glob("*.vx")
)
URI = "file:///vxfuzz/doc.vx"
INVALID_PARAMS = -32602


@dataclass
class Report:
    sessions: int = 0
    messages: int = 0
    answered: int = 0
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0


class Server(Child):
    """One `vxc lsp` process; its answers are parsed JSON-RPC messages."""

    def __init__(self):
        self.logs: list[str] = []
        super().__init__(["-m", "vxc", "lsp"])

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put({"_eof": True})
                    return
                if line in (b"\r\n", b"\n"):
                    break
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = out.read(int(headers.get("content-length", "0")))
            try:
                msg = json.loads(body)
            except ValueError:
                msg = {"_undecodable": body[:200].decode("latin-1")}
            if isinstance(msg, dict) and msg.get("method") == "window/logMessage":
                self.logs.append(str(msg.get("params", {}).get("message", "")))
            self.inbox.put(msg)

    def send(self, obj, headers: bytes | None = None) -> bool:
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        head = headers if headers is not None else b"Content-Length: %d\r\n\r\n" % len(body)
        return self.send_raw(head + body)

    def wait_for(self, pred, timeout: float):
        """The first message `pred` accepts (others are kept in `seen`), or None."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if isinstance(msg, dict) and msg.get("_eof"):
                self.inbox.put(msg)  # stays at the end: every later wait sees it
                return msg
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})  # a request
            if pred(msg):
                return msg


# ---- messages -----------------------------------------------------------------------


@dataclass
class Step:
    body: bytes | dict | list  # what to send
    shown: str
    headers: bytes | None = None
    request_id: object = None  # an answer with this id is required
    bad_params: bool = False  # the answer must be a -32602 error
    bad_request: bool = False  # the answer must be an error
    diagnostics: int | None = None  # diagnostics for this version of URI are required
    breaks_framing: bool = False


SURROGATE = "\ud800"
ODD_TEXT = [SURROGATE, "\udfff", "\x00", "\r\n", "😀", "é", "\u2028", "x" * 20000, "\t", "\ufeff"]


def _text(rng: random.Random) -> str:
    text = rng.choice(CORPUS).read_text()
    for _ in range(rng.randint(0, 3)):
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(ODD_TEXT) + text[at:]
    return text


def _simple(text: str) -> bool:
    """A text whose LSP positions are Python indices: "\n" lines, no astral or
    lone surrogate characters (UTF-16 units = code points)."""
    return "\r" not in text and "\u2028" not in text and all(ord(c) < 0xD800 for c in text)


def _apply(text: str, start: dict, end: dict, new: str) -> str | None:
    """An in-range edit applied to the client's copy; None if it is out of range."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def at(p: dict) -> int | None:
        if not 0 <= p["line"] < len(lines) or not 0 <= p["character"] <= len(lines[p["line"]]):
            return None
        return offsets[p["line"]] + p["character"]

    a, b = at(start), at(end)
    if a is None or b is None or a > b:
        return None
    return text[:a] + new + text[b:]


def _json(obj) -> bytes:
    """JSON with lone surrogates written as \\ud800 escapes, as a JS client sends them."""
    return json.dumps(obj, ensure_ascii=True).encode()


def _position(rng: random.Random, lines: int) -> dict:
    line = rng.choice([0, 1, lines - 1, lines, lines + 5, -1, 2**31, 10**12])
    char = rng.choice([0, 1, 5, 200, -1, 2**31, 10**12])
    return {"line": line, "character": char}


class Messages:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.version = 1
        self.next_id = 100
        self.text: str | None = None  # the client's copy, while the fuzzer can follow it

    def rid(self):
        self.next_id += 1
        return self.rng.choice([self.next_id] * 4 + [f"s{self.next_id}", self.next_id + 0.5])

    def open(self) -> Step:
        self.version += 1
        text = _text(self.rng)
        self.text = text if _simple(text) else None
        msg = {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {
                    "uri": URI,
                    "languageId": "vx",
                    "version": self.version,
                    "text": text,
                }
            },
        }
        return Step(_json(msg), f"didOpen v{self.version} {text[:40]!r}", diagnostics=self.version)

    def change(self) -> Step:
        """Incremental edits, in range of the client's copy or not; when every edit is
        in range of a copy the fuzzer can follow (one line ending, no astral or lone
        surrogate characters), diagnostics for the new version are required."""
        rng = self.rng
        self.version += 1
        changes = []
        followed = self.text is not None
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.15:
                changes.append({"text": _text(rng)})  # a whole-document change
                if followed:
                    self.text = changes[-1]["text"]
                continue
            lines = (self.text or "").split("\n")
            if followed and rng.random() < 0.6:
                a, b = sorted(
                    (rng.randrange(len(lines)), rng.randrange(len(lines))) for _ in range(2)
                )
                start = {"line": a[0], "character": min(a[1], len(lines[a[0]]))}
                end = {"line": b[0], "character": min(b[1], len(lines[b[0]]))}
                if start["line"] == end["line"] and start["character"] > end["character"]:
                    start, end = end, start
            else:
                start, end = _position(rng, len(lines)), _position(rng, len(lines))
            new = rng.choice([*ODD_TEXT, "fn", "{", ";", "", "let x = 1;"])
            changes.append({"range": {"start": start, "end": end}, "text": new})
            if followed:
                self.text = _apply(self.text, start, end, new)
            followed = self.text is not None and _simple(self.text)
            if not followed:
                self.text = None
        msg = {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": {
                "textDocument": {"uri": URI, "version": self.version},
                "contentChanges": changes,
            },
        }
        shown = f"didChange v{self.version} {json.dumps(changes)[:300]}"
        return Step(_json(msg), shown, diagnostics=self.version if followed else None)

    def request(self) -> Step:
        rng = self.rng
        rid = self.rid()
        method = rng.choice(
            [
                "textDocument/hover",
                "textDocument/definition",
                "vx/unknown",
                "textDocument/completion",
            ]
        )
        params = {"textDocument": {"uri": URI}, "position": _position(rng, 30)}
        bad = min(params["position"].values()) < 0 or max(params["position"].values()) >= 2**31
        r = rng.random()
        if r < 0.2:
            params, bad = (
                rng.choice([None, [], "x", 7, {"textDocument": 5}, {"position": {"line": "a"}}]),
                True,
            )
        elif r < 0.3:
            params["textDocument"]["uri"] = rng.choice(
                ["", "file:///nope.vx", "not a uri", "file:///%ff"]
            )
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        if params is None:
            del msg["params"]
        unknown = method in ("vx/unknown", "textDocument/completion")
        return Step(
            _json(msg),
            f"{method} {json.dumps(params)[:200]}",
            request_id=rid,
            bad_params=bad and not unknown,
            bad_request=unknown,
        )

    def junk(self) -> Step:
        """Bodies that are not JSON-RPC requests, with proper headers."""
        rng = self.rng
        body = rng.choice(
            [
                b"{",
                b"[]",
                b"null",
                b'"text"',
                b'{"jsonrpc": "2.0"}',
                b'{"jsonrpc": "1.0", "id": 5, "method": "textDocument/hover"}',
                b'{"jsonrpc": "2.0", "method": 7}',
                b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "textDocument/hover", "params": {}}',
                b'{"jsonrpc": "2.0", "id": 9, "result": {}}',  # an answer nobody asked for
                b'[{"jsonrpc": "2.0", "method": "initialized", "params": {}}]',
                b"\xff\xfe\x00",
                b'{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 12345}}',
                b'{"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": "file:///x.vx"}}}',
            ]
        )
        return Step(body, f"junk {body[:80]!r}")

    def header(self) -> Step:
        """Headers that keep the framing (extra, reordered, odd case) or break it."""
        rng = self.rng
        body = b'{"jsonrpc": "2.0", "method": "$/nothing", "params": {}}'
        n = len(body)
        keep = [
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n"
            % n,
            b"Content-Length: %d\r\nX-Odd: \xff\r\n\r\n" % n,
        ]
        breaking = [
            # HTTP's field names are case-insensitive, but pygls reads only this spelling
            # (every client writes it): the message is lost, the server must live.
            b"content-length: %d\r\n\r\n" % n,
            # HTTP allows blanks around a value; pygls's header pattern does not, and
            # then reads no later message either (alive, but deaf): see the report.
            b"Content-Length:    %d   \r\n\r\n" % n,
            b"Content-Length: 99999999999999\r\n\r\n",
            b"Content-Length: -5\r\n\r\n",
            b"Content-Length: abc\r\n\r\n",
            b"Content-Length: 2000000000\r\n\r\n",
            b"X-Nothing: 1\r\n\r\n",
            b"Content-Length: %d\r\n\r\n" % (n + 10),
        ]
        if rng.random() < 0.5:
            h = rng.choice(keep)
            return Step(body, f"header {h[:80]!r}", headers=h)
        h = rng.choice(breaking)
        return Step(body, f"header {h[:80]!r}", headers=h, breaks_framing=True)

    def step(self) -> Step:
        r = self.rng.random()
        if r < 0.2:
            return self.open()
        if r < 0.5:
            return self.change()
        if r < 0.75:
            return self.request()
        if r < 0.9:
            return self.junk()
        return self.header()


# ---- a session ----------------------------------------------------------------------


def _exception_first(log: str) -> str:
    """A logged traceback with its last line (the exception) first, so a shortened
    detail still names it."""
    lines = log.strip().splitlines()
    return " / ".join([lines[-1], *lines[:-1]]) if lines else ""


def _answer(server: Server, rid, timeout: float):
    return server.wait_for(
        lambda m: isinstance(m, dict) and "id" in m and "method" not in m and m["id"] == rid,
        timeout,
    )


def _diagnostics(server: Server, version: int, timeout: float):
    def ok(m):
        if not isinstance(m, dict) or m.get("method") != "textDocument/publishDiagnostics":
            return False
        p = m.get("params", {})
        return p.get("uri") == URI and p.get("version") == version

    return server.wait_for(ok, timeout)


def session(rng: random.Random, steps: int, report: Report, deadline: float) -> None:
    server = Server()
    report.sessions += 1
    msgs = Messages(rng)

    sent: list[str] = []  # the session so far: a finding's context, to reproduce it

    def finding(kind: str, shown: str, detail: str) -> None:
        report.findings.append(Finding(kind, shown, detail[:600], sent[-8:]))

    try:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "capabilities": {}, "rootUri": None},
            }
        )
        if _answer(server, 1, deadline) is None:
            finding("no-answer", "initialize", server.tail())
            return
        server.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        first = msgs.open()
        server.send(first.body)
        for i in range(steps):
            step = first if i == 0 else msgs.step()
            raw = step.body if isinstance(step.body, bytes) else _json(step.body)
            sent.append(((step.headers or b"") + raw).decode("latin-1")[:4000])
            if i:
                report.messages += 1
                server.send(
                    step.body if isinstance(step.body, bytes) else _json(step.body),
                    headers=step.headers,
                )
            if step.breaks_framing:
                time.sleep(2)
                if not server.alive():
                    finding("died", step.shown, f"exit {server.proc.returncode}: {server.tail()}")
                return
            if step.request_id is not None:
                ans = _answer(server, step.request_id, deadline)
                if ans is None or ans.get("_eof"):
                    finding("no-answer" if ans is None else "died", step.shown, server.tail())
                    return
                report.answered += 1
                err = ans.get("error")
                if step.bad_params and (not err or err.get("code") != INVALID_PARAMS):
                    finding(
                        "protocol",
                        step.shown,
                        f"malformed params answered with {json.dumps(ans)[:300]}",
                    )
                elif step.bad_request and not err:
                    finding(
                        "protocol",
                        step.shown,
                        f"unknown method answered with a result: {json.dumps(ans)[:200]}",
                    )
            if step.diagnostics is not None:
                got = _diagnostics(server, step.diagnostics, deadline)
                if got is None or got.get("_eof"):
                    finding(
                        "no-diagnostics" if got is None else "died",
                        step.shown,
                        "; ".join(_exception_first(x) for x in server.logs[-2:]),
                    )
            probe = msgs.rid()
            server.send(
                {
                    "jsonrpc": "2.0",
                    "id": probe,
                    "method": "textDocument/hover",
                    "params": {
                        "textDocument": {"uri": URI},
                        "position": {"line": 0, "character": 0},
                    },
                }
            )
            ans = _answer(server, probe, deadline)
            if ans is None or ans.get("_eof"):
                finding(
                    "no-answer" if ans is None else "died",
                    step.shown,
                    f"the probe after it: {server.tail()}",
                )
                return
            for line in server.logs:
                if "internal error" in line:
                    finding("internal", step.shown, _exception_first(line))
            server.logs.clear()
        server.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        if _answer(server, 2, deadline) is None:
            finding("no-answer", "shutdown", server.tail())
            return
        server.send({"jsonrpc": "2.0", "method": "exit"})
        try:
            rc = server.proc.wait(deadline)
            if rc != 0:
                finding("died", "exit", f"exit code {rc}")
        except subprocess.TimeoutExpired:
            finding("no-answer", "exit", "the server did not end")
    finally:
        server.kill()


def run(seed: int, count: int, deadline: float = 60.0, per_session: int = 40) -> Report:
    rng = random.Random(seed)
    report = Report()
    t0 = time.perf_counter()
    while report.messages < count:
        before = report.messages
        session(rng, min(per_session, count - report.messages + 1), report, deadline)
        if report.messages == before:  # a session that ended at once still counts one
            report.messages += 1
    report.seconds = time.perf_counter() - t0
    return report
