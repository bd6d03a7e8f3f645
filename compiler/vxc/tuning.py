"""Tuning tables (LANGUAGE.md 3): `KERNEL.tune.json` beside `KERNEL.vx`, the const values
chosen for each target. A build takes a generic entry's const values, first to last, from
`--const`, the table's entry for its target, and the parameter's default.

The table is data the build reads, never a reason to measure: a table written for other
source bytes (its `source_sha256` differs) is still read as written, with W1041 naming
the command that refreshes it. `vxc tune` (issue 33) writes tables; a hand-written one is
read the same way. The format:

    {"format": 1, "source": "attention.vx", "source_sha256": "<hex>",
     "targets": {"tpu": {"consts": {"BK": 128}}, "cpu": {"consts": {"BK": 64}}}}

(An illustration: kernels/attention.vx has no key-tile const yet, only its head dimension
`D`, and no table; a table naming a const its kernel lacks is W1040.)

Other keys of a target's entry (its arch, the score, every candidate tried, the tuning
shapes and the inputs' digests) are the tuner's (vxc/tune/) and are not read by a build.
`with_entry` writes a table: sorted keys, two-space indent, so the same inputs give the
same bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

FORMAT = 1
SUFFIX = ".tune.json"


class TuneError(ValueError):
    """A table that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Tuned:
    """One build's values from a table: what `api.analyze` instantiates after `--const`."""

    path: str  # the table, for messages
    target: str
    values: dict[str, int]
    stale: bool  # written for other source bytes
    # the `vxc tune` flags after the file that refresh this entry (W1041 prints them)
    refresh: str = ""


def table_path(source: str | Path) -> Path:
    """`kernels/attention.vx` -> `kernels/attention.tune.json`."""
    p = Path(source)
    return p.with_name(p.stem + SUFFIX)


def read(path: str | Path, target: str, source_data: bytes) -> Tuned:
    """The entry of `target` in the table at `path` (no entry: no values)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise TuneError(f"cannot read the tuning table `{path}`: {e.strerror or e}") from None
    return parse(raw, str(path), target, source_data)


def parse(raw: bytes, path: str, target: str, source_data: bytes) -> Tuned:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise TuneError(f"the tuning table `{path}` is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise TuneError(f"the tuning table `{path}` is not of format {FORMAT} (found {got!r})")
    targets = doc.get("targets", {})
    if not isinstance(targets, dict):
        raise TuneError(f"the tuning table `{path}`: `targets` must be an object")
    entry = targets.get(target, {})
    consts = entry.get("consts", {}) if isinstance(entry, dict) else None
    if not isinstance(consts, dict) or not all(
        isinstance(k, str) and k.isidentifier() and type(v) is int for k, v in consts.items()
    ):
        raise TuneError(
            f"the tuning table `{path}`: `targets.{target}.consts` must map const names to integers"
        )
    digest = hashlib.sha256(source_data).hexdigest()
    stale = doc.get("source_sha256") not in (None, digest)
    return Tuned(path, target, dict(consts), stale, refresh_flags(target, entry))


def refresh_flags(target: str, entry: object) -> str:
    """The flags of the `vxc tune` that wrote `entry` (its arch, space and shapes, as the
    tuner records them), so the command W1041 names repeats that tuning; a hand-written
    entry without them gets `--target` alone."""
    flags = [f"--target {target}"]
    if not isinstance(entry, dict):
        return flags[0]
    if isinstance(entry.get("arch"), str):
        flags.append(f"--arch {entry['arch']}")
    space = entry.get("space")
    if isinstance(space, dict):
        for name, values in space.items():
            if isinstance(values, list):
                flags.append(f"--space {name}={','.join(str(v) for v in values)}")
    shapes = entry.get("shapes")
    if isinstance(shapes, dict) and shapes:
        flags.append("--shapes " + ",".join(f"{k}={v}" for k, v in shapes.items()))
    return " ".join(flags)


def beside(source: str | Path, target: str, source_data: bytes) -> Tuned | None:
    """The table beside `source` for `target`, or None where there is none."""
    path = table_path(source)
    return read(path, target, source_data) if path.is_file() else None


def with_entry(
    old: bytes | None, source: str, source_data: bytes, target: str, entry: dict
) -> tuple[bytes, list[str]]:
    """The table `old` (None: no table yet) with `target`'s entry replaced by `entry`,
    for the source bytes `source_data`; and the targets whose entries were dropped. An
    entry written for other source bytes is dropped: kept, it would no longer read as
    stale once the table's digest is the new source's."""
    digest = hashlib.sha256(source_data).hexdigest()
    targets: dict = {}
    dropped: list[str] = []
    if old is not None:
        try:
            doc = json.loads(old)
        except (ValueError, UnicodeDecodeError) as e:
            raise TuneError(f"the tuning table for `{source}` is not JSON: {e}") from None
        if isinstance(doc, dict) and isinstance(doc.get("targets"), dict):
            targets = {t: e for t, e in doc["targets"].items() if t != target}
        if not isinstance(doc, dict) or doc.get("source_sha256") not in (None, digest):
            dropped, targets = sorted(targets), {}
    targets[target] = entry
    return _dumps(source, digest, targets), dropped


def _dumps(source: str, digest: str, targets: dict) -> bytes:
    doc = {"format": FORMAT, "source": source, "source_sha256": digest, "targets": targets}
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
