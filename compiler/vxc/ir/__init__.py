"""The `vx` MLIR dialect: op table, builders, verifier, text form.

HIR -> vx lowering lives in `vxc.ir.from_hir`; backends consume verified
modules.
"""

# First: loads jaxlib (its log level, MLIR without numpy) before any module below does.
from vxc.ir import mlir as _mlir  # noqa: F401  (isort: first)
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
