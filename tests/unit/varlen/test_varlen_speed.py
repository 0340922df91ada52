"""The shortcuts that make --seq-len-dist fast give the answers the full simulation gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import autopar.advise.varlen as av
from autopar.cli import app
from autopar.varlen import STRATEGIES

runner = CliRunner()
LONG = str(Path(__file__).resolve().parents[3] / "examples" / "seqlen" / "long_context.yaml")


def test_plans_that_cannot_hold_the_longest_sequence_are_not_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """suggest leaves out the layouts whose strategy cannot run the longest sequence before simulating them,
    and that verdict is the ``fits`` the simulation itself reports, for every strategy."""
    checked: list[tuple[Any, ...]] = []
    simulated: list[tuple[int, int, int, int]] = []
    runs_longest, simulate_plan = av.runs_longest, av.simulate_plan

    def check(ctx: Any, dist: Any, est: Any, strategy: str) -> bool:
        verdict = runs_longest(ctx, dist, est, strategy)
        checked.append((ctx, dist, est, strategy, verdict))
        return verdict

    def simulate(ctx: Any, dist: Any, est: Any, **kw: Any) -> Any:
        p = est.plan
        simulated.append((p.dp, p.tp, p.pp, p.cp))
        return simulate_plan(ctx, dist, est, **kw)

    monkeypatch.setattr(av, "runs_longest", check)
    monkeypatch.setattr(av, "simulate_plan", simulate)
    r = runner.invoke(
        app,
        [
            "suggest",
            "llama3.1-8b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "16",
            "--seq-len-dist",
            LONG,
            "--global-batch",
            "64",
            "--varlen-strategy",
            "hdp",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    # 8 layouts looked at; on three of them the pool is too small for HDP's group of the longest sequence
    # (a plan fits in the whole GPU since issue 27: four of them against 95% of it)
    assert len(checked) == av.CANDIDATES and sum(not c[-1] for c in checked) == 3
    assert len(simulated) == 5 and {(p["dp"], p["tp"], p["pp"], p["cp"]) for p in doc["plans"]} == set(simulated)
    for ctx, dist, est, _, _ in checked:  # the simulation agrees, strategy by strategy
        full = simulate_plan(ctx, dist, est, sequences=8, steps=1)
        assert {s: full.results[s].fits for s in STRATEGIES} == {s: runs_longest(ctx, dist, est, s) for s in STRATEGIES}


def test_attention_by_length_is_the_cost_models_own_number() -> None:
    """The per-length table a plan's strategies share gives, length by length, what ``attention`` computes;
    it grows when a longer length comes, and non-integer or far-spread lengths are computed directly."""
    from autopar.cost.sequence import ModelSeqCost
    from autopar.io.profiles import load_hardware
    from autopar.spec.plan import Plan
    from autopar.varlen.seqcost import TABLE_SPAN, attention_one
    from tests.conftest import llama70b

    cost = ModelSeqCost.from_model(llama70b(), load_hardware("h100-sxm"), Plan(dp=2, tp=8, pp=4, cp=2), dtype="bf16")
    rng = np.random.default_rng(3)
    short = rng.integers(0, 5000, size=(7, 300))
    longer = rng.integers(0, 20000, size=(9, 400))
    for lengths in (short, longer, short[:2]):
        want = cost.attention(lengths.astype(np.float64), 1)
        got = attention_one(cost, lengths)
        assert got.shape == lengths.shape and (got == want).all()
    assert (attention_one(cost, longer.astype(np.float64)) == cost.attention(longer.astype(np.float64), 1)).all()
    spread = np.array([[1, TABLE_SPAN * 1024 * 50]])  # a table would be 50x the lengths: computed directly
    assert (attention_one(cost, spread) == cost.attention(spread.astype(np.float64), 1)).all()
    assert attention_one(cost, short)[0, 0] == cost.attention(np.array([float(short[0, 0])]), 1)[0]
