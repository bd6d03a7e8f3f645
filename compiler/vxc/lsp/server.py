"""The Vx language server (pygls): diagnostics as you type, hover, go to definition.

Started by `vxc lsp` (stdio). The client chooses the target with the initialization
option `{"target": "tpu"}` or the setting `vx.target` (workspace/didChangeConfiguration);
the default is `vxc lsp --target`, itself `cpu`. Every open document is checked by an
`IncrementalChecker` (see incremental.py) on open and on every change, and its
diagnostics are published with the document version they belong to. After a save (and
a change of target) the parts of the document that checked clean are also lowered for
the target, one part at a time between messages, and what the backend refuses (E70xx,
as `vxc build` reports it) joins the diagnostics: lowering costs more than a keystroke's
budget, so it waits for a save, as a compiler's "check on save" does.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import threading
import time
import traceback
from dataclasses import replace
from importlib import resources
from pathlib import Path

from cattrs import transform_error
from lsprotocol import types as T
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol.language_server import LanguageServerProtocol, lsp_method
from pygls.uris import from_fs_path, to_fs_path

import vxc
from vxc.lsp import incremental as inc
from vxc.lsp import transport as tp
from vxc.lsp.document import Document, client_units, line_content
from vxc.targets import TARGETS

log = logging.getLogger("vxc.lsp")

# A check that re-ran this many components allocated a lot of long-lived HIR: freeze it
# so the cyclic GC stops re-scanning the cache on every later keystroke.
FREEZE_AFTER = 32


def _to_user_handler(method: str, name: str):
    """A builtin feature that only calls the server's own handler for `method`."""

    def builtin(self, params):
        if (user := self.fm.features.get(method)) is not None:
            yield user, (params,), None

    builtin.__name__ = name
    return lsp_method(method)(builtin)


class VxProtocol(LanguageServerProtocol):
    """pygls's protocol without its copies of open documents: its incremental edit
    rewrites the whole document in Python per keystroke and accepts any position.
    `Document` (document.py) keeps them instead."""

    lsp_text_document__did_open = _to_user_handler(
        T.TEXT_DOCUMENT_DID_OPEN, "lsp_text_document__did_open"
    )
    lsp_text_document__did_change = _to_user_handler(
        T.TEXT_DOCUMENT_DID_CHANGE, "lsp_text_document__did_change"
    )
    lsp_text_document__did_close = _to_user_handler(
        T.TEXT_DOCUMENT_DID_CLOSE, "lsp_text_document__did_close"
    )


