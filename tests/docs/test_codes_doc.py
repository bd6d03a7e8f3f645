"""docs/CODES.md is generated from the code table and must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vxc.diagnostics.codes import CODES

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gen_codes_doc.py"
DOC = ROOT / "docs" / "CODES.md"


def test_codes_doc_is_current():
    r = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr + "\nregenerate: .venv/bin/python tools/gen_codes_doc.py"


def test_codes_doc_has_every_code_with_its_explanation():
    text = DOC.read_text()
    for c in CODES.values():
        assert f"\n### {c.code}\n\n**{c.severity}: {c.title}**\n\n{c.explanation}\n" in text
        assert f"| [{c.code}](#{c.code.lower()}) | {c.severity} | {c.title} |" in text


def test_check_mode_detects_a_stale_doc(tmp_path, monkeypatch):
    sys.path.insert(0, str(TOOL.parent))
    try:
        import gen_codes_doc
    finally:
        sys.path.remove(str(TOOL.parent))
    stale = tmp_path / "CODES.md"
    stale.write_text(gen_codes_doc.render().replace("E6011", "E6012", 1))
    monkeypatch.setattr(gen_codes_doc, "OUT", stale)
    monkeypatch.setattr(gen_codes_doc, "ROOT", tmp_path)
    assert gen_codes_doc.main(["--check"]) == 1
    assert gen_codes_doc.main([]) == 0
    assert gen_codes_doc.main(["--check"]) == 0
