"""vxc: the compiler for the Vx kernel language."""

__version__ = "0.1.0"
