"""``serve suggest --plot``: every (deployment, concurrency) point that fits, as the serving table reads them.

Output tokens/s per GPU (the cost side) against tokens/s per user (1 / TPOT, the latency side),
the axes of the text's Pareto table. The chart marks that front, names the recommended point above
the axes, and titles every point (SVG ``<title>``, shown on hover) with its layout, mode, KV dtype,
concurrency, TTFT and TPOT. ``.svg`` or ``.html`` (the chart inline and the front as a table), as
``autopar.render.plot``, whose helpers it shares.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence
from pathlib import Path

from autopar.advise.serve import ServeContext, ServeSweep
from autopar.cost.serve_load import ServeEstimate
from autopar.errors import SpecError
from autopar.render.answer import PlotSummary
from autopar.render.plot import FORMATS, INSTALL_HINT, RASTER_ABOVE, _title_groups, _titled
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
    try:
        import matplotlib
        from matplotlib.figure import Figure
        from matplotlib.ticker import StrMethodFormatter
    except ImportError:
        raise SpecError(f"`plot` needs matplotlib, an optional extra: {INSTALL_HINT}") from None
    best = result.best
    if best is None:
        raise SpecError("`plot` needs a recommended deployment")
    front = list(result.pareto)
    cells = _cells(result.points)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "autopar", "font.size": 9}):
        fig = Figure(figsize=(9, 5.5))
        ax = fig.add_subplot()
        ax.scatter(
            [c[0] for c in cells],
            [c[1] for c in cells],
            s=9,
            color="#9aa5b1",
            alpha=0.6,
            linewidths=0,
            label=f"points priced ({len(result.points):,} of {fit_count(result):,} that fit)",
            gid="points",
            rasterized=len(cells) > RASTER_ABOVE,
        )
        ax.plot(
            [per_user(e) for e in front],
            [per_gpu(e) for e in front],
            color="#d62728",
            linewidth=1,
            label=f"Pareto front ({len(front)})",
            gid="pareto-front",
        )
        for i, e in enumerate(front):
            ax.plot([per_user(e)], [per_gpu(e)], marker="o", markersize=4, color="#d62728", gid=f"pareto-{i}")
        ax.plot(
            [per_user(best)],
            [per_gpu(best)],
            marker="*",
            markersize=13,
            color="#2ca02c",
            linestyle="none",
            gid="recommended",
            label="recommended",
        )
        ax.text(
            0,
            1.015,
            f"\u2605 recommended ({result.rule}): {point_text(best)}",
            transform=ax.transAxes,
            ha="left",
            va="bottom",
            color="#2ca02c",
            gid="recommended-label",
            fontsize=8,
        )
        ax.set_xlabel("tokens/s per user (1 / TPOT)")
        ax.set_ylabel("output tokens/s per GPU")
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        wl = best.workload
        ax.set_title(f"{ctx.model.name} on {ctx.gpus} x {ctx.hw.gpu_name}: ISL {wl.isl}, OSL {wl.osl}, {best.deployment.framework}", pad=22)
        ax.grid(True, linewidth=0.3, alpha=0.5)
        ax.legend(loc="upper right")
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight", dpi=120)
    svg = _titled(out.getvalue(), "points", [c[2] for c in cells])
    titles = {f"pareto-{i}": "Pareto: " + point_text(e) for i, e in enumerate(front)}
    return _title_groups(svg, {**titles, "recommended": "recommended: " + point_text(best)})


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
    svg = svg_chart(ctx, result)
    text = svg if path.suffix.lower() == ".svg" else html_page(ctx, result, svg)
    return text, PlotSummary(path=path, plans=fit_count(result), drawn=len(result.points), pareto=len(result.pareto))
