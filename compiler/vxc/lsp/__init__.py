"""`vxc lsp`: a Language Server Protocol server for Vx (diagnostics, hover, definitions).

`incremental` (no LSP library) checks a document per keystroke; `server` speaks the
protocol with pygls and is imported only when `vxc lsp` runs, so `vxc check` never
loads pygls.
"""
