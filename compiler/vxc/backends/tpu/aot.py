"""Ahead-of-time compilation of a TPU artifact with the real TPU compiler (libtpu), against
TPU topology descriptions: no TPU needed. This is what proves Mosaic accepts the module.

    compile_export(blob, kernel_or_manifest_entry, "v5e")   # raises LibtpuRejected

Topologies are made once per process (`topology`), so a test session or a build worker
pays libtpu's start-up once.
"""

from __future__ import annotations

import re
from functools import cache

from vxc.backends.tpu.env import prepare
from vxc.backends.tpu.errors import LibtpuRejected, fail

# Short names -> the topology libtpu describes (chips per host 2x2, one chip used).
TOPOLOGIES = {"v5e": "v5e:2x2", "v6e": "v6e:2x2", "v5p": "v5p:2x2x1", "v4": "v4:2x2x1"}
# The AOT check compiles the export for the Vec lengths nearest these that the kernel's
# launch constraints allow (its `where` clauses for this build's grid): a small and a
# large call. Never a guess that can contradict a clause (`lengths_for`).
PREFERRED_LENGTHS = (4, 300)


@cache
def topology(name: str):
    """libtpu's description of one TPU topology (compile-only: no TPU attached). Compile-only
    clients touch no device, so several processes (test workers, build workers) may load
    libtpu at once: its one-process lockfile is switched off (`env.py`)."""
    prepare()
    import jax
    from jax.experimental import topologies

    full = TOPOLOGIES.get(name, name)
    try:
        return topologies.get_topology_desc(platform="tpu", topology_name=full)
    except (jax.errors.JaxRuntimeError, RuntimeError, ValueError) as e:
        raise LibtpuRejected(
            f"libtpu could not describe TPU topology {name} ({full}) for the AOT check:\n"
            + "\n".join(f"  | {ln}" for ln in str(e).strip().splitlines())
        ) from None


def compile_export(blob: bytes, kernel, topo: str, length: int | dict[str, int] | None = None):
    """Deserialize the export, specialise its dimension variables (every one to `length`,
    each as `length` maps it, or by default the allowed sizes nearest 4), and compile it
    for one chip of `topo`.
    Returns the compiled executable; raises LibtpuRejected."""
    import jax
    from jax import export

    from vxc.backends.tpu.export import arg_specs

    exp = export.deserialize(bytearray(blob))
    dev = topology(topo).devices[0]
    sharding = jax.sharding.SingleDeviceSharding(dev)
    if length is None:
        lengths = lengths_for(kernel, PREFERRED_LENGTHS[0])
    elif isinstance(length, dict):
        lengths = length
    else:
        lengths = {s: length for s in kernel.symbols}
    specs = arg_specs(kernel, lengths, sharding)
    try:
        return jax.jit(exp.call).trace(*specs).lower().compile()
    except jax.errors.JaxRuntimeError as e:
        raise LibtpuRejected(readable(str(e), topo, kernel.name)) from None


def lengths_for(kernel, prefer: int) -> dict[str, int]:
    """Vec lengths, each as near `prefer` as the kernel's export constraints allow (z3 over
    the constraints `jax.export` will check at the call). A build whose constraints no
    lengths satisfy could never be called: that is an error naming them."""
    if not kernel.symbols:
        return {}
    import z3

    syms = {s: z3.Int(s) for s in kernel.symbols}
    opt = z3.Optimize()
    for v in syms.values():
        opt.add(v >= 1)
    for c in kernel.constraints:
        opt.add(_z3_constraint(c, syms))
    # Integer scalar parameters (SMEM) are free values the clauses may relate the sizes
    # to (attention's `n == h * s`, `s % 128 == 0`).
    free = {p.name: z3.Int(p.name) for _, p in kernel.scalars if p.dtype == "i32"}
    for clause in kernel.preconditions:
        # The `where` clauses over shape parameters the export cannot state (gemm's
        # `m % 128 == 0`): a compile-check call the kernel's own contract forbids would
        # prove nothing. Clauses over other values (`tiles.len()`) are constraints above.
        formula = _z3_clause(clause, {**free, **syms}, kernel)
        if formula is not None:
            opt.add(formula)
    opt.minimize(z3.Sum([z3.If(v >= prefer, v - prefer, prefer - v) for v in syms.values()]))
    if opt.check() != z3.sat:
        raise fail(
            "E7009",
            None,
            f"kernel `{kernel.name}` can never be called with this launch grid: no Vec "
            f"lengths satisfy {', '.join(kernel.constraints)} (--tpu-instances {kernel.instances})",
        )
    model = opt.model()
    return {s: model.eval(v, model_completion=True).as_long() for s, v in syms.items()}


