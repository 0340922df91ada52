"""autopar.render.svg: nice-number ticks (hand cases and a property), the chart's marks, bytes that repeat."""

from __future__ import annotations

import itertools
import math
import random
import xml.etree.ElementTree as ET

from hypothesis import assume, given
from hypothesis import strategies as st

from autopar.render import svg

NS = "{http://www.w3.org/2000/svg}"


def test_nice_ticks_hand_cases() -> None:
    # span / 7 rounded up to 1, 2, 2.5, 5 or 10 x 10^k; the ticks are its multiples inside the range
    assert svg.nice_ticks(0, 10) == ([0, 2, 4, 6, 8, 10], 0)  # 10/7 = 1.43 -> 2
    assert svg.nice_ticks(17.0, 82.8) == ([20, 30, 40, 50, 60, 70, 80], 0)  # 9.4 -> 10
    assert svg.nice_ticks(0, 15) == ([0, 2.5, 5, 7.5, 10, 12.5, 15], 1)  # 2.14 -> 2.5, printed 2.5
    assert svg.nice_ticks(0, 150_000) == ([0, 25_000, 50_000, 75_000, 100_000, 125_000, 150_000], 0)
    ticks, decimals = svg.nice_ticks(0.3, 1.2)  # 0.129 -> 0.2
    assert [f"{t:.{decimals}f}" for t in ticks] == ["0.4", "0.6", "0.8", "1.0", "1.2"]
    assert svg.nice_ticks(5, 5) == ([5], 0)


@given(st.floats(-1e7, 1e7), st.floats(1e-3, 1e8))
def test_nice_ticks_are_evenly_spaced_inside_the_range(lo: float, span: float) -> None:
    assume(span > abs(lo) * 1e-4)  # a chart's range; closer, the ticks' differences are float noise
    hi = lo + span
    ticks, _ = svg.nice_ticks(lo, hi)
    assert 3 <= len(ticks) <= 8  # the step is at least span/7 and under twice that
    tol = span * 1e-9
    assert lo - tol <= ticks[0] and ticks[-1] <= hi + tol
    steps = [b - a for a, b in itertools.pairwise(ticks)]
    assert all(math.isclose(s, steps[0], rel_tol=1e-6) for s in steps)
    mantissa = steps[0] / 10 ** math.floor(math.log10(steps[0]) + 1e-9)
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 2.5, 5))


def test_limits_pad_five_percent() -> None:
    assert svg.limits([10, 30]) == (9, 31)
    assert svg.limits([20, 20]) == (19, 21)
    assert svg.limits([0, 0]) == (-1, 1)


def chart(cloud: list[svg.Point], **kw: object) -> svg.Chart:
    args: dict[str, object] = dict(
        title="a <title> & more",
        label="\u2605 recommended: B",
        xlabel="x axis",
        ylabel="y axis",
        cloud=cloud,
        cloud_label="cloud",
        cloud_gid="plans",
        front=[svg.Point(1, 1, "Pareto: A", "pareto-0-a"), svg.Point(2, 3, "Pareto: B", "pareto-1-b")],
        front_label="Pareto front (2)",
        best=svg.Point(2, 3, "recommended: B"),
        vline=(4.0, "GPU memory (4.0 GiB)"),
    )
    args.update(kw)
    return svg.Chart(**args)  # type: ignore[arg-type]


def test_chart_marks_titles_and_labels() -> None:
    cloud = [svg.Point(x, x % 3, f"plan {x}") for x in range(5)]
    root = ET.fromstring(svg.render(chart(cloud)))
    groups = {g.get("id"): g for g in root.iter(f"{NS}g") if g.get("id")}
    assert [t.text for t in groups["plans"].iter(f"{NS}title")] == [f"plan {x}" for x in range(5)]
    assert len(list(groups["plans"].iter(f"{NS}circle"))) == 5
    assert groups["pareto-1-b"].findtext(f"{NS}title") == "Pareto: B"
    assert groups["recommended"].findtext(f"{NS}title") == "recommended: B"
    assert groups["recommended"].find(f"{NS}polygon") is not None
    texts = {t.get("id"): t.text for t in root.iter(f"{NS}text") if t.get("id")}
    assert texts == {"title": "a <title> & more", "recommended-label": "\u2605 recommended: B", "xlabel": "x axis", "ylabel": "y axis"}
    legend = [t.text for t in groups["legend"].iter(f"{NS}text")]
    assert legend == ["cloud", "Pareto front (2)", "recommended", "GPU memory (4.0 GiB)"]
    paths = {p.get("id"): p.get("d") for p in root.iter(f"{NS}path") if p.get("id")}
    # x from 0 to 4 (the line counts) padded to -0.2..4.2 over 78..636; y 0..3 padded to -0.15..3.15 over 352..48
    assert paths["vline"] == "M610.64 48V352"
    assert paths["pareto-front"] == "M230.18 246.06H357V61.82"  # steps: along, then up


def test_a_large_cloud_is_one_path_of_distinct_dots_whatever_the_order() -> None:
    rng = random.Random(7)
    cloud = [svg.Point(rng.uniform(0, 80), rng.uniform(1e4, 5e4)) for _ in range(2500)]
    cloud += cloud[:300]  # the same positions twice are one dot
    text = svg.render(chart(cloud))
    root = ET.fromstring(text)
    (group,) = [g for g in root.iter(f"{NS}g") if g.get("id") == "plans"]
    assert group.find(f".//{NS}title") is None and group.find(f".//{NS}circle") is None
    (path,) = group.iter(f"{NS}path")
    assert (path.get("d") or "").count("M") == 2500  # uniform floats: no two share a 0.1 pt position
    rng.shuffle(cloud)
    assert svg.render(chart(cloud)) == text


def test_a_long_label_is_set_smaller_to_fit() -> None:
    assert svg.fitted("short", 9, 566) == 9
    assert svg.fitted("x" * 200, 9, 566) == round(566 / (svg.CHAR_W * 200), 1) < 9
    root = ET.fromstring(svg.render(chart([], label="\u2605 " + "y" * 300)))
    (label,) = [t for t in root.iter(f"{NS}text") if t.get("id") == "recommended-label"]
    assert float(label.get("font-size", "")) * svg.CHAR_W * 302 <= svg.WIDTH - svg.LEFT


def test_line_front_and_legend_on_top() -> None:
    root = ET.fromstring(svg.render(chart([], steps=False, legend_top=True, vline=None)))
    paths = {p.get("id"): p.get("d") for p in root.iter(f"{NS}path") if p.get("id")}
    assert "L" in paths["pareto-front"] and "H" not in paths["pareto-front"] and "vline" not in paths
    (box,) = [g.find(f"{NS}rect") for g in root.iter(f"{NS}g") if g.get("id") == "legend"]
    assert box is not None and float(box.get("y", "")) == svg.TOP + 6
