"""Guards on issue 10's memory targets, over the published rows of benchmarks/data/ (no constant is set here).

Every published plan is accepted by its stack and fits by our memory model, and wherever a source publishes
peak memory (torchtitan's max reserved), ours is within 10%.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def harness() -> tuple:
    from benchmarks import framework, published

    return framework, published


def _runs(name: str) -> list[dict]:
    return yaml.safe_load((BENCH / "data" / name).read_text())["runs"]


def test_every_framework_plan_is_accepted_and_fits_and_memory_is_within_10_percent(harness: tuple) -> None:
    framework, _ = harness
    results = [framework.evaluate(r) for r in _runs("framework_runs.yaml")]
    assert [r.id for r in results if not (r.accepted and r.fits)] == []
    off = {r.id: round(r.memory_error, 3) for r in results if r.memory_error is not None and abs(r.memory_error) > 0.10}
    assert off == {}
    assert sum(r.memory_error is not None for r in results) == 9  # the torchtitan rows


def test_every_published_run_fits(harness: tuple) -> None:
    _, published = harness
    results = [published.evaluate(r, rank=False) for r in _runs("published_runs.yaml") if published.usable(r)]
    assert len(results) == 21 and [r.id for r in results if not r.fits] == []
