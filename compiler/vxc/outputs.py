"""Writing compiler outputs: the one helper the CLI and the worker share.

A build's outputs (`stem.cpu.o`, `.h`, `.so`, `.json`; one `.vxhir`) appear as a set:
all of them or none.

1. Every file is written into a fresh temporary folder beside the destinations,
   `OUT/.vxc-set-<pid>-<random>/` (same file system, so renames are atomic), each
   file flushed, mode 0644 (what compilers give their outputs under the usual umask,
   whoever runs them: the CLI and the worker agree).
2. Once all are written, a commit record `.vxc-set-.../COMMIT` (the names, one a
   line) is written and renamed into place: the set is now complete on disk.
3. Each file is renamed over its destination, then the folder is removed.

A build killed before step 2 left a folder without a commit record: nothing of that
set reached a destination. A build killed during step 3 left a committed folder:
`recover(OUT)`, which every write into OUT runs first, finishes the renames (rolls the
set forward), so the outputs the killed build published are whole and together. Both
kinds of leftover are removed by the next build into the same folder; a folder whose
owner process is still alive (a concurrent build) is left alone.

Before step 3 every destination is checked (not a folder, its directory exists and
is writable), so an ordinary error (an output path that is a folder) stops the build
before any output changes.
"""

from __future__ import annotations

import os
import secrets
import shutil

SET_PREFIX = ".vxc-set-"
COMMIT = "COMMIT"
MODE = 0o644
# Temporary files of earlier versions of vxc (one file at a time): removed on sight.
LEGACY_PREFIXES = (".vxc-", ".vx-tmp-")


class OutputError(Exception):
    """An output that cannot be written (a path that is a folder, no permission, a NUL in
    the path, a full disk): the user's to fix, reported plainly by the drivers."""


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e)


def check_name(name: str) -> None:
    """Output names come from the compiler and are plain file names."""
    if not name or os.path.basename(name) != name or name.startswith(".") or "\0" in name:
        raise ValueError(f"compiler returned an output name that is not a file name: {name!r}")


def write_set(out_dir: str, files: dict[str, bytes], _between=None) -> list[str]:
    """Write `files` (name -> bytes) into `out_dir` as one set; returns the paths written.

    `_between(name)` runs after each rename (tests use it to kill the process mid-set).
    """
    for name in files:
        check_name(name)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except (OSError, ValueError) as e:
        raise OutputError(f"cannot create output folder `{out_dir}`: {_describe(e)}") from e
    if not os.path.isdir(out_dir):
        raise OutputError(f"cannot write into `{out_dir}`: not a folder")
    recover(out_dir)
    for name in files:
        dest = os.path.join(out_dir, name)
        if os.path.isdir(dest):
            raise OutputError(f"cannot write `{dest}`: it is a folder")
    staging = os.path.join(out_dir, f"{SET_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.mkdir(staging, 0o755)
        for name, data in files.items():
            _write_file(os.path.join(staging, name), data)
        record = "".join(f"{n}\n" for n in files).encode()
        _write_file(os.path.join(staging, COMMIT + ".tmp"), record)
        os.replace(os.path.join(staging, COMMIT + ".tmp"), os.path.join(staging, COMMIT))
        _fsync_dir(staging)
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, OSError | ValueError):
            raise OutputError(f"cannot write into `{out_dir}`: {_describe(e)}") from e
        raise
    written = _publish(staging, out_dir, list(files), _between)
    return written


def write_atomic(path: str, data: bytes) -> None:
    """One output file, atomically (a set of one)."""
    directory, name = os.path.split(path)
    write_set(directory or ".", {name: data})


def _write_file(path: str, data: bytes) -> None:
    view = memoryview(data)  # TypeError before anything exists for what is not bytes
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, MODE)
    try:
        os.fchmod(fd, MODE)  # whatever the umask: outputs are 0644
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(staging: str, out_dir: str, names: list[str], between=None) -> list[str]:
    """Step 3: rename each committed file into place, then drop the folder."""
    written = []
    for name in names:
        src = os.path.join(staging, name)
        dest = os.path.join(out_dir, name)
        if os.path.exists(src):  # absent: published before a kill, on roll-forward
            try:
                os.replace(src, dest)
            except OSError as e:
                raise OutputError(f"cannot write `{dest}`: {_describe(e)}") from e
        written.append(dest)
        if between is not None:
            between(name)
    _fsync_dir(out_dir)
    shutil.rmtree(staging, ignore_errors=True)
    return written


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own leftovers (a failed earlier set in this process)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(out_dir: str) -> list[str]:
    """Finish or discard what killed builds left in `out_dir`; returns what was done
    (`rolled forward NAME` / `removed NAME`), for tests and logs."""
    done: list[str] = []
    try:
        entries = sorted(os.listdir(out_dir))
    except OSError:
        return done
    for entry in entries:
        path = os.path.join(out_dir, entry)
        if entry.startswith(SET_PREFIX) and os.path.isdir(path):
            pid_part = entry[len(SET_PREFIX) :].split("-", 1)[0]
            if pid_part.isdigit() and _alive(int(pid_part)):
                continue  # a build in progress
            commit = os.path.join(path, COMMIT)
            if os.path.isfile(commit):
                with open(commit, encoding="utf-8") as f:
                    names = [n for n in f.read().splitlines() if n]
                for n in names:
                    check_name(n)
                _publish(path, out_dir, names)
                done.append(f"rolled forward {entry}")
            else:
                shutil.rmtree(path, ignore_errors=True)
                done.append(f"removed {entry}")
        elif entry.startswith(LEGACY_PREFIXES) and os.path.isfile(path):
            if entry.endswith(".tmp") or entry.startswith(".vx-tmp-"):
                os.unlink(path)
                done.append(f"removed {entry}")
    return done
