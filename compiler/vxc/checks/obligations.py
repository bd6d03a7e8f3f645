"""Whether a function raises any solver obligation, decided without z3.

The seam checker (checks/seams.py) proves these facts with z3: reads of a
buffer that crossed a relaxed hop of the target plan or of a token before its `wait`
(E6004), buffers with a value contract `assert(buf == v)` (E6004), the `where`
bounds of a callee (E6005), that a function's own `where` clauses can hold (E0403),
views, stores and `Vec` indices (E6041-E6043), and that a kernel whose extern writes its
output through `&mut` runs as one instance (E6042). A function with none of these forms has
nothing to prove, so `vxc.api` runs the seam checker (and imports z3) only for functions
where this returns True. It errs on the side of True: the checker then proves nothing or
reports.
"""

from __future__ import annotations

from vxc.hir import nodes as H
from vxc.hir import types as T
from vxc.hir.program import Function
from vxc.hir.tiles import tile_form, tile_operands
from vxc.plan.placement import FnPlacement


def _is_token(t: T.Type | None) -> bool:
    return t is not None and isinstance(T.deref(t), T.TokenT)


def needs_proof(fn: Function, placement: FnPlacement, functions: dict[str, Function]) -> bool:
    if fn.decl.where:
        return True  # its clauses must be satisfiable (E0403)
    if any(h.relaxed for node in placement.nodes.values() for h in node.hops):
        return True  # a buffer crossed a relaxed seam
    bounded_len = bool(fn.decl.where)  # a `where` clause may bound an index or a length
    for s in H.walk_stmts(fn.decl.body):
        if _token_as_tensor(s, fn):
            return True
        for top in (x for x in vars(s).values() if isinstance(x, H.Expr)):
            for e in H.walk_expr(top):
                if _obliges(e, functions, bounded_len):
                    return True
                if isinstance(e, H.Call) and extern_outputs(e, fn, functions):
                    return True  # an extern writes shared memory: one instance only
    return False


def extern_outputs(call: H.Call, fn: Function, functions: dict[str, Function]) -> list[H.Expr]:
    """The arguments of a call of an `extern fn` passed to its `&mut` parameters that are
    (views of) `fn`'s own tensor parameters: memory every instance shares, which the
    extern writes as a whole in each of them (E6042 unless `instances() == 1`). A tile of
    the function's own is per instance, and free to pass."""
    callee = functions.get(call.callee)
    if callee is None or not callee.is_extern:
        return []
    out = []
    for p, a in zip(callee.params, call.args, strict=False):
        if not (isinstance(p.ty, T.RefT) and p.ty.mutable):
            continue
        root = a
        while isinstance(root, H.Borrow | H.View):
            root = root.operand if isinstance(root, H.Borrow) else root.obj
        var = fn.vars.get(root.vid) if isinstance(root, H.Name) else None
        if var is not None and var.kind == "param":
            out.append(a)
    return out


def _token_as_tensor(s: H.Stmt, fn: Function) -> bool:
    """A token returned, bound or assigned where a tensor is wanted: a read in flight."""
    if isinstance(s, H.Return) and s.value is not None:
        return _is_token(s.value.ty) and not _is_token(fn.ret)
    if isinstance(s, H.Let | H.Assign) and s.vid in fn.vars:
        return _is_token(s.value.ty) and not _is_token(fn.vars[s.vid].ty)
    return False


def _obliges(e: H.Expr, functions: dict[str, Function], bounded_len: bool) -> bool:
    if isinstance(e, H.View):
        return True  # a view's bounds (E6041); a store's races and in-flight source
    if isinstance(e, H.Index):
        # A Vec index out of bounds for every allowed value (E6041) needs a `where` clause
        # (`tiles.len() == 4`, `n < 0`) or a negative index: without either some Vec is long
        # enough, and the run-time check stays (the seed's `tiles[0]` imports no z3).
        return bounded_len or any(
            isinstance(n, H.Unary) and n.op == "-" for n in H.walk_expr(e.index)
        )
    if isinstance(e, H.Transfer):
        return _is_token(e.src.ty)  # a transfer reads its token's buffer in flight
    if tile_form(e) is not None and any(_is_token(a.ty) for a in tile_operands(e)):
        return True  # tile arithmetic reads a token's buffer in flight
    if not isinstance(e, H.Call):
        return False
    callee = functions.get(e.callee)
    if callee is None and e.callee == "assert":
        return True  # a value contract, or a compile-time scalar fact
    if callee is not None and callee.decl.where:
        return True  # the callee's bounds are proved at this call
    params = [p.ty for p in callee.params] if callee is not None else []
    for i, a in enumerate(e.args):
        want = params[i] if i < len(params) else None
        if _is_token(a.ty) and not isinstance(want, T.TokenT):
            return True  # a token read where its tensor is expected
    return False
