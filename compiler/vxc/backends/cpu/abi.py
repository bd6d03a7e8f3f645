"""The C ABI of a CPU kernel, derived from its `func.func` signature.

`int32_t name(<params>, <results>)`: each tensor parameter is a data pointer
followed by one `int64_t` per dynamic dimension; each scalar parameter is
passed by value; each result is a caller-allocated output pointer. The return
value is a status code (`errors.STATUS`). A kernel entry also has
`int32_t name_launch(int64_t instances, int32_t threads, <params>, <results>)`,
which runs N instances with each result stacked N times (`launch.py`). The
header, the manifest, the lowering and `vxc.runtime` all read this one description.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jaxlib.mlir import ir

from vxc.backends.cpu.errors import BackendError
from vxc.elements import ELEMENTS
from vxc.ir import types as T

# vx IR element/scalar type -> C type (from the one element table, vxc/elements.py).
# i1 travels as a byte (C `bool` is one byte); an index is an int64_t.
C_TYPES = {**{e.mlir: e.c_type for e in ELEMENTS}, "index": "int64_t"}

# Bytes of one element as the C caller lays it out (i1 is a byte; index is int64_t).
ELEMENT_BYTES = {**T.ELEMENT_BYTES, "index": 8}
LAUNCH_SUFFIX = "_launch"  # `K_launch`: the N-instance entry point of kernel `K`


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor" or "scalar"
    dtype: str
    shape: tuple[int | None, ...]  # () for scalars; None marks a dynamic dim
    space: str | None
    const: bool  # the kernel never writes through it
    # Per dimension, the shape parameter that gives its size ("" for none): the launcher
    # checks the argument against it before any instance runs (VX_ERR_SHAPE_PARAM).
    dim_names: tuple[str, ...] = ()

    @property
    def dynamic_dims(self) -> list[int]:
        return [i for i, d in enumerate(self.shape) if d is None]

    def c_params(self) -> list[str]:
        ctype = C_TYPES[self.dtype]
        if self.kind == "scalar":
            return [f"{ctype} {self.name}"]
        qual = "const " if self.const else ""
        return [f"{qual}{ctype} *{self.name}"] + [
            f"int64_t {self.name}_dim{i}" for i in self.dynamic_dims
        ]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "space": self.space,
            "const": self.const,
            **({"dims": list(self.dim_names)} if any(self.dim_names) else {}),
        }


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    results: tuple[Param, ...]
    topology: str | None
    extern: bool
    internal: bool = False  # a private helper: not in the header or manifest, may pass tokens
    requires: tuple[str, ...] = ()  # a kernel's `where` clauses, checked at launch (VX_ERR_WHERE)

    @property
    def kernel(self) -> bool:
        """A kernel entry: exported, launched as instances."""
        return not self.extern and not self.internal

    def _c_args(self) -> list[str]:
        args = [p for param in self.params for p in param.c_params()]
        return args + [f"{C_TYPES[r.dtype]} *{r.name}" for r in self.results]

    def c_prototype(self) -> str:
        return f"int32_t {self.name}({', '.join(self._c_args()) or 'void'})"

    @property
    def launch_name(self) -> str:
        return self.name + LAUNCH_SUFFIX

    def c_launch_prototype(self) -> str:
        args = ["int64_t vx_instances", "int32_t vx_threads", *self._c_args()]
        return f"int32_t {self.launch_name}({', '.join(args)})"


def _c_name(name: str) -> str:
    ok = name and (name[0].isalpha() or name[0] == "_")
    if not ok or not all(c.isalnum() or c == "_" for c in name):
        raise BackendError("E7003", f"'{name}' is not a valid C identifier")
    return name


def _param(t: ir.Type, name: str, const: bool, what: str, internal: bool = False) -> Param:
    if internal and T.is_token(t):
        # Between helpers a token is its destination buffer: on the CPU the copy is done
        # at issue and `wait` is a no-op, so passing (or returning) the buffer is the token.
        t = T.token_inner(t)
    if isinstance(t, ir.MemRefType):
        dtype = str(t.element_type)
        if dtype not in C_TYPES:
            raise BackendError("E7004", f"{what}: element type {dtype} has no C type")
        shape = tuple(None if d == T.DYNAMIC else d for d in t.shape)
        return Param(name, "tensor", dtype, shape, T.space_of(t), const)
    if T.is_token(t):
        raise BackendError(
            "E7003",
            f"{what}: a kernel entry cannot take or return a token (its C caller cannot "
            "`wait`); wait it inside the kernel",
        )
    dtype = str(t)
    if dtype not in C_TYPES:
        raise BackendError("E7011", f"{what}: type {dtype} has no C type")
    return Param(name, "scalar", dtype, (), None, const)


def _const(func: ir.Operation, i: int, extern: bool, written: set[int]) -> bool:
    """A kernel's pointer is const when its body never writes through it; an extern has
    no body, so its declaration decides: `&mut` is writable, `&` and by-value are read
    (the C definition the user writes must match the prototype exactly)."""
    if extern:
        return not T.arg_is_mut(func, i)
    return i not in written


def signature(func: ir.Operation, written: set[int]) -> Signature:
    """C ABI of `func`; `written` holds the indices of tensor args the body writes."""
    name = _c_name(T.sym_name(func))
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    extern = not T.has_body(func)
    internal = not extern and T.is_private(func)
    params = tuple(
        replace(
            _param(
                t,
                _c_name(T.arg_name(func, i)),
                _const(func, i, extern, written),
                f"@{name} argument {i}",
                internal,
            ),
            dim_names=T.arg_dims(func, i),
        )
        for i, t in enumerate(fty.inputs)
    )
    results = []
    for i, t in enumerate(fty.results):
        rname = "out" if len(fty.results) == 1 else f"out{i}"
        r = _param(t, rname, False, f"@{name} result {i}", internal)
        if r.kind == "tensor" and r.dynamic_dims:
            raise BackendError(
                "E7003", f"@{name} result {i}: a returned tensor needs a static shape"
            )
        results.append(r)
    c_names = [n.split()[-1].lstrip("*") for p in params for n in p.c_params()]
    c_names += [r.name for r in results]
    c_names += ["vx_instances", "vx_threads"] if not extern and not internal else []
    dup = sorted({n for n in c_names if c_names.count(n) > 1})
    if dup:
        raise BackendError(
            "E7003", f"@{name}: C parameter name(s) {dup} collide; rename the argument(s)"
        )
    topo = func.attributes["vx.topology"] if "vx.topology" in func.attributes else None
    topology = ir.StringAttr(topo).value if isinstance(topo, ir.StringAttr) else None
    return Signature(name, params, tuple(results), topology, extern, internal)


LOCAL_NAME_MAX = 200  # well under LLVM's 1 024, leaving room for llvmlite's ".N" suffixes


def local_name(name: str) -> str:
    """An LLVM local name for a Vx name. LLVM cuts local names at 1 024 characters when it
    parses IR, so two long names sharing a prefix would collide ("redefinition of
    argument"); cut here instead, where llvmlite still makes the cut names unique."""
    return name if len(name) <= LOCAL_NAME_MAX else name[:LOCAL_NAME_MAX]
