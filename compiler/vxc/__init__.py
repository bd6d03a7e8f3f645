"""vxc: the compiler for the Vx kernel language.

`vxc.compile(source_or_path, target=..., consts=..., **options)` builds a kernel in this
process and returns a `vxc.Kernel` to call (vxc/pyapi.py; docs/TUTORIAL.md). Importing
vxc loads nothing else: the compiler's modules load on first use.
"""

__version__ = "0.1.0"

# Names served lazily from their modules, so that `import vxc` stays instant.
_LAZY = {"compile": "vxc.pyapi", "Kernel": "vxc.pyapi", "CompileError": "vxc.errors"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vxc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
