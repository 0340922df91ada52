"""LPT by rounds on many rows: at most one item per block of rows and round, all steps at once.

A round offers each step's next items to its blocks of ``group`` rows: the
k-th largest item to the k-th least-loaded block (``round_frac`` of the
blocks are offered; with ``EXACT`` one item per round). An item is taken
while LPT would have made the same choice: block k must not be busier than
an earlier block will be once it holds its item; the rest wait for the next
round. In a block the item takes the micro-batch that can start earliest
and has room; among blocks, "least loaded" is the one whose slowest rank
ends with the smallest pipeline time, sum + (pp - 1) * max over the rank's
micro-batches. A block's ranks start together: the cell becomes
``max(block loads) + cost`` on all of them.

Speed: the state is read and written through flat indices (one index array
per access, not three broadcast ones), only the items a round takes are
written, steps with nothing left drop out of the rounds (``COMPACT``), and a
block's micro-batch is found by a plain arg-min of its start times, re-done
with the room mask only for the blocks whose earliest micro-batch lacks room
(the same choice as masking them all).
"""

from __future__ import annotations

import numpy as np

from autopar.varlen.cells import Cells, Greedy, flat, items_range, lanes

COMPACT = 0.7  # finished steps leave the rounds once fewer than this share are still going


class _Grid:
    """Flat views of the cells and of the items, for one call; blocks of ``group`` rows."""

    def __init__(self, cells: Cells, cost: np.ndarray, tokens: np.ndarray, group: int, greedy: Greedy) -> None:
        self.cells = cells
        self.steps, self.rows, self.cols = steps, rows, cols = cells.load.shape
        self.group = group
        self.blocks = blocks = rows // group
        self.used = used = blocks * group  # a pool that is not a multiple of the group leaves its last ranks out
        self.per_round = 1 if greedy.round_frac <= 0 else max(1, int(greedy.round_frac * blocks))
        self.width = cost.shape[1]
        self.item_cost = np.ascontiguousarray(cost, dtype=np.float64).reshape(-1)
        self.item_tokens = np.ascontiguousarray(tokens, dtype=np.float64).reshape(-1)
        self.load, self.eff, self.tok, self.room = (flat(a) for a in (cells.load, cells.eff, cells.tokens, cells.room))
        self.work, self.peak = flat(cells.work), flat(cells.peak)
        self.penalty = np.ascontiguousarray(np.broadcast_to(cells.penalty, cells.load.shape)).reshape(-1)  # per cell
        self.stalls = cells.pp - 1
        self.offsets = np.arange(self.per_round)[None, :]
        self.lane = np.arange(group)
        if group == 1:  # views: updating the cells updates the blocks
            self.beff, self.broom = cells.eff, cells.room
        else:  # a block's micro-batch starts when its busiest rank is free and holds what its fullest can
            self.beff = cells.eff[:, :used].reshape(steps, blocks, group, cols).max(axis=2)
            self.broom = cells.room[:, :used].reshape(steps, blocks, group, cols).min(axis=2)
        self.beff_f, self.broom_f = flat(self.beff), flat(self.broom)
        self.beff_rows, self.broom_rows = self.beff_f.reshape(-1, cols), self.broom_f.reshape(-1, cols)
        # the masked search's rows, written in place: fresh temporaries this large cost page faults each round
        self.buf_eff, self.buf_room = np.empty((steps * blocks, cols)), np.empty((steps * blocks, cols))
        self.buf_short = np.empty((steps * blocks, cols), dtype=bool)


class _Live:
    """Index arrays over the steps still placing items (global ids ``live``); rebuilt when some finish."""

    def __init__(self, g: _Grid, live: np.ndarray) -> None:
        blocks, width = g.blocks, g.width
        self.live = live
        self.whole = live.size == g.steps  # no step left out: plain views instead of gathers
        self.first_item = (live * width)[:, None]
        self.last_item = self.first_item + (width - 1)
        self.item_base = self.first_item + g.offsets  # (L, per_round) the round's items at ptr 0
        self.global_block = ((live * blocks)[:, None] + np.arange(blocks)[None, :]).reshape(-1)  # local -> global (step, block)
        self.first_cell = ((live * blocks)[:, None] + np.arange(blocks)[None, :]) * g.cols  # (L, blocks) flat cells
        self.row_start = (np.arange(live.size) * blocks)[:, None]
        self.no_room = 4.0 * g.cells.big[live]
        self.leading = np.zeros((live.size, g.per_round + 1), dtype=bool)  # taken items: the leading True run
        self.block_rows = (live * g.rows)[:, None, None] + np.arange(g.used).reshape(1, blocks, g.group)


