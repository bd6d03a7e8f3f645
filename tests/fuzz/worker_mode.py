"""Worker mode: the real persistent worker (`python -m vxc.worker --persistent_worker`,
compiler/vxc/worker/) driven over its length-delimited protobuf framing with mutated
requests — bad frames, paths, arguments, flagfiles, sandbox folders, request ids,
cancels — asserting after each one that the process survives and answers per
protocol, and that it stays inside its sandbox.

The scene (one temporary folder per run): `execroot/` with a sandbox `sb/` holding
the kernels, a secret file `execroot/secret.txt` outside it (one line, a token that
must never appear in an answer), a canary folder `execroot/outside/` (nothing may be
written there) and a symlink `sb/escape -> ../outside`. Requests name the sandbox as
their `sandbox_dir`.

A finding is one of (`Finding.kind`):

- `died`: the worker exited; `no-answer`: no answer within the deadline;
- `protocol`: an answer that is not a WorkResponse, has another request's id, or
  arrives for a cancel of a request already answered;
- `internal`: an answer that is a bug report ("internal compiler error");
- `sandbox-read`: an answer that quotes the secret file or /etc/passwd;
- `sandbox-write`: a file written outside the sandbox (the canary folder or the
  execroot beside it).
"""

from __future__ import annotations

import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compiler"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from child import Child, Finding  # noqa: E402

from vxc.worker import framing  # noqa: E402
from vxc.worker.vx_worker_protocol_pb2 import Input, WorkRequest, WorkResponse  # noqa: E402

SECRET = "vxfuzz-secret-6b1f0e"  # the one line of the file outside the sandbox
PASSWD_MARK = "root:x:0:0"
KERNELS = sorted((ROOT / "kernels").glob("*.vx"))
TARGETS = ["cpu", "tpu", "b200", "h100"]


