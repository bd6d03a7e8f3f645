"""Renders docs/IR.md from the op table (`python -m vxc.ir.docs > docs/IR.md`)."""

from __future__ import annotations

from vxc.ir.ops import CALL_PLACEMENT, OPS, OpDef

_PREAMBLE = """\
# The vx dialect

Generated from `compiler/vxc/ir/ops.py` by `python -m vxc.ir.docs`; a test
checks that this file matches the table. Do not edit by hand.

vx ops are unregistered generic MLIR operations (jaxlib ships no IRDL) and the
token type is opaque. Conventions every producer and backend follows:

- A tensor placed in Vx memory space X is `memref<d0xd1xE, "X">` (builtin
  memref, memory space = string attribute naming the space).
- A `Vec<Tensor<E, [d0, d1]>>` in X is `memref<?xd0xd1xE, "X">`.
- A token is `!vx.token<memref<d0xd1xE, "X">>`: the placed tensor it yields.
- Scalars: `i1`, `i32`, `i64`, `f32`, `index`.
- Kernels are `func.func` with attribute `vx.topology = "TensorCore"`; extern
  declarations are `func.func private`; the module carries `vx.target` (the target whose
  plan sized it; `backends.emit_target` refuses to build it for another).
  An argument may carry `{vx.name = "..."}`: backends use it to name the
  parameter in headers and manifests; `vx.mut` marks a `&mut` parameter (an
  extern declaration's C prototype is non-`const` exactly for those).
- Launch (LANGUAGE.md §4.1): a kernel entry (a `func.func` that is neither
  private nor a declaration) carries `vx.launch = "instances"`: its caller runs
  it as `N >= 1` instances that share the arguments (read-only), and receives
  result `memref<d0x..xE>` as `N x d0 x .. x E`, the instances' results stacked
  along a new leading axis in instance order (a scalar result becomes `N`
  values; a kernel never returns a token). Inside, `vx.instance` and
  `vx.instances` read the grid; helpers see the grid of the instance that
  called them. A plain call (or `N = 1`) has `instance = 0`, `instances = 1`.
- Loops are `scf.for` over `index` (loop-carried tokens and tensors are
  `iter_args`), branches `scf.if`; scalars use `arith`.
- Scratchpad rings: ops with the same `ring` id (>= 0) in one function share
  one counter and must agree on `space`, `offset`, `slots`, `slot_bytes`.
  Each execution uses `slot = counter++ mod slots` at byte address
  `base(space) + offset + slot * slot_bytes`. `ring = -1` means no scratchpad
  allocation: `offset`/`slots` are ignored and each op site owns one buffer
  that each execution overwrites.
- Builders fill attributes that have no default from the operands where they
  can (`from` = the operand's space, `slot_bytes` = its granule-rounded size);
  the verifier requires every listed attribute to be present.
- `print_module` prints vx ops in generic form with attributes sorted;
  `parse_module(print_module(m))` prints identically.
"""


def _op_section(d: OpDef) -> str:
    lines = [f"## `{d.name}`", "", d.doc, ""]
    if d.operands:
        lines += ["| operand | type | meaning |", "|---|---|---|"]
        lines += [
            f"| `{o.name}{'...' if o.variadic else ''}` | {o.type.summary} | {o.doc} |"
            for o in d.operands
        ]
        lines.append("")
    if d.results:
        lines += ["| result | type | meaning |", "|---|---|---|"]
        lines += [f"| `{r.name}` | {r.type.summary} | {r.doc} |" for r in d.results]
        lines.append("")
    if d.attrs:
        lines += ["| attribute | type | builder default | meaning |", "|---|---|---|---|"]
        for a in d.attrs:
            default = "none" if a.default is None else f"`{a.default!r}`"
            lines.append(f"| `{a.name}` | {a.kind} | {default} | {a.doc} |")
        lines.append("")
    lines += [f"Verifier: {d.verifier_doc}", ""]
    return "\n".join(lines)


def _call_section() -> str:
    lines = [
        "## `func.call` placement",
        "",
        "A call whose tensor or token result the plan placed in a scratchpad ring of the",
        "caller carries these attributes (all of them or none); the result then lives in",
        "that ring's slot, rotated like a transfer's destination.",
        "",
        "| attribute | type | meaning |",
        "|---|---|---|",
        *(f"| `{a.name}` | {a.kind} | {a.doc} |" for a in CALL_PLACEMENT),
        "",
        "Verifier: all or none; one tensor or token result; slot_bytes >= its bytes; "
        "slots >= 1; the ring's layout agrees with every other op of that ring.",
        "",
    ]
    return "\n".join(lines)


def _passes_section() -> str:
    from vxc.stages import PASSES

    return "\n".join(
        [
            "## Passes",
            "",
            "Between the verified module and a backend run the vx -> vx passes that backend",
            "declares (`Backend.stages`, in `vxc/backends/<family>`), in order, the module",
            "verified after each; `vxc build --emit vx-mlir:after=PASS` prints the module",
            "after one of them. Today every backend runs all of them, in this order.",
            "",
            "| pass | what it does |",
            "|---|---|",
            *(f"| `{p.name}` | {p.summary} |" for p in PASSES.values()),
            "",
        ]
    )


def render() -> str:
    ops = "\n".join(_op_section(d) for d in OPS.values())
    return _PREAMBLE + "\n" + ops + "\n" + _call_section() + "\n" + _passes_section()


if __name__ == "__main__":
    print(render(), end="")
