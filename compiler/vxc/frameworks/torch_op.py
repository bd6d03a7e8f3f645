"""`Kernel.to_torch()` for a cpu kernel: a `torch.library.custom_op` that calls the
kernel's C entry on the tensors' own memory.

    softmax = vxc.compile("kernels/softmax.vx").to_torch()
    y = softmax(x)                          # x: float32[m, n] on the CPU -> y, the same

The function takes the kernel's parameters in order without the shape parameters (read
from the tensors' shapes; one given by keyword is checked against them), as `to_jax()`'s
does (docs/FRAMEWORKS.md). Each `&mut` tensor is written **in place** and returned: pass
one and the kernel writes it (no copy), leave it out and a zero tensor is made for it.
The kernel's own results follow, with the instances axis in front. One result comes back
bare, several as a tuple.

The op is `vxc::<kernel>_<digest>` (the digest is the artifact object's), registered once
per process with its schema (a `&mut` tensor is a mutated argument, `Tensor(a!)`), a fake
implementation (the results' shapes from the arguments', so `torch.compile` traces
through it) and a CPU implementation: each tensor is viewed as a numpy array of its
memory (bf16 through `ml_dtypes`, never copied) and handed to the artifact's launcher,
which checks the `where` clauses and the distinct arguments again (VX_ERR_ALIAS). The
checks of the call (dtypes, ranks, shape parameters, the clauses the shapes decide)
run in Python before the op, as in `to_jax()`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vxc.frameworks import calls
from vxc.frameworks.handler import Layout
from vxc.runtime import ArgumentError, _dtype

if TYPE_CHECKING:
    from vxc.pyapi import Kernel

_OPS: dict[str, Any] = {}  # registered op name -> the op, once per process
# A scalar parameter's type in an op schema, by the kinds of its numpy dtype.
_SCHEMA_SCALAR = {"b": "bool", "i": "int", "u": "int", "f": "float", "V": "float"}


def to_torch(kernel: Kernel, *, instances: int | None = None, threads: int = 0) -> TorchKernel:
    """The kernel as a function of torch tensors (see the module docstring); an
    interpreted tpu, b200 or h100 kernel runs in vxc's interpreter or simulator
    (interpreted.py)."""
    if kernel.interpreted:
        from vxc.frameworks import interpreted

        lay, grid, requires = interpreted.validate(kernel, instances, "to_torch")

        def runner(n: int, threads: int, named: dict) -> Any:
            return kernel.launch(instances=n, **named)  # writes `&mut` arrays in place

    else:
        lay, grid = calls.validate(kernel, instances, threads, "to_torch")
        requires = list(kernel.spec.get("requires", []))
        artifact = kernel.artifact()  # loads the library and checks its ABI now

        def runner(n: int, threads: int, named: dict) -> Any:
            return artifact.launch(instances=n, threads=threads, **named)

    call = TorchKernel(kernel.name, lay, requires, instances, threads, grid)
    call.op = _register(op_name(kernel), call, runner)
    return call


def op_name(kernel: Kernel) -> str:
    """`<kernel>_<digest>`: of the artifact's object for a kernel run natively (a cpu one:
    `calls.validate` refused any other), else of everything the build depends on
    (`Build.key`); two builds of one kernel are two ops."""
    if not kernel.interpreted:
        obj = kernel.manifest_path.parent / kernel.manifest["files"]["object"]
        digest = hashlib.sha256(obj.read_bytes()).hexdigest()
    else:
        digest = kernel.build.key(kernel.name)
    return f"{kernel.name}_{digest[:16]}"


def schema(lay: Layout) -> str:
    """The op's schema: the operands in order, then the instance count (0: the one the
    `where` clause gives) and the thread bound; `&mut` tensors are mutated arguments,
    the kernel's results the returns."""
    args = []
    for i, p in enumerate(lay.operands):
        if p["kind"] == "tensor":
            args.append(f"Tensor{'' if p['const'] else f'(a{i}!)'} {p['name']}")
        else:
            kind = _dtype(p["dtype"], lay.kernel).kind
            args.append(f"{_SCHEMA_SCALAR[kind]} {p['name']}")
    args += ["int vx_instances", "int vx_threads"]
    results = ["Tensor"] * len(lay.results)
    returns = results[0] if len(results) == 1 else f"({', '.join(results)})"
    return f"({', '.join(args)}) -> {returns}"


