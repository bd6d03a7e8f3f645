"""Where a request may read and write: its sandbox.

The root is the request's ``sandbox_dir`` (absolute, or relative to the worker's
directory, as Bazel's multiplex sandboxes send it) or, without one, the worker's own
directory: the execroot, where Bazel starts a singleplex worker and runs a one-shot
action. Every path a request names resolves inside the root:

- an absolute path must lie under the root; a ``..`` component is refused outright,
  since ``k/..`` goes wherever the link ``k`` points, not back to the root;
- an input (a source, the machine model, the .vxhir, an ``@flagfile``) must be one of
  the request's ``WorkRequest.inputs``, listed by Bazel as exec paths relative to the
  execroot, which a sandbox mirrors. Bazel lays inputs out as links to the real files,
  so a listed input is opened through its link: Bazel declared it. A one-shot run has
  no list (``inputs`` is None) and is confined to its directory only;
- an output's folders must not be symbolic links, from the root down, so a planted
  link (a symlinked ``--out-dir`` too) never carries a write out of the output tree.
  Folders that do not exist yet are created by the writer as real folders.

A refusal is `PathRefused`, which says why and never what the file holds: the
caller names the path by an excerpt (`server.refusal`) and has read nothing.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import cached_property

OUTSIDE = "the path is outside the sandbox"
DOTDOT = "a `..` in the path may lead outside the sandbox"
UNLISTED = "not an input of this request"
NUL = "a NUL character in the path"
LINK = "is a symbolic link; outputs are written only inside the sandbox"


class PathRefused(Exception):
    """A path the request may not use: `reason`, and the folder of the path that is a
    link (`link`, part of the request's own path) when that is the reason."""

    def __init__(self, reason: str, link: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.link = link


@dataclass
class Sandbox:
    root: str  # absolute, not resolved: Bazel's sandbox may itself lie behind a link
    inputs: tuple[str, ...] | None = None  # None: a one-shot run, which has no list

    @staticmethod
    def of(sandbox_dir: str = "", inputs: tuple[str, ...] | None = None) -> Sandbox:
        return Sandbox(os.path.abspath(sandbox_dir or os.curdir), inputs)

    def _relative(self, path: str) -> str:
        """`path` relative to the root, normalised, or PathRefused."""
        if "\0" in path:
            raise PathRefused(NUL)
        if ".." in path.split(os.sep):  # before normpath, which would fold it away
            raise PathRefused(DOTDOT)
        if os.path.isabs(path):
            path = self._under_root(os.path.normpath(path))
        return os.path.normpath(path)

    def _under_root(self, path: str) -> str:
        for root in dict.fromkeys((self.root, os.path.realpath(self.root))):
            if path == root:
                return os.curdir
            if path.startswith(root.rstrip(os.sep) + os.sep):
                return path[len(root.rstrip(os.sep)) + 1 :]
        raise PathRefused(OUTSIDE)

    @cached_property
    def _listed(self) -> frozenset[str]:
        # Built on the first read, not per request: Bazel lists every tool file too
        # (its exec paths are normal already, so this is the set that matches).
        return frozenset(self.inputs or ())

    @cached_property
    def _listed_normalised(self) -> frozenset[str]:
        return frozenset(os.path.normpath(p) for p in self.inputs or ())

    def _is_listed(self, rel: str) -> bool:
        return rel in self._listed or rel in self._listed_normalised

    def input(self, path: str) -> str:
        """Where to open the input `path`."""
        rel = self._relative(path)
        if self.inputs is not None and not self._is_listed(rel):
            raise PathRefused(UNLISTED)
        return os.path.join(self.root, rel)

    def output(self, path: str, folder: bool) -> str:
        """Where to write the output `path`: a folder (`--out-dir`) or a file (`--out`,
        whose own name may be replaced, never followed, so only its folders count)."""
        rel = self._relative(path)
        parts = [p for p in rel.split(os.sep) if p != os.curdir]
        walked = self.root
        for i, part in enumerate(parts if folder else parts[:-1]):
            walked = os.path.join(walked, part)
            try:
                mode = os.lstat(walked).st_mode
            except OSError:
                break  # absent (the writer creates it) or unusable (the writer says so)
            if stat.S_ISLNK(mode):
                raise PathRefused(LINK, link=os.sep.join(parts[: i + 1]))
        return os.path.join(self.root, rel)
