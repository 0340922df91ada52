"""A recorded plan of the step simulation, replayed for a step cost, is the loop run with that cost,
bit for bit (cost/serve_replay.py).

The loops are those of tests/unit/cost/test_serve_sim_frozen.py (every branch of the scheduler); the
golden there was written by a frozen copy of the loop at 522afbe, so a replay that matches it matches
the loop as it was, not as it is now.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopar.cost import serve_replay
from autopar.cost.serve_admit import Scheduler
from autopar.cost.serve_replay import PLANS, SMALL, plan_key
from autopar.cost.serve_sim import _Loop, _run, simulate
from autopar.cost.serve_step import StepCost
from tests.unit.cost.test_serve_sim_frozen import CASES, GOLDEN, draw, result

_FLOATS = st.sampled_from([0.0, 1e-9, 1.3e-5, 6.5e-5, 2e-4, 0.0118, 0.02, 1 / 3, 0.1 + 0.2])


@settings(max_examples=200, deadline=None)
@given(
    fixed=_FLOATS,
    per_decode=_FLOATS,
    per_token=_FLOATS,
    eager=st.sampled_from([0.0, 0.02, 0.0118]),
    host=st.sampled_from([0.0, 4e-5, 1.3e-5]),
    graphs=st.frozensets(st.integers(0, 300), max_size=6),
    steps=st.lists(st.tuples(st.integers(0, 40_000), st.integers(0, 20_000)), min_size=1, max_size=40),
)
def test_the_cost_of_many_steps_is_each_steps_cost(
    fixed: float, per_decode: float, per_token: float, eager: float, host: float, graphs: frozenset[int], steps: list[tuple[int, int]]
) -> None:
    cost = StepCost(fixed=fixed, per_decode=per_decode, per_token=per_token, eager_s=eager, graph_sizes=graphs, host_per_decode=host)
    d, p = (np.array(x, dtype=np.int64) for x in zip(*steps, strict=True))
    assert [float(c) for c in cost.many(d, p)] == [cost(a, b) for a, b in steps]


def _cases() -> list[tuple[int, tuple]]:
    rng = random.Random(23)
    drawn = [draw(rng) for _ in range(CASES)]
    return [(i, case) for i, case in enumerate(drawn) if case[1]["host_token_s"] == 0]  # the loops a plan is kept for


@pytest.mark.parametrize("small", [SMALL, 0])  # short plans replayed in Python, or every plan in numpy from its first replay
@pytest.mark.parametrize("part", range(3))
def test_a_replayed_plan_gives_what_the_frozen_loop_gave(part: int, small: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_replay, "SMALL", small)
    monkeypatch.setattr(serve_replay, "PYTHON_TERMS", serve_replay.PYTHON_TERMS if small else 0)
    golden = json.loads(GOLDEN.read_text())
    for i, case in _cases()[part::3]:
        result(*case)  # the first time: run, or recorded (a loop reading its pool's size is recorded the second time)
        result(*case)
        assert plan_key(Scheduler(**case[1]), **case[2])[0] in PLANS.plans or golden[i][0] == "error"
        assert result(*case) == golden[i], (i, case)


@pytest.mark.parametrize("small", [SMALL, 0])
@pytest.mark.parametrize("part", range(3))
def test_a_plan_replayed_for_another_cost_is_the_loop_run_with_it(part: int, small: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_replay, "SMALL", small)
    monkeypatch.setattr(serve_replay, "PYTHON_TERMS", serve_replay.PYTHON_TERMS if small else 0)
    rng = random.Random(part)
    for i, (cost, sched, loop) in _cases()[part::3]:
        other = draw(random.Random(i))[0]  # another cost, the same loop
        before = StepCost(**{**cost, "graph_sizes": frozenset(cost["graph_sizes"])})
        after = StepCost(**{**other, "graph_sizes": frozenset(other["graph_sizes"])})
        try:
            for _ in range(2):
                simulate(before, Scheduler(**sched), **loop)
        except RuntimeError:  # a loop that stalls stalls under any cost
            continue
        if rng.random() < 0.5:  # in an order of its own: what the first replay keeps cannot leak into the next
            simulate(before, Scheduler(**sched), **loop)
        replayed = simulate(after, Scheduler(**sched), **loop)
        direct = _run(_Loop(after, Scheduler(**sched), **loop), loop["prompts"]).result()
        assert repr(replayed) == repr(direct), (i, sched, loop)


def test_a_long_plan_moves_to_numpy_once_the_python_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    # plans of more than SMALL steps and terms are replayed in Python until PYTHON_TERMS of them are
    # spent, then in numpy (their lists dropped), to the same bits; with numpy loaded, at once
    monkeypatch.setattr(serve_replay, "SMALL", 0)
    cost = StepCost(fixed=0.0118, per_decode=1.3e-5, per_token=6.5e-5)
    loop = {"concurrency": 16, "isl": 100, "osl": 64, "prompts": 48, "staggered": False, "warmup": 0}
    sched = Scheduler(policy="prefill_first", budget=2048, chunked=True, max_seqs=32)
    ticks = serve_replay.Ticks()
    run = _Loop(ticks, sched, **loop)
    serve_replay.watch(run)
    plan = serve_replay.record(_run(run, loop["prompts"]), ticks)
    direct = _run(_Loop(cost, sched, **loop), loop["prompts"]).result()
    monkeypatch.setattr(serve_replay, "PYTHON_TERMS", 2 * plan.size)
    monkeypatch.setattr(serve_replay, "_python_terms", 0)
    monkeypatch.setattr(serve_replay, "_numpy_loaded", lambda: False)  # as in a process that has not loaded it
    seen = [(plan.replay(cost), bool(plan.arrays)) for _ in range(4)]
    assert [a for _, a in seen] == [False, False, True, True] and plan.steps == []
    assert all(r == direct for r, _ in seen)
    ticks = serve_replay.Ticks()
    run = _Loop(ticks, sched, **loop)
    serve_replay.watch(run)
    fresh = serve_replay.record(_run(run, loop["prompts"]), ticks)
    monkeypatch.setattr(serve_replay, "_python_terms", 0)
    monkeypatch.setattr(serve_replay, "_numpy_loaded", lambda: True)
    assert fresh.replay(cost) == direct and fresh.arrays and fresh.steps == []
