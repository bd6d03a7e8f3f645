"""Verifier for vx modules: MLIR's own structural verifier, then the op table.

Every error names the op and its location; bad input yields errors, never an
exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxlib.mlir import ir

from vxc.ir.ops import OPS, OpDef, attr_ok, ring_layout, verify_call_placement


@dataclass(frozen=True)
class VerifyError:
    op: str
    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: '{self.op}' op {self.message}"


class IRVerificationError(ValueError):
    """Raised by `check_module` when verification finds errors."""

    def __init__(self, errors: list[VerifyError]):
        self.errors = errors
        super().__init__("vx IR verification failed:\n" + "\n".join(f"  {e}" for e in errors))


def _generic(op: ir.Operation, d: OpDef) -> list[str]:
    """Arity, type constraints and attribute kinds from the table."""
    errs: list[str] = []
    if len(op.operands) != len(d.operands):
        errs.append(f"expects {len(d.operands)} operand(s), got {len(op.operands)}")
    else:
        for spec, v in zip(d.operands, op.operands, strict=True):
            if not spec.type.check(v.type):
                errs.append(f"operand '{spec.name}' must be a {spec.type.summary}, got {v.type}")
    if len(op.results) != len(d.results):
        errs.append(f"expects {len(d.results)} result(s), got {len(op.results)}")
    else:
        for spec, r in zip(d.results, op.results, strict=True):
            if not spec.type.check(r.type):
                errs.append(f"result '{spec.name}' must be a {spec.type.summary}, got {r.type}")
    known = {a.name for a in d.attrs}
    for a in d.attrs:
        if a.name not in op.attributes:
            errs.append(f"missing attribute '{a.name}' ({a.kind})")
        elif not attr_ok(op.attributes[a.name], a.kind):
            want = "a string" if a.kind == "str" else "an i64 integer"
            errs.append(f"attribute '{a.name}' must be {want}, got {op.attributes[a.name]}")
    for i in range(len(op.attributes)):
        name = op.attributes[i].name
        if name not in known:
            errs.append(f"unknown attribute '{name}'")
    if len(op.regions) != 0:
        errs.append("must have no regions")
    return errs


def verify_op(op: ir.Operation) -> list[str]:
    """Error messages for one vx op (empty if it is well formed)."""
    d = OPS.get(op.name)
    if d is None:
        return [f"is not a vx op (known: {', '.join(sorted(OPS))})"]
    errs = _generic(op, d)
    if errs:
        return errs
    try:
        return d.verify(op)
    except Exception as e:  # noqa: BLE001 - a verifier bug must surface as an error, not a crash
        return [f"verifier failed on malformed input: {type(e).__name__}: {e}"]


def _rings(func: ir.Operation, out: list[VerifyError]) -> None:
    """Ops sharing a ring id rotate one counter, so they must agree on its layout."""
    seen: dict[int, tuple] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        well_formed = (op.name in OPS and not verify_op(op)) or (
            op.name == "func.call" and not verify_call_placement(op)
        )
        lay = ring_layout(op) if well_formed else None
        if lay is not None and lay.shared:
            key = (lay.space, lay.offset, lay.slots, lay.slot_bytes)
            if lay.ring in seen and seen[lay.ring] != key:
                out.append(
                    VerifyError(
                        op.name,
                        str(op.location),
                        f"ring {lay.ring} layout (space, offset, slots, slot_bytes) = {key} "
                        f"differs from an earlier op's {seen[lay.ring]}",
                    )
                )
            seen.setdefault(lay.ring, key)
        return ir.WalkResult.ADVANCE

    func.walk(visit)


_CURRENT_OP = re.compile(r'see current operation: (?:[^"]*= )?"([\w.]+)"')


def _diag_op(d: ir.DiagnosticInfo) -> str:
    """MLIR names the failing op only in a note; fall back to "mlir"."""
    for note in d.notes:
        m = _CURRENT_OP.search(note.message)
        if m:
            return m.group(1)
    return "mlir"


def _mlir_errors(module: ir.Module) -> list[VerifyError]:
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        return [
            VerifyError(_diag_op(d), str(d.location), f"{d.message} (MLIR verifier)")
            for d in e.error_diagnostics
        ] or [VerifyError("mlir", str(module.operation.location), str(e))]
    return []


def verify_module(module: ir.Module) -> list[VerifyError]:
    """All verification errors of `module` (empty list = valid)."""
    errors = _mlir_errors(module)
    top = module.operation
    if "vx.target" in top.attributes and not isinstance(top.attributes["vx.target"], ir.StringAttr):
        errors.append(
            VerifyError("builtin.module", str(top.location), "vx.target must be a string")
        )

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("vx."):
            errors.extend(VerifyError(op.name, str(op.location), m) for m in verify_op(op))
        elif op.name == "func.func":
            topo = op.attributes["vx.topology"] if "vx.topology" in op.attributes else None
            if topo is not None and not isinstance(topo, ir.StringAttr):
                errors.append(
                    VerifyError(op.name, str(op.location), "vx.topology must be a string")
                )
            _rings(op, errors)
        elif op.name == "func.call":
            errors.extend(
                VerifyError(op.name, str(op.location), m) for m in verify_call_placement(op)
            )
        return ir.WalkResult.ADVANCE

    top.walk(visit)
    return errors


def check_module(module: ir.Module) -> ir.Module:
    """`module` if it verifies, else raise IRVerificationError with every error."""
    errors = verify_module(module)
    if errors:
        raise IRVerificationError(errors)
    return module
