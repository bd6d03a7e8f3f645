"""Issue 3's table-driven suite: async transfer tokens (E6011, E0301), read before wait
and relaxed seams (E6004, W1027), bounds (E6005) and lifetime-based working sets (E6010).

Each program marks its expected diagnostics on the line they point at, rustc-UI style:
`//~ E6011` (several codes: `//~ W1027 E6004`). The verdict compared is the exact sorted
list of (code, line) of every diagnostic, errors and warnings, for each target listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vxc import api

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
TARGETS = ("cpu", "tpu", "b200", "h100")
MARK = re.compile(r"//~((?:\s+[EW]\d{4})+)")

# A 128x128 f32 tile is 64 KiB; 32x32 tiles (4 KiB) keep the buffering cases far below
# every target's VMEM, so only the token rules decide them.
VEC = "&Vec<Tensor<f32, [32, 32]>>"
ACC = "&mut Tensor<f32, [32, 32]>"
W = "&Tensor<f32, [32, 32]>"
ON = "on Topology::TensorCore"


@dataclass
class Case:
    name: str
    src: str
    targets: tuple[str, ...] = TARGETS
    # per-target expectations that replace the inline marks (for the shipped kernels)
    override: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def expected(self, target: str) -> list[tuple[str, int]]:
        if target in self.override:
            return sorted(self.override[target])
        out = []
        for n, line in enumerate(self.src.splitlines(), 1):
            m = MARK.search(line)
            if m:
                out += [(code, n) for code in m.group(1).split()]
        return sorted(out)


def verdict(src: str, target: str, path: str = "case.vx") -> list[tuple[str, int]]:
    checked = api.check([api.Source(path, src.encode())], target)
    return sorted((d.code, d.span.line) for d in checked.diagnostics)


def diagnostics(src: str, target: str = "cpu"):
    return api.check([api.Source("case.vx", src.encode())], target).diagnostics


def kernel(name: str) -> str:
    return (KERNELS / name).read_text()


SEED = kernel("seed.vx")
SEED_LINES = SEED.splitlines()
SEED_FINAL = "  matmul_acc(wait(inflight));"
SEED_INFLIGHT_LINE = next(n for n, line in enumerate(SEED_LINES, 1) if "let mut inflight" in line)

CASES = [
    # ---- the seed and the shipped kernels -------------------------------------------------
    Case("seed.vx", SEED),
    Case(
        "seed without its final wait",
        SEED.replace(SEED_FINAL + "\n", ""),
        override={t: [("E6011", SEED_INFLIGHT_LINE)] for t in TARGETS},
    ),
    *[Case(p.name, p.read_text()) for p in sorted(KERNELS.glob("stream*.vx"))],
    # ---- double and triple buffering -----------------------------------------------------
    Case(
        "double buffering",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut inflight = transfer_async(tiles[0], Memory::VMEM);
  for i in 1..tiles.len() {{
    let next = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(inflight);
    matmul_acc(&mut acc, &cur, &wv);
    inflight = next;
  }}
  let last = wait(inflight);
  matmul_acc(&mut acc, &last, &wv);
}}
""",
    ),
    Case(
        "double buffering: next not carried (overwritten at the loop head)",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut inflight = transfer_async(tiles[0], Memory::VMEM);
  for i in 1..tiles.len() {{
    let next = transfer_async(tiles[i], Memory::VMEM); //~ E6011
    let cur = wait(inflight); //~ E0301
    matmul_acc(&mut acc, &cur, &wv);
  }}
  let last = wait(inflight); //~ E0301
  matmul_acc(&mut acc, &last, &wv);
}}
""",
    ),
    Case(
        "triple buffering",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut a = transfer_async(tiles[0], Memory::VMEM);
  let mut b = transfer_async(tiles[1], Memory::VMEM);
  for i in 2..tiles.len() {{
    let c = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(a);
    matmul_acc(&mut acc, &cur, &wv);
    a = b;
    b = c;
  }}
  let x = wait(a);
  matmul_acc(&mut acc, &x, &wv);
  let y = wait(b);
  matmul_acc(&mut acc, &y, &wv);
}}
""",
    ),
    Case(
        "triple buffering: last token never waited",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut a = transfer_async(tiles[0], Memory::VMEM);
  let mut b = transfer_async(tiles[1], Memory::VMEM); //~ E6011
  for i in 2..tiles.len() {{
    let c = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(a);
    matmul_acc(&mut acc, &cur, &wv);
    a = b;
    b = c;
  }}
  let x = wait(a);
  matmul_acc(&mut acc, &x, &wv);
}}
""",
    ),
    Case(
        "triple buffering: rotation overwrites a live token",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut a = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  let mut b = transfer_async(tiles[1], Memory::VMEM);
  for i in 2..tiles.len() {{
    let c = transfer_async(tiles[i], Memory::VMEM);
    a = b;
    b = c;
  }}
  let x = wait(a);
  matmul_acc(&mut acc, &x, &wv);
  let y = wait(b);
  matmul_acc(&mut acc, &y, &wv);
}}
""",
    ),
    # ---- nested loops ---------------------------------------------------------------------------
    Case(
        "nested loops: a double-buffered inner loop per outer row",
        f"""\
fn f(tiles: {VEC}, w: {W}, rows: i64) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  for r in 0..rows {{
    let mut t = transfer_async(tiles[0], Memory::VMEM);
    for i in 1..tiles.len() {{
      let n = transfer_async(tiles[i], Memory::VMEM);
      let cur = wait(t);
      matmul_acc(&mut acc, &cur, &wv);
      t = n;
    }}
    let last = wait(t);
    matmul_acc(&mut acc, &last, &wv);
  }}
}}
""",
    ),
    Case(
        "nested loops: outer token waited inside the inner loop",
        f"""\
fn f(tiles: {VEC}, w: {W}, rows: i64) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  for r in 0..rows {{
    let t = transfer_async(tiles[0], Memory::VMEM); //~ E6011
    for i in 0..tiles.len() {{
      let cur = wait(t); //~ E0301
      matmul_acc(&mut acc, &cur, &wv);
    }}
  }}
}}
""",
    ),
    Case(
        "nested loops: token issued in the inner loop and dropped",
        f"""\
fn f(tiles: {VEC}, rows: i64) -> void {ON} {{
  for r in 0..rows {{
    for i in 0..tiles.len() {{
      let t = transfer_async(tiles[i], Memory::VMEM); //~ E6011
    }}
  }}
}}
""",
    ),
    # ---- tokens through function calls --------------------------------------------------------------
    Case(
        "token passed to a function that waits it",
        f"""\
fn consume(t: Token<Tensor<f32, [32, 32]>, Memory::VMEM>, acc: {ACC}, w: {W}) -> void {ON} {{
  let x = wait(t);
  matmul_acc(acc, &x, w);
}}
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let t = transfer_async(tiles[0], Memory::VMEM);
  consume(t, &mut acc, &wv);
}}
""",
    ),
    Case(
        "token passed to a function that drops it",
        f"""\
fn forget(t: Token<Tensor<f32, [32, 32]>, Memory::VMEM>) -> void {ON} {{ //~ E6011
}}
fn f(tiles: {VEC}) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  forget(t);
}}
""",
    ),
    Case(
        "token passed to a function, then waited again by the caller",
        f"""\
fn consume(t: Token<Tensor<f32, [32, 32]>, Memory::VMEM>) -> void {ON} {{
  let x = wait(t);
}}
fn f(tiles: {VEC}) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  consume(t);
  let y = wait(t); //~ E0301
}}
""",
    ),
    Case(
        "a helper that stages its own argument may be called with an HBM tensor",
        f"""\
fn stage(t: &Tensor<f32, [32, 32]>) -> Tensor<f32, [32, 32]> {ON} {{
  return transfer(t, Memory::VMEM);
}}
fn start(t: &Tensor<f32, [32, 32]>) -> Token<Tensor<f32, [32, 32]>, Memory::VMEM> {ON} {{
  return transfer_async(t, Memory::VMEM);
}}
fn f(a: &Tensor<f32, [32, 32]>) -> void {ON} {{
  let v = stage(a);
  let x = wait(start(a));
}}
""",
    ),
    Case(
        "token returned from a function and waited by the caller",
        f"""\
fn start(tiles: {VEC}, i: i64) -> Token<Tensor<f32, [32, 32]>, Memory::VMEM> {ON} {{
  return transfer_async(tiles[i], Memory::VMEM);
}}
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let t = start(tiles, 0);
  let x = wait(t);
  matmul_acc(&mut acc, &x, &wv);
}}
""",
    ),
    Case(
        "token returned from a function and dropped by the caller",
        f"""\
fn start(tiles: {VEC}, i: i64) -> Token<Tensor<f32, [32, 32]>, Memory::VMEM> {ON} {{
  return transfer_async(tiles[i], Memory::VMEM);
}}
fn f(tiles: {VEC}) -> void {ON} {{
  let t = start(tiles, 0); //~ E6011
  start(tiles, 1); //~ E6011
}}
""",
    ),
    Case(
        "token returned from a function and read before its wait",
        f"""\
fn start(tiles: {VEC}, i: i64) -> Token<Tensor<f32, [32, 32]>, Memory::VMEM> {ON} {{
  return transfer_async(tiles[i], Memory::VMEM);
}}
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let t = start(tiles, 0);
  matmul_acc(&mut acc, &t, &wv); //~ E6004
  let x = wait(t);
}}
""",
    ),
    # ---- branches ------------------------------------------------------------------------------
    Case(
        "waits in both branches",
        f"""\
fn f(tiles: {VEC}, w: {W}, c: bool) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let t = transfer_async(tiles[0], Memory::VMEM);
  if c {{
    let x = wait(t);
    matmul_acc(&mut acc, &x, &wv);
  }} else {{
    let y = wait(t);
  }}
}}
""",
    ),
    Case(
        "wait in one branch only",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  if c {{
    let x = wait(t);
  }}
}}
""",
    ),
    Case(
        "wait in a branch, then again after it",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  if c {{
    let x = wait(t);
  }}
  let y = wait(t); //~ E0301
}}
""",
    ),
    Case(
        "else-if chain waiting on every arm",
        f"""\
fn f(tiles: {VEC}, k: i64) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  if k == 0 {{
    let a = wait(t);
  }} else if k == 1 {{
    let b = wait(t);
  }} else {{
    let c = wait(t);
  }}
}}
""",
    ),
    Case(
        "read before wait on one branch only",
        f"""\
fn f(tiles: {VEC}, w: {W}, c: bool) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let t = transfer_async(tiles[0], Memory::VMEM);
  if c {{
    let x = wait(t);
    matmul_acc(&mut acc, &x, &wv);
  }} else {{
    matmul_acc(&mut acc, &t, &wv); //~ E6004
    let y = wait(t);
  }}
}}
""",
    ),
    # ---- early returns ---------------------------------------------------------------------------
    Case(
        "early return abandons a live token",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  if c {{
    return;
  }}
  let x = wait(t);
}}
""",
    ),
    Case(
        "early return after the wait",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  let x = wait(t);
  if c {{
    return;
  }}
  let u = transfer_async(tiles[1], Memory::VMEM);
  let y = wait(u);
}}
""",
    ),
    Case(
        "early return from inside a loop abandons the carried token",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let mut t = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  for i in 1..tiles.len() {{
    let n = transfer_async(tiles[i], Memory::VMEM); //~ E6011
    if c {{
      return;
    }}
    let x = wait(t);
    t = n;
  }}
  let y = wait(t);
}}
""",
    ),
    Case(
        "return waits in both arms",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  if c {{
    let x = wait(t);
    return;
  }}
  let y = wait(t);
}}
""",
    ),
    # ---- overwrites ----------------------------------------------------------------------------------
    Case(
        "overwrite of a live token",
        f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  let mut t = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  t = transfer_async(tiles[1], Memory::VMEM);
  let x = wait(t);
}}
""",
    ),
    Case(
        "overwrite after the wait",
        f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  let mut t = transfer_async(tiles[0], Memory::VMEM);
  let x = wait(t);
  t = transfer_async(tiles[1], Memory::VMEM);
  let y = wait(t);
}}
""",
    ),
    Case(
        "overwrite on one branch",
        f"""\
fn f(tiles: {VEC}, c: bool) -> void {ON} {{
  let mut t = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  if c {{
    let x = wait(t);
  }}
  t = transfer_async(tiles[1], Memory::VMEM);
  let y = wait(t);
}}
""",
    ),
    Case(
        "a token expression statement is dropped at once",
        f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  transfer_async(tiles[0], Memory::VMEM); //~ E6011
}}
""",
    ),
    Case(
        "waiting twice",
        f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  let x = wait(t);
  let y = wait(t); //~ E0301
}}
""",
    ),
    Case(
        "token moved into another binding, both waited",
        f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  let u = t;
  let x = wait(u);
  let y = wait(t); //~ E0301
}}
""",
    ),
    # ---- reads before waits --------------------------------------------------------------------------
    Case(
        "read before wait (the spec's example)",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let cur = transfer_async(tiles[0], Memory::VMEM);
  matmul_acc(&mut acc, &cur, &wv); //~ E6004
  let x = wait(cur);
}}
""",
    ),
    Case(
        "read before wait inside a loop",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  for i in 0..tiles.len() {{
    let cur = transfer_async(tiles[i], Memory::VMEM);
    matmul_acc(&mut acc, &cur, &wv); //~ E6004
    let x = wait(cur);
  }}
}}
""",
    ),
    Case(
        "read after wait inside a loop",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  for i in 0..tiles.len() {{
    let t = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(t);
    matmul_acc(&mut acc, &cur, &wv);
  }}
}}
""",
    ),
    Case(
        "every stale read is reported, also of a reassigned token",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut t = transfer_async(tiles[0], Memory::VMEM);
  matmul_acc(&mut acc, &t, &wv); //~ E6004
  matmul_acc(&mut acc, &t, &wv); //~ E6004
  let x = wait(t);
  t = transfer_async(tiles[1], Memory::VMEM);
  matmul_acc(&mut acc, &t, &wv); //~ E6004
  let y = wait(t);
}}
""",
    ),
    Case(
        "in-flight buffer transferred onward is a read",
        f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  let t = transfer_async(tiles[0], Memory::VMEM);
  let back = transfer(t, Memory::HBM); //~ E6004
  let x = wait(t);
}}
""",
    ),
    # ---- relaxed edges ----------------------------------------------------------------------------------
    Case(
        "relaxed edge declared but not crossed",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::Far -> Memory::Near : 3 relaxed //~ W1027
}
fn f(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
""",
    ),
    Case(
        "relaxed edge crossed, visibility contract",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 3 relaxed //~ W1027
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn f(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
  let far = transfer(t, Memory::Far);
  let near = transfer(far, Memory::Near);
  consume(&near); //~ E6004
}
""",
    ),
    Case(
        "relaxed edge crossed, value contract from a consumer's assert in a spawn",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Near : 1 relaxed //~ W1027
}
fn f(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
  let near = transfer(t, Memory::Near);
  spawn on(Topology::Mover) {
    assert(near == 7); //~ E6004
  }
}
""",
    ),
    Case(
        "sync route preferred over a relaxed one: no stale read",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 5 sync
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn f(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
  let near = transfer(t, Memory::Near);
  consume(&near);
}
""",
    ),
    Case(
        "value contract met by the producer's constant",
        f"""\
fn f() -> void {ON} {{
  let z = Tensor<f32>([16, 16]);
  assert(z == 0);
}}
""",
    ),
    Case(
        "value contract not met by the producer's constant",
        f"""\
fn f() -> void {ON} {{
  let z = Tensor<f32>([16, 16]);
  assert(z == 1); //~ E6004
}}
""",
    ),
    Case(
        "path-sensitive: stale only when c, read only when !c",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 10
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn f(t: &Tensor<f32, [16, 16]>, u: &Tensor<f32, [16, 16]>, c: bool) -> void on Topology::Mover {
  let mut b = transfer(t, Memory::Near);
  if c {
    let far = transfer(u, Memory::Far);
    b = transfer(far, Memory::Near);
  }
  if !c {
    consume(&b);
  }
}
""",
        targets=("tpu", "b200"),
    ),
    Case(
        "path-sensitive: stale when c, read when c",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 10
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn f(t: &Tensor<f32, [16, 16]>, u: &Tensor<f32, [16, 16]>, c: bool) -> void on Topology::Mover {
  let mut b = transfer(t, Memory::Near);
  if c {
    let far = transfer(u, Memory::Far);
    b = transfer(far, Memory::Near);
  }
  if c {
    consume(&b); //~ E6004
  }
}
""",
        targets=("tpu", "b200"),
    ),
    Case(
        "path-sensitive: k > 10 and k < 5 never hold together",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 10
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn f(t: &Tensor<f32, [16, 16]>, u: &Tensor<f32, [16, 16]>, k: i64) -> void on Topology::Mover {
  let mut b = transfer(t, Memory::Near);
  if k > 10 {
    let far = transfer(u, Memory::Far);
    b = transfer(far, Memory::Near);
  }
  if k < 5 {
    consume(&b);
  }
}
""",
        targets=("tpu", "b200"),
    ),
    Case(
        "path-sensitive: k > 10 and k < 12 can",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 10
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn f(t: &Tensor<f32, [16, 16]>, u: &Tensor<f32, [16, 16]>, k: i64) -> void on Topology::Mover {
  let mut b = transfer(t, Memory::Near);
  if k > 10 {
    let far = transfer(u, Memory::Far);
    b = transfer(far, Memory::Near);
  }
  if k < 12 {
    consume(&b); //~ E6004
  }
}
""",
        targets=("tpu", "b200"),
    ),
    Case(
        "carried token read at the loop head",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut inflight = transfer_async(tiles[0], Memory::VMEM);
  for i in 1..tiles.len() {{
    matmul_acc(&mut acc, &inflight, &wv); //~ E6004
    let next = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(inflight);
    inflight = next;
  }}
  let last = wait(inflight);
}}
""",
    ),
    Case(
        "carried token read after the rotation",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut inflight = transfer_async(tiles[0], Memory::VMEM);
  for i in 1..tiles.len() {{
    let next = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(inflight);
    inflight = next;
    matmul_acc(&mut acc, &inflight, &wv); //~ E6004
  }}
  let last = wait(inflight);
}}
""",
    ),
    Case(
        "carried token read after the loop",
        f"""\
fn f(tiles: {VEC}, w: {W}) -> void {ON} {{
  let mut acc = Tensor<f32>([32, 32]);
  let wv = transfer(w, Memory::VMEM);
  let mut inflight = transfer_async(tiles[0], Memory::VMEM);
  for i in 1..tiles.len() {{
    let next = transfer_async(tiles[i], Memory::VMEM);
    let cur = wait(inflight);
    inflight = next;
  }}
  matmul_acc(&mut acc, &inflight, &wv); //~ E6004
  let last = wait(inflight);
}}
""",
    ),
    Case(
        "relaxed buffer rotated through one, two and three variables around a loop",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 30 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 10
}
fn consume(t: &Tensor<f32, [16, 16]>) -> void on Topology::Mover {
}
fn one(t: &Tensor<f32, [16, 16]>, n: i64) -> void on Topology::Mover {
  let mut a = transfer(t, Memory::Near);
  for i in 0..n {
    consume(&a); //~ E6004
    let far = transfer(t, Memory::Far);
    a = transfer(far, Memory::Near);
  }
}
fn two(t: &Tensor<f32, [16, 16]>, n: i64) -> void on Topology::Mover {
  let mut a = transfer(t, Memory::Near);
  let mut c = transfer(t, Memory::Near);
  for i in 0..n {
    consume(&a); //~ E6004
    a = c;
    let far = transfer(t, Memory::Far);
    c = transfer(far, Memory::Near);
  }
}
fn three(t: &Tensor<f32, [16, 16]>, n: i64) -> void on Topology::Mover {
  let mut a = transfer(t, Memory::Near);
  let mut b = transfer(t, Memory::Near);
  let mut c = transfer(t, Memory::Near);
  for i in 0..n {
    consume(&a); //~ E6004
    a = b;
    b = c;
    let far = transfer(t, Memory::Far);
    c = transfer(far, Memory::Near);
  }
}
""",
        targets=("tpu",),
    ),
    # ---- bounds --------------------------------------------------------------------------------------------
    Case(
        "bounds proved by literals and the caller's where clause",
        f"""\
