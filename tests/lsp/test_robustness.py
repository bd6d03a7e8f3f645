"""`vxc lsp` under input no editor should send (issue 25): frames too big to hold,
bytes that are not JSON-RPC, params of the wrong shape, text with lone surrogates,
edits outside the document. Each is answered per JSON-RPC (or reported to the client
with window/logMessage or window/showMessage) and the server keeps serving; every test
ends with a request that must still be answered and a clean shutdown."""

from __future__ import annotations

import json

import pytest
from lspclient import ROOT, RawServer

from vxc import api
from vxc.lsp.transport import MAX_MESSAGE_BYTES

STREAM = (ROOT / "kernels/stream.vx").read_text()
URI = "file:///work/doc/stream.vx"
HOVER_NOWHERE = {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}


@pytest.fixture
def server():
    s = RawServer()
    s.initialize()
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def _still_serving(s: RawServer, msg_id="alive") -> None:
    s.request(msg_id, "textDocument/hover", HOVER_NOWHERE)
    assert s.response(msg_id) == {"jsonrpc": "2.0", "id": msg_id, "result": None}


def _error(s: RawServer, msg_id, code: int) -> str:
    r = s.response(msg_id)
    assert r["error"]["code"] == code, r
    return r["error"]["message"]


def _open(s: RawServer, text: str, version: int = 1) -> list[dict]:
    s.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": URI, "languageId": "vx", "version": version, "text": text}},
    )
    return s.diagnostics(URI, version)


def _logged(s: RawServer, needle: str) -> dict:
    return s.wait(
        lambda m: (
            m.get("method") in ("window/logMessage", "window/showMessage")
            and needle in m["params"]["message"]
        )
    )


def test_a_huge_content_length_is_refused_and_the_server_keeps_serving(server):
    # The header promises 99 TB; the body that follows is a small request that is part of
    # the refused frame. The next frame is served.
    lost = {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": HOVER_NOWHERE}
    server.send(b"Content-Length: 99999999999999\r\n\r\n" + json.dumps(lost).encode())
    msg = _error(server, None, -32600)
    assert "99999999999999" in msg and str(MAX_MESSAGE_BYTES) in msg
    _still_serving(server)
    server.send(b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n")  # past int()'s digit limit
    assert "99999999999999999999..." in _error(server, None, -32600)
    _still_serving(server, "alive-1")
    # A frame just over the limit whose body really is that long is skipped whole.
    body = b'{"jsonrpc": "2.0", "id": 2, "method": "x", "params": "' + b"a" * MAX_MESSAGE_BYTES
    server.send(server.frame(body + b'"}'))
    _error(server, None, -32600)
    _still_serving(server, "alive-2")
    assert server.close() == 0


def test_malformed_messages_get_json_rpc_errors(server):
    s = server
    s.send(s.frame(b"{not json"))
    assert "JSON" in _error(s, None, -32700)
    s.send(s.frame(b"\xff\xfe"))  # not UTF-8
    _error(s, None, -32700)
    s.send(s.frame(b"[" * 100_000))  # nested past the parser's recursion limit
    _error(s, None, -32700)
    s.send(s.frame(b"[]"))  # a batch: LSP has none
    _error(s, None, -32600)
    s.send(s.frame(b"42"))
    _error(s, None, -32600)
    s.message({"jsonrpc": "1.0", "id": 3, "method": "shutdown"})
    _error(s, 3, -32600)
    s.message({"jsonrpc": "2.0", "id": 4, "method": 17})
    _error(s, 4, -32600)
    s.message({"jsonrpc": "2.0", "id": [5], "method": "shutdown"})
    _error(s, None, -32600)
    s.message({"jsonrpc": "2.0", "id": 55})  # neither a request nor a response
    _error(s, 55, -32600)
    # Framing errors: the frame's end is unknown, so what follows up to the next
    # Content-Length header is skipped.
    s.send(b"Content-Type: text/plain\r\n\r\n{}")  # no Content-Length
    assert "Content-Length" in _error(s, None, -32700)
    s.send(b"Content-Length: 12\r\nno colon here\r\n\r\n")  # a header line that is not one
    assert "no colon here" in _error(s, None, -32700)
    s.request(6, "vx/noSuchMethod", {})
    _error(s, 6, -32601)
    # Params of the wrong shape: -32602 naming the method.
    s.request(7, "textDocument/hover", {"textDocument": {"uri": URI}})
    assert "textDocument/hover" in _error(s, 7, -32602)
    s.request(8, "textDocument/hover", "not an object")
    _error(s, 8, -32602)
    s.request(9, "textDocument/definition", {**HOVER_NOWHERE, "position": {"line": -1}})
    _error(s, 9, -32602)
    s.request(10, "initialize", {"capabilities": 5})
    _error(s, 10, -32602)
    # A notification gets no answer (JSON-RPC), but the client is told.
    s.notify("textDocument/didOpen", {"textDocument": {"uri": URI}})
    assert "textDocument/didOpen" in _logged(s, "invalid params")["params"]["message"]
    s.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": "file:///nowhere.vx", "version": 2},
            "contentChanges": [{"text": "fn f() {}"}],
        },
    )
    _logged(s, "file:///nowhere.vx is not open")
    _still_serving(s)
    assert s.close() == 0


