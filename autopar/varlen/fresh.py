"""The opening rounds of ``rounds.py`` on single ranks, while every rank still has an untouched micro-batch.

A round of ``rounds.py`` finds each rank's earliest micro-batch by an arg-min
over all of them (the first of the least loaded). While a rank has an open
micro-batch that holds nothing (load, chooser's load and tokens 0, full room),
that arg-min is its first such micro-batch: nothing is below 0. Its start is
0, the round's largest item fits it (when the item is within the hard cap),
and the rank's score reduces to ``work + c0 (+ stalls * max(peak, c0)) +
1e-6 * c0``, the same floating-point operations on the same values. So these
rounds need only the ranks' work and peak (L, rows), not the (L, rows,
micro-batches) cells: the same rule (``taken``) picks the same items, and
the cells are written once at the end (each untouched micro-batch takes one
item here, so the order of the writes does not matter).

A step leaves these rounds for good before the first round in which one of
its ranks has no untouched micro-batch left or its largest item exceeds the
hard cap; it then goes on in ``rounds.py`` from exactly the state that
``rounds.py`` would have reached. ``tests/unit/varlen/test_varlen_fresh.py``
checks the cells against ``rounds.py`` alone.
"""

from __future__ import annotations

import numpy as np

from autopar.varlen.cells import Cells, Greedy, items_range
from autopar.varlen.rounds import COMPACT, taken


def _untouched(cells: Cells, cost: np.ndarray, ptr: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps that may start here; each rank's untouched micro-batches first, ascending (S, rows, cols); their count."""
    eff = cells.eff
    empty = eff == 0.0
    odd = empty & ((cells.load != 0.0) | (cells.tokens != 0.0) | (cells.room != cells.hard_cap))
    # a zero-cost item would leave its micro-batch at 0, so the arg-min would pick it again
    at = np.arange(cost.shape[1])[None, :]
    free_item = ((cost <= 0.0) & (at >= ptr[:, None]) & (at < total[:, None])).any(axis=1)
    n_empty = empty.sum(axis=2)
    go = (ptr < total) & (n_empty > 0).all(axis=1) & ~free_item
    go &= ~odd.any(axis=(1, 2)) & (eff >= 0.0).all(axis=(1, 2))
    order = np.argsort(~empty, axis=2, kind="stable") if go.any() else np.zeros((0, 0, 0), dtype=np.int64)
    return go, order, n_empty


def place_fresh(
    cells: Cells, cost: np.ndarray, tokens: np.ndarray, greedy: Greedy, *, start: np.ndarray | None, stop: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``rounds.py``'s rounds (blocks of one rank) while they touch untouched micro-batches only.

    Returns each step's next item and the end of its items, for ``place_rounds`` to go on from.
    """
    ptr, total = items_range(cost, tokens, start, stop)
    go, order, n_empty = _untouched(cells, cost, ptr, total)
    if not go.any():
        return ptr, total
    steps, rows, cols = cells.load.shape
    width = cost.shape[1]
    per_round = 1 if greedy.round_frac <= 0 else max(1, int(greedy.round_frac * rows))
    item_cost = np.ascontiguousarray(cost, dtype=np.float64).reshape(-1)
    item_tokens = np.ascontiguousarray(tokens, dtype=np.float64).reshape(-1)
    hard, stalls = cells.hard_cap, cells.pp - 1
    offsets = np.arange(per_round)[None, :]
    live = np.flatnonzero(go)
    work, peak, nxt = cells.work[live], cells.peak[live], np.zeros((live.size, rows), dtype=np.int64)
    lp, lt, emp, ecol = ptr[live], total[live], n_empty[live], order[live]
    done_cells: list[np.ndarray] = []
    done_c: list[np.ndarray] = []
    done_t: list[np.ndarray] = []
    while True:
        active = (lp < lt) & (nxt < emp).all(axis=1)
        at_item = np.minimum((live * width)[:, None] + lp[:, None] + offsets, (live * width + width - 1)[:, None])
        c, t = item_cost[at_item], item_tokens[at_item]
        active &= t[:, 0] <= hard  # beyond it even an empty micro-batch lacks room: rounds.py masks
        if active.size and np.count_nonzero(active) < COMPACT * active.size:  # the others leave for good
            cells.work[live], cells.peak[live], ptr[live] = work, peak, lp
            keep = np.flatnonzero(active)
            live, work, peak, nxt, lp, lt, emp, ecol = (a[keep] for a in (live, work, peak, nxt, lp, lt, emp, ecol))
            c, t, active = c[keep], t[keep], active[keep]
        if not active.any():
            break
        inside = (offsets < (lt - lp)[:, None]) & active[:, None]
        c0 = c[:, :1]
        after = work + c0  # rounds.py: work + (end - at) with at = 0, end = 0 + c0
        if stalls:
            after += stalls * np.maximum(peak, c0)
        score = after + 1e-6 * c0  # + (chosen - begin) = + 0
        row_start = (np.arange(live.size) * rows)[:, None]
        leading = np.zeros((live.size, per_round + 1), dtype=bool)
        block, n_take = taken(per_round, rows, row_start, leading, score, c, c0, inside)
        f = np.flatnonzero(offsets < n_take[:, None])
        si, b = f // per_round, block.reshape(-1)[f]
        col = ecol[si, b, nxt[si, b]]
        ci, ti = c.reshape(-1)[f], t.reshape(-1)[f]
        over = hard < ti
        if over.any():
            cells.overflow_tokens += np.bincount(live[si][over], (ti * 1)[over], minlength=steps)
        work[si, b] += ci
        peak[si, b] = np.maximum(peak[si, b], ci)
        nxt[si, b] += 1
        lp += n_take
        done_cells.append((live[si] * rows + b) * cols + col)
        done_c.append(ci)
        done_t.append(ti)
    cells.work[live], cells.peak[live], ptr[live] = work, peak, lp
    if done_cells:
        _scatter(cells, np.concatenate(done_cells), np.concatenate(done_c), np.concatenate(done_t))
    return ptr, total


def _scatter(cells: Cells, fi: np.ndarray, ci: np.ndarray, ti: np.ndarray) -> None:
    """Write the items placed on untouched cells (flat indices, distinct) as ``rounds.py``'s ``_write`` does."""
    cols = cells.load.shape[2]
    gs, col = fi // (cells.load.shape[1] * cols), fi % cols
    new = 0.0 + ci
    cells.load.reshape(-1)[fi] = new
    cells.eff.reshape(-1)[fi] = new + cells.penalty.reshape(-1)[gs * cols + col]
    tk = cells.tokens.reshape(-1)[fi] + ti
    cells.tokens.reshape(-1)[fi] = tk
    cells.room.reshape(-1)[fi] = cells.room_after(tk)
