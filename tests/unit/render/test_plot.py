"""suggest --plot (autopar.render.plot, autopar.render.svg): the Pareto front, the SVG and HTML files, no matplotlib."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from autopar.advise import train as advise
from autopar.advise.train import Suggestion
from autopar.cli import app
from autopar.render import labels, plot

runner = CliRunner()
SUGGEST = ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "3"]
SVG_NS = "{http://www.w3.org/2000/svg}"


def write_plot(path: Path, s: Suggestion) -> plot.PlotSummary:
    """What `suggest --plot PATH` does: render/ makes the text, the CLI writes it."""
    text, summary = plot.plot_file(path, s)
    path.write_text(text)
    return summary


def point(name: str, gib: float, tokens_per_s: float) -> Any:
    """A stand-in for an Estimate: pareto_front reads only memory.total and tokens_per_s."""
    return SimpleNamespace(name=name, memory_bytes=gib * 2**30, tokens_per_s=tokens_per_s)


def fresh() -> Suggestion:
    """SUGGEST's search, its ranking pruned as the CLI's is when it draws."""
    ctx = advise.context("llama3-8b", hardware="h100-sxm", gpus=8, nodes=None, global_batch=None, seq_len=None, dtype="bf16")
    return advise.suggest(ctx)


@cache
def suggestion() -> Suggestion:
    return fresh()


def test_pareto_front_hand_case() -> None:
    pts = [
        point("A", 10, 100),
        point("B", 20, 150),
        point("C", 15, 90),
        point("D", 20, 140),
        point("E", 30, 150),
        point("F", 5, 50),
        point("G", 10, 100),
    ]
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


def test_svg_holds_every_pareto_point_and_the_recommended_plan(tmp_path: Path) -> None:
    target = tmp_path / "plans.svg"
    r = runner.invoke(app, [*SUGGEST, "--plot", str(target)])
    assert r.exit_code == 0, r.output
    s = fresh()
    drawn = s.result.drawn()
    assert len(drawn) < len(s.result.ranked)  # the leading plans and every plan that may be on the front
    front = plot.pareto_front(drawn)
    said = " ".join(r.stdout.split())  # prose wraps at 80 columns
    assert (
        f"plot: {s.result.feasible} feasible plans ({len(drawn)} timed and drawn), {len(front)} on the Pareto front, written to {target}"
    ) in said
    assert f"searched {s.result.considered} plans in" in said and f"; {s.result.feasible} fit in" in said
    root = ET.parse(target).getroot()
    ids = [g.get("id", "") for g in root.iter(f"{SVG_NS}g")]
    assert [i for i in ids if i.startswith("pareto-") and i != "pareto-front"] == [
        f"pareto-{n}-{plot.plan_slug(e)}" for n, e in enumerate(front)
    ]
    assert "recommended" in ids and "plans" in ids
    text = " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))
    best = s.plans[0]
    assert f"recommended: {labels.plan_text(best)};" in text
    assert "peak memory per GPU (GiB)" in text
    assert os.listdir(tmp_path) == ["plans.svg"]


def test_svg_is_reproducible(tmp_path: Path) -> None:
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    write_plot(a, suggestion())
    write_plot(b, suggestion())
    assert a.read_bytes() == b.read_bytes()


def test_html_page_has_the_chart_and_a_row_per_pareto_plan(tmp_path: Path) -> None:
    target = tmp_path / "plans.html"
    summary = write_plot(target, suggestion())
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1 and "<?xml" not in page
    front = plot.pareto_front(suggestion().result.ranked)
    assert summary.pareto == len(front)
    assert page.count("<tr><td>") == len(front)
    for e in front:
        assert f'id="pareto-{front.index(e)}-{plot.plan_slug(e)}"' in page


def test_json_names_the_plot_file(tmp_path: Path) -> None:
    target = tmp_path / "p.svg"
    doc = json.loads(runner.invoke(app, [*SUGGEST, "--json", "--plot", str(target)]).stdout)
    assert doc["plot_file"] == str(target) and target.stat().st_size > 1000


def test_plot_works_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    target = tmp_path / "p.svg"
    r = runner.invoke(app, [*SUGGEST, "--plot", str(target)])
    assert r.exit_code == 0, r.output
    assert ET.parse(target).getroot().tag == f"{SVG_NS}svg"


SERVE = ["serve", "suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8"]


@pytest.mark.parametrize("command", [SUGGEST, SERVE], ids=["suggest", "serve"])
def test_the_svg_path_imports_no_matplotlib(tmp_path: Path, command: list[str]) -> None:
    """In a fresh process (no test has imported it): the chart is written and matplotlib was never imported."""
    target = tmp_path / "p.svg"
    code = (
        "import sys\nfrom autopar.cli import main\n"
        f"sys.argv = ['autopar', *{[*command, '--plot', str(target)]!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib')\n"
        "print('imported:', bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "80"})
    assert out.stdout.splitlines()[-1] == "imported: []" and target.stat().st_size > 1000


def test_svg_does_not_depend_on_the_terminal_width(tmp_path: Path) -> None:
    narrow, wide = tmp_path / "narrow.svg", tmp_path / "wide.svg"
    for target, columns in ((narrow, "40"), (wide, "200")):
        r = runner.invoke(app, [*SUGGEST, "--plot", str(target)], env={"COLUMNS": columns})
        assert r.exit_code == 0, r.output
    assert narrow.read_bytes() == wide.read_bytes()


def test_plot_needs_svg_or_html(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SUGGEST, "--plot", str(tmp_path / "p.png")])
    assert r.exit_code == 2 and "must end in .svg or .html" in r.stderr and r.stderr.count("\n") == 1


def test_help_names_no_extra() -> None:
    r = runner.invoke(app, ["suggest", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0
    said = " ".join(r.stdout.replace("│", " ").split())
    assert "Chart the plans timed and the Pareto front (.svg or .html)." in said and "matplotlib" not in said


def test_page_count_is_the_texts_and_the_label_is_the_tables(tmp_path: Path) -> None:
    """llama3-8b on 24 GPUs: the search times fewer plans than fit (higher-ZeRO and more-recompute variants
    are counted, not timed); the page says the count the text says, and names the plan as the table does."""
    target = tmp_path / "p.html"
    r = runner.invoke(app, ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "24", "--json", "--plot", str(target)])
    doc = json.loads(r.stdout)
    page = target.read_text()
    s = advise.suggest(advise.context("llama3-8b", hardware="h100-sxm", gpus=24, nodes=None, global_batch=None, seq_len=None, dtype="bf16"))
    drawn = len(s.result.drawn())
    assert drawn < len(s.result.ranked) < doc["feasible"]
    assert f"<p>{doc['feasible']} feasible plans of {doc['considered']} searched ({drawn} timed and drawn:" in page
    best = labels.plan_text(s.plans[0])  # the recommendation after the re-ranking within the error band
    assert best == "dp24 tp1 pp1, mbs 1, recompute none, ZeRO-3" and f"recommended: {best}, " in page


def test_recommended_label_sits_outside_the_plot_area() -> None:
    root = ET.fromstring(plot.svg_chart(suggestion()))
    (label,) = [t for t in root.iter(f"{SVG_NS}text") if t.get("id") == "recommended-label"]
    (area,) = [r for r in root.iter(f"{SVG_NS}rect") if r.get("id") == "plot-area"]
    assert float(label.get("y", "")) < float(area.get("y", ""))  # above the axes: no point, no front line, whatever the data
    assert (label.text or "").startswith(f"\u2605 recommended: {labels.plan_text(suggestion().plans[0])};")


def test_every_point_names_its_plan_on_hover(tmp_path: Path) -> None:
    target = tmp_path / "p.svg"
    s = fresh()
    drawn = s.result.drawn()
    write_plot(target, s)
    root = ET.parse(target).getroot()
    groups = {g.get("id"): g for g in root.iter(f"{SVG_NS}g") if g.get("id")}
    cloud = groups["plans"]
    dots = list(cloud.iter(f"{SVG_NS}circle"))
    titled = [g for g in cloud.iter(f"{SVG_NS}g") if g.find(f"{SVG_NS}title") is not None]
    assert len(dots) == len(titled) == len(plot._distinct(drawn.candidates)) > 10
    names = {(t.text or "").split(":")[0].split(" (and")[0] for t in cloud.iter(f"{SVG_NS}title")}
    assert names <= {labels.plan_text(c) for c in drawn.candidates}
    front = plot.pareto_front(drawn)
    for i, e in enumerate(front):
        title = groups[f"pareto-{i}-{plot.plan_slug(e)}"].find(f"{SVG_NS}title")
        assert title is not None and title.text == f"Pareto: {plot.hover(e)}"
    rec = groups["recommended"].find(f"{SVG_NS}title")
    assert rec is not None and rec.text == f"recommended: {plot.hover(suggestion().plans[0])}"