class VxLanguageServer(LanguageServer):
    def __init__(self, target: str = "cpu"):
        super().__init__(
            "vxc",
            vxc.__version__,
            text_document_sync_kind=T.TextDocumentSyncKind.Incremental,
            protocol_cls=VxProtocol,
        )
        self.checker = inc.IncrementalChecker(target)
        self.docs: dict[str, Document] = {}
        self.results: dict[str, inc.DocumentResult] = {}
        self.last_check_ms = 0.0
        self.lowering: dict[str, asyncio.Task] = {}  # per document: its running lowering
        self.initialized = False  # an initialize request was handled
        self.exit_code = 0  # the process's status once the loop ends

    @property
    def encoding(self) -> str:
        """The position encoding negotiated at initialize ("utf-16" by default)."""
        kind = self.workspace.position_encoding if self.initialized else None
        return str(getattr(kind, "value", kind) or "utf-16")

    def tell(self, kind: T.MessageType, message: str, show: bool = False) -> None:
        """A message to the client: shown to the user, or only in its log."""
        if show:
            self.window_show_message(T.ShowMessageParams(kind, message))
        else:
            self.window_log_message(T.LogMessageParams(kind, message))

    # ---- the stdio transport (transport.py) instead of pygls's unbounded one ----------
    def start_io(self, stdin=None, stdout=None) -> None:
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = tp.FrameReader(stdin or sys.stdin.buffer)
        try:
            asyncio.run(self._serve(reader))
        except BrokenPipeError:
            log.error("the client's end of the connection closed")
        except KeyboardInterrupt:
            pass
        except SystemExit as e:  # `exit`: 0 after shutdown, else 1 (LSP)
            self.exit_code = e.code if isinstance(e.code, int) else 1
        finally:
            self.shutdown()

    async def _serve(self, reader: tp.FrameReader) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop_event.is_set():
            frame = await loop.run_in_executor(self.thread_pool, reader.frame)
            if frame is None:  # end of input: the client is gone
                return
            if isinstance(frame, tp.Refusal):
                self._refuse(frame)
            else:
                self._receive(frame)

    def _refuse(self, r: tp.Refusal) -> None:
        log.error("refused a message: %s", r.message)
        self.protocol._send_data(
            {"jsonrpc": "2.0", "id": r.msg_id, "error": {"code": r.code, "message": r.message}}
        )

    def _receive(self, body: bytes) -> None:
        """One frame's body: checked as JSON-RPC, then handled by pygls."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:
            self._refuse(tp.Refusal(tp.PARSE_ERROR, f"Parse error: the body is not JSON: {e}"))
            return
        refusal = tp.envelope(data)
        if refusal is not None and isinstance(refusal.msg_id, float):
            # A fractional id is wrong for LSP; if the params are wrong too, that is the
            # answer that helps (and what a JSON-RPC peer, for which the id is fine, gets).
            refusal = self._params_refusal({**data, "id": 0}, refusal.msg_id) or refusal
        if refusal is None and "method" in data:
            refusal = self._gate(data)
        if refusal is not None:
            if refusal.code:
                self._refuse(refusal)
            return
        try:
            message = self.protocol.structure_message(data)
        except Exception as e:  # params that do not fit the method's type
            self._invalid_params(data, e)
            return
        try:
            self.protocol.handle_message(message)
        except Exception as e:  # pygls answers a handler's exception; this is its own
            log.exception("handling %s", data.get("method"))
            if "method" in data and "id" in data:
                self._refuse(tp.Refusal(tp.INTERNAL_ERROR, f"Internal error: {e}", data["id"]))

    def _gate(self, data: dict) -> tp.Refusal | None:
        """LSP's lifecycle: nothing but initialize before it, nothing but exit after
        shutdown. A Refusal with code 0 drops a notification unanswered."""
        method, is_request = data["method"], "id" in data
        if not self.initialized and method not in (T.INITIALIZE, T.EXIT):
            if is_request:
                return tp.Refusal(
                    tp.SERVER_NOT_INITIALIZED, f"{method} before initialize", data["id"]
                )
            return tp.Refusal(0, "")
        if self.protocol._shutdown and method != T.EXIT:
            if is_request:
                return tp.Refusal(
                    tp.INVALID_REQUEST,
                    f"{method} after shutdown: the server is shutting down",
                    data["id"],
                )
            return tp.Refusal(0, "")
        return None

    def _params_refusal(self, data: dict, msg_id) -> tp.Refusal | None:
        """The -32602 answer (with `msg_id`) if `data`'s params do not fit its method."""
        r = tp.envelope(data)
        if r is not None:
            return replace(r, msg_id=msg_id) if r.code == tp.INVALID_PARAMS else None
        try:
            self.protocol.structure_message(data)
        except Exception as e:
            return tp.Refusal(tp.INVALID_PARAMS, _params_message(data, e), msg_id)
        return None

    def _invalid_params(self, data: dict, e: Exception) -> None:
        message = _params_message(data, e)
        if "method" in data and "id" in data:
            self._refuse(tp.Refusal(tp.INVALID_PARAMS, message, data["id"]))
        elif "method" in data:  # a notification has no answer (JSON-RPC): tell the client
            self.tell(T.MessageType.Error, f"vxc: {message[0].lower()}{message[1:]}; ignored")
        else:
            log.error("%s", message)

    def set_target(self, target: str) -> None:
        if target not in TARGETS:
            self.window_show_message(
                T.ShowMessageParams(
                    T.MessageType.Error,
                    f"vxc: unknown target `{target}` (targets: {', '.join(TARGETS)})",
                )
            )
            return
        if target != self.checker.target:
            self.checker = inc.IncrementalChecker(target)
            for uri in list(self.docs):
                self.check(uri)
                self.lower_soon(uri)

    def check(self, uri: str) -> None:
        doc = self.docs[uri]
        path = to_fs_path(uri) or uri
        t0 = time.perf_counter()
        try:
            result = self.checker.check(path, doc.lines)
        except Exception as e:  # a compiler bug must not take the editor's server down
            self.window_log_message(
                T.LogMessageParams(
                    T.MessageType.Error,
                    f"vxc: internal error checking {uri}:\n"
                    + "".join(traceback.format_exception(e)),
                )
            )
            return
        self.last_check_ms = (time.perf_counter() - t0) * 1000
        if result.rechecked >= FREEZE_AFTER:
            gc.collect()
            gc.freeze()
        self.results[uri] = result
        diags = [_diagnostic(d, doc) for d in result.diagnostics]
        self.text_document_publish_diagnostics(
            T.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=doc.version)
        )
        log.info(
            "checked %s v%s: %d component(s) re-checked, %.1f ms",
            uri,
            doc.version,
            result.rechecked,
            self.last_check_ms,
        )

    def lower_soon(self, uri: str) -> None:
        """Lower the document's clean parts in the background (`_lower`); at once when no
        event loop runs (the handlers called in process, as the benchmarks do)."""
        if uri not in self.docs or uri in self.lowering:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            asyncio.run(self._lower(uri))
            return
        task = loop.create_task(self._lower(uri))
        self.lowering[uri] = task
        task.add_done_callback(lambda _t: self.lowering.pop(uri, None))

    async def _lower(self, uri: str) -> None:
        """One part at a time, letting the messages that arrive in between be handled
        (a keystroke waits for one part's lowering at most); an edit meanwhile makes
        new parts, lowered in a next round; then publish once."""
        path = to_fs_path(uri) or uri
        lowered = 0
        while (doc := self.docs.get(uri)) is not None:
            version = doc.version
            todo = self.checker.unlowered(path)
            for unit in todo:
                if self.docs.get(uri) is not doc or doc.version != version:
                    break
                self._lower_unit(uri, unit)
                lowered += 1
                await asyncio.sleep(0)
            else:
                break
        doc = self.docs.get(uri)
        if lowered and doc is not None and path in self.checker.versions:
            diags = self.checker.diagnostics(path)
            if uri in self.results:
                self.results[uri].diagnostics = diags
            self.text_document_publish_diagnostics(
                T.PublishDiagnosticsParams(
                    uri=uri, diagnostics=[_diagnostic(d, doc) for d in diags], version=doc.version
                )
            )
            log.info("lowered %d part(s) of %s v%s", lowered, uri, doc.version)

    def _lower_unit(self, uri: str, unit: inc.Unit) -> None:
        try:
            unit.lower()
        except Exception as e:  # a backend bug: logged, and the part counts as lowered
            unit.refusals = []
            self.window_log_message(
                T.LogMessageParams(
                    T.MessageType.Error,
                    f"vxc: internal error lowering part of {uri}:\n"
                    + "".join(traceback.format_exception(e)),
                )
            )