@dataclass
class Report:
    requests: int = 0
    answers: int = 0
    exit_codes: dict[int, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    restarts: int = 0
    seconds: float = 0.0


class Worker(Child):
    """One worker process; its answers are ("frame", payload), ("eof", ""), or
    ("bad-frame", why)."""

    def __init__(self, cwd: Path):
        super().__init__(["-m", "vxc.worker", "--persistent_worker"], cwd)

    def _read(self) -> None:
        while True:
            try:
                payload = framing.read_frame(self.proc.stdout)
            except framing.FrameError as e:
                self.inbox.put(("bad-frame", str(e)))
                return
            if payload is None:
                self.inbox.put(("eof", ""))
                return
            self.inbox.put(("frame", payload))

    def answer(self, timeout: float):
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None


# ---- the scene ------------------------------------------------------------------------


@dataclass
class Scene:
    root: Path  # the execroot (the worker's working directory)
    sandbox: Path

    @staticmethod
    def make(base: Path) -> Scene:
        root = base / "execroot"
        sb = root / "sb"
        (sb / "k").mkdir(parents=True)
        (sb / "out").mkdir()
        (root / "outside").mkdir()
        for k in KERNELS:
            shutil.copy(k, sb / "k" / k.name)
        (sb / "k" / "bad.vx").write_text("fn f() -> i32 { return x; }\n")
        (root / "secret.txt").write_text(SECRET + "\n")
        (sb / "escape").symlink_to("../outside")
        (sb / "k" / "leak.vx").symlink_to("../../secret.txt")
        (sb / "flags.txt").write_text("hir\n--out\nout/f.vxhir\n--src\nk/stream.vx\n")
        (sb / "loop.txt").write_text("@loop.txt\n")
        (sb / "binary.txt").write_bytes(b"\xff\xfe\x00hir\n")
        (sb / "secret-flags.txt").write_text("@../secret.txt\n")
        return Scene(root, sb)

    def outside_state(self) -> set[str]:
        """Every path under the execroot that is not in the sandbox (what a request
        must never create or change), with sizes."""
        out = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            d = Path(dirpath)
            if d == self.sandbox or self.sandbox in d.parents:
                dirnames[:] = []
                continue
            for f in filenames:
                p = d / f
                out.add(f"{p.relative_to(self.root)}:{p.lstat().st_size}")
            dirnames[:] = [x for x in dirnames if d / x != self.sandbox]
        return out


# ---- requests ---------------------------------------------------------------------------

# Paths a request may name, from the ordinary to the hostile.
GOOD_SRC = ["k/stream.vx", "k/stream_grid.vx", "k/seed.vx", "k/bad.vx"]
HOSTILE = [
    "/etc/passwd",
    "../secret.txt",
    "../../../../../../etc/passwd",
    "k/../../secret.txt",
    "k/leak.vx",  # a symlink out of the sandbox
    "escape/x.vx",
    "k",  # a folder
    "nonexistent.vx",
    "k/stream.vx\0x",
    "",
    "\udcff",
    "x" * 5000,
]
# Output paths; `{abs}` is the canary folder's absolute path.
HOSTILE_OUT = ["../outside/o.vxhir", "{abs}/o.vxhir", "escape/o.vxhir", "escape", "out", "k/x.vx"]
HOSTILE_DIR = ["../outside", "{abs}", "escape", "/", "out/../../outside", "k/stream.vx", ""]
FLAGFILES = [
    "@flags.txt",
    "@loop.txt",
    "@binary.txt",
    "@secret-flags.txt",
    "@/etc/passwd",
    "@../secret.txt",
    "@nonexistent",
    "@",
    "@@literal",
]


def good_args(rng: random.Random) -> list[str]:
    src = rng.choice(GOOD_SRC)
    if rng.random() < 0.5:
        return ["hir", "--out", f"out/{rng.randrange(4)}.vxhir", "--src", src]
    return [
        "build", "--hir", f"out/{rng.randrange(4)}.vxhir", "--src", src,
        "--target", rng.choice(TARGETS), "--out-dir", f"out/d{rng.randrange(4)}",
        "--emit", rng.choice(["vx-mlir", "vx-mlir", "target-ir", "artifact"]),
        "--cpu", "x86-64-v3",
    ]  # fmt: skip


def mutate_args(rng: random.Random, args: list[str], outside: str) -> list[str]:
    args = list(args)
    op = rng.randrange(9)
    flags = [i for i, a in enumerate(args) if a.startswith("--")]
    if op == 0 and flags:  # a path argument made hostile
        i = rng.choice(flags)
        if i + 1 < len(args):
            name = args[i]
            pool = (
                HOSTILE_OUT if name == "--out" else HOSTILE_DIR if name == "--out-dir" else HOSTILE
            )
            args[i + 1] = rng.choice(pool).replace("{abs}", outside)
    elif op == 1:
        args.insert(rng.randrange(len(args) + 1), rng.choice(FLAGFILES))
    elif op == 2 and args:
        del args[rng.randrange(len(args))]
    elif op == 3:
        args.insert(rng.randrange(len(args) + 1), rng.choice(["--machine", "--src"]))
        args.insert(rng.randrange(len(args) + 1), rng.choice(HOSTILE + GOOD_SRC))
    elif op == 4:
        args.append(rng.choice(["--tpu-instances", "--emit", "--cpu", "--link", "--bogus"]))
        args.append(rng.choice(["-1", "99999999999999999999", "x", "", "native", "none"]))
    elif op == 5:
        args = [rng.choice(FLAGFILES)]
    elif op == 6:
        args.insert(0, rng.choice(["", "build", "hir", "--help", "-h", "check"]))
    elif op == 7:
        args = [a + rng.choice(["\0", "\n", " ", "\udcff", "é"]) for a in args]
    return args


@dataclass
class Step:
    """What to send and what to expect: `answers` frames, the first with `request_id`."""

    data: bytes
    shown: str
    answers: int = 1
    request_id: int | None = 0
    cancel_of: int | None = None  # a request sent just before, then cancelled
    before: Callable[[], None] | None = None  # a change to the sandbox's files first
    expect_exit: int | None = None  # the exit code a correct worker answers


def _frame(req: WorkRequest) -> bytes:
    payload = req.SerializeToString()
    return framing.encode_varint(len(payload)) + payload


def _utf8(s: str) -> bool:
    try:
        s.encode()
        return True
    except UnicodeEncodeError:
        return False


def stale_steps(rng: random.Random, scene: Scene, rid: int) -> list[Step]:
    """A warm worker after its source changed (issue 25): the HIR action on a kernel,
    then the source replaced by a program with an error (or another --src, or a
    --machine that makes it fail), and a build that names the old .vxhir. The old
    .vxhir is stale, so the answer must be the new program's errors (exit 1)."""
    src = scene.sandbox / "k" / f"mut{rid}.vx"
    name = f"k/{src.name}"
    hir = ["hir", "--out", f"out/m{rid}.vxhir", "--src", name]
    build = ["build", "--hir", f"out/m{rid}.vxhir", "--src", name, "--target", "cpu",
             "--out-dir", f"out/m{rid}", "--emit", "vx-mlir"]  # fmt: skip
    good = (scene.sandbox / "k" / "stream.vx").read_bytes()
    how = rng.randrange(3)
    if how == 0:
        change, extra = (lambda: src.write_text("fn f() -> i32 { return x; }\n")), []
    elif how == 1:
        change, extra = (lambda: None), []
        build[build.index(name)] = "k/bad.vx"
    else:
        tiny = scene.sandbox / "k" / f"tiny{rid}.vx"
        tiny.write_text("Memory VMEM { within: Memory::CPU_DRAM, capacity: 1 KB }\n")
        change, extra = (lambda: None), ["--machine", f"k/{tiny.name}"]
    mk = lambda args, i, exp, before=None: Step(  # noqa: E731
        _frame(WorkRequest(arguments=args, request_id=i, sandbox_dir=str(scene.sandbox))),
        f"stale#{how} {args[:6]}", 1, i, before=before, expect_exit=exp,
    )  # fmt: skip
    return [
        mk(hir, rid, 0, before=lambda: src.write_bytes(good)),
        mk(build, rid + 1, 0),
        mk(build + extra, rid + 2, 1, before=change),
    ]


def make_step(rng: random.Random, scene: Scene, rid: int) -> Step:
    kind = rng.random()
    if kind < 0.08:  # a frame that is not a WorkRequest, or a bad size prefix
        junk = rng.choice(
            [
                b"\xff" * 10,  # a size prefix of 10 continuation bytes
                framing.encode_varint(5) + b"\xff\xff\xff\xff\xff",  # undecodable
                framing.encode_varint(3) + b"\x0a\x80\x01",
                framing.encode_varint(framing.MAX_FRAME + 1),  # over the limit
            ]
        )
        return Step(junk, f"bad frame {junk[:16]!r}", 1, 0)
    args = good_args(rng)
    if rng.random() < 0.75:
        for _ in range(rng.randint(1, 2)):
            args = mutate_args(rng, args, str(scene.root / "outside"))
    if any(not a.isascii() and not _utf8(a) for a in args):  # protobuf strings are UTF-8
        args = [a.encode("utf-8", "surrogateescape").decode("latin-1") for a in args]
    req = WorkRequest(arguments=args, request_id=rid, sandbox_dir=str(scene.sandbox))
    if rng.random() < 0.1:
        req.sandbox_dir = rng.choice(["", "relative/sb", "/nonexistent", str(scene.root)])
    if rng.random() < 0.1:
        req.verbosity = rng.choice([1, 10, -1])
    if rng.random() < 0.1:
        path = rng.choice([h for h in HOSTILE + GOOD_SRC if _utf8(h)])
        req.inputs.append(Input(path=path, digest=b"\x00" * 4))
    data = _frame(req)
    shown = repr([a[:60] for a in args])[:400] + f" sandbox={req.sandbox_dir[-20:]!r}"
    if rng.random() < 0.1:  # cancel it at once (maybe before it runs)
        data += _frame(WorkRequest(request_id=rid, cancel=True))
        return Step(data, "cancelled " + shown, 1, rid, cancel_of=rid)
    if rng.random() < 0.05:  # a cancel of nothing in flight: no answer
        data = _frame(WorkRequest(request_id=rid + 100000, cancel=True)) + data
    return Step(data, shown, 1, rid)


def _check_answer(step: Step, answer, report: Report) -> str | None:
    """None when the answer is per protocol, else the finding's kind and detail."""
    kind, payload = answer
    if kind != "frame":
        return f"protocol:{kind} {payload}"
    r = WorkResponse()
    try:
        r.ParseFromString(payload)
    except Exception as e:  # noqa: BLE001 - any decode failure is the finding
        return f"protocol:undecodable answer ({e})"
    report.exit_codes[r.exit_code] = report.exit_codes.get(r.exit_code, 0) + 1
    if step.request_id is not None and r.request_id != step.request_id:
        return f"protocol:answer for request {r.request_id}, expected {step.request_id}"
    if r.exit_code not in (0, 1, 2):
        return f"protocol:exit code {r.exit_code}"
    if step.expect_exit is not None and r.exit_code != step.expect_exit:
        return f"stale:exit {r.exit_code}, expected {step.expect_exit}: {r.output[:300]}"
    if r.was_cancelled and step.cancel_of is None:
        return "protocol:was_cancelled on a request nobody cancelled"
    if "internal compiler error" in r.output:
        return "internal:" + r.output[:600]
    if SECRET in r.output or PASSWD_MARK in r.output:
        return "sandbox-read:" + r.output[:400]
    return None


def run(seed: int, count: int, deadline: float = 60.0, base: Path | None = None) -> Report:
    rng = random.Random(seed)
    report = Report()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vxfuzz-worker-", dir=base) as tmp:
        scene = Scene.make(Path(tmp))
        before = scene.outside_state()
        worker = Worker(scene.root)
        pending: list[Step] = []
        for i in range(count):
            if not pending:
                pending = (
                    stale_steps(rng, scene, 10 * i + 1)
                    if rng.random() < 0.05
                    else [make_step(rng, scene, 10 * i + 1)]
                )
            step = pending.pop(0)
            if step.before is not None:
                step.before()
            report.requests += 1
            if not worker.send_raw(step.data):
                report.findings.append(Finding("died", step.shown, worker.tail()))
                worker = _restart(worker, scene, report)
                continue
            for _ in range(step.answers):
                answer = worker.answer(deadline)
                if answer is None:
                    report.findings.append(Finding("no-answer", step.shown, f"{deadline} s"))
                    worker = _restart(worker, scene, report)
                    break
                report.answers += 1
                bad = _check_answer(step, answer, report)
                if bad:
                    kind, _, detail = bad.partition(":")
                    report.findings.append(Finding(kind, step.shown, detail))
            if not worker.alive():
                report.findings.append(Finding("died", step.shown, worker.tail()))
                worker = _restart(worker, scene, report)
            after = scene.outside_state()
            if after != before:
                new = sorted(after - before)[:5]
                report.findings.append(Finding("sandbox-write", step.shown, f"changed: {new}"))
                _clean_outside(scene, before)
        # A stream that ends inside a frame: the worker logs it and exits cleanly.
        worker.send_raw(framing.encode_varint(100) + b"\x0a")
        worker.proc.stdin.close()
        try:
            rc = worker.proc.wait(deadline)
            if rc != 0:
                report.findings.append(Finding("died", "truncated last frame", f"exit {rc}"))
        except subprocess.TimeoutExpired:
            report.findings.append(Finding("no-answer", "truncated last frame", "did not exit"))
            worker.proc.kill()
            worker.proc.wait()
    report.seconds = time.perf_counter() - t0
    return report


def _restart(worker: Worker, scene: Scene, report: Report) -> Worker:
    worker.kill()
    report.restarts += 1
    return Worker(scene.root)


def _clean_outside(scene: Scene, before: set[str]) -> None:
    """Removes what a request wrote outside the sandbox, so one finding is reported once."""
    keep = {s.rsplit(":", 1)[0] for s in before}
    for dirpath, _, filenames in os.walk(scene.root / "outside"):
        for f in filenames:
            p = Path(dirpath) / f
            if str(p.relative_to(scene.root)) not in keep:
                p.unlink()
    (scene.root / "secret.txt").write_text(SECRET + "\n")
