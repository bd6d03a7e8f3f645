"""Build every kernel for the NVIDIA targets here, for tools/gpu_check.py to run there.

    .venv/bin/python tools/gpu_build.py [--out build/gpu]

The device machine has the GPU but none of this repository's environment (no jaxlib,
lark, z3 or ptxas wheel), so the fatbins and their manifests are built on this machine
into one folder that travels to it (`build/gpu/`, about 0.5 MB; the device tool's
`carry`), with `index.json` naming each artifact and the numpy reference that checks it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "compiler"))

TARGETS = ("h100", "b200")
# Kernels the check runs: kernels/*.vx but the seed's extern form (cpu only, by decision),
# and the blocking twin of stream_grid that shows what the transfer tokens buy.
EXTRA = (ROOT / "benchmarks" / "nvidia" / "stream_grid_blocking.vx",)
SKIP = {"seed"}


def sources() -> list[Path]:
    ks = [p for p in sorted((ROOT / "kernels").glob("*.vx")) if p.stem not in SKIP]
    return ks + list(EXTRA)


def build(out: Path, srcs: list[Path] | None = None) -> dict:
    """Build `srcs` (default: `sources()`) for every target into `out`. A kernel a
    target refuses is recorded with its coded diagnostics (`refused`) and the others are
    built: tools/gpu_check.py names each refusal at the start of its run and in its log."""
    from vxc import api

    entries = []
    for src in sources() if srcs is None else srcs:
        name = str(src.relative_to(ROOT)) if src.is_relative_to(ROOT) else src.name
        analysis = api.analyze([api.Source(name, src.read_bytes())])
        for target in TARGETS:
            result = api.build(analysis, target)
            if not result.ok:
                msgs = "; ".join(
                    f"{d.span.file}:{d.span.line}:{d.span.column}: {d.code}: {d.message}"
                    for d in result.diagnostics
                )
                entries.append({"source": src.stem, "target": target, "refused": msgs})
                continue
            folder = out / target
            folder.mkdir(parents=True, exist_ok=True)
            for name, data in sorted(result.outputs.items()):
                (folder / name).write_bytes(data)
            manifest = f"{target}/{src.stem}.{target}.json"
            entries.append({"source": src.stem, "target": target, "manifest": manifest})
    index = {"format": "vx-gpu-check-1", "artifacts": entries}
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "build" / "gpu"))
    args = ap.parse_args()
    out = Path(args.out)
    index = build(out)
    built = [e for e in index["artifacts"] if "manifest" in e]
    print(f"gpu_build: {len(built)} artifacts in {out}")
    for e in index["artifacts"]:
        if "refused" in e:
            print(f"gpu_build: NOT BUILT {e['source']} for {e['target']}: {e['refused']}")


if __name__ == "__main__":
    main()
