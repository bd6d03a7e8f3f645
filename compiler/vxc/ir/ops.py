"""The one table of vx op definitions, and the typed views generated from it.

Builders (`build`, and one helper per op in `vxc.ir.builders`), the verifier
(`vxc.ir.verify`), the reference (docs/IR.md, `vxc.ir.docs`) and the backends (through
the views: `TransferOp(op).slots`, `MatmulAccOp(op).acc`) all read `OPS`, so an op's
contract is written down exactly once. `ring_layout` is the one reading of a placing
op's ring (the verifier and every backend call it); `CALL_PLACEMENT` is the placement
attribute group a `func.call` carries when its result lands in a scratchpad ring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxlib.mlir import ir

from vxc.hir.tiles import COMPARISONS, FN_ELEMENTS, UNARY_CALLS
from vxc.ir import types as T

# ---------------------------------------------------------------------------
# Type constraints: a predicate plus the words the verifier and docs use.


@dataclass(frozen=True)
class TypeConstraint:
    summary: str
    check: Callable[[ir.Type], bool]


def _placed(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and T.space_of(t) is not None


def _placed_tensor(t: ir.Type) -> bool:
    return _placed(t) and t.rank >= 1


def _placed_vec(t: ir.Type) -> bool:
    return _placed(t) and t.rank >= 2


PLACED = TypeConstraint('placed tensor `memref<d0x..xE, "SPACE">`', _placed_tensor)
VEC = TypeConstraint('placed Vec `memref<?xd0x..xE, "SPACE">`', _placed_vec)
TOKEN = TypeConstraint("token `!vx.token<memref<...>>`", lambda t: T.token_inner(t) is not None)
INDEX = TypeConstraint("`index`", lambda t: isinstance(t, ir.IndexType))
I64 = TypeConstraint(
    "`i64`", lambda t: isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 64
)
TILE_OR_SCALAR = TypeConstraint(
    "placed tensor, or a scalar (float, `i32`, `i64` or `i1`)",
    lambda t: (
        _placed_tensor(t)
        or isinstance(t, ir.FloatType)
        or (isinstance(t, ir.IntegerType) and ir.IntegerType(t).width in (1, 32, 64))
    ),
)
SCALAR = TypeConstraint(
    "scalar (float, `i32`, `i64` or `i1`)",
    lambda t: (
        isinstance(t, ir.FloatType)
        or (isinstance(t, ir.IntegerType) and ir.IntegerType(t).width in (1, 32, 64))
    ),
)
I1 = TypeConstraint(
    "`i1`", lambda t: isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1
)


@dataclass(frozen=True)
class Operand:
    name: str
    type: TypeConstraint
    doc: str
    variadic: bool = False  # the last operand only: zero or more values (a view's offsets)


@dataclass(frozen=True)
class Result:
    name: str
    type: TypeConstraint
    doc: str


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str  # "str" (StringAttr) or "i64" (64-bit signless IntegerAttr)
    doc: str
    # Builder default; None = the builder requires it. Every attr is required in the IR.
    default: str | int | None = None


Verifier = Callable[[ir.Operation], list[str]]
# Infers result types from operand types and attribute values (for builders).
Infer = Callable[[list[ir.Type], dict[str, object]], list[ir.Type]]


@dataclass(frozen=True)
class OpDef:
    name: str
    doc: str
    operands: tuple[Operand, ...]
    results: tuple[Result, ...]
    attrs: tuple[Attr, ...]
    verify: Verifier
    infer: Infer
    verifier_doc: str


def arity_error(d: OpDef, n: int) -> str | None:
    """Why `n` operands do not fit `d` (a trailing variadic operand takes any number)."""
    fixed = len(d.operands) - (1 if d.operands and d.operands[-1].variadic else 0)
    if fixed != len(d.operands):
        return None if n >= fixed else f"expects at least {fixed} operand(s), got {n}"
    return None if n == fixed else f"expects {fixed} operand(s), got {n}"


def operand_specs(d: OpDef, n: int) -> list[Operand]:
    """The table's operand for each of `n` operands (the variadic one repeated)."""
    specs = list(d.operands)
    if specs and specs[-1].variadic:
        return specs[:-1] + [specs[-1]] * (n - len(specs) + 1)
    return specs


# ---------------------------------------------------------------------------
# Attribute access (called only after the generic checks passed).


