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
owner process is still alive (a concurrent build) is left alone. Recovery follows no
link (it works through folder descriptors opened with O_NOFOLLOW): a staging name
that is a link is left alone, only regular files of a folder move, and a COMMIT that
is not a regular record of plain file names discards its folder.

Before step 3 every destination is checked (not a folder, its directory exists and
is writable), so an ordinary error (an output path that is a folder) stops the build
before any output changes.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat

SET_PREFIX = ".vxc-set-"
COMMIT = "COMMIT"
MODE = 0o644
MAX_RECORD = 1 << 20  # a COMMIT lists a handful of names; a larger one is not vxc's
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
    out_fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return _publish(out_dir, out_fd, os.path.basename(staging), list(files), _between)
    finally:
        os.close(out_fd)


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


def _regular(dir_fd: int, name: str) -> bool:
    """Whether `name` in the folder is a regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_folder(name: str, dir_fd: int) -> int | None:
    """The folder `name` in `dir_fd`, opened without following a link, or None."""
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None


def _publish(out_dir: str, out_fd: int, staging: str, names: list[str], between=None) -> list[str]:
    """Step 3: rename each committed file of the folder `staging` (in `out_fd`) into
    place, then drop the folder. Everything goes through folder descriptors opened
    without following links, and only regular files move: a folder or a file of the
    set that is a link (planted; vxc writes none) is never followed into OUT."""
    sfd = _open_folder(staging, out_fd)
    if sfd is None:
        raise OutputError(f"cannot write into `{out_dir}`: its staging folder is gone")
    written = []
    try:
        for name in names:
            # Absent: published before a kill (on roll-forward); a link: not ours.
            if _regular(sfd, name):
                try:
                    os.replace(name, name, src_dir_fd=sfd, dst_dir_fd=out_fd)
                except OSError as e:
                    dest = os.path.join(out_dir, name)
                    raise OutputError(f"cannot write `{dest}`: {_describe(e)}") from e
            written.append(os.path.join(out_dir, name))
            if between is not None:
                between(name)
        os.fsync(out_fd)
    finally:
        os.close(sfd)
    shutil.rmtree(staging, dir_fd=out_fd, ignore_errors=True)  # never follows a link
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


def _commit_record(sfd: int) -> list[str] | None:
    """The names a staging folder's COMMIT lists; None when there is no record or it is
    not one vxc wrote (a link, not a regular file, not UTF-8, a name that is not a
    plain file name, oversized): such a folder is discarded like an uncommitted one."""
    try:  # O_NONBLOCK: a planted FIFO must not hang the build
        fd = os.open(COMMIT, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=sfd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_RECORD + 1)
    try:
        names = [n for n in data.decode("utf-8").splitlines() if n]
        for n in names:
            check_name(n)
    except ValueError:  # UnicodeDecodeError too
        return None
    return names if len(data) <= MAX_RECORD else None


def _recover_set(out_dir: str, out_fd: int, entry: str) -> str | None:
    """Rolls the staging folder `entry` forward or removes it; None: left alone (a link
    or a file, which vxc never makes, or the folder of a build still running)."""
    pid_part = entry[len(SET_PREFIX) :].split("-", 1)[0]
    sfd = _open_folder(entry, out_fd)
    if sfd is None:
        return None
    try:
        if pid_part.isdigit() and _alive(int(pid_part)):
            return None  # a build in progress
        names = _commit_record(sfd)
    finally:
        os.close(sfd)
    if names is None:
        shutil.rmtree(entry, dir_fd=out_fd, ignore_errors=True)
        return "removed"
    _publish(out_dir, out_fd, entry, names)
    return "rolled forward"


def recover(out_dir: str) -> list[str]:
    """Finish or discard what killed builds left in `out_dir`; returns what was done
    (`rolled forward NAME` / `removed NAME`), for tests and logs. Nothing is followed
    through a link: an entry that is a link is left alone, whatever its name."""
    done: list[str] = []
    try:
        out_fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return done
    try:
        for entry in sorted(os.listdir(out_fd)):
            if entry.startswith(SET_PREFIX):
                what = _recover_set(out_dir, out_fd, entry)
                if what is not None:
                    done.append(f"{what} {entry}")
            elif entry.startswith(LEGACY_PREFIXES) and _regular(out_fd, entry):
                if entry.endswith(".tmp") or entry.startswith(".vx-tmp-"):
                    os.unlink(entry, dir_fd=out_fd)
                    done.append(f"removed {entry}")
    finally:
        os.close(out_fd)
    return done
