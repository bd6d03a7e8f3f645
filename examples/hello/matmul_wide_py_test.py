"""The cpu-only kernel from Python with the slim runtime (@vx//:runtime): the runfiles
hold vxc.runtime, numpy, the interpreter and the artifact, nothing of jax, libtpu, the
CUDA wheels or the compiler, and weigh under 50 MB (the locked environment: 1.8 GB)."""

import os
import sys
import unittest

import numpy as np

from vxc import runtime

ARTIFACT = sys.argv.pop(1) if len(sys.argv) > 1 else ""  # $(rootpath :matmul_wide)
LIMIT = 50 << 20
HEAVY = ("/jax/", "/jaxlib/", "/libtpu/", "/nvidia/", "/llvmlite/", "/z3/", "/lark/", "/vxc/api.py")


def runfiles_files() -> list[str]:
    root = os.environ.get("RUNFILES_DIR") or os.environ["TEST_SRCDIR"]
    found = []
    for d, _, files in os.walk(root, followlinks=True):
        found += [os.path.join(d, f) for f in files]
    return found


class MatmulWideFromPython(unittest.TestCase):
    def test_matmul_wide_matches_numpy(self):
        kernel = runtime.load(ARTIFACT)
        rng = np.random.default_rng(2)
        x = rng.standard_normal((256, 256), dtype=np.float32)
        w = rng.standard_normal((256, 256), dtype=np.float32)
        np.testing.assert_allclose(kernel.matmul_wide(x, w), x @ w, rtol=1e-4, atol=1e-3)

    def test_numpy_comes_from_the_runfiles(self):
        # Not from the base interpreter's own site-packages, which may hold another numpy.
        self.assertIn("vx_python", np.__file__)

    def test_runfiles_are_slim(self):
        files = runfiles_files()
        heavy = [f for f in files if any(h in f for h in HEAVY)]
        self.assertEqual(heavy, [])
        # Each file once, as `du -L` counts: Bazel 4's legacy external runfiles list every
        # external file twice (<repo>/... and <workspace>/external/<repo>/...), one inode.
        inodes = {(st.st_dev, st.st_ino): st.st_size for st in map(os.stat, files)}
        total = sum(inodes.values())
        print(f"runfiles: {len(files)} paths, {len(inodes)} files, {total} B")
        self.assertLess(total, LIMIT)


if __name__ == "__main__":
    unittest.main()
