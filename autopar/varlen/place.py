"""The placement engine behind the balanced strategies: greedy LPT, vectorized over steps.

The work of one training step is a grid of cells (``cells.py``): one per row
(a rank, or a CP group of identical ranks) and micro-batch. Sequences are
placed largest first, each where it leaves the least-loaded rank: Graham's
LPT rule (Graham 1969), never worse than 4/3 - 1/(3m) of the optimum on m
identical machines. "Load" is the rank's pipeline time, sum + (pp - 1) * max
over its micro-batches (``pipeline.py``); with pp = 1 that is its plain work.
Inside the chosen rank the sequence takes the micro-batch that starts
earliest and still has token room. A sequence that needs a CP group of g
ranks takes an aligned block of g rows in one micro-batch; the block's ranks
start together, so the cell becomes ``max(block loads) + cost`` on all of
them (the faster ranks wait, as real ring attention makes them). Groups are
placed before single ranks, largest first, as Megatron's hybrid CP schedules
its largest groups first.

Exact LPT is sequential: 4,096 sequences x 1,000 steps of arg-min in Python is
seconds. Two knobs (``Greedy``) make it fast while keeping the answer close:

- ``round_frac``: place a *round* of items at once, at most one per block of
  rows, each only while LPT would have made the same choice (``rounds.py``;
  on a single row, up to ``ROW_ITEMS`` per round, ``column.py``).
- ``light_frac``: single-rank items costing below ``light_frac`` x the mean
  cell load are poured as a fluid (``pour.py``).

``tests/unit/varlen/test_varlen_assign.py`` checks FAST against EXACT (within
1.5% of the mean step time; 0.3% or less measured on the long-context
example) and EXACT against a brute-force optimum.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autopar.varlen.cells import EXACT, FAST, Cells, Greedy
from autopar.varlen.column import ROW_ITEMS, place_column_rounds
from autopar.varlen.pour import pour
from autopar.varlen.rounds import place_rounds

__all__ = ["EXACT", "FAST", "ROW_ITEMS", "Cells", "Greedy", "gather_sorted", "place", "pour"]


def place(
    cells: Cells,
    cost: np.ndarray,
    tokens: np.ndarray,
    group: int,
    greedy: Greedy,
    *,
    start: np.ndarray | None = None,
    stop: np.ndarray | None = None,
) -> None:
    """Place items (S, H), sorted by decreasing cost per row, on aligned blocks of ``group`` rows.

    ``cost`` is each item's seconds on each rank of its block, ``tokens`` its
    tokens per rank. Row s places its items ``start[s]:stop[s]`` (default: all
    up to the first padding item, cost 0 and tokens 0); every item in that
    range is placed, whatever its cost.
    """
    if group == 1 and greedy.round_frac > 0 and cells.load.shape[1] == 1 and cells.load.shape[2] > 1:
        place_column_rounds(cells, cost, tokens, start=start, stop=stop)
        return
    place_rounds(cells, cost, tokens, group, greedy, start=start, stop=stop)


def gather_sorted(
    mask: np.ndarray,
    key: np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Column indices (S, H) of the True entries of each row, by decreasing ``key``; and which are real.

    ``key`` is an (S, N) array, or a function of the selected (rows, columns)
    returning their keys (so keys are computed for the selected entries only).
    H is the largest count over rows; shorter rows are padded (index 0, real False).
    """
    steps, n = mask.shape
    flat = np.flatnonzero(mask)
    r = flat // n
    counts = np.bincount(r, minlength=steps)
    width = int(counts.max()) if counts.size else 0
    if width == 0:
        return np.zeros((steps, 0), dtype=np.int64), np.zeros((steps, 0), dtype=bool)
    c = flat - r * n
    slot = r * width + (np.arange(r.size) - (np.cumsum(counts) - counts)[r])  # flat (row, rank in row)
    neg = np.full(steps * width, np.inf)  # padding sorts last
    neg[slot] = -(key(r, c) if callable(key) else key[r, c])
    idx = np.zeros(steps * width, dtype=np.int64)
    idx[slot] = c
    # equal keys are equal items in practice (same group, same cost), so their order does not matter
    order = np.argsort(neg.reshape(steps, width), axis=1)
    pick = order + (np.arange(steps) * width)[:, None]
    return idx[pick], neg[pick] < np.inf
