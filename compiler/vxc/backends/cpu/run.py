"""The cpu's `Way` (vxc.backends.Runner): the native object, called through
`vxc.runtime`, which binds the arguments by name, infers and checks the shape
parameters, writes outputs in place and runs `instances` on its thread pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vxc.backends import RunnableKernel


@dataclass(frozen=True)
class Native:
    def call(self, kernel: RunnableKernel, named: dict[str, Any]) -> Any:
        return kernel.artifact()(**named)

    def launch(
        self, kernel: RunnableKernel, named: dict[str, Any], instances: int, threads: int
    ) -> Any:
        return kernel.artifact().launch(instances=instances, threads=threads, **named)


NATIVE = Native()
