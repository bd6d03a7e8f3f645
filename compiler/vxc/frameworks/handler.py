"""The XLA FFI handler of one cpu kernel, as C++ source and as a built shared library.

The handler is what XLA:CPU calls for the custom call `Kernel.to_jax()` emits. It is
generated per kernel from the manifest entry (the C entry's argument order is the
manifest's `params` then `results`, backends/cpu/abi.py) and compiled with the machine's
C++ compiler against the FFI headers jaxlib ships (`jax.ffi.include_dir()`), with the
artifact's object linked in and its symbols bound inside the library (`-Bsymbolic`). Not
linked to the artifact's shared library: every build of a kernel `K` has the soname
`K.cpu.so`, and the loader would bind a second build's handler to the first build's
library by that name (two consts of one kernel would run the first). It calls the entry
`K_launch(instances, threads, <params>, <outputs>)`, so the kernel runs on its own thread
pool exactly as `Kernel.launch` runs it, and a non-zero status becomes an FFI error
carrying the status name and meaning (XLA raises it as `JaxRuntimeError`).

The FFI call's layout, which `jax_ffi.py` builds to match (`Layout`):

- attributes: `vx_instances`, `vx_threads`, and each shape parameter by name (i64);
- operands: every parameter that is not a shape parameter, in order: a tensor is its
  buffer (a `&mut` one its initial value), a scalar a 0-d buffer (so it may be traced);
- results: each `&mut` tensor (aliased to its operand), then each kernel result with the
  instances axis in front, as `K_launch` stacks it.

A buffer with one dimension more than the kernel's holds a batch (`jax.vmap`): the
handler runs `K_launch` once per batch element, stepping through every batched buffer
and reading an unbatched one as is. The batch size is the first result's leading
dimension; every result is batched then (the batching rule makes it so).

The library is cached beside the artifact under a name keyed by the digest of its
source, the artifact's object and the compile command: a second `to_jax()` of the same
artifact, in this process or another, reuses it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vxc.elements import BY_MLIR
from vxc.errors import NotRunnableHere
from vxc.status import MEANING

SUFFIX = ".jax.so"
CXX_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared")
DIGEST_CHARS = 16


def c_type(dtype: str) -> str:
    """The C type the entry takes one element of `dtype` as (bf16 as its bits)."""
    return "int64_t" if dtype == "index" else BY_MLIR[dtype].c_type


# A manifest dtype -> the XLA element type of a buffer holding it.
FFI_TYPES = {
    "i1": "PRED",
    "i8": "S8",
    "i16": "S16",
    "i32": "S32",
    "i64": "S64",
    "index": "S64",
    "ui8": "U8",
    "ui16": "U16",
    "ui32": "U32",
    "ui64": "U64",
    "f16": "F16",
    "bf16": "BF16",
    "f32": "F32",
    "f64": "F64",
}


@dataclass(frozen=True)
class Layout:
    """How one FFI call carries a kernel's parameters (see the module docstring)."""

    kernel: str
    launch_symbol: str
    params: tuple[dict, ...]  # the manifest's, in C order
    results: tuple[dict, ...]
    shape_params: tuple[str, ...]

    @property
    def operands(self) -> list[dict]:
        return [p for p in self.params if p["name"] not in self.shape_params]

    @property
    def mutable(self) -> list[dict]:
        return [p for p in self.params if p["kind"] == "tensor" and not p["const"]]


def layout(spec: dict) -> Layout:
    """The layout of manifest entry `spec`: a shape parameter is an integer scalar that
    names a tensor parameter's dimension (`m` of `a: [m, k]`)."""
    named = {d for p in spec["params"] for d in p.get("dims", []) if d}
    shapes = tuple(
        p["name"]
        for p in spec["params"]
        if p["kind"] == "scalar" and p["name"] in named and p["dtype"] != "i1"
    )
    return Layout(
        spec["name"], spec["launch_symbol"], tuple(spec["params"]), tuple(spec["results"]), shapes
    )


def _c_string(text: str) -> str:
    """A C string literal of `text` (printable ASCII kept, the rest escaped)."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f'\\x{b:02x}""' for b in ch.encode())
    return '"' + "".join(out) + '"'


_PRELUDE = """\
#include <cstdint>
#include <cstring>
#include <string>
#include "xla/ffi/api/ffi.h"
#include "@HEADER@"

namespace ffi = xla::ffi;

