"""What VMEM a tile really takes: Mosaic's (8, 128) tiling, checked before libtpu runs.

Mosaic lays a VMEM array out in tiles of 8 sublanes x 128 lanes of 32-bit words (16 rows
for 16-bit types, 32 for 8-bit): a tile whose last dimension is not a multiple of 128, or
whose second-to-last is not a multiple of the sublane count, is padded up to whole tiles
(libtpu reports such a scratch operand as `f32[262144,1]{1,0:T(8,128)}`, "128.0x
expansion"). Shapes off the tiling are legal - Mosaic pads them - but the padded size is
what must fit in VMEM, and the vx allocator counts unpadded bytes. `check_footprint`
applies the rule to every scratch buffer of a kernel, so a kernel whose padded tiles
overflow VMEM gets a vxc diagnostic naming the tile and the rule, not libtpu's OOM.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from vxc.backends.tpu.errors import fail
from vxc.ir import types as T

LANES = 128
SUBLANES = 8  # of 32-bit words
# vx element type -> Mosaic element type (the ones a TPU kernel may use).
ELEMENTS = {"f32": "f32", "bf16": "bf16", "f16": "f16", "i32": "i32", "i8": "i8", "i16": "i16"}


def mosaic_element(t: ir.Type, op: ir.Operation | None = None) -> str:
    """The Mosaic element type of `t`; a refusal at `op` (the function, for a parameter
    or a result) when it has none."""
    name = str(t)
    if name == "i1":
        raise fail(
            "E7004",
            op,
            "a bool (i1) tensor has no TPU form in HBM (a bool tile lives in vregs as a "
            "mask, in VMEM as i8 0/1); pass or return `cast::<i32>(mask)` instead",
        )
    if name not in ELEMENTS:
        raise fail(
            "E7004", op, f"element type {name} has no TPU form (supported: {sorted(ELEMENTS)})"
        )
    return ELEMENTS[name]


def slot_element(t: ir.Type, op: ir.Operation | None = None) -> str:
    """The Mosaic element of a VMEM scratch buffer holding vx tiles of element `t`: a
    bool (i1) tile is i8 0/1 there (vregs.mask_slot: Mosaic has no i1 memrefs, and i8 is
    the one byte per element the plan's slot counted); others as `mosaic_element`."""
    return "i8" if str(t) == "i1" else mosaic_element(t, op)


def sublanes(element: ir.Type) -> int:
    return SUBLANES * 4 // (T.element_bytes(element) or 4)


def padded_bytes(shape: list[int], element: ir.Type) -> int:
    """Bytes of a VMEM array of `shape` once Mosaic pads it to whole (sublanes, 128) tiles."""
    eb = T.element_bytes(element) or 4
    dims = list(shape) or [1]
    rows = sublanes(element)
    dims[-1] = -(-dims[-1] // LANES) * LANES
    if len(dims) >= 2:
        dims[-2] = -(-dims[-2] // rows) * rows
    n = eb
    for d in dims:
        n *= d
    return n


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def check_footprint(
    buffers: list[tuple[ir.Operation, str, list[int], ir.Type]], capacity: int
) -> None:
    """`buffers`: (op, what, shape incl. slots, element). Raise when their padded sizes
    exceed `capacity`, naming the tile whose padding costs the most."""
    if capacity <= 0:
        return
    sizes = [
        (padded_bytes(s, e), T.element_bytes(e) * _prod(s), op, what, s, e)
        for op, what, s, e in buffers
    ]
    total = sum(p for p, *_ in sizes)
    if total <= capacity:
        return
    padded, raw, op, what, shape, elem = max(sizes, key=lambda x: (x[0] - x[1], x[0]))
    dims = "x".join(str(d) for d in shape)
    rows = sublanes(elem)
    raise fail(
        "E7008",
        op,
        f"{what} ({dims}x{elem}) occupies {_mib(padded)} of VMEM once Mosaic pads it to "
        f"({rows}, {LANES}) tiles (unpadded {_mib(raw)}); the kernel's VMEM scratch then "
        f"totals {_mib(total)}, over the {_mib(capacity)} of VMEM. Rule: VMEM arrays are laid "
        f"out in ({rows}, {LANES}) tiles for {elem} (the (8, 128) tiling of 32-bit words); "
        f"make the last dimension a multiple of {LANES} and the second-to-last a multiple "
        f"of {rows}, or use smaller tiles",
    )


def _prod(xs: list[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
