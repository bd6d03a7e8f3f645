"""A Python caller of a kernel with an output, built from a generic entry with Bazel's
`vx_kernel(consts = {"R": "256"})`: the entry is `rows__256`, and the caller's array
is written in place."""

import os
import unittest

import numpy as np

from vxc import runtime


class RowsFromPython(unittest.TestCase):
    def test_the_output_is_written_in_place(self):
        kernel = runtime.load(os.environ["VX_ROWS_ARTIFACT"])
        x = np.arange(256 * 128, dtype=np.float32).reshape(256, 128)
        y = np.zeros_like(x)
        self.assertIsNone(kernel.rows__256(x, y))
        np.testing.assert_array_equal(y, x)
        with self.assertRaises(runtime.ArgumentError):  # R is 256: a 128-row output
            kernel.rows__256(x, np.zeros((128, 128), np.float32))


if __name__ == "__main__":
    unittest.main()