fn g(n: i64) -> void {ON} where n <= 512 {{
}}
fn f(m: i64) -> void {ON} where 0 <= m, m <= 100 {{
  g(256);
  g(512);
  g(m);
  g(m * 5);
  if m <= 10 {{
    g(m * 50);
  }}
}}
""",
    ),
    Case(
        "products wrap: a caller's upper bound alone does not bound them",
        f"""\
fn g(n: i64) -> void {ON} where n <= 512 {{
}}
fn f(m: i64) -> void {ON} where m <= 100 {{
  g(m);
  g(m * 5); //~ E6005
  g(m + 1);
  g(m - 1); //~ E6005
}}
""",
    ),
    Case(
        "bounds not proved",
        f"""\
fn g(n: i64) -> void {ON} where n <= 512 {{
}}
fn f(m: i64, k: i64) -> void {ON} where m <= 100 {{
  g(513); //~ E6005
  g(m * 6); //~ E6005
  g(k); //~ E6005
  for i in 0..k {{
    g(i); //~ E6005
  }}
}}
""",
    ),
    Case(
        "bound proved by a branch condition",
        f"""\
fn g(n: i64) -> void {ON} where n <= 512 {{
}}
fn f(k: i64) -> void {ON} {{
  if k <= 512 {{
    g(k);
  }} else {{
    g(k); //~ E6005
  }}
}}
""",
    ),
    Case(
        "bound proved after an early-return guard",
        f"""\
