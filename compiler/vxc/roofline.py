"""The roofline picture of `vxc report`: one self-contained SVG per source and target.

Log-log axes (arithmetic intensity in FLOP per byte of device-memory traffic against
FLOP/s), the target's roof (the device memory's bandwidth up to the ridge point, then
the declared peak), and each kernel entry as a labelled point at its intensity on the
roof: the bound the plan implies, not a measurement. The bytes are deterministic (no
clock, no randomness, fixed number formats), so the file can be checked in or diffed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

from vxc.report import KernelReport, byte_rate, flop_rate, seconds

WIDTH, HEIGHT = 900, 560
LEFT, RIGHT, TOP, BOTTOM = 112, 636, 92, 470  # the plot area
MEMORY_FILL, COMPUTE_FILL = "#e8f0fb", "#fdf1e4"  # under the slope, under the flat roof
ROOF, RIDGE, POINT, GRID, TEXT = "#1f4e9a", "#8c8c8c", "#c0392b", "#e3e3e3", "#222222"


@dataclass(frozen=True)
class _Axes:
    """log10 ranges of both axes and the mapping onto the plot area."""

    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, ai: float) -> float:
        return LEFT + (math.log10(ai) - self.x0) / (self.x1 - self.x0) * (RIGHT - LEFT)

    def y(self, flops: float) -> float:
        return BOTTOM - (math.log10(flops) - self.y0) / (self.y1 - self.y0) * (BOTTOM - TOP)


def _n(v: float) -> str:
    """Coordinates with two decimals: the same bytes on every machine."""
    return f"{v:.2f}"


def _axes(reports: list[KernelReport]) -> _Axes:
    ridge, peak = reports[0].ridge, reports[0].peak_flops
    ais = [r.intensity for r in reports if r.intensity] + [ridge]
    x0 = math.floor(math.log10(min(min(ais) / 4, ridge / 100)))
    x1 = math.ceil(math.log10(max(max(ais) * 4, ridge * 10)))
    y1 = math.ceil(math.log10(peak * 3))
    floor = min([10**x0 * reports[0].bandwidth] + [r.attainable for r in reports if r.attainable])
    y0 = min(math.floor(math.log10(floor)), y1 - 2)
    return _Axes(x0, x1, y0, y1)


def _text(x: float, y: float, s: str, size: int = 12, anchor: str = "start", **kw: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in sorted(kw.items()))
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}"{extra}>'
        f"{escape(s)}</text>"
    )


def _intensity_label(v: float) -> str:
    return f"{v:g}"


def _decades(lo: float, hi: float):
    """(value, major) of each grid line from 10**lo to 10**hi: 1..9 times each power."""
    for e in range(int(lo), int(hi) + 1):
        for m in range(1, 10 if e < hi else 2):
            yield m * 10.0**e, m == 1


def _grid(a: _Axes) -> list[str]:
    out = []
    for v, major in _decades(a.x0, a.x1):
        x, width = a.x(v), "1" if major else "0.5"
        out.append(
            f'<line x1="{_n(x)}" y1="{TOP}" x2="{_n(x)}" y2="{BOTTOM}" stroke="{GRID}" stroke-width="{width}"/>'
        )
        if major:
            out.append(_text(x, BOTTOM + 18, _intensity_label(v), 11, "middle"))
    for v, major in _decades(a.y0, a.y1):
        y, width = a.y(v), "1" if major else "0.5"
        out.append(
            f'<line x1="{LEFT}" y1="{_n(y)}" x2="{RIGHT}" y2="{_n(y)}" stroke="{GRID}" stroke-width="{width}"/>'
        )
        if major:
            out.append(_text(LEFT - 8, y + 4, flop_rate(v), 11, "end"))
    return out


def _roof(a: _Axes, r: KernelReport) -> list[str]:
    lo = 10.0**a.x0
    ridge, peak, bw = r.ridge, r.peak_flops, r.bandwidth
    xr, yp = a.x(ridge), a.y(peak)
    slope_start = (
        (a.x(lo), a.y(lo * bw)) if lo * bw >= 10.0**a.y0 else (a.x(10.0**a.y0 / bw), BOTTOM)
    )
    sx, sy = slope_start
    out = [
        f'<polygon points="{_n(sx)},{BOTTOM} {_n(sx)},{_n(sy)} {_n(xr)},{_n(yp)} {_n(xr)},{BOTTOM}" fill="{MEMORY_FILL}"/>',
        f'<polygon points="{_n(xr)},{BOTTOM} {_n(xr)},{_n(yp)} {RIGHT},{_n(yp)} {RIGHT},{BOTTOM}" fill="{COMPUTE_FILL}"/>',
        f'<polyline points="{_n(sx)},{_n(sy)} {_n(xr)},{_n(yp)} {RIGHT},{_n(yp)}" fill="none" stroke="{ROOF}" stroke-width="2.5"/>',
        f'<line x1="{_n(xr)}" y1="{_n(yp)}" x2="{_n(xr)}" y2="{BOTTOM}" stroke="{RIDGE}" stroke-width="1" stroke-dasharray="5,4"/>',
        _text(
            xr + 6,
            BOTTOM - 8,
            f"ridge {_intensity_label(float(f'{ridge:.3g}'))} FLOP/B",
            11,
            fill=RIDGE,
        ),
        _text(RIGHT - 4, yp - 8, f"peak {flop_rate(peak)} (peak_gflops)", 12, "end", fill=ROOF),
        _text((xr + RIGHT) / 2, BOTTOM - 24, "compute-bound", 11, "middle", fill="#b9770e"),
        _text((sx + xr) / 2, BOTTOM - 24, "memory-bound", 11, "middle", fill=ROOF),
    ]
    # The bandwidth label sits along the slope, rotated to its on-screen angle.
    mx, my = sx + 0.45 * (xr - sx), sy + 0.45 * (yp - sy)
    angle = math.degrees(math.atan2(yp - sy, xr - sx))
    out.append(
        f'<text x="{_n(mx)}" y="{_n(my - 8)}" font-size="12" text-anchor="middle" fill="{ROOF}" '
        f'transform="rotate({_n(angle)} {_n(mx)} {_n(my - 8)})">{escape(r.memory)} {escape(byte_rate(bw))}</text>'
    )
    return out


def _points(a: _Axes, reports: list[KernelReport]) -> list[str]:
    out = []
    placed = [r for r in reports if r.intensity and r.attainable]
    for k, r in enumerate(sorted(placed, key=lambda r: (r.intensity, r.kernel))):
        x, y = a.x(r.intensity), a.y(r.attainable)
        out.append(
            f'<line x1="{_n(x)}" y1="{_n(y)}" x2="{_n(x)}" y2="{BOTTOM}" stroke="{POINT}" stroke-width="1" stroke-dasharray="2,3"/>'
        )
        out.append(
            f'<circle cx="{_n(x)}" cy="{_n(y)}" r="5.5" fill="{POINT}" stroke="white" stroke-width="1.5"/>'
        )
        dy = 22 + 30 * k  # labels step down so that neighbouring points do not collide
        share = 100 * r.attainable / r.peak_flops
        # Below and right of a point on the slope (under the roof, clear of the line); left
        # of a compute-bound point in the right half, so the label stays in the plot.
        left = r.bound_by == "compute" and x > (LEFT + RIGHT) / 2
        lx, anchor = (x - 9, "end") if left else (x + 9, "start")
        out.append(_text(lx, y + dy - 12, r.kernel, 13, anchor, font_weight="bold", fill=POINT))
        out.append(
            _text(
                lx,
                y + dy + 2,
                f"{_sig_ai(r.intensity)} FLOP/B, ≤ {flop_rate(r.attainable)} ({share:.0f} % of peak)",
                11,
                anchor,
            )
        )
    return out


def _sig_ai(v: float) -> str:
    return f"{v:.3g}"


def _legend(reports: list[KernelReport]) -> list[str]:
    """The right-hand column: per kernel, the figures a reviewer asks for."""
    x, y = RIGHT + 24, TOP + 4
    out = [_text(x, y, "kernels (per instance)", 13, font_weight="bold")]
    for r in reports:
        y += 30
        out.append(_text(x, y, r.kernel, 12, font_weight="bold", fill=POINT))
        lines = [
            f"{r.cost.flops:,} FLOP".replace(",", " "),
            f"{r.memory_bytes:,} B of {r.memory}".replace(",", " "),
            f"intensity {_sig_ai(r.intensity)} FLOP/B" if r.intensity else "not plotted: no FLOPs",
            f"{r.bound_by}-bound",
        ]
        if r.elements:
            lines.append(f"{'/'.join(r.elements)} matmul operands")
        if r.seconds is not None:
            lines.append(f"launch ≥ {seconds(r.seconds)}")
        for line in lines:
            y += 16
            out.append(_text(x + 8, y, line, 11))
        if r.cost.bound:
            y += 16
            out.append(_text(x + 8, y, "(upper bound: runtime branch)", 11))
    return out


def roofline_svg(reports: list[KernelReport], source: str) -> bytes:
    """The picture for one source's kernels on one target (`reports` share the target)."""
    if not reports or not reports[0].peak_flops or not reports[0].bandwidth:
        raise ValueError("a roofline needs kernels and a model with `peak_gflops` and a bandwidth")
    r0 = reports[0]
    a = _axes(reports)
    sizes = ", ".join(f"{k} = {v}" for k, v in r0.sizes.items()) or "no runtime sizes"
    body = [
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        _text(LEFT, 32, f"Roofline: {source} on {r0.target}", 18, font_weight="bold"),
        _text(
            LEFT,
            54,
            f"machine model: {r0.memory} {byte_rate(r0.bandwidth)}, peak {flop_rate(r0.peak_flops)}; "
            f"{sizes}; {r0.instances} instance(s)",
            12,
            fill="#555555",
        ),
        _text(
            LEFT,
            72,
            "each kernel sits at the bound its plan implies (vxc report), not a measurement",
            11,
            fill="#777777",
        ),
        *_grid(a),
        *_roof(a, r0),
        f'<rect x="{LEFT}" y="{TOP}" width="{RIGHT - LEFT}" height="{BOTTOM - TOP}" fill="none" stroke="#444444"/>',
        *_points(a, reports),
        _text(
            (LEFT + RIGHT) / 2,
            BOTTOM + 40,
            f"arithmetic intensity (FLOP per byte of {r0.memory} traffic, log)",
            12,
            "middle",
        ),
        _text(
            18,
            (TOP + BOTTOM) / 2,
            "attainable FLOP/s (log)",
            12,
            "middle",
            transform=f"rotate(-90 18 {_n((TOP + BOTTOM) / 2)})",
        ),
        *_legend(reports),
    ]
    svg = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" fill="{TEXT}">\n'
        + "\n".join(body)
        + "\n</svg>\n"
    )
    return svg.encode()