def _params_message(data: dict, e: Exception) -> str:
    """What is wrong with a message's params, from the error structuring them raised."""
    cause = e.__cause__ or e
    try:
        detail = "; ".join(transform_error(cause)[:3])
    except Exception:  # not a cattrs validation error
        detail = str(cause) or type(cause).__name__
    return f"Invalid params for {data.get('method', 'a response')}: {detail}"


def _position(doc: Document, line: int, col: int) -> T.Position:
    """1-based line and character column -> the client's position units."""
    line = max(0, line - 1)
    col = max(0, col - 1)
    if line >= len(doc.lines):
        return T.Position(line, col)
    return T.Position(line, client_units(line_content(doc.lines[line])[:col], doc.encoding))


def _range(doc: Document, span) -> T.Range:
    start = _position(doc, span.line, span.column)
    if span.end_line and (span.end_line, span.end_column) > (span.line, span.column):
        end = _position(doc, span.end_line, span.end_column)
    else:
        end = _position(doc, span.line, span.column + 1)
    return T.Range(start, end)


def _diagnostic(d, doc: Document) -> T.Diagnostic:
    message = "\n".join(
        [d.message, *(f"note: {n}" for n in d.notes)] + ([f"help: {d.help}"] if d.help else [])
    )
    return T.Diagnostic(
        range=_range(doc, d.span),
        message=message,
        severity=T.DiagnosticSeverity.Error
        if d.severity == "error"
        else T.DiagnosticSeverity.Warning,
        code=d.code,
        source="vxc",
        data={"notes": list(d.notes), "help": d.help},
    )


def _model_uri(target: str) -> str:
    path = Path(str(resources.files("vxc.machines").joinpath(TARGETS[target].model_file)))
    return from_fs_path(str(path))


def _at(ls: VxLanguageServer, params):
    """What a hover or definition request points at: (result, doc, 1-based line and
    column, the line's text, the `Memory::X` path there and its declaration), or None
    before a check."""
    uri = params.text_document.uri
    result = ls.results.get(uri)
    doc = ls.docs.get(uri)
    if result is None or doc is None:
        return None
    n, c, _ = doc.offset(params.position.line, params.position.character)
    text = line_content(doc.lines[n])
    line, col = n + 1, c + 1
    path = inc.path_at(text, col)
    found = None
    if path is not None:
        path_file = to_fs_path(uri) or uri
        found = inc.declaration(result, path_file, path[0], path[1], ls.checker.target)
    return result, doc, line, col, text, path, found


