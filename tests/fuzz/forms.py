"""The newer language forms (LANGUAGE.md 3, 4.2, 4.3): views `x[lo .. hi, ...]`,
`&mut Tensor` outputs, stores `transfer(t, out[view])` and `transfer_async` to a view
then `wait(st);`, shape parameters, const arguments, and tile arithmetic (`+ - * /`,
`exp`, `sqrt`, `tanh`, `log`, `abs`, `rsqrt`, `sigmoid`, `erf`, `max`, `min`, `.sum(a)`,
`.max(a)`, `.min(a)`, `cast::<E>` of a tile and of a scalar, `transpose`, comparisons,
`& | !`, `select`, `.argmax/.argmin(a)`).

`FormsGen` writes kernels from these forms, biased towards ones that check (a row
tile per instance, bounds that follow from the `where` clause); the mutators change
views and tile expressions of any program (the seeds in tests/fuzz/seeds, the
kernels) in the ways that reach the bounds proof, the race proof and the typing.
"""

from __future__ import annotations

import random
import re

from vxc.hir.tiles import UNARY_CALLS

TILE = [8, 16, 32, 64, 128, 256]
ELEMS = ["f32", "f32", "bf16", "f16"]
# The section 4.3 functions of one tile (the type checker's table) and `-`, `transpose`.
UNARY = [*UNARY_CALLS, "-", "transpose"]
BINARY = ["+", "-", "*", "/"]