fn g(n: i64) -> void {ON} where n <= 512 {{
}}
fn f(k: i64, j: i64) -> void {ON} {{
  if k > 512 {{
    return;
  }}
  g(k);
  g(j); //~ E6005
  for i in 0..j {{
    if i >= 100 {{
      return;
    }}
    g(i * 5);
    g(i * 6); //~ E6005
  }}
}}
""",
    ),
    Case(
        "a where bound makes a dynamic shape checkable",
        f"""\
fn f(t: &Tensor<f32, [n, 128]>, n: i64) -> void {ON} where n <= 256 {{
  let v = transfer(t, Memory::VMEM);
}}
""",
    ),
    Case(
        "a dynamic shape without a bound",
        f"""\
fn f(t: &Tensor<f32, [n, 128]>, n: i64) -> void {ON} {{
  let v = transfer(t, Memory::VMEM); //~ W1029
}}
""",
    ),
    Case(
        "a where bound too large for the b200's shared memory",
        f"""\
fn f(t: &Tensor<f32, [n, 128]>, n: i64) -> void {ON} where n <= 512 {{
  let v = transfer(t, Memory::VMEM);
}}
""",
        override={"b200": [("E6009", 2)], "h100": [("E6009", 2)]},
    ),
    # ---- lifetimes decide the working set (issue 3 item 6) --------------------------------------------
    Case(
        "four 64 KiB tiles in flight: fine on tpu, E6010 on b200",
        f"""\
