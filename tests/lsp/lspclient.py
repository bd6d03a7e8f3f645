"""A real LSP client (pygls's LanguageClient) driving `python -m vxc lsp` over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[2]


class Session:
    """One server process; `published[uri]` holds (version, diagnostics, arrival time)."""

    def __init__(self):
        self.client = LanguageClient("vx-tests", "1")
        self.published: dict[str, list[tuple[int | None, list[T.Diagnostic], float]]] = {}
        self.arrived = asyncio.Event()

        @self.client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diags(ls, params: T.PublishDiagnosticsParams):
            self.published.setdefault(params.uri, []).append(
                (params.version, params.diagnostics, time.perf_counter())
            )
            self.arrived.set()

    @property
    def process(self) -> asyncio.subprocess.Process:
        return self.client._server

    async def start(self, *args: str, init: dict | None = None) -> T.InitializeResult:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
        await self.client.start_io(sys.executable, "-m", "vxc", "lsp", *args, env=env)
        result = await self.client.initialize_async(
            T.InitializeParams(
                capabilities=T.ClientCapabilities(),
                process_id=os.getpid(),
                initialization_options=init,
            )
        )
        self.client.initialized(T.InitializedParams())
        return result

    async def begin(
        self, uri: str, text: str, *args: str, init: dict | None = None, timeout: float = 240
    ):
        """Start the server, open `text` and return its first diagnostics."""
        await self.start(*args, init=init)
        self.open(uri, text)
        return await self.diagnostics(uri, 1, timeout=timeout)

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.client.text_document_did_open(
            T.DidOpenTextDocumentParams(T.TextDocumentItem(uri, "vx", version, text))
        )

    def change(self, uri: str, version: int, changes: list) -> None:
        self.client.text_document_did_change(
            T.DidChangeTextDocumentParams(
                T.VersionedTextDocumentIdentifier(version=version, uri=uri), changes
            )
        )

    @staticmethod
    def insert(line: int, col: int, text: str):
        """An incremental change: `text` inserted at a 0-based position."""
        at = T.Position(line, col)
        return T.TextDocumentContentChangePartial(range=T.Range(at, at), text=text)

    @staticmethod
    def replace(line: int, col: int, end_col: int, text: str):
        return T.TextDocumentContentChangePartial(
            range=T.Range(T.Position(line, col), T.Position(line, end_col)), text=text
        )

    async def diagnostics(self, uri: str, version: int, timeout: float = 60.0):
        """The diagnostics published for `version` of `uri` (waits for them)."""
        return await self.publication(uri, version, 1, timeout)

    async def publication(self, uri: str, version: int, n: int, timeout: float = 120.0):
        """The `n`th (1-based) diagnostics published for `version` of `uri` (waits)."""
        deadline = time.monotonic() + timeout
        while True:
            got = [d for v, d, _ in self.published.get(uri, []) if v == version]
            if len(got) >= n:
                return list(got[n - 1])
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no diagnostics ({n}) for {uri} version {version}")
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                pass

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(
            T.DidSaveTextDocumentParams(T.TextDocumentIdentifier(uri))
        )

    def arrival(self, uri: str, version: int) -> float:
        return next(t for v, _, t in self.published[uri] if v == version)

    async def hover(self, uri: str, line: int, col: int) -> T.Hover | None:
        return await self.client.text_document_hover_async(
            T.HoverParams(T.TextDocumentIdentifier(uri), T.Position(line, col))
        )

    async def definition(self, uri: str, line: int, col: int):
        return await self.client.text_document_definition_async(
            T.DefinitionParams(T.TextDocumentIdentifier(uri), T.Position(line, col))
        )

    async def close(self) -> int:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()
        return self.process.returncode


class RawServer:
    """`python -m vxc lsp` driven byte by byte: for frames no well-behaved client sends.
    A reader thread parses the server's frames into `messages` as they arrive."""

    def __init__(self, *args: str):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vxc", "lsp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.messages: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if not line or length is None:
                return
            self.messages.put(json.loads(out.read(length)))

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    @staticmethod
    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    def message(self, obj) -> None:
        self.send(self.frame(json.dumps(obj).encode()))

    def request(self, msg_id, method: str, params=None) -> None:
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.message(msg)

    def notify(self, method: str, params) -> None:
        self.message({"jsonrpc": "2.0", "method": method, "params": params})

    def wait(self, pred, timeout: float = 60.0) -> dict:
        """The first message (already seen or arriving within `timeout`) that `pred`
        accepts; it is taken, so that the same answer is not found twice."""
        for i, m in enumerate(self.seen):
            if pred(m):
                return self.seen.pop(i)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                m = self.messages.get(timeout=left)
            except queue.Empty:
                break
            if pred(m):
                return m
            self.seen.append(m)
        raise TimeoutError("no such message from the server")

    def response(self, msg_id, timeout: float = 60.0) -> dict:
        return self.wait(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    def initialize(self) -> None:
        self.request(0, "initialize", {"processId": None, "capabilities": {}, "rootUri": None})
        assert "result" in self.response(0)
        self.notify("initialized", {})

    def diagnostics(self, uri: str, version: int, timeout: float = 60.0) -> list[dict]:
        m = self.wait(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri
                and m["params"].get("version") == version
            ),
            timeout,
        )
        return m["params"]["diagnostics"]

    def close(self, timeout: float = 30.0) -> int:
        """shutdown, exit; the server's exit status."""
        if self.proc.poll() is None:
            self.request("bye", "shutdown")
            self.response("bye")
            self.notify("exit", None)
            self.proc.stdin.close()
        return self.proc.wait(timeout)
