"""The TextMate grammar (editors/vscode) loads, its patterns compile, and it scopes every
reserved word of the parser and the seed program's tokens as an editor would: the
first pattern that matches earliest on the line wins."""

from __future__ import annotations

import json
import re
from pathlib import Path

from vxc.frontend.parser import KEYWORDS

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors/vscode"
GRAMMAR = json.loads((VSCODE / "syntaxes/vx.tmLanguage.json").read_text())


def _rules(node) -> list[dict]:
    """The grammar's match rules, in the order an editor tries them."""
    out = []
    for p in node["patterns"]:
        if "include" in p:
            out += _rules(GRAMMAR["repository"][p["include"].lstrip("#")])
        else:
            out.append(p)
    return out


RULES = _rules(GRAMMAR)


def scopes(line: str) -> list[tuple[str, str]]:
    """(text, scope) for each token of one line (block comments only as far as the line)."""
    out, pos = [], 0
    while pos < len(line):
        best = None
        for r in RULES:
            m = re.compile(r.get("match") or r["begin"]).search(line, pos)
            if m and m.end() > m.start() and (best is None or m.start() < best[0].start()):
                best = (m, r)
        if best is None:
            break
        m, r = best
        if "captures" in r:
            out += [
                (m.group(int(k)), v["name"]) for k, v in r["captures"].items() if m.group(int(k))
            ]
        else:
            out.append((m.group(), r["name"]))
        pos = m.end()
    return out


def test_patterns_compile_and_the_package_points_at_them():
    for r in RULES:
        for key in ("match", "begin", "end"):
            if key in r:
                re.compile(r[key])
    pkg = json.loads((VSCODE / "package.json").read_text())
    (grammar,) = pkg["contributes"]["grammars"]
    assert (VSCODE / grammar["path"]).is_file() and grammar["scopeName"] == GRAMMAR["scopeName"]
    # `main` is the bundle `vscode:prepublish` builds from the client's source.
    source, *_ = pkg["scripts"]["vscode:prepublish"].split()[1:]
    assert (VSCODE / source).is_file()
    assert f"--outfile={pkg['main'].removeprefix('./')}" in pkg["scripts"]["vscode:prepublish"]
    assert pkg["contributes"]["languages"][0]["extensions"] == [".vx"]


def test_every_reserved_word_is_highlighted():
    for word in sorted(KEYWORDS):
        got = dict(scopes(f"{word} ("))
        assert word in got, word
        assert got[word].split(".")[0] in ("keyword", "storage", "support", "constant"), word


def test_seed_program_tokens():
    text = (ROOT / "kernels/stream.vx").read_text()
    toks = [t for line in text.split("\n") for t in scopes(line)]
    assert ("stream", "entity.name.function.vx") in toks
    assert ("VMEM", "entity.name.type.space.vx") in toks
    assert ("TensorCore", "entity.name.type.space.vx") in toks
    assert ("transfer_async", "support.function.transfer.vx") in toks
    assert ("wait", "support.function.transfer.vx") in toks
    assert ("Tensor", "entity.name.type.vx") in toks and (
        "f32",
        "storage.type.primitive.vx",
    ) in toks
    assert ("128", "constant.numeric.integer.vx") in toks
    comment = scopes("  let x = 1;  // transfer_async(t, Memory::VMEM)")
    assert comment[-1] == ("// transfer_async(t, Memory::VMEM)", "comment.line.double-slash.vx")
    model = (ROOT / "compiler/vxc/machines/b200.vx").read_text()
    toks = [t for line in model.split("\n") for t in scopes(line)]
    assert ("Memory", "storage.type.vx") in toks and ("TMEM", "entity.name.type.vx") in toks
    assert ("225 KB", "constant.numeric.size.vx") in toks
