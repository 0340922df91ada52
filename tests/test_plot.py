"""suggest --plot (autopar.render.plot): the Pareto front, the SVG and HTML files, and the missing-extra error."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from autopar.advise import train as advise
from autopar.advise.train import Suggestion
from autopar.cli import app
from autopar.render import plot

needs_matplotlib = pytest.mark.skipif(find_spec("matplotlib") is None, reason="needs the plot extra (matplotlib)")

runner = CliRunner()
SUGGEST = ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "3"]
SVG_NS = "{http://www.w3.org/2000/svg}"


def point(name: str, gib: float, tokens_per_s: float) -> Any:
    """A stand-in for an Estimate: pareto_front reads only memory.total and tokens_per_s."""
    return SimpleNamespace(name=name, memory_bytes=gib * 2**30, tokens_per_s=tokens_per_s)


@cache
def suggestion() -> Suggestion:
    ctx = advise.context("llama3-8b", hardware="h100-sxm", gpus=8, nodes=None, global_batch=None, seq_len=None,
                         dtype="bf16")
    return advise.suggest(ctx)


def test_pareto_front_hand_case() -> None:
    pts = [point("A", 10, 100), point("B", 20, 150), point("C", 15, 90), point("D", 20, 140), point("E", 30, 150),
           point("F", 5, 50), point("G", 10, 100)]
    # C: A is faster with less memory; D: B is faster with the same; E: B is as fast with less;
    # G: the same as A (one of equal points is kept)
    assert [p.name for p in plot.pareto_front(pts)] == ["F", "A", "B"]
    assert plot.pareto_front([]) == []


def test_pareto_front_of_a_real_search_is_undominated_and_covers_the_rest() -> None:
    ranked = suggestion().result.ranked
    front = plot.pareto_front(ranked)
    assert 2 <= len(front) < len(ranked)
    for f in front:
        assert not any(e.memory.total <= f.memory.total and e.tokens_per_s > f.tokens_per_s for e in ranked)
    for e in ranked:
        assert any(f.memory.total <= e.memory.total and f.tokens_per_s >= e.tokens_per_s for f in front)
    assert max(e.tokens_per_s for e in ranked) == front[-1].tokens_per_s


@needs_matplotlib
def test_svg_holds_every_pareto_point_and_the_recommended_plan(tmp_path: Path) -> None:
    target = tmp_path / "plans.svg"
    r = runner.invoke(app, [*SUGGEST, "--plot", str(target)])
    assert r.exit_code == 0, r.output
    s = suggestion()
    front = plot.pareto_front(s.result.ranked)
    said = " ".join(r.stdout.split())  # prose wraps at 80 columns
    assert f"plot: {len(s.result.ranked)} feasible plans, {len(front)} on the Pareto front, written to {target}" in said
    root = ET.parse(target).getroot()
    ids = [g.get("id", "") for g in root.iter(f"{SVG_NS}g")]
    assert [i for i in ids if i.startswith("pareto-") and i != "pareto-front"] == \
        [f"pareto-{n}-{plot.plan_slug(e)}" for n, e in enumerate(front)]
    assert "recommended" in ids and "plans" in ids
    text = " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))
    best = s.result.ranked[0]
    assert f"recommended: {best.plan.label()} mbs{best.plan.mbs}" in text
    assert "peak memory per GPU (GiB)" in text
    assert os.listdir(tmp_path) == ["plans.svg"]


@needs_matplotlib
def test_svg_is_reproducible(tmp_path: Path) -> None:
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    plot.write_plot(a, suggestion())
    plot.write_plot(b, suggestion())
    assert a.read_bytes() == b.read_bytes()


@needs_matplotlib
def test_html_page_has_the_chart_and_a_row_per_pareto_plan(tmp_path: Path) -> None:
    target = tmp_path / "plans.html"
    summary = plot.write_plot(target, suggestion())
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1 and "<?xml" not in page
    front = plot.pareto_front(suggestion().result.ranked)
    assert summary.pareto == len(front)
    assert page.count("<tr><td>") == len(front)
    for e in front:
        assert f'id="pareto-{front.index(e)}-{plot.plan_slug(e)}"' in page


@needs_matplotlib
def test_json_names_the_plot_file(tmp_path: Path) -> None:
    target = tmp_path / "p.svg"
    doc = json.loads(runner.invoke(app, [*SUGGEST, "--json", "--plot", str(target)]).stdout)
    assert doc["plot_file"] == str(target) and target.stat().st_size > 1000


def test_missing_matplotlib_is_one_line_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    r = runner.invoke(app, [*SUGGEST, "--plot", str(tmp_path / "p.svg")])
    assert r.exit_code == 2
    assert r.stderr == "autopar: error: --plot needs matplotlib, an optional extra: pip install 'autopar[plot]'\n"
    assert r.stdout == "" and os.listdir(tmp_path) == []


def test_plot_needs_svg_or_html(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SUGGEST, "--plot", str(tmp_path / "p.png")])
    assert r.exit_code == 2 and "must end in .svg or .html" in r.stderr and r.stderr.count("\n") == 1
