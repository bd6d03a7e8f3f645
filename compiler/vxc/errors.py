"""Errors shared by every stage that are the user's to read (not compiler bugs)."""

from __future__ import annotations


class Unsupported(Exception):
    """A valid program or request that this version of vxc cannot serve yet; the message
    says what and what works instead. Drivers print it plainly (exit 2), never as a crash."""


class NotRunnableHere(RuntimeError):
    """A valid artifact whose hardware this host lacks (no NVIDIA GPU, no TPU). The
    message is one line naming the artifact's target and what it needs."""
