"""The opening rounds on the ranks' sums (varlen/fresh.py) place exactly what rounds.py alone places."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autopar.varlen.cells import EXACT, FAST, Cells, Greedy
from autopar.varlen.fresh import place_fresh
from autopar.varlen.rounds import place_rounds

FIELDS = ("load", "eff", "tokens", "room", "work", "peak", "overflow_tokens")


def _cells(steps: int, rows: int, open_cols: np.ndarray, *, cap: float, hard: float, pp: int, big: float = 1e3) -> Cells:
    return Cells(steps=steps, rows=rows, open_cols=open_cols, cap_tokens=cap, hard_cap_tokens=hard, big_s=np.full(steps, big), pp=pp)


def test_opening_rounds_by_hand() -> None:
    """Two ranks, three open micro-batches, pp 1, costs 5, 4, 3, 1.5, 1 (one token each), FAST (two items a round).

    Round 1: both ranks empty, equal scores: 5 and 4 go to micro-batch 0 of one rank each. Round 2: the rank
    at 4 scores lower, so it takes 3 (-> 7) and the rank at 5 takes 1.5 (-> 6.5); 6.5 is below 4 + 3, so
    LPT takes both. Round 3: 1 goes to the rank at 6.5 (-> 7.5). Every item lands on an untouched micro-batch.
    """
    cells = _cells(1, 2, np.array([3]), cap=10.0, hard=10.0, pp=1)
    cost = np.array([[5.0, 4.0, 3.0, 1.5, 1.0]])
    tokens = np.ones_like(cost)
    ptr, total = place_fresh(cells, cost, tokens, FAST, start=None, stop=None)
    assert ptr.tolist() == [5] and total.tolist() == [5]  # all five placed here
    first = int(np.argmax(cells.load[0, :, 0]))  # the rank that took 5 (the tie of round 1 decides which)
    assert cells.load[0, first].tolist() == [5.0, 1.5, 1.0, 0.0]
    assert cells.load[0, 1 - first].tolist() == [4.0, 3.0, 0.0, 0.0]
    assert cells.work[0, first] == 7.5 and cells.work[0, 1 - first] == 7.0
    assert cells.peak[0].tolist() == [5.0, 4.0] if first == 0 else [4.0, 5.0]
    assert cells.tokens[0].sum() == 5.0 and (cells.room[0, first, :3] == 9.0).all()
    assert cells.eff[0, first, 3] == 1e3  # the reserve micro-batch keeps its penalty, untouched


def test_a_rank_without_untouched_micro_batches_leaves_it_to_rounds() -> None:
    """A rank whose micro-batches all hold something: the opening rounds place nothing."""
    cells = _cells(1, 2, np.array([1]), cap=10.0, hard=10.0, pp=1)
    place_rounds(cells, np.array([[2.0, 1.0]]), np.ones((1, 2)), 1, FAST)  # one item on each rank's only open one
    ptr, total = place_fresh(cells, np.array([[3.0]]), np.ones((1, 1)), FAST, start=None, stop=None)
    assert ptr.tolist() == [0] and total.tolist() == [1]


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Cells, np.ndarray, np.ndarray, Greedy, np.ndarray | None, np.ndarray | None]:
    steps, rows = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    width, pp = draw(st.integers(1, 24)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    open_cols = rng.integers(1, 7, size=steps)
    cap = float(draw(st.sampled_from([4.0, 16.0, 1e6])))
    hard = cap * float(draw(st.sampled_from([1.0, 1.5])))
    cells = _cells(steps, rows, open_cols, cap=cap, hard=hard, pp=pp, big=1e4)
    # costs sorted down per step, with ties (integers) or without; tokens up to beyond the hard cap
    raw = rng.integers(1, 6, size=(steps, width)).astype(float) if draw(st.booleans()) else rng.uniform(0.1, 5.0, (steps, width))
    cost = -np.sort(-raw, axis=1)
    tokens = rng.integers(1, int(min(hard, 20)) + 3, size=(steps, width)).astype(float)
    if draw(st.booleans()):  # items of no cost but some tokens (they leave a micro-batch at load 0) end the list
        cost[:, width - draw(st.integers(1, width)) :] = 0.0
    cut = rng.integers(0, width + 1, size=steps)  # padding after each step's items
    cost[np.arange(width)[None, :] >= cut[:, None]] = 0.0
    tokens[np.arange(width)[None, :] >= cut[:, None]] = 0.0
    if draw(st.booleans()) and rows >= 2:  # some cells already hold a group's items
        pre = rng.uniform(0.5, 6.0, size=(steps, 2))
        place_rounds(cells, -np.sort(-pre, axis=1), np.ones((steps, 2)), 2, FAST)
    greedy = draw(st.sampled_from([FAST, EXACT, Greedy(light_frac=0.25, round_frac=0.5)]))
    start = stop = None
    if draw(st.booleans()):
        start = rng.integers(0, width + 1, size=steps)
        stop = np.maximum(start, rng.integers(0, width + 1, size=steps))
    return cells, cost, tokens, greedy, start, stop


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_opening_rounds_place_what_rounds_alone_places(case: tuple[Cells, np.ndarray, np.ndarray, Greedy, Any, Any]) -> None:
    """On random cells, items, ranges, pipeline depths and token caps: every array of the cells is the same."""
    cells, cost, tokens, greedy, start, stop = case
    alone, both = cells, copy.deepcopy(cells)
    place_rounds(alone, cost, tokens, 1, greedy, start=start, stop=stop)
    ptr, total = place_fresh(both, cost, tokens, greedy, start=start, stop=stop)
    place_rounds(both, cost, tokens, 1, greedy, start=ptr, stop=total)
    for name in FIELDS:
        assert np.array_equal(getattr(both, name), getattr(alone, name)), name
