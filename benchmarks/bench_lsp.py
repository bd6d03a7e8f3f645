"""`vxc lsp` per-keystroke latency, as a client sees it: the time from sending a
didChange (one character, incremental sync) to receiving that version's
publishDiagnostics, over stdio with pygls's client. Documents: kernels/stream.vx, a
10 000-line document and a 5 000-function one (the stream function repeated; issue 25's
goal: 100 ms a keystroke there). Also the first open (cold).

    .venv/bin/python benchmarks/bench_lsp.py [--keystrokes 40]
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


async def measure(text: str, keystrokes: int) -> tuple[float, list[float]]:
    uri = "file:///bench/doc.vx"
    s = Session()
    t0 = time.perf_counter()
    await s.begin(uri, text, timeout=1200)
    cold = time.perf_counter() - t0
    lines = text.split("\n")
    n = [i for i, x in enumerate(lines) if "matmul_acc(&mut acc, &cur, &wv);" in x]
    n = n[len(n) // 2]
    col = lines[n].index(";")
    latencies = []
    for v in range(2, keystrokes + 2):
        # Type a comment after the statement, one character at a time.
        sent = time.perf_counter()
        s.change(uri, v, [Session.insert(n, col + 1 + (v - 2), "/" if v < 4 else "x")])
        await s.diagnostics(uri, v)
        latencies.append(s.arrival(uri, v) - sent)
    await s.close()
    return cold, latencies


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keystrokes", type=int, default=40)
    args = ap.parse_args()
    stream = (ROOT / "kernels/stream.vx").read_text()
    body = stream[stream.index("fn stream") :]
    docs = [
        ("kernels/stream.vx", stream),
        ("10 000 lines", _many(body, lines=10_000)),
        ("5 000 functions", _many(body, functions=5_000)),
    ]
    for name, text in docs:
        cold, lat = asyncio.run(measure(text, args.keystrokes))
        lat_ms = sorted(x * 1000 for x in lat)
        print(
            f"{name} ({text.count(chr(10)) + 1} lines): open {cold * 1000:.0f} ms; per keystroke "
            f"median {statistics.median(lat_ms):.1f} ms, p90 {lat_ms[int(0.9 * len(lat_ms))]:.1f} ms, "
            f"max {lat_ms[-1]:.1f} ms ({len(lat_ms)} keystrokes)"
        )


if __name__ == "__main__":
    main()
