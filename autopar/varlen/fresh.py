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


class _Set:
    """The steps still in the opening rounds: their ranks' sums, next untouched micro-batch, items; flat views."""

    def __init__(
        self,
        live: np.ndarray,
        work: np.ndarray,
        peak: np.ndarray,
        nxt: np.ndarray,
        arrays: tuple[np.ndarray, ...],
        sizes: tuple[int, int, int],
    ) -> None:
        rows, per_round, width = sizes
        self.live, self.work, self.peak, self.nxt = live, work, peak, nxt
        self.ptr, self.total, self.n_empty, self.order = arrays
        self.wf, self.pf, self.nf, self.of = work.reshape(-1), peak.reshape(-1), nxt.reshape(-1), self.order.reshape(-1)
        self.base = (live * width)[:, None] + np.arange(per_round)[None, :]  # the round's items at ptr 0
        self.last = (live * width + width - 1)[:, None]
        self.row_start = (np.arange(live.size) * rows)[:, None]
        self.leading = np.zeros((live.size, per_round + 1), dtype=bool)
        self.at_row = ((live * rows)[:, None] + np.arange(rows)[None, :]).reshape(-1)  # local -> global (step, rank)
        self.sizes = sizes

    def keep(self, cells: Cells, ptr: np.ndarray, keep: np.ndarray) -> _Set:
        """Hand every step's state back to the cells, and go on with the steps ``keep`` only."""
        cells.work[self.live], cells.peak[self.live], ptr[self.live] = self.work, self.peak, self.ptr
        arrays = tuple(a[keep] for a in (self.ptr, self.total, self.n_empty, self.order))
        return _Set(self.live[keep], self.work[keep], self.peak[keep], self.nxt[keep], arrays, self.sizes)


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
    per_round = 1 if greedy.round_frac <= 0 else max(1, int(greedy.round_frac * rows))
    item_cost = np.ascontiguousarray(cost, dtype=np.float64).reshape(-1)
    item_tokens = np.ascontiguousarray(tokens, dtype=np.float64).reshape(-1)
    hard, stalls = cells.hard_cap, cells.pp - 1
    offsets = np.arange(per_round)[None, :]
    live = np.flatnonzero(go)
    nxt = np.zeros((live.size, rows), dtype=np.int64)
    w = _Set(
        live,
        cells.work[live],
        cells.peak[live],
        nxt,
        (ptr[live], total[live], n_empty[live], order[live]),
        (rows, per_round, cost.shape[1]),
    )
    done: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while w.live.size:
        active = (w.ptr < w.total) & (w.nxt < w.n_empty).all(axis=1)
        at_item = np.minimum(w.base + w.ptr[:, None], w.last)
        c, t = item_cost[at_item], item_tokens[at_item]
        active &= t[:, 0] <= hard  # beyond it even an empty micro-batch lacks room: rounds.py masks
        if np.count_nonzero(active) < COMPACT * active.size:  # the others leave for good
            keep = np.flatnonzero(active)
            w, c, t, active = w.keep(cells, ptr, keep), c[keep], t[keep], active[keep]
            if not w.live.size:
                break
        inside = (offsets < (w.total - w.ptr)[:, None]) & active[:, None]
        c0 = c[:, :1]
        after = w.work + c0  # rounds.py: work + (end - at) with at = 0, end = 0 + c0
        if stalls:
            after += stalls * np.maximum(w.peak, c0)
        score = after + 1e-6 * c0  # + (chosen - begin) = + 0
        _, n_take, at = taken(per_round, rows, w.row_start, w.leading, score, c, c0, inside)
        f = np.flatnonzero(offsets < n_take[:, None])
        sb = at.reshape(-1)[f]  # flat local (step, rank)
        nth = w.nf[sb]
        col = w.of[sb * cols + nth]
        ci, ti = c.reshape(-1)[f], t.reshape(-1)[f]
        over = hard < ti
        if over.any():
            cells.overflow_tokens += np.bincount(w.live[f // per_round][over], (ti * 1)[over], minlength=steps)
        w.wf[sb] += ci
        w.pf[sb] = np.maximum(w.pf[sb], ci)
        w.nf[sb] = nth + 1
        w.ptr += n_take
        done.append((w.at_row[sb] * cols + col, ci, ti))
    w.keep(cells, ptr, np.zeros(0, dtype=np.int64))
    if done:
        _scatter(cells, *(np.concatenate(a) for a in zip(*done, strict=True)))
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