namespace {

// Element `b` of a batched buffer (one dimension more than the kernel's), or the
// buffer itself when it is not batched or holds one element for the whole batch.
char *vx_at(const ffi::AnyBuffer &x, size_t rank, int64_t b) {
  auto d = x.dimensions();
  char *base = static_cast<char *>(x.untyped_data());
  if (d.size() == rank || d[0] == 1) return base;
  size_t item = ffi::ByteWidth(x.element_type());
  for (size_t i = 1; i < d.size(); ++i) item *= static_cast<size_t>(d[i]);
  return base + static_cast<size_t>(b) * item;
}

// A scalar operand of `size` bytes: one value, or one per batch element. A 64-bit
// scalar may come as its bits in two u32 words (jax without x64 has no 64-bit arrays).
const char *vx_scalar_at(const ffi::AnyBuffer &x, size_t size, int64_t b) {
  const char *base = static_cast<const char *>(x.untyped_data());
  return x.size_bytes() == size ? base : base + static_cast<size_t>(b) * size;
}

// The checks that make the casts below safe: each tensor buffer has the kernel's
// element type and rank (or one more, a batch of `batch`); each scalar holds one value or
// one per batch element. jax_ffi.py passes what these expect; this is the handler's own
// guard against any other caller of the target.
bool vx_tensor_ok(const ffi::AnyBuffer &x, ffi::DataType t, size_t rank, int64_t batch) {
  auto d = x.dimensions();
  if (x.element_type() != t) return false;
  return d.size() == rank || (d.size() == rank + 1 && (d[0] == batch || d[0] == 1));
}

bool vx_scalar_ok(const ffi::AnyBuffer &x, size_t size, int64_t batch) {
  return x.size_bytes() == size || x.size_bytes() == static_cast<size_t>(batch) * size;
}

// Dimension `i` of the kernel's view of `x` (past the batch dimension, if any).
int64_t vx_dim(const ffi::AnyBuffer &x, size_t rank, size_t i) {
  auto d = x.dimensions();
  return d[d.size() - rank + i];
}

const char *vx_status_name(int32_t s) {
  switch (s) {
@NAMES@
    default: return "an unknown status";
  }
}

// A scalar read from bytes of any alignment (words, or a batch of them).
template <typename T>
T vx_load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace
"""


def _status_cases(status: dict[str, int]) -> str:
    lines = []
    for name, code in sorted(status.items(), key=lambda kv: kv[1]):
        text = f"{name} ({code}): {MEANING.get(name, 'unknown status')}"
        lines.append(f"    case {code}: return {_c_string(text)};")
    return "\n".join(lines)


def _operand_args(lay: Layout) -> tuple[list[str], dict[str, str]]:
    """The impl's operand and result parameters, and each tensor's buffer variable."""
    params, buffer = [], {}
    for i, p in enumerate(lay.operands):
        params.append(f"ffi::AnyBuffer in{i}")
        buffer[p["name"]] = f"in{i}"
    for i, p in enumerate(lay.mutable):
        params.append(f"ffi::Result<ffi::AnyBuffer> mut{i}")
        buffer[p["name"]] = f"(*mut{i})"
    for i in range(len(lay.results)):
        params.append(f"ffi::Result<ffi::AnyBuffer> out{i}")
    return params, buffer


def _call_args(lay: Layout, buffer: dict[str, str]) -> list[str]:
    """The C entry's arguments after (instances, threads), for batch element `b`."""
    args = []
    for p in lay.params:
        ctype = c_type(p["dtype"])
        if p["name"] in lay.shape_params:
            args.append(f"static_cast<{ctype}>({p['name']})")
            continue
        buf = buffer[p["name"]]
        rank = len(p["shape"])
        at = f"vx_at({buf}, {rank}, b)"
        if p["kind"] == "scalar":
            args.append(f"vx_load<{ctype}>(vx_scalar_at({buf}, sizeof({ctype}), b))")
            continue
        qual = "const " if p["const"] else ""
        args.append(f"reinterpret_cast<{qual}{ctype} *>({at})")
        args += [f"vx_dim({buf}, {rank}, {i})" for i, d in enumerate(p["shape"]) if d is None]
    for i, r in enumerate(lay.results):
        rank = 1 + len(r["shape"])  # the instances axis
        args.append(f"reinterpret_cast<{c_type(r['dtype'])} *>(vx_at(*out{i}, {rank}, b))")
    return args


def _checks(lay: Layout, buffer: dict[str, str]) -> list[str]:
    """The conditions every operand and result must meet before the entry is called."""
    out = []
    pairs = [(p, f"in{i}") for i, p in enumerate(lay.operands)]
    pairs += [(p, buffer[p["name"]]) for p in lay.mutable]
    for p, buf in pairs:
        ctype = c_type(p["dtype"])
        if p["kind"] == "scalar":
            out.append(f"vx_scalar_ok({buf}, sizeof({ctype}), batch)")
        else:
            ty = f"ffi::DataType::{FFI_TYPES[p['dtype']]}"
            out.append(f"vx_tensor_ok({buf}, {ty}, {len(p['shape'])}, batch)")
    for i, r in enumerate(lay.results):
        ty = f"ffi::DataType::{FFI_TYPES[r['dtype']]}"
        out.append(f"vx_tensor_ok(*out{i}, {ty}, {1 + len(r['shape'])}, batch)")
    return out


def _first_result(lay: Layout) -> tuple[str, int]:
    """The first result's buffer and its unbatched rank: its leading dimension is the
    batch when it has one more."""
    if lay.mutable:
        return "(*mut0)", len(lay.mutable[0]["shape"])
    return "(*out0)", 1 + len(lay.results[0]["shape"])


def source(lay: Layout, header: str, status: dict[str, int], requires: list[str]) -> str:
    """The handler's C++ source: `vxc_<kernel>_ffi`, bound as the module docstring says."""
    params, buffer = _operand_args(lay)
    attrs = ["vx_instances", "vx_threads", *lay.shape_params]
    sig = ", ".join([*params, *(f"int64_t {a}" for a in attrs)])
    first, rank = _first_result(lay)
    checks = " &&\n        ".join(_checks(lay, buffer))
    where = f" (where {' and '.join(requires)})" if requires else ""
    call = ",\n        ".join(
        ["vx_instances", "static_cast<int32_t>(vx_threads)", *_call_args(lay, buffer)]
    )
    binds = "".join(
        [".Arg<ffi::AnyBuffer>()" for _ in lay.operands]
        + [".Ret<ffi::AnyBuffer>()" for _ in [*lay.mutable, *lay.results]]
        + [f'.Attr<int64_t>("{a}")' for a in attrs]
    )
    return (
        _PRELUDE.replace("@HEADER@", header).replace("@NAMES@", _status_cases(status))
        + f"""
static ffi::Error vxc_{lay.kernel}_impl({sig}) {{
  auto lead = {first}.dimensions();
  int64_t batch = lead.size() == {rank} ? 1 : lead[0];
  if (!({checks})) {{
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      {_c_string(f"vxc kernel '{lay.kernel}': an FFI buffer has another dtype or shape than the kernel takes")});
  }}
  for (int64_t b = 0; b < batch; ++b) {{
    int32_t status = {lay.launch_symbol}(
        {call});
    if (status != 0) {{
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        std::string({_c_string(f"vxc kernel '{lay.kernel}' failed with ")}) +
                            vx_status_name(status) +
                            (status == {status.get("VX_ERR_WHERE", -1)} ? {_c_string(where)} : ""));
    }}
  }}
  return ffi::Error::Success();
}}

XLA_FFI_DEFINE_HANDLER_SYMBOL(vxc_{lay.kernel}_ffi, vxc_{lay.kernel}_impl,
                              ffi::Ffi::Bind(){binds});
"""
    )


def symbol(lay: Layout) -> str:
    return f"vxc_{lay.kernel}_ffi"


def compiler() -> str:
    """The C++ compiler: $CXX, else c++, g++ or clang++ on PATH."""
    found = os.environ.get("CXX") or next(
        (c for c in ("c++", "g++", "clang++") if shutil.which(c)), None
    )
    if not found:
        raise NotRunnableHere(
            "Kernel.to_jax needs a C++ compiler to build its XLA FFI handler: none of "
            "$CXX, c++, g++, clang++ is on PATH"
        )
    return found


def command(cxx: str, include: str, src: Path, obj: Path, out: Path) -> list[str]:
    """Compile `src` with the artifact's object `obj` (position-independent, as its own
    shared library is linked from it) into one library whose calls stay inside it."""
    return [cxx, *CXX_FLAGS, f"-I{include}", f"-I{obj.parent}", str(src), str(obj),
            "-Wl,-Bsymbolic", "-o", str(out)]  # fmt: skip


def build(text: str, obj: Path, name: str, include: str) -> Path:
    """The handler library for C++ `text`, beside the artifact's object `obj`: reused when a
    file of its digest is there, else compiled (to a temporary name, then renamed, so a
    concurrent build never leaves a half-written file under the cached name)."""
    cxx = compiler()
    h = hashlib.sha256(text.encode())
    for part in (
        obj.read_bytes(),
        cxx.encode(),
        " ".join(CXX_FLAGS).encode(),
        include.encode(),
    ):
        h.update(b"\0" + part)
    out = obj.parent / f"{name}.{h.hexdigest()[:DIGEST_CHARS]}{SUFFIX}"
    if out.is_file():
        return out
    with tempfile.TemporaryDirectory(prefix="vxc-jax-") as tmp:
        src = Path(tmp) / f"{name}_ffi.cc"
        src.write_text(text)
        partial = obj.parent / f".{out.name}.{os.getpid()}.tmp"
        run = subprocess.run(
            command(cxx, include, src, obj, partial), capture_output=True, text=True
        )
        if run.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(
                f"building the XLA FFI handler of kernel '{name}' failed "
                f"({' '.join(command(cxx, include, src, obj, out))}):\n{run.stderr}"
            )
        os.replace(partial, out)
    return out