class FormsGen:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def tile_expr(self, tiles: list[str], scalars: list[str], depth: int = 0) -> str:
        """A tile-valued expression over `tiles` (same shape) and `scalars`."""
        rng = self.rng
        r = rng.random()
        if depth > 2 or r < 0.25:
            return rng.choice(tiles)
        if r < 0.5:
            op = rng.choice(BINARY)
            rhs = (
                rng.choice([*scalars, "2.0", "0.5", "1e30", "0.0"])
                if rng.random() < 0.4
                else self.tile_expr(tiles, scalars, depth + 1)
            )
            return f"({self.tile_expr(tiles, scalars, depth + 1)} {op} {rhs})"
        if r < 0.7:
            f = rng.choice(UNARY)
            inner = self.tile_expr(tiles, scalars, depth + 1)
            return f"-{inner}" if f == "-" else f"{f}({inner})"
        if r < 0.8:
            f = rng.choice(["max", "min"])
            other = rng.choice(["0.0", self.tile_expr(tiles, scalars, depth + 1)])
            return f"{f}({self.tile_expr(tiles, scalars, depth + 1)}, {other})"
        if r < 0.9:
            red = rng.choice(["sum", "max", "min"])
            axis = rng.choice([1, 1, 0, 2, -1])
            base = self.tile_expr(tiles, scalars, depth + 1)
            return (
                f"({base} - {base}.{red}({axis}))"
                if rng.random() < 0.6
                else f"{base}.{red}({axis})"
            )
        if r < 0.95:
            elem = rng.choice(["f32", "bf16", "f16", "i32"])
            return f"cast::<{elem}>({self.tile_expr(tiles, scalars, depth + 1)})"
        return self.mask_expr(tiles, scalars, depth + 1)

    def mask_expr(self, tiles: list[str], scalars: list[str], depth: int) -> str:
        """A select over a comparison (or two, combined), or an argmax / argmin cast back
        to a float and broadcast (LANGUAGE.md 4.3's masks and indices)."""
        rng = self.rng
        a, b = (self.tile_expr(tiles, scalars, depth + 1) for _ in range(2))
        if rng.random() < 0.3:
            f, axis = rng.choice(["argmax", "argmin"]), rng.choice([1, 1, 0, 2])
            return f"({a} - cast::<f32>({b}.{f}({axis})))"
        cond = f"({a} {rng.choice(['<', '<=', '>', '>=', '==', '!='])} {rng.choice([b, '0.0'])})"
        if rng.random() < 0.3:
            cond = f"({cond} {rng.choice(['&', '|'])} !({b} > 0.5))"
        other = rng.choice(["-1e30", "0.0", *scalars, b])
        return f"select({cond}, {a}, {other})"

    def view(self, name: str, row: str, rows: int, cols: int, col: str = "0") -> str:
        rng = self.rng
        hi_r = f"{row} + {rows}"
        hi_c = f"{col} + {cols}"
        k = rng.random()
        if k < 0.1:  # off by one: E6041 territory
            hi_r = f"{row} + {rows + 1}"
        elif k < 0.15:  # an extent that is not a constant: E0106
            hi_r = f"{row} + m"
        elif k < 0.2:
            return f"{name}[{row} .. {hi_r}]"  # too few ranges
        elif k < 0.25:
            return f"{name}[{hi_r} .. {row}, {col} .. {hi_c}]"  # hi < lo
        return f"{name}[{row} .. {hi_r}, {col} .. {hi_c}]"

    def kernel(self, name: str) -> str:
        rng = self.rng
        t = rng.choice(TILE)
        cols = rng.choice([t, 128, 64])
        elem = rng.choice(ELEMS)
        out_elem = rng.choice(["f32", "f32", elem])
        shape_param = rng.random() < 0.8
        rows = "m" if shape_param else str(t * rng.choice([1, 2, 4]))
        params = [
            *(["m: i64"] if shape_param else []),
            "alpha: f32",
            f"x: &Tensor<{elem}, [{rows}, {cols}]>",
            f"y: &mut Tensor<{out_elem}, [{rows}, {cols}]>",
        ]
        where = []
        if shape_param:
            where += [f"m % {t} == 0"] if rng.random() < 0.9 else []
            where += [f"instances() == m / {t}"] if rng.random() < 0.85 else ["instances() == 1"]
        else:
            where += [
                rng.choice([f"instances() == {rows} / {t}", "instances() == 1", "instances() <= 4"])
            ]
        # `edge` views (LANGUAGE.md 4.2): a ragged `m` over a cdiv grid, fills of the
        # element type or not, a store's destination with or without a fill
        ragged = shape_param and rng.random() < 0.25
        if ragged:
            where = [rng.choice(["m >= 1", "m >= 0", f"m % {t} == 1"])]
            where += [f"instances() == (m + {t - 1}) / {t}"]
        row = rng.choice([f"instance() * {t}", f"instance() * {t}", "0", "instance()"])
        space = rng.choice(["VMEM", "VMEM", "VMEM", "ACC", "SMEM", "HBM"])
        body = [f"  let r = {row};"]
        src = self.view("x", "r", t, cols)
        if ragged or rng.random() < 0.05:
            fill = rng.choice(["0.0", "0.0", "alpha", "-1e30", "true", "1"])
            src = f"edge({src}, {fill})" if rng.random() < 0.9 else f"edge({src})"
        if rng.random() < 0.5:
            body.append(f"  let t = transfer({src}, Memory::{space});")
        else:
            body += [
                f"  let tk = transfer_async({src}, Memory::{space});",
                "  let t = wait(tk);",
            ]
        tiles = ["t"]
        # scalar casts (LANGUAGE.md 4.3): an integer to f32, a float to a narrow integer
        # (saturating), an index narrowed (E6045 where it may not fit)
        scalars = ["alpha", "cast::<f32>(cast::<i8>(alpha))", "cast::<f32>(cast::<i32>(r))"]
        if shape_param:
            scalars += ["cast::<f32>(m)", "(1.0 / cast::<f32>(m))", "cast::<f32>(cast::<i16>(m))"]
        scalars = [rng.choice(scalars)]
        for i in range(rng.randint(0, 3)):
            body.append(f"  let u{i} = {self.tile_expr(tiles, scalars)};")
            tiles.append(f"u{i}")
        if rng.random() < 0.3:
            body += [
                f"  let mut acc = transfer(Tensor<f32>([{t}, {cols}]), Memory::ACC);",
                "  for j in 0 .. 2 {",
                f"    acc = acc * alpha + {rng.choice(tiles)};",
                "  }",
            ]
            tiles.append("acc")
        res = self.tile_expr(tiles, scalars)
        if out_elem != "f32" or rng.random() < 0.2:
            res = f"cast::<{out_elem}>({res})"
        body.append(f"  let res = {res};")
        dest = self.view("y", "r", t, cols)
        if ragged and rng.random() < 0.9:
            dest = f"edge({dest})" if rng.random() < 0.8 else f"edge({dest}, 0.0)"
        if rng.random() < 0.5:
            body.append(f"  transfer(res, {dest});")
        else:
            body.append(f"  let st = transfer_async(res, {dest});")
            if rng.random() < 0.3:
                body.append("  let again = res * 2.0;")  # reads the source in flight: allowed
            if rng.random() < 0.9:
                body.append("  wait(st);")  # else E6011
        clause = (" where " + ", ".join(where)) if where else ""
        head = f"fn {name}({', '.join(params)}) -> void on Topology::TensorCore{clause}"
        return head + " {\n" + "\n".join(body) + "\n}\n"

    def const_kernel(self, name: str) -> str:
        """A const-generic tile size and the call that substitutes it."""
        rng = self.rng
        t = rng.choice(TILE)
        n = rng.choice([t, t, t * 2, 0, -1])
        return (
            f"fn {name}_t<const T: i64>(x: &Tensor<f32, [T, 128]>, o: &mut Tensor<f32, [T, 128]>)"
            f" -> void on Topology::TensorCore where instances() == 1 {{\n"
            f"  let v = transfer(x[0 .. T, 0 .. 128], Memory::VMEM);\n"
            f"  transfer({self.tile_expr(['v'], [])}, o[0 .. T, 0 .. 128]);\n"
            f"}}\n"
            f"fn {name}(x: &Tensor<f32, [{t}, 128]>, o: &mut Tensor<f32, [{t}, 128]>) -> void"
            f" on Topology::TensorCore where instances() == 1 {{\n"
            f"  {name}_t::<{n}>(x, o);\n"
            f"}}\n"
        )

    def program(self) -> bytes:
        parts = [
            self.const_kernel(f"c{i}") if self.rng.random() < 0.2 else self.kernel(f"v{i}")
            for i in range(self.rng.randint(1, 2))
        ]
        return "\n".join(parts).encode()


