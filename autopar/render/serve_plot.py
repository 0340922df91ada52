"""``serve suggest --plot``: every (deployment, concurrency) point that fits, as the serving table reads them.

Output tokens/s per GPU (the cost side) against tokens/s per user (1 / TPOT, the latency side),
the axes of the text's Pareto table. The chart marks that front, names the recommended point above
the axes, and titles every point (SVG ``<title>``, shown on hover) with its layout, mode, KV dtype,
concurrency, TTFT and TPOT. ``.svg`` or ``.html`` (the chart inline and the front as a table), as
``autopar.render.plot``, whose helpers it shares.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path

from autopar.advise.serve import ServeContext, ServeSweep
from autopar.cost.serve_load import ServeEstimate
from autopar.errors import SpecError
from autopar.render import svg
from autopar.render.answer import PlotSummary
from autopar.render.plot import FORMATS, RASTER_ABOVE
from autopar.render.serve import layout_label


def per_gpu(e: ServeEstimate) -> float:
    return e.output_tokens_per_s / e.deployment.gpus


def per_user(e: ServeEstimate) -> float:
    return 1 / e.tpot_s


def point_text(e: ServeEstimate) -> str:
    """A point as the table row says it."""
    dep = e.deployment
    return (
        f"{dep.mode} {layout_label(dep)}, KV {dep.kv_dtype}, concurrency {e.workload.concurrency}: "
        f"{per_gpu(e):,.0f} tok/s/GPU, {per_user(e):.1f} tok/s/user, TTFT {e.ttft_s * 1e3:.0f} ms, "
        f"TPOT {e.tpot_s * 1e3:.1f} ms"
    )


def _cells(points: Sequence[ServeEstimate]) -> list[tuple[float, float, str]]:
    """One point per (4 significant digits of each axis) cell, titled by its highest-throughput point."""
    cells: dict[tuple[float, float], list[ServeEstimate]] = {}
    for e in points:
        cells.setdefault((float(f"{per_user(e):.4g}"), float(f"{per_gpu(e):.4g}")), []).append(e)
    out = []
    for (x, y), group in sorted(cells.items()):
        more = f" (and {len(group) - 1} more points here)" if len(group) > 1 else ""
        out.append((x, y, point_text(max(group, key=per_gpu)) + more))
    return out


def svg_chart(ctx: ServeContext, result: ServeSweep) -> str:
    """The chart as SVG text (autopar.render.svg), each point titled as its table row."""
    best = result.best
    if best is None:
        raise SpecError("`plot` needs a recommended deployment")
    front = list(result.pareto)
    wl = best.workload
    return svg.render(
        svg.Chart(
            title=f"{ctx.model.name} on {ctx.gpus} x {ctx.hw.gpu_name}: ISL {wl.isl}, OSL {wl.osl}, {best.deployment.framework}",
            label=f"\u2605 recommended ({result.rule}): {point_text(best)}",
            xlabel="tokens/s per user (1 / TPOT)",
            ylabel="output tokens/s per GPU",
            cloud=[svg.Point(x, y, title) for x, y, title in _cells(result.points)],
            cloud_label=f"points priced ({len(result.points):,} of {fit_count(result):,} that fit)",
            cloud_gid="points",
            front=[svg.Point(per_user(e), per_gpu(e), "Pareto: " + point_text(e), f"pareto-{i}") for i, e in enumerate(front)],
            front_label=f"Pareto front ({len(front)})",
            best=svg.Point(per_user(best), per_gpu(best), "recommended: " + point_text(best)),
            steps=False,
            legend_top=True,
            label_size=8,
            titled_up_to=RASTER_ABOVE,
        )
    )


def fit_count(result: ServeSweep) -> int:
    """Points that fit, as the text counts them: priced ones and those bounded without solving."""
    return len(result.points) + result.skipped


def html_page(ctx: ServeContext, result: ServeSweep, svg: str) -> str:
    inline = re.sub(r"^<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?", "", svg)
    rows = "\n".join(f"<tr><td>{html.escape(point_text(e))}{' (recommended)' if e is result.best else ''}</td></tr>" for e in result.pareto)
    title = html.escape(f"autopar serve: {ctx.model.name} on {ctx.gpus} x {ctx.hw.gpu_name}")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto}"
        "table{border-collapse:collapse}td{padding:.2rem .6rem;border-bottom:1px solid #ddd}</style>\n"
        f"</head>\n<body>\n<h1>{title}</h1>\n<p>{fit_count(result):,} (deployment, concurrency) points fit "
        f"({len(result.points):,} priced and drawn) of {result.layouts:,} deployments. Hover over a point for its "
        "deployment.</p>\n"
        f"{inline}\n<h2>Pareto front: output tokens/s per GPU against tokens/s per user</h2>\n<table>\n{rows}\n"
        "</table>\n</body>\n</html>\n"
    )


def serve_plot_file(path: Path, ctx: ServeContext, result: ServeSweep) -> tuple[str, PlotSummary]:
    """The text of the chart of `result` for `path` (.svg or .html), and what it shows; the CLI writes it."""
    if path.suffix.lower() not in FORMATS:
        raise SpecError(f"`plot` {path}: the file name must end in .svg or .html")
    chart = svg_chart(ctx, result)
    text = chart if path.suffix.lower() == ".svg" else html_page(ctx, result, chart)
    return text, PlotSummary(path=path, plans=fit_count(result), drawn=len(result.points), pareto=len(result.pareto))
