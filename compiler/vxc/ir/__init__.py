"""The `vx` MLIR dialect: op table, builders, verifier, text form.

HIR -> vx lowering lives in `vxc.ir.from_hir`; backends consume verified
modules.
"""

import os

# jaxlib's C++ logging (XLA, PJRT, libtpu) reads its level once, when the library loads,
# and this package is where vxc first loads it: from here on only errors reach stderr
# (INFO/WARNING lines are noise in a compiler's output; real failures reach the user as
# exceptions). A level the user set wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from vxc.ir.builders import BuildError, build
from vxc.ir.context import make_context
from vxc.ir.ops import OPS, OpDef
from vxc.ir.printer import IRParseError, parse_module, print_module
from vxc.ir.verify import IRVerificationError, VerifyError, check_module, verify_module

__all__ = [
    "OPS",
    "BuildError",
    "IRParseError",
    "IRVerificationError",
    "OpDef",
    "VerifyError",
    "build",
    "check_module",
    "make_context",
    "parse_module",
    "print_module",
    "verify_module",
]
