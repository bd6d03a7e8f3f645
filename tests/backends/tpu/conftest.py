"""Shared set-up of the TPU backend tests: every kernel is built once per session, and
libtpu's topologies (seconds to start) are made once per session by `vxc.backends.tpu.aot`."""

from __future__ import annotations

from pathlib import Path

import pytest
from tpu_kernels import Built


@pytest.fixture(scope="session")
def built():
    cache: dict[Path, Built] = {}

    def get(path: Path) -> Built:
        if path not in cache:
            cache[path] = Built(path)
        return cache[path]

    return get
