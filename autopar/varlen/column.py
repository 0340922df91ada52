"""LPT on a single row of single ranks (a dp 1 fixed-CP plan, a one-rank pool): many items per round.

With one row, LPT only chooses among micro-batches: each item goes to the
micro-batch that starts earliest and has room. A round offers the next items
(up to ``ROW_ITEMS``) to the emptiest micro-batches that have room for all of
them, the k-th item to the k-th emptiest; item k is taken while that
micro-batch still starts no later than the ones the round filled before it
and than any left out that has room for it, and is open: one-by-one LPT
would place it there too. A step whose first item fails places it alone
(``_place_one``: what ``rounds.py`` does with one block and one item).
"""

from __future__ import annotations

import numpy as np

from autopar.varlen.cells import Cells, flat, items_range

ROW_ITEMS = 64  # items per step and round at most


def place_column_rounds(cells: Cells, cost: np.ndarray, tokens: np.ndarray, *, start: np.ndarray | None, stop: np.ndarray | None) -> None:
    """``place`` on a single row of single ranks: up to ``ROW_ITEMS`` items per step and round, as exact LPT."""
    steps, _, cols = cells.load.shape
    ptr, total = items_range(cost, tokens, start, stop)
    width = cost.shape[1]
    item_cost = np.ascontiguousarray(cost, dtype=np.float64).reshape(-1)
    item_tokens = np.ascontiguousarray(tokens, dtype=np.float64).reshape(-1)
    load, eff, tok, room = (flat(a) for a in (cells.load, cells.eff, cells.tokens, cells.room))
    work, peak = flat(cells.work), flat(cells.peak)
    per_round = min(ROW_ITEMS, cols)
    while True:
        live = np.flatnonzero(ptr < total)
        if not live.size:
            return
        left = (total - ptr)[live]
        k_items = int(min(per_round, left.max()))
        ks = np.arange(k_items)
        inside = ks[None, :] < left[:, None]  # (L, K)
        at_item = live[:, None] * width + np.minimum(ptr[live][:, None] + ks, width - 1)
        c = np.where(inside, item_cost[at_item], 0.0)
        t = np.where(inside, item_tokens[at_item], 0.0)
        e_all = cells.eff[live, 0]  # (L, cols)
        r_all = cells.room[live, 0]
        excluded = r_all < t.max(axis=1)[:, None]  # no room for some item of the round
        e_in = np.where(excluded, np.inf, e_all)
        part = np.argpartition(e_in, k_items - 1, axis=1)[:, :k_items] if k_items < cols else np.broadcast_to(np.arange(cols), e_in.shape)
        col = np.take_along_axis(part, np.argsort(np.take_along_axis(e_in, part, 1), axis=1, kind="stable"), 1)
        cell = (live * cols)[:, None] + col  # flat cells (one row)
        e_k = eff[cell]
        l_k = load[cell]
        # the earliest left-out micro-batch with room for the round's smallest item bounds every item's choice
        t_lo = np.where(inside, t, np.inf).min(axis=1)
        bound = np.where(excluded & (r_all >= t_lo[:, None]), e_all, np.inf).min(axis=1)
        filled = np.minimum.accumulate(e_k + c, axis=1)  # the earliest the round's filled micro-batches start
        ok = inside & np.isfinite(np.take_along_axis(e_in, col, 1)) & (e_k == l_k) & (room[cell] >= t)
        ok &= e_k <= bound[:, None]
        ok[:, 1:] &= e_k[:, 1:] <= filled[:, :-1]
        n_take = np.concatenate([ok, np.zeros((live.size, 1), dtype=bool)], axis=1).argmin(axis=1)
        f = np.flatnonzero(ks[None, :] < n_take[:, None])
        if f.size:
            fi = cell.reshape(-1)[f]
            ci, ti = c.reshape(-1)[f], t.reshape(-1)[f]
            new = l_k.reshape(-1)[f] + ci
            load[fi] = new
            eff[fi] = new
            tk = tok[fi] + ti
            tok[fi] = tk
            room[fi] = cells.room_after(tk)
            ri = live[f // k_items]
            work += np.bincount(ri, ci, minlength=steps)
            np.maximum.at(peak, ri, new)
            ptr[live] += n_take
        stuck = live[inside[:, 0] & (n_take == 0)]
        if stuck.size:  # the emptiest micro-batch lacks room for it, or is a reserve one: LPT as before
            at = stuck * width + ptr[stuck]
            _place_one(cells, stuck, item_cost[at], item_tokens[at])
            ptr[stuck] += 1


def _place_one(cells: Cells, steps: np.ndarray, c: np.ndarray, t: np.ndarray) -> None:
    """One item per step of ``steps`` on its single row, as ``rounds.py`` places a round of one block: the
    micro-batch that starts earliest among those with room (those without look full: + 4 big), the same
    arithmetic in the same order."""
    eff, room = cells.eff[steps, 0], cells.room[steps, 0]  # (n, cols) copies
    short = room < t[:, None]
    col = (eff + short * (4.0 * cells.big[steps])[:, None]).argmin(axis=1)  # + 0 where every micro-batch has room
    lacks = room[np.arange(steps.size), col] < t
    if lacks.any():
        cells.overflow_tokens += np.bincount(steps[lacks], t[lacks], minlength=cells.load.shape[0])
    old = cells.load[steps, 0, col]
    new = old + c
    cells.load[steps, 0, col] = new
    cells.eff[steps, 0, col] = new + np.broadcast_to(cells.penalty, cells.load.shape)[steps, 0, col]
    tk = cells.tokens[steps, 0, col] + t
    cells.tokens[steps, 0, col] = tk
    cells.room[steps, 0, col] = cells.room_after(tk)
    cells.work[steps, 0] += new - old
    cells.peak[steps, 0] = np.maximum(cells.peak[steps, 0], new)
