"""Writing compiler outputs: the one atomic-write helper the CLI and the worker share."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: bytes) -> None:
    """Write `data` to `path` so that `path` is absent, old or complete, never partial.

    A temporary file in the same directory (so the rename cannot cross file systems),
    made world-readable like an ordinary output (mkstemp's 0600 is not what a build
    tool or a user expects), then renamed over `path`.
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".vxc-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
