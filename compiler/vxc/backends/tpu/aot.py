"""Ahead-of-time compilation of a TPU artifact with the real TPU compiler (libtpu), against
TPU topology descriptions: no TPU needed. This is what proves Mosaic accepts the module.

    compile_export(blob, kernel_or_manifest_entry, "v5e")   # raises LibtpuRejected

Topologies are made once per process (`topology`), so a test session or a build worker
pays libtpu's start-up once.
"""

from __future__ import annotations

import os
import re
from functools import cache

from vxc.backends.tpu.errors import LibtpuRejected

# Short names -> the topology libtpu describes (chips per host 2x2, one chip used).
TOPOLOGIES = {"v5e": "v5e:2x2", "v6e": "v6e:2x2", "v5p": "v5p:2x2x1", "v4": "v4:2x2x1"}
DEFAULT_LENGTHS = (4, 300)  # Vec lengths the AOT check specialises the export to


@cache
def topology(name: str):
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    from jax.experimental import topologies

    return topologies.get_topology_desc(platform="tpu", topology_name=TOPOLOGIES.get(name, name))


def compile_export(blob: bytes, kernel, topo: str, length: int = DEFAULT_LENGTHS[0]):
    """Deserialize the export, specialise every Vec length to `length`, and compile it for
    one chip of `topo`. Returns the compiled executable; raises LibtpuRejected."""
    import jax
    from jax import export

    from vxc.backends.tpu.export import arg_specs

    exp = export.deserialize(bytearray(blob))
    dev = topology(topo).devices[0]
    sharding = jax.sharding.SingleDeviceSharding(dev)
    lengths = {s: length for s in kernel.symbols}
    specs = arg_specs(kernel, lengths, sharding)
    try:
        return jax.jit(exp.call).trace(*specs).lower().compile()
    except jax.errors.JaxRuntimeError as e:
        raise LibtpuRejected(readable(str(e), topo, kernel.name)) from None


def readable(message: str, topo: str, kernel: str) -> str:
    """libtpu's error as one block: its message and the op it names, without jax's
    bug-report boilerplate."""
    lines = [ln.rstrip() for ln in message.strip().splitlines()]
    keep = [ln for ln in lines if ln and not re.match(r"Please report a bug", ln)]
    body = "\n".join(f"  | {ln}" for ln in keep)
    return f"libtpu rejected kernel `{kernel}` for {topo} ({TOPOLOGIES.get(topo, topo)}):\n{body}"