fn f(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void {ON} {{
  let a = transfer_async(tiles[0], Memory::VMEM);
  let b = transfer_async(tiles[1], Memory::VMEM);
  let c = transfer_async(tiles[2], Memory::VMEM);
  let d = transfer_async(tiles[3], Memory::VMEM);
  let x = wait(a);
  let y = wait(b);
  let z = wait(c);
  let u = wait(d);
}}
""",
        targets=("tpu", "b200"),
        override={"b200": [("E6010", 5)]},
    ),
    Case(
        "one 64 KiB tile at a time, sixteen times: two slots, no E6010 anywhere",
        f"""\
fn f(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void {ON} {{
  let mut t = transfer_async(tiles[0], Memory::VMEM);
  for i in 1..16 {{
    let n = transfer_async(tiles[i], Memory::VMEM);
    let x = wait(t);
    t = n;
  }}
  let y = wait(t);
}}
""",
    ),
]


# ---- a token passed where its tensor is expected, in every form (issue 9 item 1) -------------------
# Each form is a read of the in-flight buffer (E6004 at the read), whether or not a `wait`
# follows; without one the token is also dropped (E6011 at its binding). The declarations:
# an extern fn and a Vx helper, each taking the tensor by value, by `&` and by `&mut`.
T32 = "Tensor<f32, [32, 32]>"
FORM_DECLS = f"""\
extern fn ext_v(t: {T32}) -> void {ON};
extern fn ext_r(t: &{T32}) -> void {ON};
extern fn ext_m(t: &mut {T32}) -> void {ON};
fn vx_v(t: {T32}) -> void {ON} {{
}}
fn vx_r(t: &{T32}) -> void {ON} {{
}}
fn vx_m(t: &mut {T32}) -> void {ON} {{
}}
"""
TOKEN_READ_FORMS = {
    "by value to an extern fn": "ext_v(cur);",
    "by reference to an extern fn": "ext_r(&cur);",
    "by mutable reference to an extern fn": "ext_m(&mut cur);",
    "by value to a Vx helper": "vx_v(cur);",
    "by reference to a Vx helper": "vx_r(&cur);",
    "by mutable reference to a Vx helper": "vx_m(&mut cur);",
    "as an intrinsic operand by reference": "matmul_acc(&mut acc, &cur, &wv);",
    "as an intrinsic operand by value": "matmul_acc(&mut acc, cur, wv);",
    "as the intrinsic's second operand": "matmul_acc(&mut acc, &wv, &cur);",
    "as a transfer source": "let h = transfer(cur, Memory::HBM);",
    "as an async transfer source": "let h = wait(transfer_async(cur, Memory::HBM));",
    "through a nested transfer into a call": "ext_v(transfer(cur, Memory::VMEM));",
    "in a value contract": "assert(cur == 0);",
    "bound as a tensor": f"let h: {T32} = cur;",
}


def token_read_case(form: str, where: str, waited: bool) -> Case:
    stmt = TOKEN_READ_FORMS[form]
    lines = [
        f"fn f(tiles: {VEC}, w: {W}, c: bool, n: i64) -> void {ON} {{",
        "  let mut acc = Tensor<f32>([32, 32]);",
        "  let wv = transfer(w, Memory::VMEM);",
        f"  let {'mut ' if '&mut cur' in stmt else ''}cur = transfer_async(tiles[0], Memory::VMEM);"
        + ("" if waited else " //~ E6011"),
    ]
    read = f"{stmt} //~ E6004"
    if where == "straight":
        lines.append(f"  {read}")
    else:
        lines += [f"  {'for i in 0..n' if where == 'loop' else 'if c'} {{", f"    {read}", "  }"]
    lines += ["  let x = wait(cur);"] if waited else []
    verb = "then waited" if waited else "never waited"
    return Case(
        f"token read {form}, {where}, {verb}",
        FORM_DECLS + "\n".join(lines) + "\n}\n",
    )


CASES += [
    token_read_case(form, where, waited)
    for form in TOKEN_READ_FORMS
    for where in ("straight", "loop", "branch")
    for waited in (True, False)
]
CASES.append(
    Case(
        "a token returned where the function returns its tensor",
        f"""\
fn g(tiles: {VEC}, c: bool) -> {T32} {ON} {{
  let cur = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  if c {{
    return cur; //~ E6004
  }}
  return wait(cur);
}}
fn h(tiles: {VEC}) -> {T32} {ON} {{
  let cur = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  return cur; //~ E6004
}}
""",
    )
)
CASES.append(
    Case(
        "a buffer that crossed a relaxed seam is read where it is returned (the caller "
        "takes a call's result as published)",
        """\
Memory Far { capacity: 1 MB }
Memory Near { capacity: 1 MB }
Topology Mover {
  memory: Memory::Near,
  visible: [Memory::Near, Memory::Far],
  transfer Memory::HBM -> Memory::Far : 1,
  transfer Memory::Far -> Memory::Near : 3 relaxed, //~ W1027
  transfer Memory::HBM -> Memory::Near : 2
}
fn stale(t: &Tensor<f32, [16, 16]>) -> Tensor<f32, [16, 16]> on Topology::Mover {
  let far = transfer(t, Memory::Far);
  let near = transfer(far, Memory::Near);
  return near; //~ E6004
}
fn fresh(t: &Tensor<f32, [16, 16]>) -> Tensor<f32, [16, 16]> on Topology::Mover {
  let near = transfer(t, Memory::Near);
  return near;
}
""",
        targets=("tpu", "b200"),
    )
)
CASES.append(
    Case(
        "`&mut` of a token bound without `mut` is E0305 (and stops the later checks)",
        FORM_DECLS
        + f"""\
fn f(tiles: {VEC}) -> void {ON} {{
  let cur = transfer_async(tiles[0], Memory::VMEM);
  ext_m(&mut cur); //~ E0305
  let x = wait(cur);
}}
""",
    )
)
CASES.append(
    Case(
        "the seed's read before wait: one-argument extern matmul_acc, by value, no wait",
        """\
extern fn matmul_acc(t: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore;
fn f(tiles: &Vec<Tensor<f32, [128, 128]>>) -> void on Topology::TensorCore {
  let cur = transfer_async(tiles[0], Memory::VMEM); //~ E6011
  matmul_acc(cur); //~ E6004
}
""",
    )
)


@pytest.mark.parametrize(
    ("case", "target"),
    [(c, t) for c in CASES for t in c.targets],
    ids=[f"{c.name} [{t}]" for c in CASES for t in c.targets],
)
def test_token_table(case: Case, target: str):
    assert verdict(case.src, target) == case.expected(target)


def test_table_is_big_enough_and_has_both_verdicts():
    assert len(CASES) >= 30
    accepted = [c for c in CASES if not c.expected(c.targets[0])]
    rejected = [c for c in CASES if c.expected(c.targets[0])]
    assert len(accepted) >= 10 and len(rejected) >= 15
    codes = {code for c in CASES for t in c.targets for code, _ in c.expected(t)}
    assert {"E6011", "E0301", "E6004", "E6005", "W1027", "E6010"} <= codes


# ---- exact messages of the spec ---------------------------------------------------------------------------
def test_e6004_read_before_wait_message_and_counterexample():
    case = next(c for c in CASES if c.name == "read before wait (the spec's example)")
    (d,) = diagnostics(case.src)
    assert d.code == "E6004"
    assert d.message == (
        "'cur' is read before its transfer token is waited — a consumer may read stale data"
    )
    # The spec's note, then one line in words (issue 24).
    assert d.notes == [
        "z3 counterexample: ((tag_cur #b11) (val_cur #x00))",
        "in words: on this path nothing waits the DMA HBM -> VMEM that fills `cur`, so `cur` "
        "is stale (tag TOP: it may hold any value, such as 0x00) when it is read",
    ]
    assert (d.span.line, d.span.column) == (5, 24)


def test_e6004_of_the_seeds_one_argument_form_by_value():
    """Issue 9 item 1: the seed's headline diagnostic, through a by-value extern call."""
    case = next(c for c in CASES if c.name.startswith("the seed's read before wait"))
    for target in TARGETS:
        e6011, e6004 = diagnostics(case.src, target)
        assert (e6004.code, e6004.span.line, e6004.span.column) == ("E6004", 4, 14)
        assert e6004.message == (
            "'cur' is read before its transfer token is waited — a consumer may read stale data"
        )
        assert e6004.notes[0] == "z3 counterexample: ((tag_cur #b11) (val_cur #x00))"
        assert e6004.notes[1].startswith("in words: on this path nothing waits the DMA")
        assert (e6011.code, e6011.span.line) == ("E6011", 3)


def test_e6011_message_and_help_of_the_spec():
    case = next(c for c in CASES if c.name == "seed without its final wait")
    (d,) = diagnostics(case.src)
    assert d.message == (
        "transfer token for 'inflight' is dropped without `wait`; the DMA may not have completed"
    )
    assert d.help == "bind the result of `wait(inflight)` before the token goes out of scope"
    assert d.span.column == SEED_LINES[SEED_INFLIGHT_LINE - 1].index("inflight") + 1


@pytest.mark.parametrize(
    ("name", "note"),
    [
        ("overwrite of a live token", "it is overwritten at line 3"),
        ("early return abandons a live token", "it is abandoned by the `return` at line 4"),
        ("wait in one branch only", "it is dropped at the end of its scope (line 6)"),
    ],
)
def test_e6011_notes_say_how_the_token_is_dropped(name, note):
    case = next(c for c in CASES if c.name == name)
    (d,) = diagnostics(case.src)
    assert d.code == "E6011" and d.notes == [note]


def test_e0301_after_wait_says_where_it_was_waited():
    case = next(c for c in CASES if c.name == "waiting twice")
    (d,) = diagnostics(case.src)
    assert d.message == "use of moved value `t`"
    assert d.notes == ["`t` was waited at line 3"]


def test_e0301_on_some_path():
    case = next(c for c in CASES if c.name == "wait in a branch, then again after it")
    (d,) = diagnostics(case.src)
    assert d.notes == ["`t` was waited at line 4 on some path"]


def test_relaxed_seam_is_named_in_w1027_and_e6004():
    case = next(c for c in CASES if c.name == "relaxed edge crossed, visibility contract")
    w, e = diagnostics(case.src, "tpu")
    assert (w.code, w.message) == (
        "W1027",
        "transfer edge `Far -> Near` is relaxed: data crossing it is not published with a release",
    )
    assert e.code == "E6004"
    assert e.message == (
        "'near' is read after crossing the relaxed seam `Far -> Near` — a consumer may read "
        "stale data"
    )
    assert e.notes[0] == "z3 counterexample: ((tag_near #b11) (val_near #x00))"
    assert "over the relaxed seam `Far -> Near`" in e.notes[1] and "is stale" in e.notes[1]


def test_value_contract_counterexample_shows_the_constant():
    case = next(c for c in CASES if c.name == "value contract not met by the producer's constant")
    (d,) = diagnostics(case.src)
    assert d.message == "'z' may not hold the value 1 its consumer requires"
    assert d.notes[0] == "z3 counterexample: ((tag_z #b01) (val_z #x00))"
    assert d.notes[1].endswith("but on this path it holds 0 (tag CONST)")


def test_e6005_names_the_argument_and_the_bound():
    case = next(c for c in CASES if c.name == "bounds not proved")
    first = diagnostics(case.src)[0]
    assert first.message == "cannot prove `n <= 512` for argument `n` of `g`"
    assert (first.span.line, first.span.column) == (4, 5)
    assert first.notes and first.notes[0].startswith("z3 counterexample: ")
    assert "513" in first.notes[0]


def test_seed_allocates_two_ping_pong_slots():
    """LANGUAGE.md section 5 rule 5: the seed loop's tiles share one ring of two slots, and
    the working set counts two 64 KiB tiles, not `tiles.len()` of them."""
    checked = api.check([api.Source("seed.vx", SEED.encode())], "tpu")
    assert checked.ok
    placement = checked.placements["stream"]
    assert placement.working_set["VMEM"] == 2 * 65536
    allocs = [n.alloc for n in placement.nodes.values() if n.kind == "transfer_async"]
    assert len(allocs) == 2
    assert {(a.space, a.offset, a.slots, a.slot_bytes) for a in allocs} == {("VMEM", 0, 2, 65536)}


def test_relaxed_seam_is_named_as_declared_through_an_alias():
    """LANGUAGE.md section 6 names the B200 seam `SMEM -> TMEM`; on the b200 model SMEM is
    an alias of VMEM, and the diagnostics must name the seam as the user declared it."""
    src = """\
Topology Staging {
  memory: Memory::TMEM,
  visible: [Memory::TMEM, Memory::SMEM],
  transfer Memory::HBM -> Memory::SMEM : 1,
  transfer Memory::SMEM -> Memory::TMEM : 1 relaxed
}
fn consume(t: &Tensor<f32, [32, 32]>) -> void on Topology::Staging {
}
fn f(t: &Tensor<f32, [32, 32]>) -> void on Topology::Staging {
  let s = transfer(t, Memory::SMEM);
  let m = transfer(s, Memory::TMEM);
  consume(&m);
}
"""
    w, e = diagnostics(src, "b200")
    assert (w.code, w.span.line, e.code, e.span.line) == ("W1027", 5, "E6004", 12)
    assert "`SMEM -> TMEM`" in w.message, w.message
    assert "`SMEM -> TMEM`" in e.message, e.message


# ---- borrows held in bindings (LANGUAGE.md section 3: Rust rules) ---------------------------
BORROW_PRELUDE = f"""\
fn g(t: Tensor<f32, [4, 4]>) -> void {ON} {{
}}
fn h(t: &Tensor<f32, [4, 4]>) -> void {ON} {{
}}
"""


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        (
            "moved while a shared borrow is alive (rustc E0505)",
            """\
  let a = Tensor<f32>([4, 4]);
  let r = &a;
  g(a);
  h(r);
""",
            [("E0302", 8)],
        ),
        (
            "a shared borrow while a unique borrow is alive (rustc E0502)",
            """\
  let mut a = Tensor<f32>([4, 4]);
  let r = &mut a;
  let s = &a;
  matmul_acc(r, s, s);
""",
            [("E0302", 8)],
        ),
        (
            "borrows that end before the move are fine",
            """\
  let a = Tensor<f32>([4, 4]);
  let r = &a;
  h(r);
  g(a);
""",
            [],
        ),
    ],
    ids=["move-while-borrowed", "shared-while-unique", "borrow-ends-first"],
)
def test_borrows_held_in_bindings(name, body, expected):
    src = BORROW_PRELUDE + f"fn f() -> void {ON} {{\n" + body + "}\n"
    assert [(c, line) for c, line in verdict(src, "tpu") if c.startswith("E03")] == expected
