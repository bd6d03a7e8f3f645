"""The Vx configs are defined for consumers in one file, `vx_rules/vx.bazelrc`, which a
workspace imports instead of copying config lines (issue 36); the repository's own
.bazelrc defines the same configs for its `//vx_rules` labels. No Bazel runs here: the
Bazel tests (test_bazel_integration.py, the examples workspace) build through the file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = re.compile(r"^build:(\w+) (.+)$", re.M)


def configs(path: Path) -> dict[str, str]:
    return dict(CONFIG.findall(path.read_text()))


def test_the_exported_configs_are_the_repository_s_own():
    own = configs(ROOT / ".bazelrc")
    exported = configs(ROOT / "vx_rules" / "vx.bazelrc")
    assert set(exported) == {"cpu", "tpu", "b200", "h100", "native"}
    assert {k: v.replace("--@vx//", "--//") for k, v in exported.items()} == own


def test_the_examples_workspace_imports_them_and_copies_nothing():
    text = (ROOT / "examples" / ".bazelrc").read_text()
    assert "import %workspace%/../vx_rules/vx.bazelrc" in text.splitlines()
    assert configs(ROOT / "examples" / ".bazelrc") == {}
