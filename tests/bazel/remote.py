"""Helpers of the remote cache and remote execution tests (and their benchmark):
copies of this repository at other paths, each with its own HOME and an empty
output_user_root, built by real Bazel against a server on loopback; Bazel's
execution log says which VxCompile spawns were remote cache hits.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bazelrun import CACHE, JOBS, ROOT

REMOTE = CACHE / "remote"
CONFIGS = ("cpu", "tpu", "b200", "h100")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class HttpCache:
    """tools/http_cache.sh (Debian's nginx with WebDAV) on a free loopback port,
    serving an empty directory."""

    def __init__(self, directory: Path):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        self.dir = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(ROOT / "tools" / "http_cache.sh"), str(directory), str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=open(directory / "server.log", "w"),
        )
        wait_for_port(self.port, self.proc, timeout=300)  # may apt-get install nginx first

    def stop(self) -> None:
        stop(self.proc)


def bot_python() -> str:
    """A throwaway venv for the fixture bot: grpcio, protobuf and BuildGrid's
    generated protos (the package itself is not imported, so its Python >= 3.13
    requirement does not apply here)."""
    venv = REMOTE / "bot-venv"
    py = venv / "bin" / "python"
    if not py.exists():
        tmp = REMOTE / "bot-venv.partial"
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(tmp)], check=True)
        pip = [str(tmp / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "grpcio", "protobuf"], check=True, capture_output=True)
        subprocess.run(
            [*pip, "--no-deps", "--ignore-requires-python", "buildgrid==0.9.1"],
            check=True,
            capture_output=True,
        )
        tmp.rename(venv)
    return str(py)


def start_bot(port: int, work: Path, log: Path) -> subprocess.Popen:
    """The test-fixture bot (fixtures/reapi_bot.py) serving BuildGrid's instance "main"."""
    return subprocess.Popen(
        [
            bot_python(),
            str(ROOT / "tests" / "bazel" / "fixtures" / "reapi_bot.py"),
            f"--server=127.0.0.1:{port}",
            "--instance=main",
            f"--work={work}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
    )


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [
        r for r in out.split("\0") if r and (ROOT / r).is_file() and not (ROOT / r).is_symlink()
    ]


def copy_repository(dest: Path) -> Path:
    """A clone: this repository's files (tracked and untracked, not ignored) at dest."""
    shutil.rmtree(dest, ignore_errors=True)
    for rel in tracked_files():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def spawns(log: Path) -> list[dict]:
    """The spawns of Bazel's --execution_log_json_file (concatenated JSON objects)."""
    text = log.read_text()
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


@dataclass
class BuildResult:
    wall_s: float
    vxcompile: int  # VxCompile spawns
    hits: int  # ... of which remote cache hits
    runners: dict[str, int] = field(default_factory=dict)
    stderr: str = ""


@dataclass
class Clone:
    """A checkout at `path` (its workspace: the repository, or examples/ in it),
    built with HOME=`home` and output_user_root `root` (emptied by fresh())."""

    path: Path
    home: Path
    root: Path
    bazel: str
    subdir: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def ws(self) -> Path:
        return self.path / self.subdir if self.subdir else self.path

    def fresh(self) -> None:
        if self.root.exists():
            self.shutdown()  # a server of an earlier run would write there
            # out of the way first: a server still winding down may write there
            old = self.root.with_name(f"{self.root.name}.old-{time.monotonic_ns()}")
            self.root.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)

    def bazel_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "VX_", "VIRTUAL_ENV", "BAZEL"))
        }
        # pip's download cache is not Bazel's: sharing it only spares the index.
        env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
        env["HOME"] = str(self.home)
        env.update(self.env)
        return env

    def run(self, *args: str, check: bool = True, timeout: int = 1800):
        cmd = [
            self.bazel,
            f"--output_user_root={self.root}",
            "--max_idle_secs=300",
            *args[:1],
            *(
                [f"--jobs={JOBS}", "--color=no", "--curses=no"]
                if args[0] in ("build", "test")
                else []
            ),
            *args[1:],
        ]
        p = subprocess.run(
            cmd, cwd=self.ws, capture_output=True, text=True, timeout=timeout, env=self.bazel_env()
        )
        if check and p.returncode != 0:
            raise AssertionError(
                f"{' '.join(cmd)} in {self.ws} exited {p.returncode}\n{p.stderr[-6000:]}"
            )
        return p

    def targets(self, config: str, pattern: str) -> list[str]:
        """`pattern` for a config whose backend exists; otherwise what of it builds
        today: everything but the artifact kernels (and what depends on them)."""
        target = config
        backend = {"b200": "nvidia", "h100": "nvidia"}.get(target, target)
        if (self.path / "compiler" / "vxc" / "backends" / backend).exists():
            return [pattern]
        q = f'{pattern} except rdeps({pattern}, attr(emit, "^artifact$", {pattern}))'
        p = self.run("query", q, "--output=label", "--color=no", "--curses=no")
        return [t for t in p.stdout.split() if t.startswith(("//", "@"))]

    def build(self, config: str, targets: list[str], *flags: str) -> BuildResult:
        log = self.root / f"exec-{config}-{time.monotonic_ns()}.json"
        t0 = time.monotonic()
        p = self.run(
            "build",
            f"--config={config}",
            f"--execution_log_json_file={log}",
            *flags,
            "--",
            *targets,
        )
        wall = time.monotonic() - t0
        vx = [s for s in spawns(log) if s.get("mnemonic") == "VxCompile"]
        runners: dict[str, int] = {}
        for s in vx:
            runners[s.get("runner", "")] = runners.get(s.get("runner", ""), 0) + 1
        return BuildResult(
            wall_s=wall,
            vxcompile=len(vx),
            hits=sum(1 for s in vx if s.get("remoteCacheHit")),
            runners=runners,
            stderr=p.stderr,
        )

    def outputs(self, package: str) -> dict[str, str]:
        """sha256 of every output file of `package` in every configuration."""
        out_dir = self.ws / "bazel-out"
        digests = {}
        for f in sorted(out_dir.glob(f"*/bin/{package}/**/*")):
            rel = f.relative_to(out_dir)
            # param files are written by the actions that ran here, not outputs
            if f.is_file() and ".runfiles" not in str(rel) and not f.name.endswith(".params"):
                digests[str(rel)] = hashlib.sha256(f.read_bytes()).hexdigest()
        return digests

    def shutdown(self) -> None:
        self.run("shutdown", check=False, timeout=120)
