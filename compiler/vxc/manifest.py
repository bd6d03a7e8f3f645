"""What a CPU artifact's manifest promises, and the record of it that the library carries.

The manifest (`x.cpu.json`) tells `vxc.runtime` how to call each kernel: its symbols, the
shapes and dtypes of its parameters and results, its `where` clauses and the status table.
A runtime that trusted an edited manifest would call a kernel with buffers of the wrong
size. So the object exports, for each kernel `K`, a constant `K__vx_abi`: the sha256 (hex,
NUL-terminated) of K's manifest entry and the status table in canonical JSON, written at
build time. The runtime recomputes it from the manifest it reads and refuses a mismatch.
It is in the object, so it holds however the library is linked (vxc's `cc`, or Bazel's
toolchain). Defined once, here: the backend embeds it, the runtime checks it; this module
imports neither jaxlib nor llvmlite.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

ABI_SUFFIX = "__vx_abi"  # `K__vx_abi`: the digest of kernel K's manifest entry
AMX_SUFFIX = "__vx_amx"  # `int32_t K__vx_amx(void)`: whether K's AMX matmuls run (cpu amx.py)
DIGEST_CHARS = 64  # sha256, hex


def abi_digest(entry: Mapping[str, object], status: Mapping[str, int]) -> str:
    """sha256 of one kernel's manifest entry and the status table, canonical JSON."""
    text = json.dumps({"kernel": entry, "status": status}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
