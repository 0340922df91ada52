"""Terminal pictures (autopar.render.charts): bar proportions, the capacity mark, the schedule drawing,
and `estimate --explain` / `--no-explain`."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from autopar.advise import train as advise
from autopar.advise.train import Explained
from autopar.cli import app
from autopar.render import charts


def explained(
    *,
    gpus: int = 16,
    tp: int = 2,
    pp: int = 2,
    vpp: int = 1,
    batch: int = 16,
    zero: int = 1,
    hardware: str = "h100-sxm",
    model: str = "llama3-8b",
) -> Explained:
    ctx = advise.context(model, hardware=hardware, gpus=gpus, nodes=None, global_batch=batch, seq_len=None, dtype="bf16")
    return advise.explain(ctx, tp=tp, pp=pp, cp=1, vpp=vpp, ep=1, mbs=1, recompute="none", zero=zero, sp=True)


def plain(lines: list[Text]) -> list[str]:
    return [line.plain.rstrip() for line in lines]


@pytest.mark.parametrize(
    ("values", "width", "expected"),
    [
        ([3.0, 1.0], 40, [30, 10]),
        ([1.0, 1.0, 1.0], 10, [4, 3, 3]),
        ([0.0, 5.0, 0.0], 7, [0, 7, 0]),
        ([0.004, 0.996], 100, [0, 100]),  # under half a character rounds away
        ([2.0, 1.0, 1.0], 9, [5, 2, 2]),  # exact 4.5, 2.25, 2.25: the largest remainder takes the spare
        ([1.0, 2.0], 0, [0, 0]),
        ([0.0, 0.0], 10, [0, 0]),
    ],
)
def test_proportional_widths(values: list[float], width: int, expected: list[int]) -> None:
    assert charts.proportional_widths(values, width) == expected


def test_capacity_bar_fits_and_overflows() -> None:
    fits = charts.capacity_bar([10.0, 30.0], capacity=80.0, width=40)
    assert (fits.parts, fits.free, fits.capacity_col) == ((5, 15), 20, 40)
    over = charts.capacity_bar([60.0, 60.0], capacity=80.0, width=30)
    assert (over.parts, over.free, over.capacity_col) == ((15, 15), 0, 20)


def test_time_bar_proportions_match_the_breakdown() -> None:
    x = explained()
    lines = plain(charts.time_bar(x, 80))
    assert lines[0] == f"step time {x.estimate.step_time_s:.3f} s"
    bar = lines[1]
    assert len(bar) == 80
    values = x.estimate.time.as_dict()
    widths = charts.proportional_widths(list(values.values()), 80)
    for (key, value), n in zip(values.items(), widths, strict=True):
        char = charts.TIME_PARTS[key][1]
        assert bar.count(char) == n
        assert abs(n - 80 * value / x.estimate.step_time_s) < 1
    legend = " ".join(lines[2:])
    compute = values["compute"]
    assert f"█ compute {compute:.3f} s {compute / x.estimate.step_time_s:.1%}" in legend
    assert "· bubble" in legend and values["bubble"] > 0


def test_memory_bar_marks_capacity() -> None:
    x = explained()
    gib = x.estimate.memory.as_gib()
    cap = x.estimate.memory_capacity_bytes / 2**30
    lines = plain(charts.memory_bar(x, 50))
    bar = lines[1]
    assert bar.endswith(charts.CAPACITY_MARK) and len(bar) == 51  # fits: the mark closes the bar
    used = round(50 * gib["total"] / cap)
    assert bar.count(charts.FREE_CHAR) == 50 - used
    assert bar.count("▒") == charts.proportional_widths([v for k, v in gib.items() if k != "total"], used)[2]  # optimizer
    assert f"{gib['total']:.1f} of {cap:.1f} GiB" in lines[0]


def test_memory_bar_over_capacity_puts_the_mark_inside() -> None:
    x = explained(model="llama3-70b", gpus=8, tp=8, pp=1, batch=8, zero=0)  # 70B on one 8-GPU node, no sharding
    assert not x.estimate.fits
    total = x.estimate.memory.total
    cap = x.estimate.memory_capacity_bytes
    lines = plain(charts.memory_bar(x, 60))
    assert lines[1].index(charts.CAPACITY_MARK) == round(60 * cap / total)
    assert charts.FREE_CHAR not in lines[1]
    assert "over the" in lines[0]


def test_schedule_lines_two_stages_four_microbatches() -> None:
    # unit = 3 characters; a backward takes 2 units; '·' is idle time (see test_schedule.py)
    lines = plain(charts.schedule_lines(stages=2, microbatches=4, chunks=1, bwd_units=2, width=120))
    assert lines == [
        "stage 0 F1 F2 ······B1    F3 B2    F4 B3    ···B4",
        "stage 1 ···F1 B1    F2 B2    F3 B3    F4 B4    ······",
    ]


def test_schedule_lines_long_run_shows_both_ends_with_an_ellipsis() -> None:
    lines = plain(charts.schedule_lines(stages=4, microbatches=256, chunks=1, bwd_units=2, width=100))
    assert len(lines) == 4 and all(" … " in line for line in lines)
    assert all(len(line) <= 100 for line in lines)
    head, tail = lines[0].split(" … ")
    assert head.startswith("stage 0 F1   F2   F3   F4   ····")  # 3 warm-up forwards, one steady, then wait for B1
    assert tail.rstrip().endswith("B256")
    assert lines[3].split(" … ")[0].startswith("stage 3 ···············F1   B1")
    assert all(line.split(" … ")[1][0] in "FB·" for line in lines)  # an op cut by the window is still labelled


def test_schedule_picture_names_the_interleaved_schedule() -> None:
    x = explained(gpus=16, tp=2, pp=4, vpp=2, batch=16)
    text = "\n".join(plain(charts.schedule_picture(x, 160)))
    assert "interleaved 1F1B, 2 model chunks per stage, 4 stages, 8 micro-batches" in text
    assert "stage 3 " in text and "F1.1" in text and "B1.2" in text
    assert "(p-1)/(v·m) = 3/16" in text
    single = explained(gpus=8, tp=8, pp=1, batch=8)
    assert "no schedule and no bubble" in plain(charts.schedule_picture(single, 160))[0]


def test_render_explain_fits_a_narrow_console() -> None:
    console = Console(width=70, record=True, color_system=None)
    charts.render_explain(console, explained(pp=2, batch=64))
    out = console.export_text()
    assert max(len(line) for line in out.splitlines()) <= 70
    assert "pipeline schedule: 1F1B" in out and "step time" in out and "memory per GPU" in out


def test_estimate_explains_by_default_and_not_with_no_explain() -> None:
    args = ["estimate", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "16"]
    runner = CliRunner()
    out = runner.invoke(app, args).stdout
    assert "pipeline schedule: 1F1B, 2 stages, 4 micro-batches" in out
    assert "stage 1 ···F1 B1    F2 B2    F3 B3    F4 B4    ······" in out
    assert charts.CAPACITY_MARK in out
    quiet = runner.invoke(app, [*args, "--no-explain"])
    assert quiet.exit_code == 0 and "pipeline schedule" not in quiet.stdout and "step time" in quiet.stdout
    doc = runner.invoke(app, [*args, "--json"])
    assert doc.stdout.lstrip().startswith("{") and "pipeline schedule" not in doc.stdout
