"""The variable-length answers stay those recorded before the placement was sped up (0.1%).

benchmarks/data/varlen_figures.json holds the --json answers of
``benchmarks/varlen_figures.py --record`` (re-recorded when a plan came to fit in the whole GPU, issue 27); the benchmark
compares every case, these two quick ones run here.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from autopar.cli import app

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    from benchmarks import varlen_figures

    return varlen_figures


@pytest.mark.parametrize("case", ["estimate_wlb", "bytescale"])
def test_answers_match_the_recorded_ones(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench()
    stored = json.loads(bench.DATA.read_text())["cases"][case]
    monkeypatch.chdir(ROOT)  # the cases name examples/ relative to the repository
    r = CliRunner().invoke(app, [*stored["argv"], "--json"])
    assert r.exit_code == 0, r.output
    found = bench.diffs(stored["answer"], json.loads(r.stdout))
    assert found, "nothing compared"
    worst = max(found, key=lambda d: d[0])
    assert worst[0] <= 1e-3, worst
    assert bench.layouts(stored["answer"]) == bench.layouts(json.loads(r.stdout))


def test_the_comparison_sees_a_change() -> None:
    bench = _bench()
    old = {"plans": [{"dp": 2, "step_time_s": 10.0, "stall_frac": 0.1, "fits": True}]}
    assert max(bench.diffs(old, old))[0] == 0.0
    moved = {"plans": [{"dp": 2, "step_time_s": 10.02, "stall_frac": 0.1, "fits": True}]}
    assert max(bench.diffs(old, moved))[0] == pytest.approx(2e-3)
    frac = {"plans": [{"dp": 2, "step_time_s": 10.0, "stall_frac": 0.1005, "fits": True}]}
    assert max(bench.diffs(old, frac))[0] == pytest.approx(5e-4)  # fractions: absolute
    assert max(bench.diffs(old, {"plans": [{"dp": 2, "step_time_s": 10.0, "stall_frac": 0.1, "fits": False}]}))[0] == float("inf")
    assert max(bench.diffs(old, {"plans": []}))[0] == float("inf")


def test_the_error_bands_are_left_to_the_error_model() -> None:
    """A `*_range` moves with autopar/data/error_model.yaml, not with the placement; the figure itself counts."""
    bench = _bench()
    old = {"tokens_per_s": 100.0, "tokens_per_s_range": [90.0, 110.0]}
    assert max(bench.diffs(old, {"tokens_per_s": 100.0, "tokens_per_s_range": [95.0, 104.0]}))[0] == 0.0
    assert max(bench.diffs(old, {"tokens_per_s": 101.0, "tokens_per_s_range": [90.0, 110.0]}))[0] == pytest.approx(0.01)
