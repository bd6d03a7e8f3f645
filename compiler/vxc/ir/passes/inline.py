"""Helpers inlined into their kernels: the one call lowering every target shares.

TARGETS.md: "A Vx helper function is inlined into its kernel on every target". A TPU
artifact is one Mosaic kernel and a GPU kernel one PTX entry, so a call has no
equivalent there; doing it here, on the vx dialect between the HIR lowering and the
backends, means no backend keeps a call lowering of its own for Vx helpers (calls to
`extern fn` stay calls: the CPU links them, the device backends refuse them).

Each call to a private function with a body is replaced by a copy of that body:

- arguments are bound to the call's operands (a tile stays where the caller put it,
  a `&mut` tensor is the caller's buffer, so writes reach it);
- the helper's scratchpad rings are its call frame, stacked above the caller's: ring
  ids after the caller's, byte offsets after the caller's last byte in that space, so
  the copy never shares a slot with a tile of the caller's (two calls one after the
  other may share the frame: a helper's tiles die when it returns);
- a result the plan placed in a ring of the caller's (`func.call` placement attributes,
  `let next = start(x, i)` ping-ponging in a loop) is produced directly in that slot:
  the op that makes the returned tile or token takes the call's layout;
- every copied op's location becomes `callsite(helper line at call line)`, so a
  refusal inside the helper names the helper's line (`loc.span_of`) and the call
  (`loc.call_sites`).

Helpers are inlined callees first, so a helper that calls another is inlined whole.
A helper on a cycle of calls (recursion) cannot be inlined: its calls stay, the CPU
calls it, and the device backends refuse the call (E7002). The module keeps only
the kernels, the extern declarations and such recursive helpers.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.errors import Refusal
from vxc.ir import types as T
from vxc.ir.loc import span_of
from vxc.ir.ops import CALL_PLACEMENT, ring_layout


def _callee(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def _calls(func: ir.Operation) -> list[ir.Operation]:
    out: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            out.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return out


def recursive(graph: dict[str, set[str]]) -> set[str]:
    """The functions that can reach themselves through calls (on a cycle of `graph`)."""
    out: set[str] = set()
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            f = todo.pop()
            if f == start:
                out.add(start)
                break
            if f not in seen and f in graph:
                seen.add(f)
                todo.extend(graph[f])
    return out


def _postorder(graph: dict[str, set[str]]) -> list[str]:
    """Callees before callers (a cycle is cut where it is met; its calls stay anyway)."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(f: str) -> None:
        state[f] = 1
        for g in sorted(graph.get(f, ())):
            if g in graph and g not in state:
                visit(g)
        state[f] = 2
        order.append(f)

    for f in sorted(graph):
        if f not in state:
            visit(f)
    return order