def place_rounds(
    cells: Cells,
    cost: np.ndarray,
    tokens: np.ndarray,
    group: int,
    greedy: Greedy,
    *,
    start: np.ndarray | None = None,
    stop: np.ndarray | None = None,
) -> None:
    """``place`` by rounds of at most one item per block (see the module doc)."""
    ptr, total = items_range(cost, tokens, start, stop)
    live = np.flatnonzero(ptr < total)
    if not live.size:
        return
    g = _Grid(cells, cost, tokens, group, greedy)
    ptr, total = ptr[live], total[live]
    n_live, lv = live.size, _Live(g, live)
    while n_live:
        if n_live < COMPACT * lv.live.size:  # drop the finished steps
            keep = np.flatnonzero(ptr < total)
            lv, ptr, total = _Live(g, lv.live[keep]), ptr[keep], total[keep]
        inside = g.offsets < (total - ptr)[:, None]
        at_item = np.minimum(lv.item_base + ptr[:, None], lv.last_item)
        # items past a step's end are never taken (inside is a prefix), so their values do not matter
        c = g.item_cost[at_item]
        t = g.item_tokens[at_item]
        c0 = c[:, :1]
        t0 = np.where(inside[:, :1], t[:, :1], 0.0)  # a finished step asks for no room
        col, cell, chosen = _earliest(g, lv, t0)
        begin, score = _scores(g, lv, col, cell, chosen, c0)
        block, n_take, sb = _taken(g, lv, score, c, c0, inside)
        ptr += n_take
        n_live = int(np.count_nonzero(ptr < total))
        _write(g, lv, n_take, block, sb, cell, col, begin, c, t)


def _earliest(g: _Grid, lv: _Live, t0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each block's earliest micro-batch; where it lacks room for the round's first (largest) item, the
    earliest with room (micro-batches without room look full: + no_room). Column, flat cell, start."""
    live = lv.live
    if lv.whole:
        col = g.beff.argmin(axis=2)
    elif 2 * live.size >= g.steps:
        col = g.beff.argmin(axis=2)[live]
    else:
        col = g.beff[live].argmin(axis=2)
    cell = lv.first_cell + col  # (L, blocks) flat index into the blocks' cells
    chosen = g.beff_f[cell]
    short = g.broom_f[cell] < t0
    if short.any():
        fs = np.flatnonzero(short)  # flat local (step, block)
        ss = fs // g.blocks
        at_block = lv.global_block[fs]  # rows of the (steps * blocks, cols) views: one take each
        n = fs.size
        masked, room, lacks = g.buf_eff[:n], g.buf_room[:n], g.buf_short[:n]
        np.take(g.beff_rows, at_block, axis=0, out=masked, mode="clip")  # in range: clip only skips a copy
        np.take(g.broom_rows, at_block, axis=0, out=room, mode="clip")
        np.less(room, t0.reshape(-1)[ss, None], out=lacks)
        masked += np.multiply(lacks, lv.no_room[ss, None], out=room)  # + no_room where the room is short
        better = masked.argmin(axis=1)
        col.reshape(-1)[fs] = better
        chosen.reshape(-1)[fs] = masked[np.arange(fs.size), better]
        cell.reshape(-1)[fs] = at_block * g.cols + better
    return col, cell, chosen


def _scores(g: _Grid, lv: _Live, col: np.ndarray, cell: np.ndarray, chosen: np.ndarray, c0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """When each block's micro-batch starts, and the block's score: its pipeline time once it holds the
    round's largest item (+ the chooser's penalty, + a tie-break to the earliest end)."""
    cells, stalls = g.cells, g.stalls
    if g.group == 1:
        at = g.load[cell]  # (L, blocks) load of that micro-batch
        begin = at
        end = begin + c0  # scored with the round's largest item
        after = (cells.work if lv.whole else g.work[lv.block_rows[:, :, 0]]) + (end - at)
        if stalls:
            after += stalls * np.maximum(cells.peak if lv.whole else g.peak[lv.block_rows[:, :, 0]], end)
    else:
        at = g.load[lv.block_rows * g.cols + col[:, :, None]]  # (L, blocks, group) loads in that micro-batch
        begin = lanes(np.maximum, at)  # the block's ranks start together
        end = begin + c0
        end3 = end[:, :, None]
        after3 = g.work[lv.block_rows] + (end3 - at)
        if stalls:
            after3 += stalls * np.maximum(g.peak[lv.block_rows], end3)
        after = lanes(np.maximum, after3)
    return begin, after + (chosen - begin) + 1e-6 * end  # + penalty / no-room


def _taken(
    g: _Grid, lv: _Live, score: np.ndarray, c: np.ndarray, c0: np.ndarray, inside: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blocks in the order the round offers them (L, per_round), how many items each step takes, and
    those blocks as flat indices into ``score`` (local (step, block))."""
    per_round, row_start, leading = g.per_round, lv.row_start, lv.leading
    if per_round == 1:
        block = score.argmin(axis=1)[:, None]
        return block, inside[:, 0].astype(np.int64), row_start + block
    if per_round < g.blocks:
        part = np.argpartition(score, per_round - 1, axis=1)[:, :per_round]
        block = np.take_along_axis(part, np.argsort(np.take_along_axis(score, part, 1), axis=1), 1)
    else:
        block = np.argsort(score, axis=1)
    # k-th largest item to k-th least-loaded block, while LPT would do the same: block k must not
    # be busier than an earlier block will be once it holds its item.
    at = row_start + block
    sc = score.reshape(-1)[at] - c0
    reach = np.minimum.accumulate(sc + c, axis=1)
    leading[:, 0] = inside[:, 0]
    np.less_equal(sc[:, 1:], reach[:, :-1], out=leading[:, 1:-1])
    leading[:, 1:-1] &= inside[:, 1:]
    return block, leading.argmin(axis=1), at  # the first False; the last column is always False


