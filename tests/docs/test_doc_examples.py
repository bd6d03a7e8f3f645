"""Every example of docs/LANGUAGE.md, docs/TUTORIAL.md and docs/FRAMEWORKS.md (and the
README's Python) does what its text says.

A fenced block is checked when the line before it is a marker, `<!-- vx: KIND ARGS -->`
(an HTML comment: it does not render). Every ```vx block must carry one:

| marker | the block must |
|---|---|
| `check [target=T,T]` | pass `vxc check` with no diagnostic at all, for each target (default cpu) |
| `error CODE ... [target=T]` | give exactly these diagnostic codes, errors and warnings, in order of position |
| `warn CODE ... [target=T]` | the same, with warnings only (it builds) |
| `build T ...` | build an artifact for each target named, with no diagnostic |

and it may add `file=kernels/x.vx` (the block is that file, verbatim: the tutorial shows the
kernels the suite builds) and `name=x.vx` (the file name its diagnostics show).
A ```text block marked `output` must be the rendering of the vx block before it, as
`vxc check` prints it. ```python blocks marked `python` and ```sh blocks marked `sh` run
in order, the Python in one namespace per document, in a scratch directory where
`kernels/` is the repository's and `vxc` is on PATH (a shell block must exit 0).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from vxc import api

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / d for d in ("LANGUAGE.md", "TUTORIAL.md", "FRAMEWORKS.md")]
README = ROOT / "README.md"  # its Python example runs too

MARKER = re.compile(r"<!--\s*vx:\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
VX_KINDS = ("check", "error", "warn", "build")


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: str | None  # the marker's text, None when unmarked

    @property
    def id(self) -> str:
        return f"{self.doc.name}:{self.line}"

    def words(self) -> list[str]:
        return (self.marker or "").split()

    def option(self, key: str) -> str | None:
        found = [w.split("=", 1)[1] for w in self.words() if w.startswith(key + "=")]
        return found[0] if found else None

    def args(self) -> list[str]:
        return [w for w in self.words()[1:] if "=" not in w]


def blocks(doc: Path) -> list[Block]:
    lines = doc.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
        prev = lines[i - 1] if i else ""
        mark = MARKER.fullmatch(prev.strip())
        out.append(
            Block(
                doc, i + 1, m.group(1), "\n".join(lines[i + 1 : j]) + "\n", mark and mark.group(1)
            )
        )
        i = j + 1
    return out


ALL = [b for d in [*DOCS, README] for b in blocks(d)]
VX = [b for b in ALL if b.lang == "vx"]


def _name(b: Block) -> str:
    return b.option("name") or f"example_{b.line}.vx"


def _check(b: Block, target: str):
    sources = [api.Source(_name(b), b.text.encode())]
    return sources, api.check_target(api.analyze(sources), target).diagnostics


def test_the_documents_have_examples_and_every_vx_block_says_what_it_does():
    assert len(VX) >= 20, f"only {len(VX)} vx examples in {[d.name for d in DOCS]}"
    for doc in DOCS:
        assert any(b.doc == doc for b in VX), f"{doc.name} has no vx example"
    unmarked = [b.id for b in VX if not b.marker or b.words()[0] not in VX_KINDS]
    assert not unmarked, f"vx blocks without a `<!-- vx: check|error|warn|build -->`: {unmarked}"
    stray = [b.id for b in ALL if b.marker and b.lang not in ("vx", "text", "python", "sh")]
    assert not stray, f"markers before blocks that are not vx, text, python or sh: {stray}"


@pytest.mark.parametrize("b", VX, ids=[b.id for b in VX])
def test_vx_example(b: Block):
    kind, targets = b.words()[0], (b.option("target") or "cpu").split(",")
    if b.option("file"):
        assert b.text == (ROOT / b.option("file")).read_text(), (
            f"{b.id} is not {b.option('file')} verbatim"
        )
    if kind == "build":
        targets = b.args()
        assert targets, f"{b.id}: `build` names no target"
    for target in targets:
        sources, diags = _check(b, target)
        codes = [d.code for d in diags]
        if kind in ("check", "build"):
            assert not codes, f"{b.id} on {target}:\n{api.render(diags, sources)}"
        else:
            assert codes == b.args(), (
                f"{b.id} on {target}: expected {b.args()}, got:\n{api.render(diags, sources)}"
            )
            errors = [d for d in diags if d.severity == "error"]
            assert bool(errors) == (kind == "error"), f"{b.id}: {kind} but {codes}"
        if kind == "build":
            result = api.build(api.analyze(sources), target)
            assert result.ok and result.outputs, api.render(result.diagnostics, sources)


OUTPUTS = [
    (prev, b)
    for doc in DOCS
    for prev, b in zip(blocks(doc), blocks(doc)[1:], strict=False)
    if b.marker == "output"
]


@pytest.mark.parametrize(("src", "out"), OUTPUTS, ids=[o.id for _, o in OUTPUTS])
def test_shown_diagnostics_are_what_vxc_prints(src: Block, out: Block):
    assert src.lang == "vx", f"{out.id}: `output` must follow a vx block"
    sources, diags = _check(src, (src.option("target") or "cpu").split(",")[0])
    assert out.text.rstrip() == api.render(diags, sources).rstrip()


@pytest.mark.parametrize("doc", [*DOCS, README], ids=[d.name for d in [*DOCS, README]])
def test_shell_and_python_examples_run(doc: Path, tmp_path, monkeypatch):
    steps = [b for b in blocks(doc) if (b.lang, b.marker) in (("python", "python"), ("sh", "sh"))]
    if doc.name == "TUTORIAL.md":
        assert {b.lang for b in steps} == {"python", "sh"}, "the tutorial's steps are unmarked"
    if doc == README:
        assert steps, "the README's Python example is not marked `python`"
    (tmp_path / "kernels").symlink_to(ROOT / "kernels")
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    namespace: dict = {"__name__": "__doc_example__"}
    for b in steps:
        if b.lang == "sh":
            p = subprocess.run(["bash", "-ec", b.text], env=env, capture_output=True, text=True)
            assert p.returncode == 0, f"{b.id} exited {p.returncode}:\n{p.stdout}{p.stderr}"
            continue
        try:
            exec(compile(b.text, b.id, "exec"), namespace)  # noqa: S102 - the docs' own code
        except Exception as e:
            raise AssertionError(f"{b.id} raised {type(e).__name__}: {e}") from e


def test_a_wrong_marker_fails(tmp_path):
    """The checker can fail: a block whose marker names the wrong code, a clean claim for a
    program with an error, and a `file=` that is not the file are each reported."""
    doc = tmp_path / "DOC.md"
    doc.write_text(
        "<!-- vx: error E6004 -->\n```vx\nfn f() -> i64 on Topology::TensorCore {\n"
        "  let t = transfer_async(Tensor<f32>([128, 128]), Memory::VMEM);\n  return 1;\n}\n```\n"
        "<!-- vx: check -->\n```vx\nfn g() -> i64 on Topology::TensorCore {\n  return x;\n}\n```\n"
        "<!-- vx: check file=kernels/stream.vx -->\n```vx\nfn h() -> void {\n}\n```\n"
    )
    found = blocks(doc)
    assert [b.marker for b in found] == ["error E6004", "check", "check file=kernels/stream.vx"]
    for b, why in zip(found, ["expected ['E6004'], got", "E0101", "verbatim"], strict=True):
        with pytest.raises(AssertionError, match=re.escape(why)):
            test_vx_example(b)
