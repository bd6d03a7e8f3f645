"""Shared set-up of the TPU backend tests: every kernel is built once per session, and
libtpu's topologies (seconds to start) are made once per session by `vxc.backends.tpu.aot`."""

from __future__ import annotations

from pathlib import Path

import pytest
from tpu_kernels import Built


@pytest.fixture(scope="session")
def built():
    cache: dict[tuple[Path, int], Built] = {}

    def get(path: Path, instances: int = 0) -> Built:
        if (path, instances) not in cache:
            cache[path, instances] = Built(path, instances)
        return cache[path, instances]

    return get