def _write(
    g: _Grid,
    lv: _Live,
    n_take: np.ndarray,
    block: np.ndarray,
    at: np.ndarray,
    cell: np.ndarray,
    col: np.ndarray,
    begin: np.ndarray,
    c: np.ndarray,
    t: np.ndarray,
) -> None:
    """Write the taken items only (the others leave the cells as they are); their blocks are distinct."""
    cells, blocks, group = g.cells, g.blocks, g.group
    f = np.flatnonzero(g.offsets < n_take[:, None])  # flat (step, k) of the taken items
    sb = at.reshape(-1)[f]  # flat local (step, block)
    bcell = cell.reshape(-1)[sb]
    ci, ti = c.reshape(-1)[f], t.reshape(-1)[f]
    overflow = g.broom_f[bcell] < ti  # each item against its own micro-batch
    if overflow.any():
        gs = lv.live[f // g.per_round]  # global step
        cells.overflow_tokens += np.bincount(gs[overflow], (ti * group)[overflow], minlength=g.steps)
    new = begin.reshape(-1)[sb] + ci
    if group == 1:
        ri, fi = (sb if lv.whole else lv.global_block[sb]), bcell
        new_eff = new + g.penalty[fi]
    else:
        gs, b, bcol = lv.live[f // g.per_round], block.reshape(-1)[f], col.reshape(-1)[sb]
        new_eff = new + g.penalty[(gs * g.rows) * g.cols + bcol]
        ri = ((gs * blocks + b) * group)[:, None] + g.lane + (gs * (g.rows - g.used))[:, None]  # flat (step, row)
        fi = ri * g.cols + bcol[:, None]
        new, new_eff, ti = new[:, None], new_eff[:, None], ti[:, None]
    old = g.load[fi]
    g.load[fi] = new
    g.eff[fi] = new_eff
    tk = g.tok[fi] + ti
    g.tok[fi] = tk
    rm = cells.room_after(tk)
    g.room[fi] = rm
    g.work[ri] += new - old
    g.peak[ri] = np.maximum(g.peak[ri], new)
    if group > 1:
        g.beff_f[bcell] = new_eff[:, 0]
        g.broom_f[bcell] = lanes(np.minimum, rm)
