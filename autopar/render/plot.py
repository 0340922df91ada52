"""``suggest --plot``: every feasible plan as tokens/s against peak memory per GPU.

The chart marks the Pareto front (the plans that no other beats on both axes: more tokens/s
for no more memory) and names the recommended plan above the axes, clear of the points, with the
label the text table uses (``labels.plan_text``). It is written by hand (autopar.render.svg), so a
chart needs no plotting library and costs a few milliseconds. ``.svg`` writes the chart; ``.html``
writes a self-contained page with the same SVG inline and a table of the Pareto plans.

Counts: the page and the text say the search's number of feasible plans; the chart draws the
plans the search timed and every plan that may be on the Pareto front (search/front.py). The others
are beaten on both axes by a drawn plan, or are variants of a drawn layout at a higher ZeRO stage,
which the search counts as fitting without timing them (search/planner.py).

The SVG is reproducible (the same search writes the same bytes) and keeps text as text; every Pareto point is
its own element with id ``pareto-<i>-<plan>``, so a test or a script can find them, and every
point carries an SVG ``<title>`` naming its plan, which a browser shows on hover.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from autopar.advise.train import Candidate, Suggestion
from autopar.cost.step import Estimate
from autopar.errors import SpecError
from autopar.render import svg
from autopar.render.answer import PlotSummary
from autopar.render.labels import plan_text
from autopar.spec.units import GIB

P = TypeVar("P", Candidate, Estimate)
FORMATS = (".svg", ".html", ".htm")
RASTER_ABOVE = 2000  # more plans than this are drawn as one path of untitled dots (the SVG stays small)


def pareto_front(estimates: Iterable[P]) -> list[P]:
    """Plans not dominated in (more tokens/s, less memory), by increasing memory.

    Of plans with equal memory only the fastest can be on the front, and a plan must be strictly
    faster than every plan using less memory.
    """
    front: list[P] = []
    best = float("-inf")
    for e in sorted(estimates, key=lambda e: (e.memory_bytes, -e.tokens_per_s)):
        if e.tokens_per_s > best:
            front.append(e)
            best = e.tokens_per_s
    return front


def plan_slug(e: Estimate) -> str:
    """The plan as an SVG id fragment: dp4-tp2-sp-pp2-cp4-mbs1-none-z2."""
    p = e.plan
    bits = [f"dp{p.dp}", f"tp{p.tp}"] + (["sp"] if p.sp and p.tp > 1 else []) + [f"pp{p.pp}"]
    bits += [f"vpp{p.vpp}"] if p.vpp > 1 else []
    bits += [f"cp{p.cp}"] if p.cp > 1 else []
    bits += [f"ep{p.ep}"] if p.ep > 1 else []
    return "-".join([*bits, f"mbs{p.mbs}", p.recompute, f"z{p.zero}"])


def hover(e: Estimate | Candidate) -> str:
    """What a point says on hover: the whole plan, its tokens/s and memory."""
    return f"{plan_text(e)}: {e.tokens_per_s:,.0f} tokens/s, {e.memory_bytes / GIB:.1f} GiB"


def _distinct(estimates: Sequence[Candidate]) -> list[tuple[float, float, Candidate, int]]:
    """Points (GiB, tokens/s, fastest plan there, plans there), one per (0.01 GiB, 4 significant digits of
    tokens/s) cell: thousands of plans share a few hundred distinguishable positions, and the SVG stays small."""
    cells: dict[tuple[float, float], list[Candidate]] = {}
    for e in estimates:
        cells.setdefault((round(e.memory_bytes / GIB, 2), float(f"{e.tokens_per_s:.4g}")), []).append(e)
    return [(gib, tps, max(group, key=lambda c: c.tokens_per_s), len(group)) for (gib, tps), group in sorted(cells.items())]


def cell_title(fastest: Candidate, plans: int) -> str:
    """A grey point's hover text: its fastest plan, and how many more share the position."""
    return hover(fastest) + (f" (and {plans - 1} more plans here)" if plans > 1 else "")


