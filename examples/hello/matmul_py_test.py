"""A Python caller of this workspace's kernel: the artifact is a `data` dep,
`$(rootpath :matmul)` names it in the runfiles, and vxc.runtime (@vx//:vxc_py) loads it."""

import os
import unittest

import numpy as np

from vxc import runtime


class MatmulFromPython(unittest.TestCase):
    def test_matmul_matches_numpy(self):
        kernel = runtime.load(os.environ["VX_MATMUL_ARTIFACT"])
        rng = np.random.default_rng(1)
        x = rng.standard_normal((128, 128), dtype=np.float32)
        w = rng.standard_normal((128, 128), dtype=np.float32)
        np.testing.assert_allclose(kernel.matmul(x, w), x @ w, rtol=1e-4, atol=1e-3)


if __name__ == "__main__":
    unittest.main()
