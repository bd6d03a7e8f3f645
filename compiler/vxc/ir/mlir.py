"""How vxc loads jaxlib's MLIR bindings: `vxc.ir` imports this module before anything
else of jaxlib, so every vxc module that lowers gets them as set up here."""

import os
import sys

# jaxlib's C++ logging (XLA, PJRT, libtpu) reads its level once, when the library loads,
# and vxc.ir is where vxc first loads it: from here on only errors reach stderr
# (INFO/WARNING lines are noise in a compiler's output; real failures reach the user as
# exceptions). A level the user set wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _load_mlir_without_numpy() -> None:
    """Import jaxlib's MLIR bindings without numpy when nothing has loaded numpy yet.

    `jaxlib.mlir.ir` imports numpy (optionally: it catches the ImportError) only to register
    the builders of four dense-elements attribute kinds (F64/I32/I64/IndexElementsAttr)
    that turn a Python list into an attribute for ops of stablehlo, mhlo and llvm; the vx
    dialect and the upstream dialects vxc builds never take one, and jax passes those ops
    attributes it built itself. numpy costs 55-80 ms of a cold `vxc check` (Zen 4),
    more than all of vxc's modules, for a process that never makes an array (issue 36).
    numpy is importable again as soon as MLIR is loaded; a process that had loaded numpy
    first gets the bindings as jaxlib makes them."""
    if "numpy" in sys.modules or "jaxlib.mlir.ir" in sys.modules:
        return
    sys.modules["numpy"] = None  # `import numpy` raises ImportError while this is set
    try:
        import jaxlib.mlir.ir  # noqa: F401
    finally:
        del sys.modules["numpy"]


_load_mlir_without_numpy()
