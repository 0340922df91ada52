"""serve suggest --plot (autopar.render.serve_plot): counts as the text says them, the front, hover titles."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from typer.testing import CliRunner

from autopar.cli import app

runner = CliRunner()
SERVE = ["serve", "suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8"]
SVG_NS = "{http://www.w3.org/2000/svg}"


def test_serve_plot_counts_the_front_and_titles_every_point(tmp_path: Path) -> None:
    target = tmp_path / "serve.svg"
    r = runner.invoke(app, [*SERVE, "--json", "--plot", str(target)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["plot_file"] == str(target)
    root = ET.parse(target).getroot()
    groups = {g.get("id"): g for g in root.iter(f"{SVG_NS}g") if g.get("id")}
    front = [k for k in groups if k and k.startswith("pareto-") and k != "pareto-front"]
    assert len(front) == len(doc["pareto"])
    for i, point in enumerate(doc["pareto"]):
        title = groups[f"pareto-{i}"].find(f"{SVG_NS}title")
        assert title is not None and (title.text or "").startswith(f"Pareto: {point['mode']} {point['layout']}, KV ")
        assert f"TPOT {point['tpot_ms']:.1f} ms" in (title.text or "")
    cloud = groups["points"]
    assert len(list(cloud.iter(f"{SVG_NS}circle"))) == len(list(cloud.iter(f"{SVG_NS}title"))) > 10
    rec = groups["recommended"].find(f"{SVG_NS}title")
    assert rec is not None and f"concurrency {doc['recommended']['concurrency']}:" in (rec.text or "")
    text = " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))
    assert "tokens/s per user (1 / TPOT)" in text and "output tokens/s per GPU" in text


def test_serve_plot_page_says_the_texts_count(tmp_path: Path) -> None:
    target = tmp_path / "serve.html"
    r = runner.invoke(app, [*SERVE, "--plot", str(target)])
    assert r.exit_code == 0, r.output
    said = " ".join(r.stdout.split())
    fit = said.split("deployments on 8 GPUs, ")[1].split(" (deployment, concurrency) points fit")[0]
    assert f"plot: {fit} points fit (" in said
    page = target.read_text()
    assert f"<p>{fit} (deployment, concurrency) points fit (" in page and page.count("<svg") == 1


def test_serve_plot_needs_svg_or_html(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SERVE, "--plot", str(tmp_path / "p.png")])
    assert r.exit_code == 2 and "must end in .svg or .html" in r.stderr and r.stderr.count("\n") == 1