def test_requests_before_initialize_and_after_shutdown_are_refused():
    s = RawServer()
    try:
        s.request(1, "textDocument/hover", HOVER_NOWHERE)
        _error(s, 1, -32002)
        s.initialize()
        s.request(2, "shutdown")
        assert s.response(2)["result"] is None
        s.request(3, "textDocument/hover", HOVER_NOWHERE)
        _error(s, 3, -32600)
        s.notify("exit", None)
        s.proc.stdin.close()
        assert s.proc.wait(30) == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
    # `exit` without shutdown: status 1 (LSP), and the server is gone.
    s = RawServer()
    s.initialize()
    s.notify("exit", None)
    assert s.proc.wait(30) == 1


def test_lone_surrogates_are_checked_as_the_editor_saves_them(server):
    """A lone surrogate (JSON `\\ud800`) is no character; an editor saves it as U+FFFD.
    The document is checked as saved: in a comment it changes nothing, in code it is
    the lexer's error at its column."""
    commented = STREAM.replace("// The seed", "// \ud800 The seed", 1)
    assert _open(server, commented) == []
    i = STREAM.index("let wv")
    broken = STREAM[:i] + "\udc00" + STREAM[i:]
    server.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": broken}]},
    )
    got = server.diagnostics(URI, 2)
    saved = broken.replace("\udc00", "\ufffd")
    want = api.check([api.Source("/work/doc/stream.vx", saved.encode())]).diagnostics
    assert [
        (d["code"], d["range"]["start"]["line"] + 1, d["range"]["start"]["character"] + 1)
        for d in got
    ] == [(d.code, d.span.line, d.span.column) for d in want]
    assert want  # U+FFFD is not a token
    _still_serving(server)
    assert server.close() == 0


def _edit(s: RawServer, version: int, start, end, text: str) -> None:
    s.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": URI, "version": version},
            "contentChanges": [
                {
                    "range": {
                        "start": {"line": start[0], "character": start[1]},
                        "end": {"line": end[0], "character": end[1]},
                    },
                    "text": text,
                }
            ],
        },
    )


def _hover_text(s: RawServer, msg_id, line: int, col: int) -> str:
    s.request(
        msg_id,
        "textDocument/hover",
        {"textDocument": {"uri": URI}, "position": {"line": line, "character": col}},
    )
    r = s.response(msg_id)["result"]
    return r["contents"]["value"] if r else ""


def _codes(diags: list[dict]) -> list[tuple[str, int]]:
    return [(d["code"], d["range"]["start"]["line"] + 1) for d in diags]


def _want(text: str) -> list[tuple[str, int]]:
    got = api.check([api.Source("/work/doc/stream.vx", text.encode())]).diagnostics
    return [(d.code, d.span.line) for d in got]


def test_out_of_range_edits_are_clamped_and_the_client_told(server):
    """A character past the line's end means the line's end (LSP: "defaults back to the
    line length"); a line past the document's end means its end. Either way the server
    applies the clamped edit and tells the client; what it checks is what the client
    has if it clamps the same way."""
    lines = STREAM.split("\n")
    n = next(i for i, x in enumerate(lines) if "let last = wait(inflight);" in x)
    assert _open(server, STREAM) == []
    # Past the end of line n: the text lands at its end.
    _edit(server, 2, (n, 500), (n, 900), "  // tail")
    assert server.diagnostics(URI, 2) == []
    note = _logged(server, f"line {n + 1}")["params"]["message"]
    assert "past the end" in note
    # Past the end of the document: appended (a function returning the wrong type).
    extra = "\nfn extra(t: &Tensor<f32, [8]>) -> i32 { return t; }\n"
    _edit(server, 3, (10_000, 3), (10_000, 3), extra)
    text = "\n".join(lines[:n] + [lines[n] + "  // tail"] + lines[n + 1 :]) + extra
    assert _codes(server.diagnostics(URI, 3)) == _want(text) == [("E0201", text.count("\n"))]
    _logged(server, "line 10001")
    # A reversed range is an edit of the range it spans, and told too.
    c = lines[n].index("wait(inflight)")
    _edit(server, 4, (n, c + len("wait(")), (n, c), "")
    broken = text.replace("let last = wait(inflight);", "let last = inflight);")
    assert _codes(server.diagnostics(URI, 4)) == _want(broken) == [("E0002", n + 1)]
    _logged(server, "ends before it starts")
    # Typed back: the server's copy is the client's again, and hover reads it.
    _edit(server, 5, (n, c), (n, c), "wait(")
    assert _codes(server.diagnostics(URI, 5)) == _want(text)
    hover = _hover_text(server, "h", n, lines[n].index("last"))
    assert "let last: Tensor<f32, [128, 128]>" in hover
    assert server.close() == 0
