"""A scatter chart as SVG text, written by hand: the ``--plot`` charts without matplotlib.

One chart shape serves ``suggest --plot`` and ``serve suggest --plot``: a grey cloud of points, a
red Pareto front (steps or a line, each of its points a titled group), a green star for the
recommendation named above the plot area, an optional dashed vertical line, a title, axis labels,
nice-number ticks with a light grid, and a legend. Every point carries an SVG ``<title>`` (shown on
hover); above ``Chart.titled_up_to`` cloud points the cloud is one ``<path>`` of dots without titles.

The output is a pure function of the chart: coordinates are rounded to 0.01 of a point and nothing
depends on the date, the locale or the terminal, so the same search writes the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 648, 396  # 9 x 5.5 inches at 72 points per inch, the size the matplotlib chart had
LEFT, RIGHT, TOP, BOTTOM = 78, 636, 48, 352  # the plot area
GREY, RED, GREEN, INK = "#9aa5b1", "#d62728", "#2ca02c", "#444444"
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'
Scale = Callable[[float], float]  # data to SVG coordinates along one axis
CHAR_W = 0.58  # a sans-serif character's mean width per unit of font size (for the legend's box)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str = ""  # the hover text; cloud points above Chart.titled_up_to have none
    gid: str = ""  # the id of the point's group; "" for a cloud point


@dataclass(frozen=True)
class Chart:
    title: str
    label: str  # the recommendation, above the plot area
    xlabel: str
    ylabel: str
    cloud: Sequence[Point]
    cloud_label: str
    cloud_gid: str
    front: Sequence[Point]
    front_label: str
    best: Point
    steps: bool = True  # the front as steps (each point holds until the next) or a line
    vline: tuple[float, str] | None = None  # (x, legend label): a dashed vertical line
    legend_top: bool = False  # the legend in the upper right corner, else the lower right
    label_size: float = 9
    titled_up_to: int = 2000


def nice_ticks(lo: float, hi: float, most: int = 8) -> tuple[list[float], int]:
    """Ticks at multiples of 1, 2, 2.5 or 5 x 10^k inside [lo, hi], at most `most` of them, and the
    decimals that print them (the step's): the numbers a person would put on an axis."""
    span = hi - lo
    if span <= 0 or not math.isfinite(span):
        return [lo], 0
    raw = span / (most - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step, mult = next((m * mag, m) for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9) + (1 if mult == 2.5 else 0))
    return [k * step for k in range(first, last + 1)], decimals


def limits(values: Sequence[float]) -> tuple[float, float]:
    """The data range with 5% margins each side (matplotlib's default); a single value gets +-5% of itself."""
    lo, hi = min(values), max(values)
    if hi == lo:
        pad = abs(lo) * 0.05 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def fitted(s: str, size: float, room: float) -> float:
    """`size`, or less where `s` would be wider than `room` (a long plan or serving label): a line of text
    the chart cannot wrap stays inside the picture."""
    return min(size, round(room / (CHAR_W * max(len(s), 1)), 1))


def _n(v: float) -> str:
    """A coordinate: at most two decimals, no trailing zeros."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _text(x: float, y: float, s: str, *, size: float = 9, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{_n(x)}" y="{_n(y)}" font-size="{_n(size)}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'


def _star(x: float, y: float, r: float = 7.0) -> str:
    corners = []
    for i in range(10):
        a = math.pi / 2 + i * math.pi / 5
        rr = r if i % 2 == 0 else r * 0.4
        corners.append(f"{_n(x + rr * math.cos(a))},{_n(y - rr * math.sin(a))}")
    return f'<polygon points="{" ".join(corners)}" fill="{GREEN}"/>'


def render(c: Chart) -> str:
    """The chart as a standalone SVG document."""
    xs = [p.x for p in (*c.cloud, *c.front, c.best)] + ([c.vline[0]] if c.vline else [])
    ys = [p.y for p in (*c.cloud, *c.front, c.best)]
    (x0, x1), (y0, y1) = limits(xs), limits(ys)

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (RIGHT - LEFT)

    def py(y: float) -> float:
        return BOTTOM - (y - y0) / (y1 - y0) * (BOTTOM - TOP)

    out = [
        '<?xml version="1.0" encoding="utf-8" standalone="no"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}pt" height="{HEIGHT}pt" viewBox="0 0 {WIDTH} {HEIGHT}" {FONT}>',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        *_axes(c, (x0, x1), (y0, y1), px, py),
        *_cloud(c, px, py),
        *_front(c, px, py),
    ]
    if c.vline is not None:
        vx = _n(px(c.vline[0]))
        out.append(f'<path id="vline" d="M{vx} {TOP}V{BOTTOM}" stroke="{INK}" stroke-width="0.8" stroke-dasharray="3,2"/>')
    out += [
        f'<g id="recommended">\n<title>{escape(c.best.title)}</title>\n{_star(px(c.best.x), py(c.best.y))}\n</g>',
        _text(WIDTH / 2, 16, c.title, size=fitted(c.title, 10.8, WIDTH - 8), anchor="middle", extra=' id="title"'),
        _text(
            LEFT, TOP - 6, c.label, size=fitted(c.label, c.label_size, WIDTH - LEFT - 4), extra=f' id="recommended-label" fill="{GREEN}"'
        ),
        *_legend(c),
        "</svg>",
    ]
    return "\n".join(out) + "\n"


def _axes(c: Chart, xr: tuple[float, float], yr: tuple[float, float], px: Scale, py: Scale) -> list[str]:
    """Grid, frame, ticks and tick labels, axis labels."""
    xticks, xd = nice_ticks(*xr)
    yticks, _ = nice_ticks(*yr)
    grid, labels = [], []
    for t in xticks:
        x = _n(px(t))
        grid.append(f"M{x} {TOP}V{BOTTOM}")
        labels.append(f'<path d="M{x} {BOTTOM}v3.5" stroke="#000000" stroke-width="0.8"/>')
        labels.append(_text(float(x), BOTTOM + 14, f"{t:,.{xd}f}", anchor="middle"))
    for t in yticks:
        y = _n(py(t))
        grid.append(f"M{LEFT} {y}H{RIGHT}")
        labels.append(f'<path d="M{LEFT} {y}h-3.5" stroke="#000000" stroke-width="0.8"/>')
        labels.append(_text(LEFT - 6, float(y) + 3, f"{t:,.0f}", anchor="end"))
    mid_y = (TOP + BOTTOM) / 2
    return [
        f'<g id="axes">\n<path id="grid" d="{"".join(grid)}" stroke="#b0b0b0" stroke-width="0.3" fill="none"/>',
        f'<rect id="plot-area" x="{LEFT}" y="{TOP}" width="{RIGHT - LEFT}" height="{BOTTOM - TOP}" '
        'fill="none" stroke="#000000" stroke-width="0.8"/>',
        *labels,
        _text((LEFT + RIGHT) / 2, BOTTOM + 32, c.xlabel, anchor="middle", extra=' id="xlabel"'),
        _text(14, mid_y, c.ylabel, anchor="middle", extra=f' id="ylabel" transform="rotate(-90 14 {_n(mid_y)})"'),
        "</g>",
    ]


def _cloud(c: Chart, px: Scale, py: Scale) -> list[str]:
    style = f'fill="{GREY}" fill-opacity="0.6"'
    if len(c.cloud) > c.titled_up_to:  # one path of dots: the file stays small, the points untitled
        # dots 0.1 pt apart are one dot on any screen: each is drawn once, in a fixed order
        dots = "".join(f"M{x:.1f} {y:.1f}h0" for x, y in sorted({(round(px(p.x), 1), round(py(p.y), 1)) for p in c.cloud}))
        return [
            f'<g id="{c.cloud_gid}">',
            f'<path d="{dots}" stroke="{GREY}" stroke-opacity="0.6" stroke-width="3" stroke-linecap="round"/>',
            "</g>",
        ]
    lines = [f'<g id="{c.cloud_gid}" {style}>']
    for p in c.cloud:
        lines.append(f'<g><title>{escape(p.title)}</title><circle cx="{_n(px(p.x))}" cy="{_n(py(p.y))}" r="1.5"/></g>')
    return [*lines, "</g>"]


def _front(c: Chart, px: Scale, py: Scale) -> list[str]:
    if not c.front:
        return []
    pts = [(_n(px(p.x)), _n(py(p.y))) for p in c.front]
    d = f"M{pts[0][0]} {pts[0][1]}"
    for xb, yb in pts[1:]:
        d += f"H{xb}V{yb}" if c.steps else f"L{xb} {yb}"
    lines = [f'<path id="pareto-front" d="{d}" stroke="{RED}" stroke-width="1" fill="none"/>']
    for p, (x, y) in zip(c.front, pts, strict=True):
        lines.append(f'<g id="{p.gid}">\n<title>{escape(p.title)}</title>\n<circle cx="{x}" cy="{y}" r="2.5" fill="{RED}"/>\n</g>')
    return lines


def _legend(c: Chart) -> list[str]:
    """The legend box in a right-hand corner: a swatch and a label per mark."""
    entries = [("dot", c.cloud_label), ("line", c.front_label), ("star", "recommended")]
    if c.vline is not None:
        entries.append(("dash", c.vline[1]))
    width = 34 + CHAR_W * 9 * max(len(label) for _, label in entries)
    height = 8 + 14 * len(entries)
    x = RIGHT - 6 - width
    y = TOP + 6 if c.legend_top else BOTTOM - 6 - height
    out = [
        f'<g id="legend">\n<rect x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" height="{height}" rx="2" '
        'fill="#ffffff" fill-opacity="0.8" stroke="#cccccc" stroke-width="0.8"/>'
    ]
    for i, (kind, label) in enumerate(entries):
        cy = y + 11 + 14 * i
        sx = x + 8
        if kind == "dot":
            out.append(f'<circle cx="{_n(sx + 9)}" cy="{_n(cy)}" r="1.5" fill="{GREY}" fill-opacity="0.6"/>')
        elif kind == "line":
            out.append(f'<path d="M{_n(sx)} {_n(cy)}h18" stroke="{RED}" stroke-width="1"/>')
        elif kind == "star":
            out.append(_star(sx + 9, cy, 5))
        else:
            out.append(f'<path d="M{_n(sx)} {_n(cy)}h18" stroke="{INK}" stroke-width="0.8" stroke-dasharray="3,2"/>')
        out.append(_text(sx + 24, cy + 3, label))
    return [*out, "</g>"]
