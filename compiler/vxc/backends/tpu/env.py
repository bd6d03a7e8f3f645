"""Process environment for jax and libtpu in a compiler process (set before jax loads).

The backend builds and checks TPU artifacts on a machine without a TPU, so:
- `JAX_PLATFORMS=cpu`: jax needs no accelerator to export for platform tpu, and would
  otherwise probe libtpu as a device plugin (seconds, and log lines) on every build;
  AOT compilation makes its TPU client from a topology description regardless;
- the log level of jaxlib's C++ side is set where vxc first loads jaxlib (`vxc.ir`);
- for libtpu's compile-only client: no metadata-server query (`TPU_SKIP_MDS_QUERY`), no
  one-process lockfile (`ALLOW_MULTIPLE_LIBTPU_LOAD`: test and build workers load it at
  once), and a host description (`TPU_WORKER_HOSTNAMES`, `TPU_ACCELERATOR_TYPE`) so its
  start-up prints no warnings; the chip each compile targets comes from the topology
  (the tests check the device kinds: "TPU v5 lite", "TPU v6 lite").
Values already set by the user win.
"""

from __future__ import annotations

import os

DEFAULTS = {
    "JAX_PLATFORMS": "cpu",
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",
}


def prepare() -> None:
    for k, v in DEFAULTS.items():
        os.environ.setdefault(k, v)
    import jax

    # jaxlib (the MLIR bindings vxc uses everywhere) is loaded before this runs, so jax
    # may not see the variable at its import: say it through jax's config as well (it
    # takes effect until jax's backends start, which vxc's own calls do not precede).
    if jax.config.jax_platforms != os.environ["JAX_PLATFORMS"]:
        jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
