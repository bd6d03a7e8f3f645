"""A Python caller of the stream kernel through ordinary Bazel deps: the artifact is a
`data` dep, `$(rootpath :stream)` names it in the runfiles, vxc.runtime loads it."""

import os
import unittest

import numpy as np

from vxc import runtime


class StreamFromPython(unittest.TestCase):
    def test_stream_matches_numpy(self):
        kernel = runtime.load(os.environ["VX_STREAM_ARTIFACT"])
        rng = np.random.default_rng(7)
        for n in (1, 2, 5):
            tiles = rng.standard_normal((n, 128, 128), dtype=np.float32)
            w = rng.standard_normal((128, 128), dtype=np.float32)
            got = kernel.stream(tiles, w)
            want = np.einsum("nij,jk->ik", tiles.astype(np.float64), w.astype(np.float64))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * n)


if __name__ == "__main__":
    unittest.main()