def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _frame(func: ir.Operation) -> tuple[int, dict[str, int]]:
    """The next free ring id of `func` and, per space, the byte past its last ring."""
    next_ring, end = 0, {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal next_ring
        lay = ring_layout(op)
        if lay is not None and lay.shared:
            next_ring = max(next_ring, lay.ring + 1)
            end[lay.space] = max(end.get(lay.space, 0), lay.end)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return next_ring, end


def _stack(
    body: ir.Block,
    call: ir.Operation,
    frame: tuple[int, dict[str, int]],
    placed: list[ir.Operation],
) -> None:
    """Move the copied body's rings above the caller's `frame` (ids and bytes), but for
    the ops `placed` in the call's own slot."""
    ring_base, end = frame
    for op in _ops(body):
        lay = ring_layout(op)
        if lay is None or not lay.shared or any(op == p for p in placed):
            continue
        offset = end.get(lay.space, 0) + lay.offset
        cap = op.attributes["capacity"] if "capacity" in op.attributes else None
        capacity = ir.IntegerAttr(cap).value if cap is not None else 0
        if capacity and offset + lay.slots * lay.slot_bytes > capacity:
            raise Refusal(
                "E6010",
                f"the tiles of `{_callee(call)}` do not fit in {lay.space} next to the "
                f"caller's: inlined, its frame would end at byte "
                f"{offset + lay.slots * lay.slot_bytes} of {capacity}",
                span_of(call),
                help="the working-set check counts each function's own tiles; make the "
                "helper's tiles the caller's (pass them in as `&mut`) or smaller",
            )
        op.attributes["ring"] = _i64(ring_base + lay.ring)
        op.attributes["offset"] = _i64(offset)


def _ops(block: ir.Block) -> list[ir.Operation]:
    out: list[ir.Operation] = []
    for op in block.operations:
        op.operation.walk(lambda o: (out.append(o), ir.WalkResult.ADVANCE)[1])
    return out


def _retarget(value: ir.Value, call: ir.Operation) -> list[ir.Operation]:
    """Make the op that produces the returned `value` place it in the call's slot (both
    branches' producers for an `scf.if`); the ops it changed."""
    if isinstance(value, ir.BlockArgument):
        return []  # a parameter passed back: it already lives in a buffer of the caller's
    op = value.owner.operation
    if op.name == "scf.if":
        k = ir.OpResult(value).result_number
        return [
            changed
            for region in op.regions
            for block in region.blocks
            for changed in _retarget(list(block.operations)[-1].operands[k], call)
        ]
    if ring_layout(op) is None:
        raise Refusal(
            "E7002",
            f"call to `{_callee(call)}`: its result is placed in a scratchpad ring of the "
            f"caller, but the helper returns a value `{op.name}` makes, which inlining "
            f"cannot place there",
            span_of(call),
        )
    for attr in CALL_PLACEMENT:
        op.attributes[attr.name] = call.attributes[attr.name]
    return [op]


def _located(body: ir.Block, call: ir.Operation) -> None:
    """Each copied op at `callsite(its own location at the call's)`."""
    for op in _ops(body):
        op.location = ir.Location.callsite(op.location, [call.location])


def inline_call(call: ir.Operation, helper: ir.Operation, frame: tuple[int, dict[str, int]]) -> int:
    """Replace `call` by a copy of `helper`'s body, its rings above `frame` (the
    caller's next ring id and per-space end, `_frame`); returns the ring ids it took."""
    copy = helper.clone(ip=ir.InsertionPoint(helper))  # a scratch copy beside the helper
    body = copy.regions[0].blocks[0]
    for arg, v in zip(body.arguments, call.operands, strict=True):
        arg.replace_all_uses_with(v)
    ret = list(body.operations)[-1]
    placed = []
    if ring_layout(call) is not None:
        placed = [op for v in ret.operands for op in _retarget(v, call)]
    _stack(body, call, frame, placed)
    _located(body, call)
    for op in list(body.operations)[:-1]:
        op.operation.move_before(call)
    for r, v in zip(call.results, ret.operands, strict=True):
        r.replace_all_uses_with(v)
    call.erase()
    copy.erase()
    return _frame(helper)[0]


def inline_helpers(module: ir.Module) -> ir.Module:
    """Inline every call to a non-recursive Vx helper (in place); drop the helpers no
    call is left to. Returns `module`."""
    with module.context:
        _inline_all(module)
    return module


def _inline_all(module: ir.Module) -> None:
    funcs = {
        T.sym_name(op.operation): op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }
    defined = {n: f for n, f in funcs.items() if T.has_body(f)}
    graph = {n: {_callee(c) for c in _calls(f)} & defined.keys() for n, f in defined.items()}
    cyclic = recursive(graph)
    for name in _postorder(graph):
        caller = defined[name]
        # The calls of one caller run one after the other and a helper's own tiles die
        # when it returns, so every copy starts at the caller's end of each space (they
        # share bytes); each takes ring ids of its own, since two helpers' rings of one
        # id would have to agree on their layout.
        next_ring, end = _frame(caller)
        for call in _calls(caller):
            callee = _callee(call)
            helper = defined.get(callee)
            if helper is not None and T.is_private(helper) and callee not in cyclic:
                next_ring += inline_call(call, helper, (next_ring, end))
    called = {_callee(c) for f in defined.values() for c in _calls(f)}
    for name, f in defined.items():
        if T.is_private(f) and name not in called:
            f.erase()


def run(module: ir.Module, backend: object) -> None:
    """The pass `inline` (vxc/stages.py): the same for every backend."""
    inline_helpers(module)
