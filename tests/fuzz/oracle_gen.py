"""Small random kernels for the oracle (oracle.py) to judge against the checker.

Each kernel: one input `a` and one output `c` of `R x 128` f32, `where instances() ==
K`, loop-carried counters stepped by constants (some under `if`s, some in nested
loops), views of `a` and `c` offset by counters, loop variables and `instance()`,
blocking and async stores, reads of the output (some before the store's `wait`), and a
source re-assigned while its store may be in flight. Biased towards kernels near the
edge: offsets that fit for most iterations and instances, and run past for some.
Deterministic in the seed.
"""

from __future__ import annotations

import random

TILE = 64  # rows of every view
STEPS = [0, 64, 64, 128, 128, 192, 256, -64]


class KernelGen:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def index(self, counters: list[str], loops: list[str]) -> str:
        """A row offset: a sum of a few terms over the counters, loop variables and
        `instance()`."""
        rng = self.rng
        terms = []
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            k = rng.random()
            if k < 0.4 and counters:
                terms.append(rng.choice(counters))
            elif k < 0.65 and loops:
                terms.append(f"{rng.choice(loops)} * {rng.choice([64, 64, 128, 192])}")
            elif k < 0.9:
                terms.append(f"instance() * {rng.choice([64, 128, 128, 256, 512])}")
            else:
                terms.append(str(rng.choice([0, 64, 128, 256])))
        return " + ".join(terms)

    def view(self, name: str, counters, loops) -> str:
        lo = self.index(counters, loops)
        return f"{name}[{lo} .. {lo} + {TILE}, 0 .. 128]"

    def access(self, out: list[str], counters, loops, ind: str, fresh) -> None:
        """One load, store, async store or read-back, appended to `out`."""
        rng = self.rng
        t = fresh("t")
        out.append(f"{ind}let {t} = transfer({self.view('a', counters, loops)}, Memory::VMEM);")
        k = rng.random()
        if k < 0.35:
            out.append(f"{ind}transfer({t}, {self.view('c', counters, loops)});")
        elif k < 0.75:
            st = fresh("st")
            out.append(f"{ind}let {st} = transfer_async({t}, {self.view('c', counters, loops)});")
            r = rng.random()
            if r < 0.3:  # a read of the output while the store is in flight
                out.append(
                    f"{ind}let {fresh('u')} = transfer({self.view('c', counters, loops)}, "
                    "Memory::VMEM);"
                )
            elif r < 0.4:  # another store while it is in flight
                out.append(f"{ind}transfer({t}, {self.view('c', counters, loops)});")
            elif r < 0.45:  # the source changed while it is in flight
                out.append(f"{ind}{t} = transfer(a[0 .. {TILE}, 0 .. 128], Memory::VMEM);")
                out[-3] = out[-3].replace(f"let {t} =", f"let mut {t} =")
            out.append(f"{ind}wait({st});")
        else:  # a read of the output
            out.append(
                f"{ind}let {fresh('u')} = transfer({self.view('c', counters, loops)}, Memory::VMEM);"
            )

    def body(self, out, counters, loops, depth: int, fresh, ind: str) -> None:
        rng = self.rng
        for _ in range(rng.randint(1, 3)):
            k = rng.random()
            if k < 0.45:
                self.access(out, counters, loops, ind, fresh)
            elif k < 0.7 and depth < 2:
                var = fresh("i")
                hi = rng.choice([1, 2, 2, 3, 4])
                lo = rng.choice([0, 0, 0, 1])
                out.append(f"{ind}for {var} in z + {lo} .. z + {hi} {{")  # i64, as instance()
                self.body(out, counters, [*loops, var], depth + 1, fresh, ind + "  ")
                for c in counters:
                    if rng.random() < 0.5:
                        out.append(f"{ind}  {c} = {c} + {rng.choice(STEPS)};")
                out.append(f"{ind}}}")
            elif k < 0.85 and depth < 3:
                cond = rng.choice(
                    [
                        "flag",
                        "!flag",
                        *(f"{v} % 2 == 0" for v in loops),
                        *(f"{v} < 2" for v in loops),
                        "instance() == 0",
                        *(f"{c} < 256" for c in counters),
                    ]
                )
                out.append(f"{ind}if {cond} {{")
                self.body(out, counters, loops, depth + 1, fresh, ind + "  ")
                if counters and rng.random() < 0.6:
                    c = rng.choice(counters)
                    out.append(f"{ind}  {c} = {c} + {rng.choice(STEPS)};")
                out.append(f"{ind}}}")
            elif counters:
                c = rng.choice(counters)
                out.append(f"{ind}{c} = {c} + {rng.choice(STEPS)};")

    def kernel(self, name: str = "k") -> str:
        rng = self.rng
        k = rng.choice([1, 1, 2, 2, 3, 4])
        rows = rng.choice([512, 1024, 1024, 2048])
        counters = [f"r{j}" for j in range(rng.choice([1, 1, 2]))]
        out = ["  let z: i64 = 0;"]
        for c in counters:
            start = rng.choice(["0", "0", "instance() * 128", "64"])
            out.append(f"  let mut {c}: i64 = {start};")
        names: dict[str, int] = {}

        def fresh(base: str) -> str:
            names[base] = names.get(base, 0) + 1
            return f"{base}{names[base]}"

        self.body(out, counters, [], 0, fresh, "  ")
        if not any("transfer(" in x for x in out):
            self.access(out, counters, [], "  ", fresh)
        params = f"a: &Tensor<f32, [{rows}, 128]>, c: &mut Tensor<f32, [{rows}, 128]>, flag: bool"
        head = f"fn {name}({params}) -> void on Topology::TensorCore where instances() == {k} {{"
        return "\n".join([head, *out, "}", ""])


def kernels(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [KernelGen(rng).kernel() for _ in range(count)]
