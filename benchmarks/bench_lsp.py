"""`vxc lsp` per-keystroke latency, as a client sees it: the time from sending a
didChange (one character, incremental sync) to receiving that version's
publishDiagnostics, over stdio with pygls's client. Documents: kernels/stream.vx, a
10 000-line document and a 5 000-function one (the stream function repeated; issue 25's
goal: 100 ms a keystroke there). Also the first open (cold).

`--cpu` also runs the server's own handlers in this process (no pipes, no client) and
reports the CPU time of each keystroke, which a loaded machine stretches less than
wall time. `--only 5000` keeps the documents whose name holds it.

    .venv/bin/python benchmarks/bench_lsp.py [--keystrokes 40] [--cpu] [--only NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests/lsp"), str(ROOT / "compiler")]

from lspclient import Session  # noqa: E402


def _many(body: str, lines: int = 0, functions: int = 0) -> str:
    n = functions or lines // body.count("\n") + 1
    return "\n".join(body.replace("fn stream(", f"fn stream{i}(") for i in range(n))


def _keystroke(text: str):
    """Where the keystrokes go: after the statement in the middle function's loop,
    typing `//` and then `x`s (a comment)."""
    lines = text.split("\n")
    n = [i for i, x in enumerate(lines) if "matmul_acc(&mut acc, &cur, &wv);" in x]
    n = n[len(n) // 2]
    col = lines[n].index(";")
    return lambda v: Session.insert(n, col + 1 + (v - 2), "/" if v < 4 else "x")


def measure_cpu(text: str, keystrokes: int) -> tuple[float, list[float]]:
    """The server's handlers called in process: CPU seconds of the open and of each
    keystroke (didChange handled, diagnostics published to a writer that drops them)."""
    import gc

    from lsprotocol import types as T

    from vxc.lsp.server import make_server

    class Drop:
        def write(self, data: bytes) -> None:
            pass

        def close(self) -> None:
            pass

    server = make_server()
    server.protocol.set_writer(Drop())
    feature = server.protocol.fm.features
    uri = "file:///bench/doc.vx"
    t0 = time.process_time()
    feature[T.TEXT_DOCUMENT_DID_OPEN](
        T.DidOpenTextDocumentParams(T.TextDocumentItem(uri, "vx", 1, text))
    )
    cold = time.process_time() - t0
    key = _keystroke(text)
    out = []
    for v in range(2, keystrokes + 2):
        doc = T.VersionedTextDocumentIdentifier(version=v, uri=uri)
        t0 = time.process_time()
        feature[T.TEXT_DOCUMENT_DID_CHANGE](T.DidChangeTextDocumentParams(doc, [key(v)]))
        out.append(time.process_time() - t0)
    gc.unfreeze()
    return cold, out


async def measure(text: str, keystrokes: int) -> tuple[float, list[float]]:
    uri = "file:///bench/doc.vx"
    s = Session()
    t0 = time.perf_counter()
    await s.begin(uri, text, timeout=1200)
    cold = time.perf_counter() - t0
    key = _keystroke(text)
    latencies = []
    for v in range(2, keystrokes + 2):
        sent = time.perf_counter()
        s.change(uri, v, [key(v)])
        await s.diagnostics(uri, v)
        latencies.append(s.arrival(uri, v) - sent)
    await s.close()
    return cold, latencies


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keystrokes", type=int, default=40)
    ap.add_argument("--cpu", action="store_true", help="also CPU time, in process")
    ap.add_argument("--only", default="", help="documents whose name holds this")
    args = ap.parse_args()
    stream = (ROOT / "kernels/stream.vx").read_text()
    body = stream[stream.index("fn stream") :]
    docs = [
        ("kernels/stream.vx", stream),
        ("10 000 lines", _many(body, lines=10_000)),
        ("5 000 functions", _many(body, functions=5_000)),
    ]
    for name, text in docs:
        if args.only not in name:
            continue
        runs = [("over stdio, wall", asyncio.run(measure(text, args.keystrokes)))]
        if args.cpu:
            runs.append(("in process, CPU", measure_cpu(text, args.keystrokes)))
        for how, (cold, lat) in runs:
            lat_ms = sorted(x * 1000 for x in lat)
            print(
                f"{name} ({text.count(chr(10)) + 1} lines), {how}: open {cold * 1000:.0f} ms; "
                f"per keystroke median {statistics.median(lat_ms):.1f} ms, "
                f"p90 {lat_ms[int(0.9 * len(lat_ms))]:.1f} ms, max {lat_ms[-1]:.1f} ms "
                f"({len(lat_ms)} keystrokes)"
            )


if __name__ == "__main__":
    main()