def attr_str(op: ir.Operation, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value


def attr_int(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


# ---------------------------------------------------------------------------
# Placement attributes shared by transfer, transfer_async and zeros.

_ALLOC_ATTRS = (
    Attr("offset", "i64", "byte offset of the ring base inside the space", 0),
    Attr("slots", "i64", "ring length (>= 1); execution n uses slot n mod slots", 1),
    # Builder default: the tensor size rounded up to the granule.
    Attr("slot_bytes", "i64", "granule-rounded size of one slot in bytes"),
    Attr("ring", "i64", "ring id shared by ops that rotate one counter; -1 = no ring", -1),
)

_TRANSFER_ATTRS = (
    Attr("space", "str", "destination Vx memory space"),
    Attr("from", "str", "source Vx memory space (one hop)"),
    Attr("within", "str", 'parent space of the destination, "" if none', ""),
    Attr("capacity", "i64", "destination capacity in bytes, 0 = unbounded", 0),
    Attr("granule", "i64", "destination allocation granule in bytes, 0 = none", 0),
    *_ALLOC_ATTRS,
    Attr("scope", "str", 'destination scope (device, sm, ...), "" if none', ""),
    Attr("edge_cost", "i64", "cost of the declared transfer edge", 0),
)


@dataclass(frozen=True)
class RingLayout:
    """Where a placing op's buffer lives. Ops that share a ring id rotate one counter
    (execution n uses slot n mod slots), so they agree on the whole layout; `ring = -1`
    is a private buffer the backend provides (offset ignored)."""

    ring: int
    space: str
    offset: int
    slots: int
    slot_bytes: int

    @property
    def end(self) -> int:
        """The byte past the ring's last slot, inside its space."""
        return self.offset + self.slots * self.slot_bytes

    @property
    def shared(self) -> bool:
        return self.ring >= 0


_LAYOUT_ATTRS = ("ring", "offset", "slots", "slot_bytes")


def ring_layout(op: ir.Operation) -> RingLayout | None:
    """The ring layout of a vx placing op or a placed `func.call`; None for any other op
    (a `func.call` without placement attributes, an op without a ring)."""
    attrs = op.attributes
    if not all(a in attrs for a in _LAYOUT_ATTRS) or "space" not in attrs:
        return None
    return RingLayout(
        attr_int(op, "ring"),
        attr_str(op, "space"),
        attr_int(op, "offset"),
        attr_int(op, "slots"),
        attr_int(op, "slot_bytes"),
    )


def _check_allocation(op: ir.Operation, placed: ir.MemRefType, bounded: bool) -> list[str]:
    """slot/granule/capacity arithmetic of a ring allocation."""
    errs: list[str] = []
    lay = ring_layout(op)
    slots, slot_bytes, offset, ring = lay.slots, lay.slot_bytes, lay.offset, lay.ring
    if ring < -1:
        errs.append(f"ring must be >= -1, got {ring}")
    if slots < 1:
        errs.append(f"slots must be >= 1, got {slots}")
    if ring >= 0 and offset < 0:  # ring -1: offset is ignored
        errs.append(f"offset must be >= 0, got {offset}")
    nbytes = T.static_bytes(placed)
    if nbytes is not None and slot_bytes < nbytes:
        errs.append(f"slot_bytes {slot_bytes} is smaller than the tensor ({nbytes} bytes)")
    if not bounded:
        return errs
    granule, capacity = attr_int(op, "granule"), attr_int(op, "capacity")
    if granule < 0 or capacity < 0:
        errs.append("granule and capacity must be >= 0")
        return errs
    if ring >= 0 and granule > 0 and offset % granule != 0:
        errs.append(f"offset {offset} is not a multiple of the granule {granule}")
    if ring >= 0 and capacity > 0 and lay.end > capacity:
        errs.append(
            f"ring end offset + slots*slot_bytes = {lay.end} "
            f"exceeds the capacity of {attr_str(op, 'space')} ({capacity} bytes)"
        )
    return errs


def _check_placed_copy(op: ir.Operation, src: ir.MemRefType, dst: ir.MemRefType) -> list[str]:
    errs: list[str] = []
    if list(src.shape) != list(dst.shape) or src.element_type != dst.element_type:
        errs.append(f"result type {dst} must have the shape and element type of the operand {src}")
    if T.space_of(dst) != attr_str(op, "space"):
        errs.append(f'result memory space "{T.space_of(dst)}" != space "{attr_str(op, "space")}"')
    if T.space_of(src) != attr_str(op, "from"):
        errs.append(f'operand memory space "{T.space_of(src)}" != from "{attr_str(op, "from")}"')
    return errs + _check_allocation(op, dst, bounded=True)


def _verify_transfer(op: ir.Operation) -> list[str]:
    return _check_placed_copy(op, op.operands[0].type, op.results[0].type)


def _verify_transfer_async(op: ir.Operation) -> list[str]:
    return _check_placed_copy(op, op.operands[0].type, T.token_inner(op.results[0].type))


def _placed_like(src: ir.Type, space: str) -> ir.MemRefType:
    shape = [None if d == T.DYNAMIC else d for d in src.shape]
    return T.memref_type(shape, str(src.element_type), space)


def _infer_transfer(ts: list[ir.Type], attrs: dict[str, object]) -> list[ir.Type]:
    return [_placed_like(ts[0], str(attrs["space"]))]


def _infer_transfer_async(ts: list[ir.Type], attrs: dict[str, object]) -> list[ir.Type]:
    return [T.token_type(_placed_like(ts[0], str(attrs["space"])))]


def _verify_wait(op: ir.Operation) -> list[str]:
    inner = T.token_inner(op.operands[0].type)
    if op.results[0].type != inner:
        return [f"result type {op.results[0].type} != the token's tensor type {inner}"]
    return []


TRANSPOSES = ("", "a", "b", "ab")  # `vx.matmul_acc`'s operands read transposed


def _verify_matmul_acc(op: ir.Operation) -> list[str]:
    acc, a, b = (o.type for o in op.operands)
    transpose = attr_str(op, "transpose")
    if transpose not in TRANSPOSES:
        return [f"transpose must be one of {TRANSPOSES}, got {transpose!r}"]
    errs: list[str] = []
    for label, t in (("acc", acc), ("a", a), ("b", b)):
        if t.rank != 2:
            errs.append(f"{label} must be a rank-2 tensor, got {t}")
    if errs:
        return errs
    if str(acc.element_type) != "f32":
        errs.append(f"acc must have element type f32, got {acc.element_type}")
    if a.element_type != b.element_type:
        errs.append(
            f"a and b must share an element type, got {a.element_type} and {b.element_type}"
        )
    m, n = acc.shape
    am, k = a.shape[::-1] if "a" in transpose else a.shape
    bk, bn = b.shape[::-1] if "b" in transpose else b.shape
    if not (_dims_agree(m, am) and _dims_agree(k, bk) and _dims_agree(n, bn)):
        errs.append(
            f"shapes do not agree for acc[MxN] += a[MxK] @ b[KxN] (transposed: "
            f"{transpose!r}): {acc}, {a}, {b}"
        )
    return errs


def _dims_agree(x: int, y: int) -> bool:
    return x == y or T.DYNAMIC in (x, y)


def _verify_zeros(op: ir.Operation) -> list[str]:
    res = op.results[0].type
    errs = []
    if not res.has_static_shape:
        errs.append(f"result {res} must have a static shape (vx.zeros takes no size operands)")
    if T.space_of(res) != attr_str(op, "space"):
        errs.append(f'result memory space "{T.space_of(res)}" != space "{attr_str(op, "space")}"')
    return errs + _check_allocation(op, res, bounded=False)


def _verify_element(op: ir.Operation) -> list[str]:
    vec, res = op.operands[0].type, op.results[0].type
    if (
        list(vec.shape[1:]) != list(res.shape)
        or vec.element_type != res.element_type
        or T.space_of(vec) != T.space_of(res)
    ):
        return [f"result {res} must be one tile of the Vec {vec} (same tile shape, element, space)"]
    return _check_proof(op, "proved")


def _infer_element(ts: list[ir.Type], attrs: dict[str, object]) -> list[ir.Type]:
    vec = ts[0]
    shape = [None if d == T.DYNAMIC else d for d in vec.shape[1:]]
    return [T.memref_type(shape, str(vec.element_type), T.space_of(vec))]


_PROOF_ATTR = Attr(
    "proved",
    "i64",
    "1: the checker proved the region inside the tensor for every allowed value (E6041), "
    "so no run-time check is made; 0: not proved, the backend checks it at run time",
    1,
)

_STORE_OPERANDS = (
    Operand("src", PLACED, "the tile, static shape, in space `from`"),
    Operand("dst", PLACED, "the output (a `&mut` tensor argument) in `space`"),
    Operand("offsets", INDEX, "the region's first element, per dimension", True),
)

_STORE_ATTRS = (
    Attr("space", "str", "the output's Vx memory space"),
    Attr("from", "str", "the stored tile's space (one hop)"),
    Attr("edge_cost", "i64", "cost of the declared transfer edge (0: already in place)", 0),
    _PROOF_ATTR,
    Attr(
        "disjoint",
        "i64",
        "1: the checker proved that two instances never store to overlapping regions (E6042)",
        1,
    ),
    Attr(
        "edge_view",
        "i64",
        "1: an `edge` view's store (LANGUAGE.md 4.2): the region may reach past the output's "
        "end and only its elements inside the output are written; 0: the region lies inside",
        0,
    ),
)


def _check_region(
    region: list[int], tensor: ir.MemRefType, offsets: int, what: str, edge: bool = False
) -> list[str]:
    """A static region of `tensor` at `offsets` dynamic offsets (one per dimension); an
    `edge` region may be larger than the tensor (it reaches past its end)."""
    errs: list[str] = []
    if len(region) != tensor.rank or offsets != tensor.rank:
        errs.append(
            f"{what} of rank {len(region)} with {offsets} offset(s) does not address the "
            f"rank-{tensor.rank} tensor {tensor}"
        )
        return errs
    if any(d == T.DYNAMIC or d < 1 for d in region):
        errs.append(f"{what} sizes must be static and positive, got {region}")
    for d, full in zip(region, tensor.shape, strict=True):
        if not edge and full != T.DYNAMIC and d > full:
            errs.append(f"{what} size {d} exceeds the tensor's dimension {full}")
    return errs


def _check_proof(op: ir.Operation, *names: str) -> list[str]:
    return [
        f"{n} must be 0 or 1, got {attr_int(op, n)}" for n in names if attr_int(op, n) not in (0, 1)
    ]


def _verify_view(op: ir.Operation) -> list[str]:
    src, res = op.operands[0].type, op.results[0].type
    errs = _check_region(list(res.shape), src, len(op.operands) - 1, "the view")
    if res.element_type != src.element_type or T.space_of(res) != T.space_of(src):
        errs.append(f"result {res} must have the element type and space of {src}")
    return errs + _check_proof(op, "proved")


def _verify_edge_view(op: ir.Operation) -> list[str]:
    src, fill, res = op.operands[0].type, op.operands[1].type, op.results[0].type
    errs = _check_region(list(res.shape), src, len(op.operands) - 2, "the edge view", edge=True)
    if res.element_type != src.element_type or T.space_of(res) != T.space_of(src):
        errs.append(f"result {res} must have the element type and space of {src}")
    if fill != src.element_type:
        errs.append(f"the fill {fill} must be the tensor's element type {src.element_type}")
    return errs + _check_proof(op, "proved")


def _infer_none(ts: list[ir.Type], attrs: dict[str, object]) -> list[ir.Type]:
    return []


def _verify_store(op: ir.Operation) -> list[str]:
    src, dst = op.operands[0].type, op.operands[1].type
    edge = attr_int(op, "edge_view") == 1
    errs = _check_region(list(src.shape), dst, len(op.operands) - 2, "the stored tile", edge)
    if src.element_type != dst.element_type:
        errs.append(f"the stored tile {src} and the output {dst} differ in element type")
    if T.space_of(dst) != attr_str(op, "space"):
        errs.append(f'output memory space "{T.space_of(dst)}" != space "{attr_str(op, "space")}"')
    if T.space_of(src) != attr_str(op, "from"):
        errs.append(f'tile memory space "{T.space_of(src)}" != from "{attr_str(op, "from")}"')
    return errs + _check_proof(op, "proved", "disjoint", "edge_view")


def _verify_store_async(op: ir.Operation) -> list[str]:
    errs = _verify_store(op)
    with op.context:  # a type is built here; the verifier may run outside a context
        want = _placed_like(op.operands[0].type, attr_str(op, "space"))
    if T.token_inner(op.results[0].type) != want:
        errs.append(f"result must be `!vx.token<{want}>` (the tile's region in the output)")
    return errs


def _infer_store_async(ts: list[ir.Type], attrs: dict[str, object]) -> list[ir.Type]:
    return [T.token_type(_placed_like(ts[0], str(attrs["space"])))]


def _no_checks(op: ir.Operation) -> list[str]:
    return []


def _in_function(op: ir.Operation) -> list[str]:
    """The launch grid exists inside a function body (a kernel or a helper it calls)."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    if parent is None:
        return ["must be inside a func.func"]
    return []


def _i64(ts: list[ir.Type], attrs: dict[str, object]) -> list[ir.Type]:
    return [ir.IntegerType.get_signless(64)]


# ---------------------------------------------------------------------------
# Tile arithmetic (LANGUAGE.md §4.3). Each op makes a new tile in `space`, the space of
# its tile operands; a placed one (what a `let` binds) has a ring slot, an intermediate
# inside one expression has `ring = -1` (a private buffer, no scratchpad slot).

_TILE_ATTRS = (
    Attr("space", "str", "Vx memory space of the operands and the result"),
    *_ALLOC_ATTRS,
)
TILE_FNS = {
    "vx.binary": ("add", "sub", "mul", "div", "max", "min", "and", "or"),
    "vx.unary": ("neg", "not", *UNARY_CALLS),
    "vx.reduce": ("sum", "max", "min", "argmax", "argmin"),
    "vx.compare": tuple(COMPARISONS.values()),
}
# The element types of tile arithmetic (vx IR spelling): floats, the two integer types of
# `iota`, and `i1` (bool tiles: comparisons' results, `select`'s condition).
TILE_FLOATS = ("f32", "bf16", "f16", "f64")
TILE_INTS = ("i32", "i64")
# Which fns take which elements (hir/tiles.py, read by the type checker too): "float" =
# TILE_FLOATS, "int" = TILE_INTS, "bool" = i1.


def element_class(t: ir.Type) -> str | None:
    """ "float", "int" or "bool" for a tile element type vx tile arithmetic takes."""
    name = str(t)
    if name in TILE_FLOATS:
        return "float"
    if name in TILE_INTS:
        return "int"
    return "bool" if name == "i1" else None


def _check_fn_elements(op: ir.Operation, elem: ir.Type) -> list[str]:
    fn = attr_str(op, "fn")
    allowed = FN_ELEMENTS.get(fn, ("float",))
    if element_class(elem) not in allowed:
        return [f"fn {fn} takes {' or '.join(allowed)} elements, got {elem}"]
    return []


def _check_tile_result(op: ir.Operation, tiles: list[ir.MemRefType]) -> list[str]:
    """The shared rules: the tile operands and the result live in `space`; `fn` is known."""
    res = op.results[0].type
    errs: list[str] = []
    if not isinstance(res, ir.MemRefType) or not res.has_static_shape:
        return [f"result {res} must be a placed tensor of static shape"]
    space = attr_str(op, "space")
    for t in [*tiles, res]:
        if T.space_of(t) != space:
            errs.append(f'{t} is not in space "{space}" (tile operands share one space: E6044)')
    fns = TILE_FNS.get(op.name)
    if fns is not None and attr_str(op, "fn") not in fns:
        errs.append(f"fn must be one of {', '.join(fns)}, got {attr_str(op, 'fn')!r}")
    return errs + _check_allocation(op, res, bounded=False)


def _broadcasts(shape: list[int], to: list[int]) -> bool:
    """numpy broadcasting of `shape` to `to`: trailing dimensions equal or 1."""
    if len(shape) > len(to):
        return False
    return all(d in (1, t) for d, t in zip(reversed(shape), reversed(to), strict=False))


def _verify_binary(op: ir.Operation) -> list[str]:
    res = op.results[0].type
    tiles = [o.type for o in op.operands if isinstance(o.type, ir.MemRefType)]
    if not tiles:
        return ["at least one operand must be a tile"]
    errs = _check_tile_result(op, tiles)
    errs += _elementwise(op, res, res.element_type)
    return errs + _check_fn_elements(op, res.element_type)


def _elementwise(op: ir.Operation, res: ir.MemRefType, elem: ir.Type) -> list[str]:
    """Every operand is a tile of element `elem` broadcasting to `res`, or a scalar of
    `elem`'s class (a float scalar for a float tile: it is converted like a literal)."""
    errs = []
    for o in op.operands:
        t = o.type
        if isinstance(t, ir.MemRefType):
            if t.element_type != elem:
                errs.append(f"tile operand {t} does not have the element type {elem}")
            if not _broadcasts(list(t.shape), list(res.shape)):
                errs.append(f"tile operand {t} does not broadcast to the result {res}")
        elif element_class(t) != element_class(elem):
            errs.append(f"scalar operand {t} is not of the tiles' kind ({elem})")
    return errs


def _verify_unary(op: ir.Operation) -> list[str]:
    src, res = op.operands[0].type, op.results[0].type
    errs = _check_tile_result(op, [src])
    if list(src.shape) != list(res.shape) or src.element_type != res.element_type:
        errs.append(f"result {res} must have the shape and element type of {src}")
    return errs + _check_fn_elements(op, src.element_type)


def _verify_reduce(op: ir.Operation) -> list[str]:
    src, res = op.operands[0].type, op.results[0].type
    errs = _check_tile_result(op, [src])
    axis = attr_int(op, "axis")
    if not 0 <= axis < src.rank:
        return [*errs, f"axis {axis} is not a dimension of {src}"]
    want = [1 if i == axis else d for i, d in enumerate(src.shape)]
    index = attr_str(op, "fn") in ("argmax", "argmin")
    elem = ir.IntegerType.get_signless(32, op.context) if index else src.element_type
    if list(res.shape) != want or res.element_type != elem:
        errs.append(f"result {res} must be {want} of {elem}: dimension {axis} reduced to 1")
    return errs + _check_fn_elements(op, src.element_type)


def _verify_cast(op: ir.Operation) -> list[str]:
    src, res = op.operands[0].type, op.results[0].type
    errs = _check_tile_result(op, [src])
    if list(src.shape) != list(res.shape):
        errs.append(f"result {res} must have the shape of {src}")
    kinds = element_class(src.element_type), element_class(res.element_type)
    if None in kinds or kinds[1] == "bool":
        errs.append(
            f"cast converts float, i32/i64 and i1 tiles to float or i32/i64, got {src} -> {res}"
        )
    return errs


def _verify_compare(op: ir.Operation) -> list[str]:
    res = op.results[0].type
    tiles = [o.type for o in op.operands if isinstance(o.type, ir.MemRefType)]
    if not tiles:
        return ["at least one operand must be a tile"]
    errs = _check_tile_result(op, tiles)
    if str(res.element_type) != "i1":
        errs.append(f"result {res} must be an i1 tile")
    elem = tiles[0].element_type
    if element_class(elem) not in ("float", "int"):
        errs.append(f"comparisons take float or i32/i64 tiles, got {elem}")
    return errs + _elementwise(op, res, elem)


def _verify_select(op: ir.Operation) -> list[str]:
    res = op.results[0].type
    cond = op.operands[0].type
    values = [o.type for o in op.operands[1:] if isinstance(o.type, ir.MemRefType)]
    errs = _check_tile_result(op, [cond, *values])
    if not isinstance(cond, ir.MemRefType) or str(cond.element_type) != "i1":
        return [*errs, f"the condition {cond} must be an i1 tile"]
    if not _broadcasts(list(cond.shape), list(res.shape)):
        errs.append(f"the condition {cond} does not broadcast to the result {res}")
    if element_class(res.element_type) is None:
        errs.append(f"result {res} has no tile element type")
    for o in op.operands[1:]:
        t = o.type
        if isinstance(t, ir.MemRefType):
            if t.element_type != res.element_type:
                errs.append(f"value {t} does not have the result's element type")
            if not _broadcasts(list(t.shape), list(res.shape)):
                errs.append(f"value {t} does not broadcast to the result {res}")
        elif element_class(t) != element_class(res.element_type):
            errs.append(f"scalar value {t} is not of the result's kind ({res.element_type})")
    return errs


def _verify_iota(op: ir.Operation) -> list[str]:
    res = op.results[0].type
    errs = _check_tile_result(op, [])
    axis = attr_int(op, "axis")
    if isinstance(res, ir.MemRefType) and not 0 <= axis < res.rank:
        errs.append(f"axis {axis} is not a dimension of {res}")
    if isinstance(res, ir.MemRefType) and str(res.element_type) not in TILE_INTS:
        errs.append(f"result {res} must be an i32 or i64 tile")
    return errs


def _verify_transpose(op: ir.Operation) -> list[str]:
    src, res = op.operands[0].type, op.results[0].type
    errs = _check_tile_result(op, [src])
    if src.rank != 2 or list(res.shape) != list(reversed(src.shape)):
        errs.append(f"result {res} must be the 2-D operand {src} transposed")
    if src.element_type != res.element_type:
        errs.append(f"result {res} must have the element type of {src}")
    return errs


_TILE_DOC = (
    " The result is a new tile in `space` (ring >= 0: a placed tile with a scratchpad "
    "slot; -1: an intermediate of one expression, a private buffer); bf16/f16 compute in "
    "f32 and round to nearest even."
)


OPS: dict[str, OpDef] = {
    d.name: d
    for d in (
        OpDef(
            "vx.transfer",
            "Blocking one-hop move of a tensor into `space`; returns the placed tensor.",
            (Operand("src", PLACED, "tensor in space `from`"),),
            (Result("dst", PLACED, "the same tensor placed in `space`"),),
            _TRANSFER_ATTRS,
            _verify_transfer,
            _infer_transfer,
            "result shape/element = operand's; result space == `space`; operand space == "
            "`from`; slot_bytes >= tensor bytes; slots >= 1; for ring >= 0 (offset is ignored "
            "otherwise): offset >= 0, offset % granule == 0 (granule > 0), "
            "offset + slots*slot_bytes <= capacity (capacity > 0).",
        ),
        OpDef(
            "vx.transfer_async",
            "Starts a one-hop move into `space`; returns a token yielding the placed tensor.",
            (Operand("src", PLACED, "tensor in space `from`"),),
            (Result("token", TOKEN, "`!vx.token` of the placed tensor type"),),
            _TRANSFER_ATTRS,
            _verify_transfer_async,
            _infer_transfer_async,
            "as `vx.transfer`, applied to the token's inner tensor type.",
        ),
        OpDef(
            "vx.wait",
            "Consumes a token; blocks until its transfer completed; returns the placed tensor.",
            (Operand("token", TOKEN, "token from `vx.transfer_async`"),),
            (Result("dst", PLACED, "the placed tensor"),),
            (),
            _verify_wait,
            lambda ts, attrs: [T.token_inner(ts[0])],
            "result type == the token's inner type exactly.",
        ),
        OpDef(
            "vx.matmul_acc",
            "`acc += a @ b` in place.",
            (
                Operand("acc", PLACED, "MxN f32 accumulator, updated in place"),
                Operand("a", PLACED, "MxK (KxM when read transposed)"),
                Operand("b", PLACED, "KxN (NxK when read transposed), same element type as a"),
            ),
            (),
            (
                Attr(
                    "transpose",
                    "str",
                    'the operands read transposed: "", "a", "b" or "ab" (the pass '
                    "`fold-transpose` folds a `vx.transpose` feeding the op into it)",
                    "",
                ),
            ),
            _verify_matmul_acc,
            lambda ts, attrs: [],
            "all rank 2; acc is f32; a and b share an element type; transpose is one of "
            '"", "a", "b", "ab"; M, N, K agree (a transposed operand read as its transpose).',
        ),
        OpDef(
            "vx.zeros",
            "A new zero-filled tensor in `space`.",
            (),
            (Result("dst", PLACED, "zero-filled tensor of static shape"),),
            (Attr("space", "str", "Vx memory space of the new tensor"), *_ALLOC_ATTRS),
            _verify_zeros,
            lambda ts, attrs: [],
            "result shape static; result space == `space`; slots >= 1; slot_bytes >= tensor bytes.",
        ),
        OpDef(
            "vx.element",
            "A view of tile `i` of a Vec (no copy).",
            (Operand("vec", VEC, "the Vec"), Operand("i", INDEX, "tile index")),
            (Result("tile", PLACED, "view of tile i, in the Vec's space"),),
            (
                Attr(
                    "proved",
                    "i64",
                    "1: the checker proved 0 <= i < len for every allowed value (E6041), so "
                    "no run-time check is made; 0: not proved, the backend checks it at run time",
                    0,
                ),
            ),
            _verify_element,
            _infer_element,
            "result = the Vec type without its leading dimension (same element and space).",
        ),
        OpDef(
            "vx.view",
            "A rectangular region of a tensor (LANGUAGE.md §4.2): static sizes (the result "
            "type), dynamic offsets (one `index` per dimension). No copy: a transfer from it "
            "copies the region (cpu: a strided copy; tpu: a DMA of a strided slice; "
            "b200/h100: a TMA box at the offsets).",
            (
                Operand("src", PLACED, "the whole tensor"),
                Operand("offsets", INDEX, "the region's first element, per dimension", True),
            ),
            (Result("region", PLACED, "the region: static shape, the tensor's element and space"),),
            (_PROOF_ATTR,),
            _verify_view,
            lambda ts, attrs: [],
            "one offset per dimension; result rank == operand rank; result sizes static, "
            "positive, and within the operand's static dimensions; same element type and "
            "space; proved is 0 or 1.",
        ),
        OpDef(
            "vx.edge_view",
            "A region of a tensor that may reach past its end (`edge(x[..], fill)`, "
            "LANGUAGE.md §4.2): static sizes, dynamic offsets. A transfer from it copies the "
            "elements inside the tensor and gives every other element the value `fill` "
            "(cpu: a clamped copy and a fill; tpu: a clamped DMA and a fill; b200/h100: the "
            "tensor map's out-of-bounds zero fill, and a select for another fill).",
            (
                Operand("src", PLACED, "the whole tensor"),
                Operand("fill", SCALAR, "the value of the elements outside the tensor"),
                Operand("offsets", INDEX, "the region's first element, per dimension", True),
            ),
            (Result("region", PLACED, "the region: static shape, the tensor's element and space"),),
            (
                Attr(
                    "proved",
                    "i64",
                    "1: the checker proved `0 <= offset` in every dimension (E6041; the end "
                    "may pass the tensor's); 0: the backend checks it at run time",
                    1,
                ),
            ),
            _verify_edge_view,
            lambda ts, attrs: [],
            "one offset per dimension; result rank == operand rank; result sizes static and "
            "positive (they may exceed the operand's); same element type and space; fill of "
            "the element type; proved is 0 or 1.",
        ),
        OpDef(
            "vx.store",
            "Blocking store of a tile into a region of an output (`transfer(t, c[view])`), "
            "one hop from `from` to `space`; the tile is only read.",
            _STORE_OPERANDS,
            (),
            _STORE_ATTRS,
            _verify_store,
            _infer_none,
            "one offset per output dimension; tile rank == output rank; tile sizes static and "
            "within the output's static dimensions; same element type; output space == "
            "`space`; tile space == `from`; proved and disjoint are 0 or 1.",
        ),
        OpDef(
            "vx.store_async",
            "Starts a store (`transfer_async(t, c[view])`); the token's `vx.wait` completes "
            "it. The tile must not change until then (E6043).",
            _STORE_OPERANDS,
            (Result("token", TOKEN, "`!vx.token` of the region (the tile's shape in `space`)"),),
            _STORE_ATTRS,
            _verify_store_async,
            _infer_store_async,
            "as `vx.store`; the result is the token of the tile's type placed in `space`.",
        ),
        OpDef(
            "vx.len",
            "Number of tiles in a Vec.",
            (Operand("vec", VEC, "the Vec"),),
            (Result("n", INDEX, "tile count"),),
            (),
            _no_checks,
            lambda ts, attrs: [ir.IndexType.get()],
            "operand is a placed Vec.",
        ),
        OpDef(
            "vx.instance",
            "This instance's index in the launch grid (LANGUAGE.md §4.1): "
            "`0 <= instance < instances`. cpu: the index the launcher hands the instance; "
            "tpu: the program id of grid dimension 0; b200/h100: `blockIdx.x`.",
            (),
            (Result("index", I64, "the instance index, `0 <= index < instances`"),),
            (),
            _in_function,
            _i64,
            "result is i64; inside a func.func.",
        ),
        OpDef(
            "vx.instances",
            "How many instances the kernel was launched as (`>= 1`; 1 for a plain call). "
            "cpu: the launch's instance count; tpu: the grid size; b200/h100: `gridDim.x`.",
            (),
            (Result("count", I64, "the instance count, `>= 1`"),),
            (),
            _in_function,
            _i64,
            "result is i64; inside a func.func.",
        ),
        OpDef(
            "vx.binary",
            "Elementwise `lhs fn rhs` (`add`, `sub`, `mul`, `div`, `max`, `min` on float "
            "tiles, all but `div` on i32/i64 tiles, wrapping; `and`, `or` on i1 tiles) with "
            "numpy broadcasting: a tile operand is the result's shape or broadcasts to it "
            "(`[M, 1]` / `[1, N]` against `[M, N]`); a scalar operand applies to every "
            "element." + _TILE_DOC,
            (
                Operand("lhs", TILE_OR_SCALAR, "tile in `space`, or a scalar"),
                Operand("rhs", TILE_OR_SCALAR, "tile in `space`, or a scalar"),
            ),
            (Result("dst", PLACED, "the new tile: the broadcast shape, the tiles' element"),),
            (Attr("fn", "str", "add, sub, mul, div, max, min, and or or"), *_TILE_ATTRS),
            _verify_binary,
            lambda ts, attrs: [],
            "at least one tile operand; every tile operand has the result's element type and "
            "broadcasts to its shape; tiles and result in `space`; fn known; slots >= 1; "
            "slot_bytes >= tensor bytes.",
        ),
        OpDef(
            "vx.unary",
            "Elementwise `fn(src)`: `neg` (negation), "
            + ", ".join(f"`{k}` ({v})" for k, v in UNARY_CALLS.items())
            + " (accuracy per target: docs/LANGUAGE.md section 9)."
            + _TILE_DOC,
            (Operand("src", PLACED, "tile in `space`"),),
            (Result("dst", PLACED, "the new tile, the operand's shape and element"),),
            (Attr("fn", "str", "one of: " + ", ".join(TILE_FNS["vx.unary"])), *_TILE_ATTRS),
            _verify_unary,
            lambda ts, attrs: [],
            "result shape and element = operand's; both in `space`; fn known.",
        ),
        OpDef(
            "vx.reduce",
            "`src.fn(axis)`: `sum`, `max`, `min` over dimension `axis`, kept as size 1 "
            "(float tiles accumulated in f32, integer tiles in their type, wrapping), or "
            "`argmax` / `argmin`: the i32 index of the first extreme (a NaN is the extreme, "
            "as numpy's)." + _TILE_DOC,
            (Operand("src", PLACED, "tile in `space`"),),
            (Result("dst", PLACED, "the operand's shape with dimension `axis` = 1"),),
            (
                Attr("fn", "str", "sum, max, min, argmax or argmin"),
                Attr("axis", "i64", "the reduced dimension"),
                *_TILE_ATTRS,
            ),
            _verify_reduce,
            lambda ts, attrs: [],
            "0 <= axis < rank; result = operand's shape with dimension axis = 1, same "
            "element; both in `space`; fn known.",
        ),
        OpDef(
            "vx.cast",
            "Element type conversion of a tile: to a float rounds to nearest even; float to "
            "i32/i64 truncates toward zero, saturating (NaN gives 0); an i1 tile gives 0 or "
            "1." + _TILE_DOC,
            (Operand("src", PLACED, "tile in `space`"),),
            (Result("dst", PLACED, "the operand's shape, the new element type"),),
            _TILE_ATTRS,
            _verify_cast,
            lambda ts, attrs: [],
            "result shape = operand's; float, i32/i64 or i1 to float or i32/i64; both in `space`.",
        ),
        OpDef(
            "vx.compare",
            "Elementwise comparison `lhs fn rhs` (`lt`, `le`, `gt`, `ge`, `eq`, `ne`), "
            "broadcasting as `vx.binary`, into an i1 tile (a bool tile: one byte per "
            "element in memory). Floats compare as IEEE and numpy do: a NaN operand makes "
            "every comparison false except `ne`; bf16/f16 compare exactly." + _TILE_DOC,
            (
                Operand("lhs", TILE_OR_SCALAR, "tile in `space`, or a scalar"),
                Operand("rhs", TILE_OR_SCALAR, "tile in `space`, or a scalar"),
            ),
            (Result("dst", PLACED, "the i1 tile of the broadcast shape"),),
            (Attr("fn", "str", "lt, le, gt, ge, eq or ne"), *_TILE_ATTRS),
            _verify_compare,
            lambda ts, attrs: [],
            "at least one tile operand, float or i32/i64, every tile of one element type "
            "broadcasting to the result; result i1; all in `space`; fn known.",
        ),
        OpDef(
            "vx.select",
            "Elementwise `cond ? a : b`, broadcasting the three as `vx.binary` does; `a` "
            "and `b` are tiles of the result's element or scalars." + _TILE_DOC,
            (
                Operand("cond", PLACED, "i1 tile in `space`"),
                Operand("a", TILE_OR_SCALAR, "taken where `cond` holds"),
                Operand("b", TILE_OR_SCALAR, "taken elsewhere"),
            ),
            (Result("dst", PLACED, "the new tile: the broadcast shape"),),
            _TILE_ATTRS,
            _verify_select,
            lambda ts, attrs: [],
            "cond an i1 tile; cond and tile values broadcast to the result; values of the "
            "result's element (scalars of its kind); all in `space`.",
        ),
        OpDef(
            "vx.iota",
            "A new integer tile counting along `axis`: element `[i0, i1, ..]` is "
            "`i_axis`." + _TILE_DOC,
            (),
            (Result("dst", PLACED, "the i32 or i64 tile"),),
            (Attr("axis", "i64", "the dimension that counts"), *_TILE_ATTRS),
            _verify_iota,
            lambda ts, attrs: [],
            "result an i32/i64 tile in `space`; 0 <= axis < rank.",
        ),
        OpDef(
            "vx.transpose",
            "A 2-D tile transposed." + _TILE_DOC,
            (Operand("src", PLACED, "2-D tile in `space`"),),
            (Result("dst", PLACED, "the transposed tile"),),
            _TILE_ATTRS,
            _verify_transpose,
            lambda ts, attrs: [],
            "operand rank 2; result shape = the operand's reversed, same element; both in `space`.",
        ),
        OpDef(
            "vx.require",
            "A launch precondition: one `where` clause of a kernel entry, evaluated at the "
            "start of each instance (LANGUAGE.md §4.1: `where instances() <= tiles.len()`). "
            "The checker assumed it; a backend that can report a status stops the instance "
            "when it is false (cpu: VX_ERR_WHERE); one that cannot may drop it, leaving it to "
            "the caller.",
            (Operand("cond", I1, "the clause's value"),),
            (),
            (Attr("clause", "str", "the clause as written, for messages"),),
            _in_function,
            lambda ts, attrs: [],
            "operand is i1; inside a func.func.",
        ),
    )
}


# ---------------------------------------------------------------------------
# The placement attributes of a `func.call` whose result the plan placed in a ring of
# the caller's (DESIGN.md: "A call's tensor or token result"): all of them or none.

CALL_PLACEMENT: tuple[Attr, ...] = (
    Attr("space", "str", "Vx memory space of the caller's buffer for the result"),
    *(a for a in _ALLOC_ATTRS),
)


def verify_call_placement(op: ir.Operation) -> list[str]:
    """Errors of a `func.call`'s placement attributes (none when it has none)."""
    names = [a.name for a in CALL_PLACEMENT]
    present = [n for n in names if n in op.attributes]
    if not present:
        return []
    if len(present) != len(names):
        missing = [n for n in names if n not in present]
        return [f"placement attributes are all or none: missing {missing}"]
    errs = [
        f"attribute '{a.name}' must be {'a string' if a.kind == 'str' else 'an i64 integer'}"
        for a in CALL_PLACEMENT
        if not attr_ok(op.attributes[a.name], a.kind)
    ]
    if errs:
        return errs
    if len(op.results) != 1:
        return [f"a placed call has one result, got {len(op.results)}"]
    t = op.results[0].type
    placed = T.token_inner(t) if T.is_token(t) else t
    if not isinstance(placed, ir.MemRefType):
        return [f"a placed call's result must be a tensor or token, got {t}"]
    return _check_allocation(op, placed, bounded=False)


def attr_ok(attr: ir.Attribute, kind: str) -> bool:
    """Whether `attr` is of the table's kind ("str" or "i64")."""
    if kind == "str":
        return isinstance(attr, ir.StringAttr)
    return (
        isinstance(attr, ir.IntegerAttr)
        and isinstance(attr.type, ir.IntegerType)
        and ir.IntegerType(attr.type).width == 64
    )


# ---------------------------------------------------------------------------
# Typed views (xDSL's accessors): one class per OPS row, its operands, results and
# attributes as properties named as in the table (`from` is `from_`).


class OpView:
    """A typed accessor over one vx op; `VIEWS[name]` is the generated subclass."""

    __slots__ = ("op",)
    DEF: OpDef

    def __init__(self, op: ir.Operation | ir.OpView):
        self.op = op.operation if isinstance(op, ir.OpView) else op
        if self.op.name != self.DEF.name:
            raise TypeError(f"{type(self).__name__} views {self.DEF.name}, not {self.op.name}")

    @property
    def location(self) -> ir.Location:
        return self.op.location

    @property
    def layout(self) -> RingLayout | None:
        return ring_layout(self.op)


def _getter(kind: str, name: str) -> property:
    read = attr_str if kind == "str" else attr_int
    return property(lambda self: read(self.op, name), doc=f"attribute `{name}` ({kind})")


def _view_class(d: OpDef) -> type[OpView]:
    ns: dict[str, object] = {"__slots__": (), "DEF": d, "__doc__": d.doc}
    for i, o in enumerate(d.operands):
        if o.variadic:  # the trailing variadic operand: every value from its position on
            ns[o.name] = property(lambda self, i=i: list(self.op.operands[i:]), doc=o.doc)
        else:
            ns[o.name] = property(lambda self, i=i: self.op.operands[i], doc=o.doc)
    for i, r in enumerate(d.results):
        ns[r.name] = property(lambda self, i=i: self.op.results[i], doc=r.doc)
    for a in d.attrs:
        ns["from_" if a.name == "from" else a.name] = _getter(a.kind, a.name)
    stem = "".join(w.capitalize() for w in d.name.split(".", 1)[1].split("_"))
    return type(f"{stem}Op", (OpView,), ns)


VIEWS: dict[str, type[OpView]] = {name: _view_class(d) for name, d in OPS.items()}
TransferOp = VIEWS["vx.transfer"]
TransferAsyncOp = VIEWS["vx.transfer_async"]
WaitOp = VIEWS["vx.wait"]
MatmulAccOp = VIEWS["vx.matmul_acc"]
ZerosOp = VIEWS["vx.zeros"]
ElementOp = VIEWS["vx.element"]
LenOp = VIEWS["vx.len"]
InstanceOp = VIEWS["vx.instance"]
InstancesOp = VIEWS["vx.instances"]
RequireOp = VIEWS["vx.require"]
ViewOp = VIEWS["vx.view"]
EdgeViewOp = VIEWS["vx.edge_view"]
StoreOp = VIEWS["vx.store"]
StoreAsyncOp = VIEWS["vx.store_async"]
BinaryOp = VIEWS["vx.binary"]
UnaryOp = VIEWS["vx.unary"]
ReduceOp = VIEWS["vx.reduce"]
CastOp = VIEWS["vx.cast"]
TransposeOp = VIEWS["vx.transpose"]
CompareOp = VIEWS["vx.compare"]
SelectOp = VIEWS["vx.select"]
IotaOp = VIEWS["vx.iota"]
# The tile-arithmetic ops (LANGUAGE.md §4.3). Every backend has a rule or a coded refusal
# for each (tests/backends/test_contract.py), and lowers them its own way: the cpu one op
# at a time, an explicit vector loop over the whole tile (an internal function per site,
# backends/cpu/tiles.py) writing the op's ring slot or arena buffer; the tpu as Mosaic
# vector values kept in vregs, stored into the op's ring slot only where an op needs the
# tile in memory (backends/tpu/vregs.py; the tpu's lowering is the one reader of this
# tuple); nvidia as a `Lazy` per-element expression tree over the ops in registers,
# evaluated only where a tile must exist (backends/nvidia/tiles.py), a `vx.transpose`
# only when folded into a matmul_acc (E7001 otherwise).
TILE_OPS = (
    "vx.binary",
    "vx.unary",
    "vx.reduce",
    "vx.cast",
    "vx.transpose",
    "vx.compare",
    "vx.select",
    "vx.iota",
)


def view(op: ir.Operation) -> OpView:
    """The typed view of vx op `op`."""
    return VIEWS[op.name](op)


# Ops whose result is (a view of) their first operand's buffer: a write through the
# result writes the buffer it came from.
THROUGH = ("vx.element", "vx.wait", "memref.memory_space_cast")


def buffer_root(v: ir.Value) -> ir.Value:
    """The buffer `v` is (a view of): through the ops of THROUGH."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in THROUGH:
        v = v.owner.operation.operands[0]
    return v
