from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def write(tmp_path):
    """Write a source file into the test's temporary directory; returns its path."""

    def _write(name: str, content: str | bytes) -> Path:
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return p

    return _write
