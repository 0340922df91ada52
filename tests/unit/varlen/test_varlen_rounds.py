"""rounds.py places exactly what its rule says, read one step, one block and one item at a time.

The reference below is the rule of ``varlen/rounds.py`` written out with Python floats (the same IEEE
operations in the same order): each round offers the step's next ``per_round`` items; each block takes its
earliest micro-batch, or, when that lacks room for the round's first item, the earliest once ``no_room`` is
added to those without room; blocks are scored by their pipeline time with the first item; the k-th item
goes to the k-th block by score while that block's score, less the first item, is within what every earlier
block reaches with its own item.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autopar.varlen.cells import EXACT, FAST, Cells, Greedy
from autopar.varlen.rounds import place_rounds

FIELDS = ("load", "eff", "tokens", "room", "work", "peak", "overflow_tokens")


def _choose(cells: Cells, s: int, rows: range, t0: float) -> tuple[int, float]:
    """A block's micro-batch and its load as the chooser sees it."""
    cols = cells.load.shape[2]
    beff = [max(float(cells.eff[s, r, j]) for r in rows) for j in range(cols)]
    broom = [min(float(cells.room[s, r, j]) for r in rows) for j in range(cols)]
    col = beff.index(min(beff))
    if broom[col] >= t0:
        return col, beff[col]
    no_room = 4.0 * float(cells.big[s])
    masked = [beff[j] + no_room * (1.0 if broom[j] < t0 else 0.0) for j in range(cols)]
    col = masked.index(min(masked))
    return col, masked[col]


def _round(cells: Cells, s: int, items: list[tuple[float, float]], group: int) -> tuple[int, bool]:
    """One round of step ``s``; returns how many items it took and whether two blocks tied."""
    c0, t0 = items[0]
    stalls, blocks = cells.pp - 1, cells.load.shape[1] // group
    offer = []
    for b in range(blocks):
        rows = range(b * group, (b + 1) * group)
        col, chosen = _choose(cells, s, rows, t0)
        begin = max(float(cells.load[s, r, col]) for r in rows)
        end = begin + c0
        after = []
        for r in rows:
            a = float(cells.work[s, r]) + (end - float(cells.load[s, r, col]))
            after.append(a + stalls * max(float(cells.peak[s, r]), end) if stalls else a)
        offer.append((max(after) + (chosen - begin) + 1e-6 * end, b, col, begin))
    tied = len({o[0] for o in offer}) < len(offer)
    offer.sort()
    take, reach = 1, offer[0][0] - c0 + items[0][0]
    while take < min(len(items), len(offer)) and offer[take][0] - c0 <= reach:
        reach = min(reach, offer[take][0] - c0 + items[take][0])
        take += 1
    spilled = 0.0
    for (ci, ti), (_, b, col, begin) in zip(items[:take], offer[:take], strict=False):
        rows = range(b * group, (b + 1) * group)
        if min(float(cells.room[s, r, col]) for r in rows) < ti:
            spilled += ti * group
        new = begin + ci
        for r in rows:
            old = float(cells.load[s, r, col])
            cells.load[s, r, col] = new
            cells.eff[s, r, col] = new + float(cells.penalty[s, 0, col])
            cells.tokens[s, r, col] += ti
            tk = float(cells.tokens[s, r, col])
            cells.room[s, r, col] = cells.cap - tk + (cells.hard_cap - cells.cap) * (1.0 if tk <= 0 else 0.0)
            cells.work[s, r] += new - old
            cells.peak[s, r] = max(float(cells.peak[s, r]), new)
    if spilled:
        cells.overflow_tokens[s] += spilled
    return take, tied


def reference(cells: Cells, cost: np.ndarray, tokens: np.ndarray, group: int, per_round: int) -> bool:
    """Every step's rounds, one after the other; True when some round had two blocks of one score."""
    tied = False
    for s in range(cost.shape[0]):
        ptr, total = 0, int(((cost[s] > 0) | (tokens[s] > 0)).sum())
        while ptr < total:
            items = [(float(cost[s, k]), float(tokens[s, k])) for k in range(ptr, min(ptr + per_round, total))]
            took, tie = _round(cells, s, items, group)
            ptr, tied = ptr + took, tied or tie
    return tied


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Cells, np.ndarray, np.ndarray, int, Greedy]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    steps, group = draw(st.integers(1, 3)), draw(st.sampled_from([1, 1, 2, 3]))
    rows, pp = group * draw(st.integers(1, 4)), draw(st.integers(1, 4))
    cap = float(draw(st.sampled_from([6.0, 20.0])))
    cells = Cells(
        steps=steps,
        rows=rows,
        open_cols=rng.integers(1, 6, size=steps),
        cap_tokens=cap,
        hard_cap_tokens=1.5 * cap,
        big_s=np.full(steps, 1e3),
        pp=pp,
    )
    # a state some earlier items left: loads and tokens in some cells (distinct loads: no ties of blocks)
    held = rng.random(cells.load.shape) < 0.4
    cells.load[...] = np.where(held, rng.uniform(0.1, 4.0, cells.load.shape), 0.0)
    cells.tokens[...] = np.where(held, rng.integers(1, int(cap) + 2, cells.load.shape), 0.0)
    cells.eff[...] = cells.load + cells.penalty
    cells.room[...] = np.where(held, cells.room_after(cells.tokens), cells.hard_cap)
    cells.work[...], cells.peak[...] = cells.load.sum(axis=2), cells.load.max(axis=2)
    width = draw(st.integers(1, 20))
    cost = -np.sort(-rng.uniform(0.05, 3.0, (steps, width)), axis=1)
    tokens = rng.integers(1, int(1.5 * cap) + 3, (steps, width)).astype(float)  # some beyond the hard cap
    cut = rng.integers(1, width + 1, size=steps)
    cost[np.arange(width)[None, :] >= cut[:, None]] = 0.0
    tokens[np.arange(width)[None, :] >= cut[:, None]] = 0.0
    return cells, cost, tokens, group, draw(st.sampled_from([FAST, EXACT, Greedy(round_frac=0.5)]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_rounds_place_what_the_rule_says(case: tuple[Cells, np.ndarray, np.ndarray, int, Any]) -> None:
    """On random held cells, items (some past the hard cap), groups, pipeline depths and rounds: the same cells."""
    cells, cost, tokens, group, greedy = case
    want = copy.deepcopy(cells)
    blocks = cells.load.shape[1] // group
    per_round = 1 if greedy.round_frac <= 0 else max(1, int(greedy.round_frac * blocks))
    assume(not reference(want, cost, tokens, group, per_round))  # tied scores: numpy's sort may order them otherwise
    place_rounds(cells, cost, tokens, group, greedy)
    for name in FIELDS:
        assert np.array_equal(getattr(cells, name), getattr(want, name)), name