def svg_chart(s: Suggestion, front: Sequence[Estimate] | None = None) -> str:
    """The chart as SVG text (autopar.render.svg), each point titled with its plan; `front`: ``_front(s)``."""
    ranked = s.result.drawn()
    front = _front(s) if front is None else front
    best = s.plans[0]  # the recommendation: the re-ranked first (advise/ties.py), as the text says
    cap = s.ctx.hw.memory_bytes / GIB
    bx, by = best.memory.total / GIB, best.tokens_per_s
    j = s.ctx.job
    if len(ranked.candidates) > RASTER_ABOVE:  # one path of untitled dots: no cells, no titles to build
        cloud = [svg.Point(c.memory_bytes / GIB, c.tokens_per_s) for c in ranked.candidates]
    else:
        cloud = [svg.Point(gib, tps, cell_title(fastest, n)) for gib, tps, fastest, n in _distinct(ranked.candidates)]
    return svg.render(
        svg.Chart(
            title=f"{s.ctx.model.name} on {j.gpus} x {s.ctx.hw.gpu_name}: global batch {j.global_batch} x {j.seq_len} tokens, {j.dtype}",
            label=f"\u2605 recommended: {plan_text(best)}; {by:,.0f} tokens/s, {bx:.1f} GiB",
            xlabel="peak memory per GPU (GiB)",
            ylabel="tokens/s (whole job)",
            cloud=cloud,
            cloud_label=f"plans drawn ({len(ranked)} of {s.result.feasible} that fit)",
            cloud_gid="plans",
            front=[
                svg.Point(e.memory.total / GIB, e.tokens_per_s, "Pareto: " + hover(e), f"pareto-{i}-{plan_slug(e)}")
                for i, e in enumerate(front)
            ],
            front_label=f"Pareto front ({len(front)})",
            best=svg.Point(bx, by, "recommended: " + hover(best)),
            vline=(cap, f"GPU memory ({cap:.1f} GiB)"),
            titled_up_to=RASTER_ABOVE,
        )
    )


def html_page(s: Suggestion, svg: str, front: Sequence[Estimate] | None = None) -> str:
    """A self-contained page: the chart inline and the Pareto plans as a table; `front`: ``_front(s)``."""
    front = _front(s) if front is None else front
    best = s.plans[0]
    inline = re.sub(r"^<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?", "", svg)
    rows = []
    for e in front:
        mark = " (recommended)" if e is best else ""
        rows.append(
            f"<tr><td>{html.escape(plan_text(e))}{mark}</td><td>{e.tokens_per_s:,.0f}</td>"
            f"<td>{e.mfu:.1%}</td><td>{e.memory.total / GIB:.1f}</td></tr>"
        )
    j = s.ctx.job
    title = html.escape(f"autopar: {s.ctx.model.name} on {j.gpus} x {s.ctx.hw.gpu_name}")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto}"
        "table{border-collapse:collapse}td,th{padding:.2rem .6rem;border-bottom:1px solid #ddd;text-align:right}"
        "td:first-child,th:first-child{text-align:left}</style>\n</head>\n<body>\n"
        f"<h1>{title}</h1>\n<p>{s.result.feasible} feasible plans of {s.result.considered} searched "
        f"({len(s.result.drawn())} timed and drawn: the leading plans and every plan that may be on the Pareto "
        "front; each of the rest is beaten on both axes by a drawn plan, or is a drawn layout at a higher ZeRO "
        f"stage); recommended: {html.escape(plan_text(best))}, "
        f"{best.tokens_per_s:,.0f} tokens/s. Hover over a point for its plan.</p>\n"
        f"{inline}\n<h2>Pareto front: tokens/s against peak memory per GPU</h2>\n"
        "<table>\n<tr><th>plan</th><th>tokens/s</th><th>MFU</th><th>GiB per GPU</th></tr>\n"
        + "\n".join(rows)
        + "\n</table>\n</body>\n</html>\n"
    )


def plot_file(path: Path, s: Suggestion) -> tuple[str, PlotSummary]:
    """The text of the chart of `s` for `path` (.svg or .html), and what it shows; the CLI writes it."""
    if path.suffix.lower() not in FORMATS:
        raise SpecError(f"`plot` {path}: the file name must end in .svg or .html")
    front = _front(s)  # sorts every plan drawn: once for the chart, the page and the count
    chart = svg_chart(s, front)
    text = chart if path.suffix.lower() == ".svg" else html_page(s, chart, front)
    return text, PlotSummary(path=path, plans=s.result.feasible, drawn=len(s.result.drawn()), pareto=len(front))


def _front(s: Suggestion) -> list[Estimate]:
    """The Pareto plans' estimates (built for these few only)."""
    ranked = s.result.drawn()
    where = {id(c): i for i, c in enumerate(ranked.candidates)}
    return [ranked[where[id(c)]] for c in pareto_front(ranked.candidates)]
