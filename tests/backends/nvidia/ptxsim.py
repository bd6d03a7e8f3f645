"""A functional simulator of one CTA running the PTX subset the NVIDIA backends emit.

It is the closest this machine can get to running the kernels: the generated PTX text
is parsed and executed thread by thread (128 threads, round-robin, `bar.sync` and
mbarrier waits block), with the hardware rules written down independently of the
backend's encoders:

- shared-memory matrix descriptors are *decoded* (start address, stride byte offset,
  swizzle field) and operands read through the 128-byte swizzle as the hardware applies
  it (address bits 4-6 XOR bits 7-9);
- TMA copies write / read boxes with that swizzle and complete only when every thread is
  blocked (so a tile read before its `wait` holds stale bytes and the numbers go wrong);
- mbarrier phases, `expect_tx` byte counts and `try_wait.parity` follow the PTX ISA;
- wgmma's D fragment layout (warp w, lane l: rows 16w + l/4 (+8), columns 8j + 2(l%4))
  and tcgen05's TMEM (128 lanes x 512 columns; 32x32b ld/st: a warp's 32 lanes) are
  modelled as the ISA describes them.

It checks the backends' bookkeeping (slots, phases, descriptors, fragment layouts,
epilogues) against numpy; it cannot check what only hardware can (timing, the real
instruction semantics), which tools/gpu_check.sh does on a GPU.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from dataclasses import dataclass, field

import numpy as np

THREADS = 128
SMEM_BASE = 16  # deliberately not 1024-aligned: the kernel aligns its own base


class SimError(AssertionError):
    pass


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@dataclass
class TensorMap:
    buf: np.ndarray  # uint8 view of the global tensor
    dims: tuple[int, int]  # (inner elements, rows)
    stride: int  # bytes per row
    box: tuple[int, int]
    swizzle: str
    elem: int


class Global:
    """Device memory: buffers at made-up, far-apart addresses."""

    def __init__(self) -> None:
        self.bufs: list[tuple[int, np.ndarray]] = []

    def add(self, buf: np.ndarray) -> int:
        base = (len(self.bufs) + 1) << 40
        self.bufs.append((base, buf))
        return base

    def find(self, addr: int) -> tuple[np.ndarray, int]:
        for base, buf in self.bufs:
            if base <= addr < base + buf.size:
                return buf, addr - base
        raise SimError(f"global access at {addr:#x} outside every buffer")


@dataclass
class Ins:
    pred: str | None
    neg: bool
    op: str
    args: list[str]


@dataclass
class Thread:
    tid: int
    regs: dict = field(default_factory=dict)
    pc: int = 0
    done: bool = False
    waiting: str | None = None  # "bar" | "wgmma" | None


def _split(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse(ptx: str, kernel: str) -> tuple[list[str], list[Ins], dict[str, int]]:
    body = ptx[ptx.index(f".entry {kernel}(") :]
    head, rest = body.split(")", 1)
    params = re.findall(r"\.param [^\n]*?(\w+)(?:\[128\])?\s*$", head, re.M)
    code = rest[rest.index("{") + 1 : rest.rindex("}")]
    prog, labels = [], {}
    for line in code.splitlines():
        line = line.strip()
        if not line or line.startswith((".reg", "//")):
            continue
        if line.endswith(":"):
            labels[line[:-1]] = len(prog)
            continue
        line = line.rstrip(";")
        pred, neg = None, False
        if line.startswith("@"):
            g, line = line.split(" ", 1)
            neg = g.startswith("@!")
            pred = g.lstrip("@!")
        op, _, args = line.partition(" ")
        prog.append(Ins(pred, neg, op, _split(args)))
    return params, prog, labels


class Cta:
    def __init__(
        self,
        ptx: str,
        kernel: str,
        params: dict,
        smem_bytes: int,
        ctaid: int,
        nctaid: int,
        memory: Global,
    ):
        self.memory = memory
        self.names, self.prog, self.labels = parse(ptx, kernel)
        self.params = params
        self.smem = bytearray(SMEM_BASE + smem_bytes)
        self.tmem = np.zeros((128, 512), dtype=np.uint32)
        self.bars: dict[int, dict] = {}
        self.pending: deque = deque()  # TMA loads not yet landed
        self.threads = [Thread(t) for t in range(THREADS)]
        self.ctaid, self.nctaid = ctaid, nctaid
        self.tmem_alloc = False
        self.steps = 0

    # -- values ---------------------------------------------------------------------
    def val(self, t: Thread, a: str):
        if a.startswith("%"):
            if a == "%tid.x":
                return t.tid
            if a == "%ctaid.x":
                return self.ctaid
            if a == "%nctaid.x":
                return self.nctaid
            if a not in t.regs:
                raise SimError(f"thread {t.tid} reads {a} before writing it")
            return t.regs[a]
        if a.startswith("0f"):
            return struct.unpack("<f", struct.pack("<I", int(a[2:], 16)))[0]
        if a == "vx_smem":
            return SMEM_BASE
        if a in self.params:
            return ("param", a)
        return int(a)

    def addr(self, t: Thread, a: str) -> tuple[object, int]:
        inner = a[1:-1]
        m = re.fullmatch(r"([%\w.]+)(?:\+(\d+))?", inner)
        return self.val(t, m.group(1)), int(m.group(2) or 0)

    def coords(self, t: Thread, a: str):
        base, c = a[1:-1].split(",", 1)
        cs = [self.val(t, x.strip()) for x in c.strip()[1:-1].split(",")]
        return self.val(t, base.strip()), cs

    def vec(self, t: Thread, a: str) -> list:
        return [self.val(t, x.strip()) for x in a[1:-1].split(",")]

    # -- shared memory ----------------------------------------------------------------
    def st(self, off: int, data: bytes) -> None:
        if off < 0 or off + len(data) > len(self.smem):
            raise SimError(f"shared store out of bounds at {off}")
        self.smem[off : off + len(data)] = data

    def ld(self, off: int, n: int) -> bytes:
        if off < 0 or off + n > len(self.smem):
            raise SimError(f"shared load out of bounds at {off}")
        return bytes(self.smem[off : off + n])

    @staticmethod
    def swz(off: int) -> int:
        return off ^ (((off >> 7) & 7) << 4)

    # -- mbarriers --------------------------------------------------------------------
    def bar_arrive(self, a: int, tx: int = 0) -> None:
        b = self.bars[a]
        b["tx"] += tx
        b["pending"] -= 1
        self._bar_check(a)

    def _bar_check(self, a: int) -> None:
        b = self.bars[a]
        if b["pending"] == 0 and b["tx"] == 0:
            b["phase"] += 1
            b["pending"] = b["count"]

    def complete_one_copy(self) -> bool:
        if not self.pending:
            return False
        dst, tmap, c0, c1, bar = self.pending.popleft()
        e = tmap.elem
        for r in range(tmap.box[1]):
            y = c1 + r
            for x in range(c0, c0 + tmap.box[0]):
                if 0 <= y < tmap.dims[1] and 0 <= x < tmap.dims[0]:
                    src = tmap.buf[y * tmap.stride + x * e : y * tmap.stride + x * e + e].tobytes()
                else:
                    src = bytes(e)
                off = dst + r * tmap.box[0] * e + (x - c0) * e
                self.st(self.swz(off) if tmap.swizzle == "128B" else off, src)
        nbytes = tmap.box[0] * tmap.box[1] * e
        b = self.bars[bar]
        b["tx"] -= nbytes
        self._bar_check(bar)
        return True

    # -- matrix operands ----------------------------------------------------------------
    def read_kmajor(self, desc: int, rows: int, kbytes: int, elem: int, dtype: str, sbo_shift=32):
        start = (desc & 0x3FFF) << 4
        sbo = ((desc >> sbo_shift) & 0x3FFF) << 4
        out = np.zeros((rows, kbytes // elem), dtype=np.float32)
        for m in range(rows):
            row = self.ld_row(start + (m // 8) * sbo + (m % 8) * 128, kbytes)
            if dtype == "f32":
                vals = np.frombuffer(row, np.uint32) & np.uint32(0xFFFFE000)  # tf32
                out[m] = vals.view(np.float32)
            else:
                bits = np.frombuffer(row, np.uint16)
                out[m] = _bf16_to_f32(bits) if dtype == "bf16" else bits.view(np.float16)
        return out

    def ld_row(self, a: int, n: int) -> bytes:
        # The row's bytes through the 128-byte swizzle, 16 bytes at a time.
        return b"".join(self.ld(self.swz(a + i), 16) for i in range(0, n, 16))

    # -- execution --------------------------------------------------------------------
    def run(self, max_steps: int = 20_000_000) -> None:
        while True:
            progressed = False
            for t in self.threads:
                if t.done or t.waiting:
                    continue
                progressed |= self.step_until_block(t)
            if all(t.done for t in self.threads):
                if self.pending:
                    raise SimError("the kernel exited with TMA loads in flight")
                return
            if self._release_collectives():
                continue
            if not progressed and not self.complete_one_copy():
                if not any(t.waiting == "spin" for t in self.threads):
                    raise SimError("deadlock: every thread is blocked")
                raise SimError("deadlock: threads spin on an mbarrier no copy will complete")
            for t in self.threads:
                if t.waiting == "spin":
                    t.waiting = None
            if self.steps > max_steps:
                raise SimError("too many steps")

    def _release_collectives(self) -> bool:
        live = [t for t in self.threads if not t.done]
        for kind in ("bar", "wgmma"):
            if live and all(t.waiting == kind for t in live):
                pcs = {t.pc for t in live}
                if len(pcs) != 1:
                    raise SimError(f"threads reach different {kind} points: {sorted(pcs)}")
                if kind == "wgmma":
                    self.wgmma(live, self.prog[live[0].pc])
                for t in live:
                    t.waiting = None
                    t.pc += 1
                return True
        return False

    def step_until_block(self, t: Thread) -> bool:
        moved = False
        while not t.done and not t.waiting:
            ins = self.prog[t.pc]
            self.steps += 1
            if ins.pred is not None:
                p = bool(t.regs[ins.pred])
                if p == ins.neg:
                    t.pc += 1
                    moved = True
                    continue
            if ins.op.startswith("bar.sync"):
                t.waiting = "bar"
                return True
            if ins.op.startswith("wgmma.mma_async"):
                t.waiting = "wgmma"
                return True
            nxt = self.exec(t, ins)
            if nxt == "spin":
                t.waiting = "spin"
                return moved
            t.pc = nxt if nxt is not None else t.pc + 1
            moved = True
        return moved

    def exec(self, t: Thread, ins: Ins):
        op, a = ins.op, ins.args
        V = lambda x: self.val(t, x)  # noqa: E731
        R = t.regs
        base = op.split(".")[0]
        if op == "ret":
            t.done = True
            return None
        if base == "bra":
            return self.labels[a[0]]
        if op.startswith(("fence", "tcgen05.fence", "wgmma.fence", "wgmma.commit", "wgmma.wait")):
            return None
        if op.startswith(("tcgen05.wait", "tcgen05.relinquish", "cp.async.bulk.commit")):
            return None
        if op.startswith("cp.async.bulk.wait_group"):
            return None
        if base == "mov":
            v = V(a[1])
            R[a[0]] = v
            return None
        if base == "cvta":
            R[a[0]] = V(a[1])
            return None
        if op == "ld.param.u64":
            v, _ = self.addr(t, a[1])
            R[a[0]] = self.params[v[1]]
            return None
        if base in (
            "add",
            "sub",
            "mul",
            "mad",
            "div",
            "rem",
            "and",
            "or",
            "xor",
            "shl",
            "shr",
            "min",
            "max",
        ):
            bits = 64 if op.endswith("64") and "wide" not in op else 32
            if "wide" in op:
                bits = 64
            mask = (1 << bits) - 1
            x, y = V(a[1]), V(a[2])
            signed = ".s" in op
            if signed and bits == 64:
                x = x - (1 << 64) if x >> 63 else x
                y = y - (1 << 64) if y >> 63 else y
            r = {
                "add": lambda: x + y,
                "sub": lambda: x - y,
                "mul": lambda: x * y,
                "mad": lambda: x * y + V(a[3]),
                "div": lambda: int(x / y) if signed else x // y,
                "rem": lambda: x % y,
                "and": lambda: x & (y & mask),
                "or": lambda: x | (y & mask),
                "xor": lambda: x ^ y,
                "shl": lambda: x << y,
                "shr": lambda: x >> y,
                "min": lambda: min(x, y),
                "max": lambda: max(x, y),
            }[base]()
            R[a[0]] = r & mask
            return None
        if base == "bfe":
            R[a[0]] = (V(a[1]) >> V(a[2])) & ((1 << V(a[3])) - 1)
            return None
        if base == "cvt":
            v = V(a[1])
            if op == "cvt.s64.s32":
                v = (v - (1 << 32) if v >> 31 else v) & ((1 << 64) - 1)
            R[a[0]] = v & 0xFFFFFFFF if ".u32." in op or ".s32." in op else v
            return None
        if base == "setp":
            cmp, ty = op.split(".")[1], op.split(".")[2]
            x, y = V(a[1]), V(a[2])
            if ty.startswith("s") and ty.endswith("64"):
                x = x - (1 << 64) if x >> 63 else x
                y = y - (1 << 64) if y >> 63 else y
            R[a[0]] = {
                "eq": x == y,
                "ne": x != y,
                "ge": x >= y,
                "lt": x < y,
                "le": x <= y,
                "gt": x > y,
            }[cmp]
            return None
        if op == "selp.b64" or op == "selp.b32":
            R[a[0]] = V(a[1]) if R[a[3]] else V(a[2])
            return None
        if base == "st" and ".shared" in op:
            p, off = self.addr(t, a[0])
            if op.endswith(("v2.f32",)):
                self.st(p + off, struct.pack("<2f", *self.vec(t, a[1])))
            elif op.endswith("v4.b32"):
                self.st(p + off, struct.pack("<4I", *[x & 0xFFFFFFFF for x in self.vec(t, a[1])]))
            elif op.endswith("b32"):
                self.st(p + off, struct.pack("<I", V(a[1]) & 0xFFFFFFFF))
            elif op.endswith("b16"):
                self.st(p + off, struct.pack("<H", V(a[1]) & 0xFFFF))
            else:
                raise SimError(f"no model for {op}")
            return None
        if op == "ld.shared.b32":
            p, off = self.addr(t, a[1])
            R[a[0]] = struct.unpack("<I", self.ld(p + off, 4))[0]
            return None
        if op.startswith("ld.global"):
            p, off = self.addr(t, a[1])
            buf, o = self.memory.find(p + off)
            n = 2 if op.endswith("16") else 4
            R[a[0]] = int.from_bytes(buf[o : o + n].tobytes(), "little")
            return None
        if op == "st.global.u32":
            p, off = self.addr(t, a[0])
            buf, o = self.memory.find(p + off)
            buf[o : o + 4] = np.frombuffer(struct.pack("<I", V(a[1])), np.uint8)
            return None
        if op.startswith("mbarrier.init"):
            p, off = self.addr(t, a[0])
            self.bars[p + off] = {"count": V(a[1]), "pending": V(a[1]), "tx": 0, "phase": 0}
            return None
        if op.startswith("mbarrier.arrive.expect_tx"):
            p, off = self.addr(t, a[1])
            self.bar_arrive(p + off, V(a[2]))
            return None
        if op.startswith("mbarrier.try_wait.parity"):
            p, off = self.addr(t, a[1])
            b = self.bars[p + off]
            done = (b["phase"] & 1) != (V(a[2]) & 1)
            if not done:
                return "spin"
            R[a[0]] = True
            return None
        if op.startswith("cp.async.bulk.tensor.2d.shared::cluster"):
            dst, doff = self.addr(t, a[0])
            (_, name), cs = self.coords(t, a[1])
            bar, boff = self.addr(t, a[2])
            self.pending.append((dst + doff, self.params[name], cs[0], cs[1], bar + boff))
            return None
        if op.startswith("cp.async.bulk.tensor.2d.global.shared"):
            (_, name), cs = self.coords(t, a[0])
            src, soff = self.addr(t, a[1])
            tm = self.params[name]
            e = tm.elem
            for r in range(tm.box[1]):
                row = self.ld(src + soff + r * tm.box[0] * e, tm.box[0] * e)
                o = (cs[1] + r) * tm.stride + cs[0] * e
                tm.buf[o : o + len(row)] = np.frombuffer(row, np.uint8)
            return None
        if op.startswith("tcgen05.alloc"):
            p, off = self.addr(t, a[0])
            if not self.tmem_alloc:
                self.tmem_alloc = True
            self.st(p + off, struct.pack("<I", 0))
            return None
        if op.startswith("tcgen05.dealloc"):
            return None
        if op.startswith("tcgen05.st.sync.aligned.32x32b.x32"):
            p, off = self.addr(t, a[0])
            addr = p + off
            lane, col = (addr >> 16) + (t.tid % 32), addr & 0xFFFF
            self.tmem[lane, col : col + 32] = [x & 0xFFFFFFFF for x in self.vec(t, a[1])]
            return None
        if op.startswith("tcgen05.ld.sync.aligned.32x32b.x32"):
            p, off = self.addr(t, a[1])
            addr = p + off
            lane, col = (addr >> 16) + (t.tid % 32), addr & 0xFFFF
            for r, v in zip(a[0][1:-1].split(","), self.tmem[lane, col : col + 32], strict=True):
                R[r.strip()] = int(v)
            return None
        if op.startswith("tcgen05.mma"):
            self.tcgen05_mma(t, ins)
            return None
        if op.startswith("tcgen05.commit"):
            p, off = self.addr(t, a[0])
            self.bar_arrive(p + off)
            return None
        raise SimError(f"no model for `{op}`")

    def wgmma(self, threads: list[Thread], ins: Ins) -> None:
        m = re.search(r"m64n(\d+)k(\d+)\.f32\.(\w+)\.", ins.op)
        n, kk, ty = int(m.group(1)), int(m.group(2)), m.group(3)
        dtype = {"tf32": "f32", "bf16": "bf16", "f16": "f16"}[ty]
        elem = 4 if dtype == "f32" else 2
        t0 = threads[0]
        da, db = self.val(t0, ins.args[1]), self.val(t0, ins.args[2])
        if (da >> 62) != 1 or (db >> 62) != 1:
            raise SimError("wgmma descriptor without the 128B swizzle")
        A = self.read_kmajor(da, 64, kk * elem, elem, dtype)
        B = self.read_kmajor(db, n, kk * elem, elem, dtype)  # B^T: [n, k]
        D = A.astype(np.float64) @ B.T.astype(np.float64)
        for t in threads:
            w, lane = t.tid // 32, t.tid % 32
            regs = [x.strip() for x in ins.args[0][1:-1].split(",")]
            for i, r in enumerate(regs):
                row = 16 * w + lane // 4 + (8 if (i % 4) >= 2 else 0)
                col = 8 * (i // 4) + 2 * (lane % 4) + (i % 2)
                t.regs[r] = float(np.float32(t.regs[r] + D[row, col]))

    def tcgen05_mma(self, t: Thread, ins: Ins) -> None:
        kind = ins.op.rsplit("::", 1)[1]
        p, off = self.addr(t, ins.args[0])
        d = p + off
        da, db, idesc = (self.val(t, x) for x in ins.args[1:4])
        enable = bool(t.regs[ins.args[4]])
        fmt = (idesc >> 7) & 7
        n, m = ((idesc >> 17) & 63) << 3, ((idesc >> 24) & 31) << 4
        dtype = "f32" if kind == "tf32" else {0: "f16", 1: "bf16"}[fmt]
        if (da >> 61) != 2 or (db >> 61) != 2 or ((da >> 46) & 3) != 1:
            raise SimError("tcgen05 descriptor without version 1 and the 128B swizzle")
        elem = 4 if dtype == "f32" else 2
        A = self.read_kmajor(da, m, 32, elem, dtype)
        B = self.read_kmajor(db, n, 32, elem, dtype)
        lane0, col = d >> 16, d & 0xFFFF
        cur = self.tmem[lane0 : lane0 + m, col : col + n].view(np.float32).astype(np.float64)
        res = A.astype(np.float64) @ B.T.astype(np.float64) + (cur if enable else 0)
        self.tmem[lane0 : lane0 + m, col : col + n] = res.astype(np.float32).view(np.uint32)


def run_kernel(
    ptx: str, manifest_kernel: dict, args: list[np.ndarray], instances: int
) -> list[np.ndarray]:
    """Run `instances` CTAs one after another, with the parameters the runtime would
    pass (`vxc.backends.nvidia.runtime.plan_launch`); returns the stacked results."""
    from vxc.backends.nvidia.runtime import plan_launch

    k = manifest_kernel
    memory = Global()
    params: dict = {}
    outs, status, ptrs = [], None, {}
    for p in plan_launch(k, args, instances):
        if p.kind in ("tensormap", "pointer"):
            raw = p.array.reshape(-1).view(np.uint8)
            if p.arg_index is None:
                outs.append(p.array)
            if p.kind == "pointer":
                params[p.name] = ptrs.setdefault(p.arg_index, memory.add(raw))
            else:
                tm = p.tensor_map
                params[p.name] = TensorMap(
                    raw, tm.dims, tm.strides[0], tm.box, tm.swizzle, tm.elem_bytes
                )
        elif p.kind == "u64":
            params[p.name] = p.value
        elif p.kind == "status":
            status = p.array
            params[p.name] = memory.add(status.view(np.uint8))
    for i in range(instances):
        Cta(ptx, k["name"], params, k["dynamic_smem"], i, instances, memory).run()
    if status is not None and status.any():
        raise SimError(f"status word {int(status[0])}: the launch breaks a `where` clause")
    return outs
