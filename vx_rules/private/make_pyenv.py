"""Creates the locked environment for @vx_python (run by python_env.bzl at fetch time).

    python make_pyenv.py BASE_PYTHON REQUIREMENTS_LOCK STORE_DIR

Builds a venv beside STORE_DIR, installs the lock with --require-hashes --no-deps,
rewrites pyvenv.cfg without the creating command line (it held a temporary path,
and pyvenv.cfg is an action input), marks it complete and renames it into place, so
a STORE_DIR that exists is always whole. Concurrent creators race harmlessly: the
first rename wins and the others discard their copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile


def main() -> int:
    base, lock, store = sys.argv[1:4]
    parent = os.path.dirname(store)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(store) + ".partial-", dir=parent)
    try:
        subprocess.run([base, "-m", "venv", "--clear", tmp], check=True)
        py = os.path.join(tmp, "bin", "python3")
        subprocess.run(
            [
                py,
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-q",
                "--require-hashes",
                "--no-deps",
                "-r",
                lock,
            ],
            check=True,
        )
        cfg = os.path.join(tmp, "pyvenv.cfg")
        with open(cfg, encoding="utf-8") as f:
            lines = [ln for ln in f if not ln.startswith("command")]
        with open(cfg, "w", encoding="utf-8") as f:
            f.writelines(lines)
        with open(os.path.join(tmp, ".complete"), "w") as f:
            f.write(lock + "\n")
        try:
            os.rename(tmp, store)
        except OSError:
            if not os.path.exists(os.path.join(store, ".complete")):
                raise
        return 0
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
