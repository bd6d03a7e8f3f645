"""`vxc tune FILE.vx --target T ...`: the command's arguments, its summary and the table it
writes (cli.py declares the flags and calls `main`)."""

from __future__ import annotations

import sys
from pathlib import Path

from vxc import api, tuning
from vxc.targets import CPU_LEVELS, TARGETS
from vxc.tune import Outcome, Request, TuneFailed, entry, method_of, run
from vxc.tune.launch import LaunchError, parse_shapes


class TuneUsage(ValueError):
    """A bad `vxc tune` command line: exit 2 with this one line."""


def arch_of(target: str, arch: str | None) -> str:
    """The arch a target is tuned for: the --cpu level, a TPU topology, or the NVIDIA sm."""
    from vxc.backends.tpu.aot import TOPOLOGIES  # names only: libtpu loads on first use

    t = TARGETS[target]
    allowed = {"cpu": CPU_LEVELS, "tpu": tuple(TOPOLOGIES)}.get(
        t.family, (t.arch.sm,) if t.arch else ()
    )
    if arch is None:
        return "native" if target == "cpu" else allowed[0]
    if arch not in allowed:
        raise TuneUsage(f"--arch for {target} is one of {', '.join(allowed)}, not `{arch}`")
    return arch


def parse_space(items: list[str]) -> dict[str, tuple[int, ...]]:
    """`--space BK=64,128 --space BQ=128` -> {"BK": (64, 128), "BQ": (128,)}."""
    space: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        try:
            if not sep or not name.isidentifier() or name in space:
                raise ValueError
            space[name] = tuple(dict.fromkeys(int(v) for v in values.split(",")))
        except ValueError:
            raise TuneUsage(
                f"--space takes NAME=V1,V2,... (integers, each NAME once), found `{item[:200]}`"
            ) from None
    return space


def _line(o: Outcome, unit: str) -> str:
    consts = " ".join(f"{k}={v}" for k, v in o.consts.items())
    if o.status == "rejected":
        return f"  {consts}: rejected ({', '.join(o.codes)}): {o.why}"
    if o.status == "unscored":
        return f"  {consts}: not scored: {o.why}"
    return f"  {consts}: {o.score.value:g} {unit}"


def main(args) -> int:
    """Tune, print one line per candidate, write the table. 0: written; 1: no candidate
    could be chosen (nothing written); TuneUsage for a bad command line."""
    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TuneUsage(f"cannot read `{args.file}`: {e.strerror or e}") from None
    if args.runs < 1:
        raise TuneUsage(f"--runs must be at least 1, not {args.runs}")
    try:
        request = Request(
            api.Source(args.file, data),
            args.target,
            arch_of(args.target, args.arch),
            parse_shapes(args.shapes),
            parse_space(args.space),
            args.runs,
        )
        best, outcomes = run(request)
    except LaunchError as e:
        raise TuneUsage(str(e)) from None
    except TuneFailed as e:
        _summary(request, e.outcomes)
        print(f"vxc tune: {e}; no table written", file=sys.stderr)
        return 1
    _summary(request, outcomes)
    out = Path(args.out) if args.out else tuning.table_path(path)
    try:
        old = out.read_bytes() if out.is_file() else None
        table, dropped = tuning.with_entry(
            old, path.name, data, request.target, entry(request, best, outcomes)
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(table)
    except (OSError, tuning.TuneError) as e:
        raise TuneUsage(f"cannot write `{out}`: {getattr(e, 'strerror', None) or e}") from None
    if dropped:
        print(f"vxc tune: dropped the entries for {', '.join(dropped)}: they were "
              "written for other source bytes", file=sys.stderr)  # fmt: skip
    chosen = " ".join(f"{k}={v}" for k, v in best.consts.items())
    print(f"wrote {out}: {request.target} ({request.arch}) {chosen}", file=sys.stderr)
    return 0


def _summary(request: Request, outcomes: list[Outcome]) -> None:
    method = method_of(request.target)
    print(f"{request.source.path} for {request.target} ({request.arch}), {method.text}:")
    for o in outcomes:
        print(_line(o, method.unit))
