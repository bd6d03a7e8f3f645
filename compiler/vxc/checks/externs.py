"""An `extern fn` that writes shared memory (E6042), proved with the seam checker's facts.

An extern is C code: the checker cannot see which part of a `&mut` argument it writes,
so it writes all of it. Passed a kernel's own tensor parameter (or a view of one: memory
every instance shares), each instance writes the whole region, and two instances race on
it unless the launch has one instance. The seam checker (checks/seams.py) asks this at
each call, under the path condition: `instances() == 1` must follow from the facts (the
`where` clauses), or it is E6042 with the launch z3 finds. A tile of the function's own
is per instance and free to pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vxc.checks.obligations import extern_outputs

if TYPE_CHECKING:
    import z3

    from vxc.checks.seams import SeamChecker
    from vxc.hir import nodes as H
    from vxc.hir.program import Function


def check_extern_outputs(
    checker: SeamChecker, call: H.Call, callee: Function, pc: z3.BoolRef
) -> None:
    """E6042 at a call of an extern that writes (part of) an output, unless the facts
    prove the launch has one instance."""
    from vxc.hir.nodes import show_expr

    if not checker.emit:
        return
    args = extern_outputs(call, checker.fn, checker.functions)
    if not args:
        return
    what = f"that `{callee.decl.name}` runs in one instance"
    model = checker._model([*checker.assume, pc, checker.INSTANCES != 1], call.span, what)
    if model is None or model is checker.UNDECIDED:
        return  # proved, or E6015 (reported)
    n = model.eval(checker.INSTANCES, model_completion=True)
    shown = show_expr(args[0])
    checker.sink.emit(
        "E6042",
        f"every instance writes all of `{shown}` through `extern fn {callee.decl.name}`",
        args[0].span,
        notes=[
            "an `extern fn` writes its `&mut` argument as a whole (the checker cannot see "
            f"which part), and `{shown}` is shared by every instance: with {n} instances "
            "they all write it",
            f"z3 counterexample: instances() = {n}",
        ],
        help=f"add `where instances() == 1` to `{checker.fn.decl.name}`, or pass the extern "
        "a tile of the instance's own and store it to a view that depends on `instance()`",
    )
