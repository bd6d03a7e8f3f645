"""The editor integrations as a user installs them: editors/neovim/vx.lua on a Neovim
older than it supports says the version it needs (instead of `attempt to index field
'fs'`), and editors/vscode holds what `vsce package` asks for (repository, LICENSE,
.vscodeignore, a lock file that matches package.json)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"
LUA = ROOT / "editors" / "neovim" / "vx.lua"


def _nvim_version(nvim: str) -> tuple[int, int]:
    first = subprocess.run([nvim, "--version"], capture_output=True, text=True).stdout
    major, minor = re.match(r"NVIM v(\d+)\.(\d+)", first).groups()
    return int(major), int(minor)


def _open_vx_file(nvim: str, tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "k.vx").write_text("fn f() {}\n")
    return subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-c", f"luafile {LUA}", "-c", "edit k.vx",
         "-c", "set filetype=vx", "-c", "qa!"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_neovim_older_than_0_10_is_told_the_version(tmp_path):
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("no nvim on this machine (Debian bookworm's is 0.7.2)")
    version = _nvim_version(nvim)
    p = _open_vx_file(nvim, tmp_path)
    out = p.stdout + p.stderr
    assert "attempt to index" not in out and "stack traceback" not in out, out
    if version < (0, 10):
        assert "vx.lua needs Neovim >= 0.10" in out
        assert f"this is Neovim {version[0]}.{version[1]}." in out
    else:
        assert "needs Neovim" not in out


def test_vscode_package_has_what_vsce_checks():
    pkg = json.loads((VSCODE / "package.json").read_text())
    assert pkg["repository"]["directory"] == "editors/vscode"
    assert pkg["license"] == "Apache-2.0"
    assert "Apache License" in (VSCODE / "LICENSE").read_text()
    ignore = (VSCODE / ".vscodeignore").read_text().split()
    assert "node_modules/**" in ignore  # the bundle carries the client instead
    # The bundle is what package.json starts, built by the step vsce runs first.
    assert pkg["main"] == "./dist/extension.js"
    assert "--outfile=dist/extension.js" in pkg["scripts"]["vscode:prepublish"]
    assert {"node_modules/", "dist/", "*.vsix"} <= set((VSCODE / ".gitignore").read_text().split())


def test_vscode_lock_file_matches_package_json():
    pkg = json.loads((VSCODE / "package.json").read_text())
    lock = json.loads((VSCODE / "package-lock.json").read_text())
    root = lock["packages"][""]
    assert lock["lockfileVersion"] >= 2 and root["name"] == pkg["name"]
    for field in ("dependencies", "devDependencies"):
        assert root.get(field) == pkg.get(field), field
    for name in [*pkg["dependencies"], *pkg["devDependencies"]]:
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["integrity"].startswith("sha512-")
