"""`vxc`: check, build, explain, lsp. A thin driver over vxc.api (TOOLCHAIN.md's CLI contract).

Exit status: 0 no errors, 1 the program has errors, 2 bad usage or an internal
failure (which prints a short bug report, never a bare traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from vxc import collector
from vxc.stages import AFTER, emit_error, emit_help
from vxc.targets import (
    EMIT_MEANING,
    EMITS,
    TARGET_NAMES,
    TARGETS,
    add_analysis_flags,
    add_option_flags,
    analysis_from,
    options_from,
)

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


def _emit_value(value: str) -> str:
    """`--emit`'s type: a name of EMITS or `vx-mlir:after=PASS` (vxc/stages.py)."""
    why = emit_error(value, EMITS)
    if why:
        raise argparse.ArgumentTypeError(why)
    return value


class UsageError(Exception):
    """Bad command line or unreadable input: exit 2 with one line, no traceback."""


class _Version(argparse.Action):
    """`vxc --version`: the package version and the digest of the compiler's own files
    (the one `api.compiler_version` keys every cache with), then the git commit it runs
    from; api loads only when asked."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from vxc.api import compiler_version, source_commit

        print(f"vxc {compiler_version()}")
        print(f"commit {source_commit()}")
        parser.exit()


# The help texts the subcommands share (argparse fills in %(default)s).
TARGET_HELP = "the target to check for: " + "; ".join(
    f"{t.name}, {t.description}" for t in TARGETS.values()
)
MACHINE_HELP = "a machine model that adds to or replaces the target's declarations"
FORMAT_HELP = "diagnostics as rustc-style text (human) or one JSON object per line (json)"


def _add_error_format(p) -> None:
    p.add_argument(
        "--error-format",
        choices=("human", "json"),
        default="human",
        help=FORMAT_HELP + " (default: %(default)s)",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vxc", description="The Vx kernel compiler.")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser(
        "check",
        help="check sources for a target",
        description="Check Vx sources for one target, including what the target's "
        "backend would refuse (so a clean check builds): diagnostics on stderr; exit 0 "
        "(no errors), 1 (errors) or 2 (bad usage).",
    )
    c.add_argument("files", nargs="+", metavar="FILE.vx")
    c.add_argument(
        "--target",
        choices=TARGET_NAMES,
        default="cpu",
        help=TARGET_HELP + " (default: %(default)s)",
    )
    c.add_argument("--machine", metavar="MODEL.vx", help=MACHINE_HELP)
    c.add_argument(
        "--no-lower",
        action="store_true",
        help="skip the target's lowering: only the target-independent checks (faster; a "
        "clean result may still be refused by `vxc build`)",
    )
    _add_error_format(c)
    add_analysis_flags(c)
    _tune_flags(c)
    b = sub.add_parser(
        "build",
        help="build sources for a target",
        description="Build Vx sources for one target into OUT (or print the IR).",
    )
    b.add_argument("files", nargs="+", metavar="FILE.vx")
    b.add_argument(
        "--target", choices=TARGET_NAMES, required=True, help=TARGET_HELP.replace("check", "build")
    )
    b.add_argument("--machine", metavar="MODEL.vx", help=MACHINE_HELP)
    b.add_argument(
        "-o",
        "--out",
        metavar="OUT",
        help="output directory (default: stdout for vx-mlir/target-ir, . otherwise)",
    )
    b.add_argument(
        "--emit",
        type=_emit_value,
        default="artifact",
        metavar="{" + ",".join(EMITS) + f",{AFTER}PASS}}",
        help="what to write: "
        + "; ".join(f"{k}: {v}" for k, v in EMIT_MEANING.items())
        + f"; {emit_help()} (default: %(default)s)",
    )
    add_option_flags(b)  # --cpu, --link, --tpu-aot, --tpu-instances: vxc/targets.py
    _add_error_format(b)
    add_analysis_flags(b)
    _tune_flags(b)
    _report_parser(sub)
    _tune_parser(sub)
    e = sub.add_parser("explain", help="explain a diagnostic code")
    e.add_argument("code")
    s = sub.add_parser("lsp", help="run the language server (LSP over stdio) for editors")
    s.add_argument(
        "--target", choices=TARGET_NAMES, default="cpu", help="default target; a client may choose"
    )
    return p


def _report_parser(sub) -> None:
    r = sub.add_parser(
        "report",
        help="per kernel: bytes per edge, FLOPs, intensity, rings and the roofline bound",
        description="Prints what the target plan knows about each kernel's cost, per "
        "instance, and with -o writes DIR/<stem>.<target>.roofline.svg (and the table as "
        "DIR/<stem>.<target>.report.txt). A bound from the machine model, not a measurement.",
    )
    r.add_argument("files", nargs="+", metavar="FILE.vx")
    r.add_argument("--target", choices=TARGET_NAMES, default="cpu", help="default: cpu")
    r.add_argument("--machine", metavar="MODEL.vx", help="adds to or replaces the target model")
    r.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a runtime size: a Vec's length (`tiles.len()=64`), a dimension or a scalar "
        "parameter (`n=512`); every size not given is 1024 where the kernel's `where` clauses allow it, else what they imply",
    )
    r.add_argument(
        "--instances",
        type=int,
        default=None,
        metavar="N",
        help="the launch grid (default: what the `where` clauses give, else 1)",
    )
    r.add_argument("-o", "--out", metavar="DIR", help="write the roofline SVG and the table here")
    r.add_argument("--error-format", choices=("human", "json"), default="human")


def _tune_parser(sub) -> None:
    t = sub.add_parser(
        "tune",
        help="choose a kernel's const values for a target and write KERNEL.tune.json",
        description="Every candidate of --space is checked as `vxc check` checks it (a "
        "rejected one is recorded with its codes), the rest are scored with the target's "
        "own signal (cpu: measured time; tpu: libtpu's schedule; b200/h100: a model), and "
        "the best is written to the table beside the source (docs/PERFORMANCE.md).",
    )
    t.add_argument("file", metavar="FILE.vx")
    t.add_argument("--target", choices=TARGET_NAMES, required=True, help="the target to tune for")
    t.add_argument(
        "--arch",
        help="cpu: the --cpu level (default native); tpu: the topology (default v5e); "
        "b200/h100: the sm (their only one)",
    )
    t.add_argument("--space", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a const parameter's candidates (repeatable)")  # fmt: skip
    t.add_argument("--shapes", action="append", default=[], metavar="NAME=V,...",
                   help="tuning sizes and scalars (`n=2048,scale=0.125`), as `vxc report "
                   "--size`; the rest as the `where` clauses allow")  # fmt: skip
    t.add_argument("--runs", type=int, default=5, help="cpu: timed rounds (default 5)")
    t.add_argument("-o", "--out", metavar="TABLE", help="default: KERNEL.tune.json beside it")


def _tune(args) -> int:
    from vxc.tune.command import TuneUsage, main

    try:
        return main(args)
    except TuneUsage as e:
        raise UsageError(str(e)) from None


def _sizes(items: list[str]) -> dict[str, int]:
    sizes = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value.strip().isdigit():
            raise UsageError(f"--size wants NAME=N with N a non-negative integer, not `{item}`")
        sizes[name.strip()] = int(value)
    return sizes


def _read(path: str):
    from vxc.api import Source

    try:
        with open(path, "rb") as f:
            return Source(path, f.read())
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UsageError(f"cannot read `{path}`: {why}") from e


def _tune_flags(parser) -> None:
    g = parser.add_mutually_exclusive_group()
    g.add_argument(
        "--tune",
        metavar="FILE",
        help="the tuning table to read (default: KERNEL.tune.json beside the first source, "
        "when there is one); its entry for --target gives const values after --const",
    )
    g.add_argument("--no-tune", action="store_true", help="read no tuning table")


def _analysis_args(args, sources=None) -> dict:
    """`api.analyze`'s keywords from the flags (`--const`, the tuning table); a malformed
    one is a usage error."""
    try:
        out = analysis_from(vars(args))
    except ValueError as e:
        raise UsageError(str(e)) from None
    if sources:
        out["tuned"] = _tuned(args, sources[0])
    return out


def _tuned(args, first):
    """The tuning table's values for --target: --tune FILE, else the table beside the
    first source, unless --no-tune (LANGUAGE.md 3: --const, then the table, then defaults)."""
    from vxc import tuning

    if getattr(args, "no_tune", False):
        return None
    try:
        if getattr(args, "tune", None):
            return tuning.read(args.tune, args.target, first.data)
        return tuning.beside(first.path, args.target, first.data)
    except tuning.TuneError as e:
        raise UsageError(str(e)) from None


def _report(diags, sources, machine, fmt: str) -> None:
    from vxc.api import render

    sys.stderr.write(render(diags, sources, machine, fmt))


def _check(args) -> int:
    from vxc import api

    sources = [_read(f) for f in args.files]
    machine = _read(args.machine) if args.machine else None
    analysis = _analysis_args(args, sources)
    checked = api.check(sources, args.target, machine, lower=not args.no_lower, **analysis)
    _report(checked.diagnostics, sources, machine, args.error_format)
    return EXIT_OK if checked.ok else EXIT_ERRORS


def _build(args) -> int:
    from vxc import api

    sources = [_read(f) for f in args.files]
    machine = _read(args.machine) if args.machine else None
    result = api.build(
        api.analyze(sources, machine, **_analysis_args(args, sources)),
        args.target,
        args.emit,
        **options_from(vars(args)),
    )
    _report(result.diagnostics, sources, machine, args.error_format)
    if not result.ok:
        return EXIT_ERRORS
    if args.out is None and args.emit not in ("artifact", "report"):
        for data in result.outputs.values():
            sys.stdout.write(data.decode())
        return EXIT_OK
    from vxc.outputs import OutputError, write_set

    try:  # all the outputs or none, mode 0644 (vxc.outputs)
        written = write_set(args.out or ".", dict(sorted(result.outputs.items())))
    except OutputError as e:
        raise UsageError(str(e)) from None
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _cost_report(args) -> int:
    from vxc import api

    if args.instances is not None and args.instances < 1:
        raise UsageError(f"--instances must be at least 1, not {args.instances}")
    sources = [_read(f) for f in args.files]
    machine = _read(args.machine) if args.machine else None
    result = api.report(
        api.analyze(sources, machine), args.target, _sizes(args.size), args.instances
    )
    _report(result.diagnostics, sources, machine, args.error_format)
    if not result.ok:
        return EXIT_ERRORS
    table = next(v for k, v in result.outputs.items() if k.endswith(".report.txt"))
    sys.stdout.write(table.decode())
    if args.out is not None:
        from vxc.outputs import OutputError, write_set

        if not any(k.endswith(".roofline.svg") for k in result.outputs):
            print(
                "vxc: note: no roofline picture: the machine model declares no "
                "`peak_gflops` or no memory `bandwidth`",
                file=sys.stderr,
            )
        try:
            written = write_set(args.out, dict(sorted(result.outputs.items())))
        except OutputError as e:
            raise UsageError(str(e)) from None
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _explain(args) -> int:
    from vxc.diagnostics.codes import CODES

    code = CODES.get(args.code.upper())
    if code is None:
        raise UsageError(f"unknown code `{args.code}`; codes: {', '.join(CODES)}")
    print(f"{code.code} ({code.severity}): {code.title}\n\n{code.explanation}")
    return EXIT_OK


def _lsp(args) -> int:
    from vxc.lsp.server import serve  # imports pygls: only `vxc lsp` pays for it

    return serve(args.target)


def main(argv: list[str] | None = None) -> int:
    sys.setrecursionlimit(10_000)
    args = _parser().parse_args(argv)
    try:
        if args.command == "lsp":  # runs for hours: the collector frees each edit's objects
            return _lsp(args)
        one_shot = {
            "check": _check,
            "build": _build,
            "report": _cost_report,
            "tune": _tune,
            "explain": _explain,
        }
        with collector.paused():  # their objects live until exit (vxc/collector.py)
            return one_shot[args.command](args)
    except UsageError as e:
        print(f"vxc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        from vxc.errors import Unsupported

        if isinstance(e, Unsupported):
            print(f"vxc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        _bug_report(e)
        return EXIT_USAGE


def _bug_report(e: BaseException) -> None:
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames)
    print(
        "vxc: internal compiler error (this is a bug in vxc, not in your program)\n"
        f"  {type(e).__name__}: {e}\n  at: {where}\n"
        "  please report it with the command line and the input files",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(main())