def _z3_clause(text: str, syms: dict, kernel):
    """A `where` clause in Vx syntax (`m % 128 == 0`, `k >= 256`, `instances() == E`)
    over the dimension variables as a z3 formula; None when it names anything else.
    Vx's `/` and `%` on the non-negative sizes are z3's integer division and modulus."""
    import ast
    import operator

    import z3

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.truediv,
           ast.Mod: operator.mod}  # fmt: skip
    cmps = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.GtE: operator.ge,
            ast.Gt: operator.gt, ast.LtE: operator.le, ast.Lt: operator.lt}  # fmt: skip

    def term(n: ast.AST):
        if isinstance(n, ast.Name) and n.id in syms:
            return syms[n.id]
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return z3.IntVal(n.value)
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](term(n.left), term(n.right))
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "instances"
            and kernel.grid_expr
        ):
            return term(ast.parse(kernel.grid_expr, mode="eval").body)  # Kernel.grid_expr
        raise ValueError(text)

    try:
        tree = ast.parse(text, mode="eval").body
        if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1):
            return None
        return cmps[type(tree.ops[0])](term(tree.left), term(tree.comparators[0]))
    except (SyntaxError, ValueError, KeyError):
        return None


def _z3_constraint(text: str, syms: dict):
    """One constraint as the lowering writes it (`A >= B`, `A == B`; A, B built of
    dimension variables, integers, + - *, mod() and floordiv()) as a z3 formula. Parsed,
    never evaluated."""
    import ast
    import operator

    import z3

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}

    def term(n: ast.AST):
        if isinstance(n, ast.Name) and n.id in syms:
            return syms[n.id]
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return z3.IntVal(n.value)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -term(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](term(n.left), term(n.right))
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("mod", "floordiv")
            and len(n.args) == 2
        ):
            x, y = (term(a) for a in n.args)  # z3's Int / and % on the non-negative sizes
            return x % y if n.func.id == "mod" else x / y
        raise fail("E7009", None, f"cannot read the export constraint `{text}`")

    tree = ast.parse(text, mode="eval").body
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1):
        raise fail("E7009", None, f"cannot read the export constraint `{text}`")
    lhs, rhs = term(tree.left), term(tree.comparators[0])
    if isinstance(tree.ops[0], ast.Eq):
        return lhs == rhs
    if isinstance(tree.ops[0], ast.GtE):
        return lhs >= rhs
    raise fail("E7009", None, f"cannot read the export constraint `{text}`")


def specialised_mosaic(compiled) -> list[str]:
    """The Mosaic modules (text) inside a compiled executable: the bodies of its
    `tpu_custom_call`s as libtpu specialised them (the placeholder Vec length replaced by
    the real one). The interpreter can run exactly what libtpu compiled."""
    import base64
    import json

    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    from vxc.backends.tpu.context import mosaic_context

    out = []
    for m in re.finditer(
        r'custom_call_target="tpu_custom_call".*?backend_config=(\{.*\})', compiled.as_text()
    ):
        config = json.JSONDecoder().raw_decode(m.group(1))[0]
        body = base64.b64decode(config["custom_call_config"]["body"])
        ctx = mosaic_context()
        ctx.allow_unregistered_dialects = True  # the serialized form, before deserialization
        with ctx:
            module = ir.Module.parse(body)
            PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
            out.append(str(module))
    return out


def readable(message: str, topo: str, kernel: str) -> str:
    """libtpu's error as one block: its message and the op it names, without jax's
    bug-report boilerplate."""
    lines = [ln.rstrip() for ln in message.strip().splitlines()]
    keep = [ln for ln in lines if ln and not re.match(r"Please report a bug", ln)]
    body = "\n".join(f"  | {ln}" for ln in keep)
    return f"libtpu rejected kernel `{kernel}` for {topo} ({TOPOLOGIES.get(topo, topo)}):\n{body}"