def _register(op: str, call: TorchKernel, runner: Any) -> Any:
    """The kernel's op `vxc::<op>`, registered once per process; `runner(n, threads,
    named)` launches it. Both implementations check the call (`checked`): the fake one
    while `torch.compile` traces (fake tensors carry shapes and dtypes), the CPU one
    before the launch."""
    import torch

    name = f"vxc::{op}"
    if name in _OPS:
        return _OPS[name]
    # Shared by every to_torch() of this build: the instance count comes with each call
    # (0: the one the `where` clause gives), never from the first caller's option.
    call = dataclasses.replace(call, instances=None)
    lay = call.layout
    operands = [p["name"] for p in lay.operands]

    def run(*args: Any) -> Any:
        *values, instances, threads = args
        n = call.checked(values, instances)
        named = {
            k: _numpy(v) if isinstance(v, torch.Tensor) else v
            for k, v in zip(operands, values, strict=True)
        }
        out = runner(n, threads, named)
        outs = () if out is None else out if isinstance(out, tuple) else (out,)
        return _returned([_tensor(np.ascontiguousarray(o)) for o in outs])

    def fake(*args: Any) -> Any:
        *values, instances, _ = args
        n = call.checked(values, instances)
        return _returned(
            [torch.empty((n, *r["shape"]), dtype=torch_dtype(r["dtype"])) for r in lay.results]
        )

    mutated = [p["name"] for p in lay.mutable]
    op = torch.library.custom_op(name, run, mutates_args=mutated, schema=schema(lay))
    op.register_fake(fake)
    _OPS[name] = op
    return op


def _returned(tensors: list[Any]) -> Any:
    if not tensors:
        return None
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def torch_dtype(dtype: str) -> Any:
    """The torch dtype of a Vx element type: numpy's of the same name, bf16 is
    `torch.bfloat16`."""
    import torch

    return torch.bfloat16 if dtype == "bf16" else getattr(torch, _dtype(dtype, dtype).name)


def _tensor(a: np.ndarray) -> Any:
    """A tensor on a numpy array's memory (bf16, which torch's numpy bridge lacks, through
    its 16-bit bits)."""
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _numpy(t: Any) -> np.ndarray:
    """A numpy view of a CPU tensor's memory: no copy (bf16 through its 16-bit bits)."""
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@dataclass(eq=False)
class TorchKernel(calls.FrameworkCall):
    """A cpu kernel as a function of torch tensors; `op` is its custom op. Call it as the
    module docstring says. The call binds the arguments and makes the `&mut` tensors left
    out; everything else is checked inside the op, so `torch.compile` traces the call
    whole (`fullgraph=True`)."""

    op: Any = None

    def __repr__(self) -> str:
        names = ", ".join(p["name"] for p in self.layout.operands)
        return f"<vxc to_torch {self.name}({names}) -> torch.ops.{self.op._qualname}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        bound = self._bind(args, kwargs, check=False)
        if torch.is_grad_enabled():
            grads = [k for k, v in bound.values.items() if getattr(v, "requires_grad", False)]
            if grads:  # no backward: a result without a grad_fn would drop the gradient
                raise ArgumentError(
                    f"{self.name}: {grads} require grad, and a vxc kernel has no backward; "
                    "call it under torch.no_grad() (or pass detached tensors)"
                )
        left_out = [p for p in self.layout.mutable if p["name"] not in bound.values]
        sizes = self._sizes(bound) if left_out else {}
        operands = [self._operand(p, bound, sizes) for p in self.layout.operands]
        results = self.op(*operands, self.instances or 0, self.threads)
        results = () if results is None else results if isinstance(results, tuple) else (results,)
        written = [operands[i] for i, p in enumerate(self.layout.operands) if not p["const"]]
        outs = [*written, *results]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def checked(self, values: list[Any], instances: int) -> int:
        """The instance count of a call of the op with these operands, after checking
        them (dtypes, ranks, devices, shape parameters, the clauses the shapes decide)."""
        names = [p["name"] for p in self.layout.operands]
        bound = calls.Bound(dict(zip(names, values, strict=True)))
        for p in self.layout.operands:
            if p["kind"] == "tensor":
                self._array(p, bound.values[p["name"]])
        return self._count(self._sizes(bound), instances or None)

    def _array(self, p: dict, value: Any) -> Any:
        """`value`, a CPU tensor of `p`'s dtype, rank and static dimensions."""
        import torch

        who = f"{self.name}: argument '{p['name']}'"
        if not isinstance(value, torch.Tensor):
            raise ArgumentError(f"{who} must be a torch.Tensor, got {type(value).__name__}")
        if value.device.type not in ("cpu", "meta"):
            raise ArgumentError(f"{who} is on {value.device}: a cpu kernel takes CPU tensors")
        want = torch_dtype(p["dtype"])
        if value.dtype != want:
            raise ArgumentError(f"{who} must have dtype {want}, got {value.dtype}")
        self._check_array(p, tuple(int(d) for d in value.shape), None)
        if not p["const"] and not value.is_contiguous():
            raise ArgumentError(f"{who} is written by the kernel and must be contiguous")
        return value

    def _operand(self, p: dict, bound: calls.Bound, sizes: dict[str, int]) -> Any:
        """The operand of parameter `p`: its tensor, zeros for a `&mut` left out, the
        number for a scalar."""
        import torch

        if p["kind"] == "scalar" or p["name"] in bound.values:
            return bound.values[p["name"]]
        return torch.zeros(self._shape(p, sizes), dtype=torch_dtype(p["dtype"]))
