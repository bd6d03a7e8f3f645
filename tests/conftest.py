"""How pytest-xdist shares the suite out (tools/test.sh: `-n 2 --dist loadfile`).

A test file is one unit of work, so its module and session fixtures (built kernels,
libtpu's topologies, workers) are made once, on one worker; and every file under
tests/bazel/ is one unit together: they share ~/.cache/vx-bazel (the workspace, the
output roots, the remote-cache and BuildGrid state), HOME's locked-environment store,
Bazel servers, apt-get and the sid chroots, so one worker runs them one after another.

This is done in the controller's scheduler rather than with `xdist_group` marks and
`--dist loadgroup`: with pytest 9.2, xdist 3.8's loadgroup sets an attribute pytest no
longer reads (pytest-xdist issue 1386), and every test is then sent out on its own.
"""

from __future__ import annotations

import pytest

# Folders whose test files run on one worker, in one unit.
ONE_UNIT = ("tests/bazel/",)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((d for d in ONE_UNIT if path.startswith(d)), path)

    return Scheduling(config, log)