# ---- mutators of views and tile expressions ------------------------------------------

RANGE = re.compile(rb"(\[|,\s*)([^\[\],;]+?)\s*\.\.\s*([^\[\],;]+?)(?=\s*[\],])")
TILE_WORDS = [
    [*(f.encode() for f in UNARY_CALLS), b"transpose"],
    [b"max", b"min"],
    [b"sum", b"max", b"min", b"argmax", b"argmin"],
    [b"bf16", b"f16", b"f32", b"i32"],
    [b"select", b"max", b"min"],
]
OFFSETS = [b" + 1", b" - 1", b" + 128", b" * 2", b" + m", b" - 128", b""]


def view_bounds(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """One range of a view changed: off by one, swapped, an extent that is not a
    constant, a negative start, or the range dropped or duplicated."""
    hits = list(RANGE.finditer(data))
    if not hits:
        return data
    m = rng.choice(hits)
    lo, hi = m.group(2), m.group(3)
    op = rng.randrange(5)
    if op == 0:
        new = lo + b" .. " + hi + rng.choice(OFFSETS)
    elif op == 1:
        new = hi + b" .. " + lo
    elif op == 2:
        new = lo + rng.choice(OFFSETS) + b" .. " + hi
    elif op == 3:
        new = b"-1 .. " + hi
    else:
        new = lo + b" .. " + hi + b", " + lo + b" .. " + hi
    return data[: m.start(2)] + new + data[m.end(3) :]


def tile_word(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A tile function, reduction or cast element for another of its kind, or a
    reduction axis for another axis."""
    if rng.random() < 0.3:
        axes = list(re.finditer(rb"\.(sum|max)\((\d+)\)", data))
        if axes:
            m = rng.choice(axes)
            return (
                data[: m.start(2)] + rng.choice([b"0", b"1", b"2", b"-1", b"99"]) + data[m.end(2) :]
            )
    group = rng.choice(TILE_WORDS)
    hits = [m for m in re.finditer(rb"[A-Za-z_][A-Za-z0-9_]*", data) if m.group() in group]
    if not hits:
        return data
    m = rng.choice(hits)
    # another word of the group: the same one would be a wasted (unchanged) input
    return data[: m.start()] + rng.choice([w for w in group if w != m.group()]) + data[m.end() :]


def store_form(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A store made async without its wait, a wait dropped or doubled, a view
    destination made a memory space, or an output borrow made shared."""
    op = rng.randrange(4)
    if op == 0:
        m = re.search(rb"\n(\s*)transfer\(([^;]*\]\));", data)
        if m:
            return (
                data[: m.start()]
                + b"\n"
                + m.group(1)
                + b"let st = transfer_async("
                + m.group(2)
                + b";"
                + data[m.end() :]
            )
    if op == 1:
        m = re.search(rb"\n\s*wait\(\w+\);", data)
        if m:
            keep = m.group() * rng.choice([0, 2])
            return data[: m.start()] + keep + data[m.end() :]
    if op == 2:
        m = re.search(rb"&mut Tensor", data)
        if m:
            return data[: m.start()] + b"&Tensor" + data[m.end() :]
    hits = list(re.finditer(rb"\b\w+\[[^\]]*\.\.[^\]]*\]", data))
    if not hits:
        return data
    m = rng.choice(hits)
    return (
        data[: m.start()]
        + rng.choice([b"Memory::VMEM", b"Memory::HBM", b"y", b"c[0]"])
        + data[m.end() :]
    )


# ---- loop-carried counters, reads of outputs, in-flight store destinations ------------
# (issue 30: the checks these reach were made sound after the fuzzer had no mutants of
# them; tests/fuzz/oracle.py judges the same forms by running them)

FOR = re.compile(rb"\n([ \t]*)for \w+ in [^{;]*\{")
VIEW = re.compile(rb"\b\w+\[([^\[\];]*?)\s*\.\.\s*([^\[\];]*?)(,|\])")
STORE = re.compile(rb"\n([ \t]*)transfer(_async)?\(([^;]*), (\w+\[[^\[\];]*\])\);")
ASYNC_STORE = re.compile(rb"\n([ \t]*)let (\w+) = transfer_async\(([^;]*), (\w+\[[^\[\];]*\])\);")
STEPS = [b"128", b"64", b"1", b"0", b"-128", b"256"]


def _matching_brace(data: bytes, open_at: int) -> int | None:
    """The index of the `}` that closes the `{` at `open_at`."""
    depth = 0
    for i in range(open_at, len(data)):
        c = data[i : i + 1]
        if c == b"{":
            depth += 1
        elif c == b"}":
            depth -= 1
            if depth == 0:
                return i
    return None


def loop_counter(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A counter carried around a loop: `let mut vxr: i64 = S;` before a `for`, `vxr = vxr
    + C;` at the end of its body (under an `if` sometimes), and a view inside the loop
    (or after it) offset by `vxr`: E6041's and E6042's loop heads."""
    loops = list(FOR.finditer(data))
    if not loops:
        return data
    m = rng.choice(loops)
    close = _matching_brace(data, m.end() - 1)
    if close is None:
        return data
    ind = m.group(1)
    step = rng.choice(STEPS)
    bump = b"vxr = vxr + " + step + b";"
    if rng.random() < 0.3:
        bump = (
            b"if " + rng.choice([b"vxr < 256", b"vxr >= 0", b"vxr != 128"]) + b" { " + bump + b" }"
        )
    start = rng.choice([b"0", b"0", b"128", b"instance() * 128"])
    inside = [v for v in VIEW.finditer(data, m.end(), close)]
    after = [v for v in VIEW.finditer(data, close)]
    views = inside if inside and (rng.random() < 0.8 or not after) else after
    out = data
    if views:  # the view first, in `data`'s positions; the loop's end moves with it
        v = rng.choice(views)
        shifted = b"vxr + " + v.group(1) + b" .. vxr + " + v.group(2)
        out = data[: v.start(1)] + shifted + data[v.end(2) :]
        if v.start(1) < close:
            close += len(shifted) - (v.end(2) - v.start(1))
    out = out[:close] + b"  " + bump + b"\n" + ind + out[close:]
    return out[: m.start()] + b"\n" + ind + b"let mut vxr: i64 = " + start + b";" + out[m.start() :]


def output_read(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A read of an output next to a store into it: the same region (fine for one
    instance, a race for the region of another) or a shifted one (E6042's reads)."""
    stores = list(STORE.finditer(data))
    if not stores:
        return data
    m = rng.choice(stores)
    ind, view = m.group(1), m.group(4)
    if rng.random() < 0.4:
        hits = list(VIEW.finditer(view))
        if hits:
            v = hits[0]
            off = rng.choice([b" + 128", b" - 128", b" + 64", b" + 1"])
            view = (
                view[: v.start(1)]
                + v.group(1)
                + off
                + b" .. "
                + v.group(2)
                + off
                + view[v.end(2) :]
            )
    read = b"\n" + ind + b"let vxu = transfer(" + view + b", Memory::VMEM);"
    at = m.end() if rng.random() < 0.5 else m.start()
    return data[:at] + read + data[at:]


def inflight_read(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A read of (or a second store to) the destination of a store still in flight, before
    its `wait` (E6043), or the same read after the wait (allowed): an async store is used
    as found, a blocking one made async with its wait after the read."""
    ind = src = view = None
    found = list(ASYNC_STORE.finditer(data))
    if found and rng.random() < 0.6:
        m = rng.choice(found)
        ind, src, view = m.group(1), m.group(3), m.group(4)
        if rng.random() < 0.15:  # after its wait: no E6043
            w = re.search(rb"\n[ \t]*wait\(" + re.escape(m.group(2)) + rb"\);", data[m.end() :])
            if w:
                at = m.end() + w.end()
                read = b"\n" + ind + b"let vxu = transfer(" + view + b", Memory::VMEM);"
                return data[:at] + read + data[at:]
        at, head, tail = m.end(), b"", b""
    else:
        blocking = [s for s in STORE.finditer(data) if not s.group(2)]
        if not blocking:
            return data
        m = rng.choice(blocking)
        ind, src, view = m.group(1), m.group(3), m.group(4)
        at = m.end()
        head = b"\n" + ind + b"let vxst = transfer_async(" + src + b", " + view + b");"
        tail = b"\n" + ind + b"wait(vxst);"
    if rng.random() < 0.25:
        touch = b"\n" + ind + b"transfer(" + src + b", " + view + b");"  # a second store
    else:
        touch = b"\n" + ind + b"let vxu = transfer(" + view + b", Memory::VMEM);"
    if head:
        return data[: m.start()] + head + touch + tail + data[at:]
    return data[:at] + touch + data[at:]


# The forms' mutators, in the order the fuzzer draws them (vxfuzz.MUTATORS) and the
# suite checks each one changes the seeds (test_fuzz.py).
def edge_form(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """A view made an `edge` view (a read's with a fill of some type, a store's with or
    without one), or an `edge` view made a plain one again (LANGUAGE.md 4.2)."""
    edges = list(EDGE.finditer(data))
    if edges and rng.random() < 0.3:
        m = rng.choice(edges)
        return data[: m.start()] + m.group(1) + data[m.end() :]
    views = list(WHOLE_VIEW.finditer(data))
    if not views:
        return data
    m = rng.choice(views)
    fill = rng.choice([b"", b", 0.0", b", 0.0", b", alpha", b", true", b", 3"])
    return data[: m.start()] + b"edge(" + m.group(0) + fill + b")" + data[m.end() :]


EDGE = re.compile(rb"edge\((\w+\[[^\[\];()]*\])(?:, [^();]*)?\)")
WHOLE_VIEW = re.compile(rb"\b(?<!edge\()\w+\[[^\[\];]*\.\.[^\[\];]*\]")

MUTATORS = (
    view_bounds,
    tile_word,
    store_form,
    loop_counter,
    output_read,
    inflight_read,
    edge_form,
)
