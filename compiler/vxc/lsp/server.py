"""The Vx language server (pygls): diagnostics as you type, hover, go to definition.

Started by `vxc lsp` (stdio). The client chooses the target with the initialization
option `{"target": "tpu"}` or the setting `vx.target` (workspace/didChangeConfiguration);
the default is `vxc lsp --target`, itself `cpu`. Every open document is checked by an
`IncrementalChecker` (see incremental.py) on open and on every change, and its
diagnostics are published with the document version they belong to.
"""

from __future__ import annotations

import gc
import logging
import time
import traceback
from importlib import resources
from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace.position_codec import ServerTextPosition

import vxc
from vxc.lsp import incremental as inc
from vxc.targets import TARGETS

log = logging.getLogger("vxc.lsp")

# A check that re-ran this many components allocated a lot of long-lived HIR: freeze it
# so the cyclic GC stops re-scanning the cache on every later keystroke.
FREEZE_AFTER = 32


class VxLanguageServer(LanguageServer):
    def __init__(self, target: str = "cpu"):
        super().__init__(
            "vxc", vxc.__version__, text_document_sync_kind=T.TextDocumentSyncKind.Incremental
        )
        self.checker = inc.IncrementalChecker(target)
        self.results: dict[str, inc.DocumentResult] = {}
        self.last_check_ms = 0.0

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
            for uri in list(self.results):
                self.check(uri)

    def check(self, uri: str) -> None:
        doc = self.workspace.get_text_document(uri)
        path = to_fs_path(uri) or uri
        t0 = time.perf_counter()
        try:
            result = self.checker.check(path, doc.source)
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
        lines = doc.lines
        diags = [_diagnostic(d, doc, lines) for d in result.diagnostics]
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


def _position(doc, lines, line: int, col: int) -> T.Position:
    """1-based line and character column -> the client's position units."""
    line = max(0, line - 1)
    col = max(0, col - 1)
    if line >= len(lines):
        return T.Position(line, col)
    return doc.position_codec.position_to_client_units(lines, ServerTextPosition(line, col))


def _range(doc, lines, span) -> T.Range:
    start = _position(doc, lines, span.line, span.column)
    if span.end_line and (span.end_line, span.end_column) > (span.line, span.column):
        end = _position(doc, lines, span.end_line, span.end_column)
    else:
        end = _position(doc, lines, span.line, span.column + 1)
    return T.Range(start, end)


def _diagnostic(d, doc, lines) -> T.Diagnostic:
    message = "\n".join(
        [d.message, *(f"note: {n}" for n in d.notes)] + ([f"help: {d.help}"] if d.help else [])
    )
    return T.Diagnostic(
        range=_range(doc, lines, d.span),
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
    """What a hover or definition request points at: (result, doc, lines, 1-based line and
    column, the `Memory::X` path there and its declaration), or None before a check."""
    uri = params.text_document.uri
    result = ls.results.get(uri)
    if result is None:
        return None
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    p = doc.position_codec.position_from_client_units(lines, params.position)
    text = lines[p.line] if p.line < len(lines) else ""
    line, col = p.line + 1, p.character + 1
    path = inc.path_at(text, col)
    found = None
    if path is not None:
        path_file = to_fs_path(uri) or uri
        found = inc.declaration(result, path_file, path[0], path[1], ls.checker.target)
    return result, doc, lines, line, col, text, path, found


def make_server(target: str = "cpu") -> VxLanguageServer:
    server = VxLanguageServer(target)

    @server.feature(T.INITIALIZE)
    def _initialize(ls: VxLanguageServer, params: T.InitializeParams) -> None:
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
        ls.check(params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def _change(ls: VxLanguageServer, params: T.DidChangeTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def _close(ls: VxLanguageServer, params: T.DidCloseTextDocumentParams) -> None:
        ls.results.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(
            T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(T.TEXT_DOCUMENT_HOVER)
    def _hover(ls: VxLanguageServer, params: T.HoverParams) -> T.Hover | None:
        at = _at(ls, params)
        if at is None:
            return None
        result, doc, lines, line, col, text, path, found = at
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
                T.Range(_position(doc, lines, line, a), _position(doc, lines, line, b)),
            )
        sym = inc.symbol_at(result, line, col)
        if sym is None:
            return None
        return T.Hover(
            T.MarkupContent(T.MarkupKind.Markdown, f"```vx\n{sym.text}\n```"),
            _range(doc, lines, sym.span),
        )

    @server.feature(T.TEXT_DOCUMENT_DEFINITION)
    def _definition(ls: VxLanguageServer, params: T.DefinitionParams) -> T.Location | None:
        at = _at(ls, params)
        if at is None:
            return None
        result, doc, lines, line, col, text, path, found = at
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
            return T.Location(uri, _range(doc, lines, span))
        sym = inc.symbol_at(result, line, col)
        if sym is not None and sym.definition is not None:
            return T.Location(uri, _range(doc, lines, sym.definition))
        word = inc.word_at(text, col)
        span = inc.function_at(result, word) if word else None
        return T.Location(uri, _range(doc, lines, span)) if span else None

    return server


def serve(target: str = "cpu") -> int:
    logging.basicConfig(level=logging.WARNING, format="vxc lsp: %(message)s")
    make_server(target).start_io()
    return 0