def make_server(target: str = "cpu") -> VxLanguageServer:
    server = VxLanguageServer(target)

    @server.feature(T.INITIALIZE)
    def _initialize(ls: VxLanguageServer, params: T.InitializeParams) -> None:
        ls.initialized = True
        opts = params.initialization_options
        if isinstance(opts, dict) and isinstance(opts.get("target"), str):
            ls.set_target(opts["target"])

    @server.feature(T.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def _configuration(ls: VxLanguageServer, params: T.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict):
            vx = settings.get("vx", settings)
            if isinstance(vx, dict) and isinstance(vx.get("target"), str):
                ls.set_target(vx["target"])

    @server.feature(T.TEXT_DOCUMENT_DID_OPEN)
    def _open(ls: VxLanguageServer, params: T.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        ls.docs[item.uri] = Document.of(item.uri, item.version, item.text, ls.encoding)
        ls.check(item.uri)

    @server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def _change(ls: VxLanguageServer, params: T.DidChangeTextDocumentParams) -> None:
        uri, version = params.text_document.uri, params.text_document.version
        doc = ls.docs.get(uri)
        if doc is None:
            ls.tell(T.MessageType.Error, f"vxc: {uri} is not open; its change is ignored")
            return
        notes = []
        for change in params.content_changes:
            if isinstance(change, T.TextDocumentContentChangePartial):
                r = change.range
                start, end = (r.start.line, r.start.character), (r.end.line, r.end.character)
                notes += doc.apply(start, end, change.text)
            else:
                doc.replace_all(change.text)
        doc.version = version
        if notes:
            ls.tell(
                T.MessageType.Warning,
                f"vxc: an edit of {uri} (version {version}) did not fit the server's copy: "
                + "; ".join(notes)
                + ". It was applied clamped to the document; if the diagnostics look wrong, "
                "close and reopen the file.",
                show=True,
            )
        ls.check(uri)

    @server.feature(T.TEXT_DOCUMENT_DID_SAVE)
    def _save(ls: VxLanguageServer, params: T.DidSaveTextDocumentParams) -> None:
        ls.lower_soon(params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def _close(ls: VxLanguageServer, params: T.DidCloseTextDocumentParams) -> None:
        ls.docs.pop(params.text_document.uri, None)
        ls.results.pop(params.text_document.uri, None)
        ls.checker.forget(to_fs_path(params.text_document.uri) or params.text_document.uri)
        ls.text_document_publish_diagnostics(
            T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(T.TEXT_DOCUMENT_HOVER)
    def _hover(ls: VxLanguageServer, params: T.HoverParams) -> T.Hover | None:
        at = _at(ls, params)
        if at is None:
            return None
        result, doc, line, col, text, path, found = at
        if path is not None:
            kind, name, a, b = path
            body = found[2] if found else f"{kind} {name}: built in (host memory)"
            where = (
                f" ({TARGETS[ls.checker.target].model_file} model)"
                if found and found[0].startswith("<")
                else ""
            )
            return T.Hover(
                T.MarkupContent(T.MarkupKind.Markdown, f"```vx\n{body}\n```{where}"),
                T.Range(_position(doc, line, a), _position(doc, line, b)),
            )
        sym = inc.symbol_at(result, line, col)
        if sym is None:
            return None
        return T.Hover(
            T.MarkupContent(T.MarkupKind.Markdown, f"```vx\n{sym.text}\n```"),
            _range(doc, sym.span),
        )

    @server.feature(T.TEXT_DOCUMENT_DEFINITION)
    def _definition(ls: VxLanguageServer, params: T.DefinitionParams) -> T.Location | None:
        at = _at(ls, params)
        if at is None:
            return None
        result, doc, line, col, text, path, found = at
        uri = params.text_document.uri
        if path is not None:
            if found is None:
                return None
            file, span, _ = found
            if file.startswith("<"):  # the target's shipped model
                return T.Location(
                    _model_uri(ls.checker.target),
                    T.Range(
                        T.Position(span.line - 1, span.column - 1),
                        T.Position(span.end_line - 1, span.end_column - 1),
                    ),
                )
            return T.Location(uri, _range(doc, span))
        sym = inc.symbol_at(result, line, col)
        if sym is not None and sym.definition is not None:
            return T.Location(uri, _range(doc, sym.definition))
        word = inc.word_at(text, col)
        span = inc.function_at(result, word) if word else None
        return T.Location(uri, _range(doc, span)) if span else None

    return server


def serve(target: str = "cpu") -> int:
    logging.basicConfig(level=logging.WARNING, format="vxc lsp: %(message)s")
    server = make_server(target)
    server.start_io()
    return server.exit_code
