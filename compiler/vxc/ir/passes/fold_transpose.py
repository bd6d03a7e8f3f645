"""The pass `fold-transpose`: a `vx.transpose` feeding `vx.matmul_acc` becomes the
matmul's `transpose` attribute, so the matmul reads its source in transposed order
and no transposed tile is ever made (the MXU's dimension numbers on tpu, the MMA's
operand layout on nvidia, the operand packing on cpu).

A transpose folds when its one use is the `a` or `b` operand of the `matmul_acc` right
after it (only other folding transposes in between), the backend reads that operand
transposed (`Backend.matmul_transposes`: nvidia's MMA takes B only), and the matmul
does not write its source. Right after, because the plan may give the transpose's
source slot to a later tile once the transpose was its last read: with nothing in
between, nothing has written it when the matmul reads it. A transpose with any other
use stays, and the backend lowers (or refuses) it as a tile op.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.ir.ops import MatmulAccOp, buffer_root

OPERANDS = {1: "a", 2: "b"}  # matmul_acc operand number -> the attribute's letter


def _folds(t: ir.Operation, mm: ir.Operation, allowed: frozenset[str]) -> int | None:
    """The operand number of `mm` that transpose `t` folds into, or None."""
    if t.name != "vx.transpose":
        return None
    uses = list(t.results[0].uses)
    if len(uses) != 1 or uses[0].owner != mm or OPERANDS.get(uses[0].operand_number) not in allowed:
        return None
    if buffer_root(mm.operands[0]) == buffer_root(t.operands[0]):
        return None  # the matmul writes the source it would read
    return uses[0].operand_number


def _block_folds(ops: list[ir.Operation], allowed: frozenset[str]):
    """(transpose, matmul, operand number) for each fold in one block."""
    for at, mm in enumerate(ops):
        if mm.name != "vx.matmul_acc":
            continue
        for t in reversed(ops[:at]):
            i = _folds(t, mm, allowed)
            if i is None:
                break
            yield t, mm, i


def _folds_in(op: ir.Operation, allowed: frozenset[str]):
    for region in op.regions:
        for block in region.blocks:
            ops = [o.operation for o in block.operations]
            yield from _block_folds(ops, allowed)
            for o in ops:
                yield from _folds_in(o, allowed)


def run(module: ir.Module, backend) -> None:
    allowed = frozenset(backend.matmul_transposes)
    with module.context:
        for t, mm, i in list(_folds_in(module.operation, allowed)):
            letters = set(MatmulAccOp(mm).transpose) | {OPERANDS[i]}
            mm.operands[i] = t.operands[0]
            mm.attributes["transpose"] = ir.StringAttr.get("".join(sorted(letters)))
            t.erase()
