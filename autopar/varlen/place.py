"""The placement engine behind the balanced strategies: greedy LPT, vectorized over steps.

The work of one training step is a grid of *cells*: one per row (a rank, or a
CP group of identical ranks) and micro-batch. A cell holds a load in seconds
and a number of tokens, bounded by a token capacity (activation memory).
Sequences are placed largest first, each where it leaves the least-loaded
rank: Graham's LPT rule (Graham 1969), never worse than 4/3 - 1/(3m) of the
optimum on m identical machines. "Load" is the rank's pipeline time,
sum + (pp - 1) * max over its micro-batches (``pipeline.py``); with pp = 1 that
is its plain work. Inside the chosen rank the sequence takes the micro-batch
that starts earliest and still has token room. A sequence that needs a CP group
of g ranks takes an aligned block of g rows in one micro-batch; the block's
ranks start together, so the cell becomes ``max(block loads) + cost`` on all of
them (the faster ranks wait, as real ring attention makes them). Groups are
placed before single ranks, largest first, as Megatron's hybrid CP schedules
its largest groups first.

Exact LPT is sequential: 4,096 sequences x 1,000 steps of arg-min in Python is
seconds. Two knobs (``Greedy``) make it fast while keeping the answer close:

- ``round_frac``: place a *round* of items at once, the k-th largest on the
  k-th least-loaded block of rows (at most one item per block; ``round_frac``
  of the blocks are offered per round; 0 means one item per round: exact LPT).
  An item is taken in the round only while LPT would have made the same choice:
  block k must not be busier than an earlier block will be once it holds its
  item; the rest wait for the next round.
- ``light_frac``: single-rank items costing below ``light_frac`` x the mean
  cell load are poured as a fluid (water-filling: rows up to a common pipeline
  time, then inside each row its emptiest micro-batches first, capped by token
  room). LPT places such small items last and they level the cells to within
  one small item, so pouring differs from LPT by at most one small item per cell.

With a single row (a dp 1 fixed-CP plan, a one-rank pool) LPT only chooses
among micro-batches, and a FAST round takes up to ``ROW_ITEMS`` items at once
while one-by-one LPT would place them the same way (``_place_column_rounds``).

Every array has the steps on axis 0, so one call simulates many steps.
``tests/unit/varlen/test_varlen_assign.py`` checks FAST against EXACT (within 1.5% of the
mean step time; 0.3% or less measured on the long-context example) and EXACT
against a brute-force optimum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from autopar.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class Greedy:
    """How exactly to run LPT: (0, 0) is exact; ``FAST`` trades well under 1% of step time for 25-50x speed."""

    light_frac: float = 0.0  # pour items costing below this fraction of the mean cell load as a fluid
    round_frac: float = 0.0  # fraction of row blocks that get an item per round (0: one item per round)

    def __post_init__(self) -> None:
        if not 0.0 <= self.light_frac < 1.0 or not 0.0 <= self.round_frac <= 1.0:
            raise SpecError(f"Greedy: light_frac must be in [0, 1) and round_frac in [0, 1], got {self}")


EXACT = Greedy()
FAST = Greedy(light_frac=0.25, round_frac=1.0)
ROW_ITEMS = 64  # FAST on one row places up to this many items per step and round (_place_column_rounds)
COMPACT = 0.7  # place() drops finished steps from its rounds once fewer than this share are still going


class Cells:
    """Working state of one batch of steps: load (s), tokens, per step x row x micro-batch.

    Columns at or past ``open_cols[s]`` (a quarter more, at least one) are
    *reserve* micro-batches: they are used only when no open micro-batch has
    room, and then they are real micro-batches like the others.
    """

    def __init__(self, *, steps: int, rows: int, open_cols: np.ndarray, cap_tokens: float,
                 hard_cap_tokens: float, big_s: np.ndarray, pp: int) -> None:
        cols = int(open_cols.max()) + max(1, int(open_cols.max()) // 4)
        self.load = np.zeros((steps, rows, cols))
        self.tokens = np.zeros((steps, rows, cols))
        self.big = np.asarray(big_s, dtype=np.float64)  # (S,) larger than any load of its step
        self.open = (np.arange(cols)[None, :] < open_cols[:, None])[:, None, :]  # (S, 1, cols)
        self.penalty = np.where(self.open, 0.0, self.big[:, None, None])
        self.cap = float(cap_tokens)  # tokens a shared cell may hold
        self.hard_cap = float(hard_cap_tokens)  # tokens one sequence may bring to an empty cell
        self.pp = pp  # pipeline stages: a row's time is sum + (pp - 1) * max over its cells
        self.overflow_tokens = np.zeros(steps)  # tokens placed beyond the memory limit
        # kept up to date by place(), so a round touches few (S, rows, cols) arrays
        self.eff = self.load + self.penalty  # load as the chooser sees it: reserve cells look full
        self.room = np.full(self.load.shape, self.hard_cap)  # tokens the cell can still take
        self.work = np.zeros((steps, rows))  # sum of a row's cells
        self.peak = np.zeros((steps, rows))  # largest cell of a row


def place(cells: Cells, cost: np.ndarray, tokens: np.ndarray, group: int, greedy: Greedy, *,
          start: np.ndarray | None = None, stop: np.ndarray | None = None) -> None:
    """Place items (S, H), sorted by decreasing cost per row, on aligned blocks of ``group`` rows.

    ``cost`` is each item's seconds on each rank of its block, ``tokens`` its
    tokens per rank. Row s places its items ``start[s]:stop[s]`` (default: all
    up to the first padding item, cost 0 and tokens 0); every item in that
    range is placed, whatever its cost.
    In each block the item goes to the micro-batch that can start earliest and
    has room; among blocks, "least loaded" is the one whose slowest rank ends
    with the smallest pipeline time, sum + (pp - 1) * max over the rank's
    micro-batches (with pp = 1: the least work).

    Speed: the state is read and written through flat indices (one index array
    per access, not three broadcast ones), only the items a round takes are
    written, steps with nothing left drop out of the rounds, and a block's
    micro-batch is found by a plain arg-min of its start times, re-done with
    the room mask only for the blocks whose earliest micro-batch lacks room
    (the same choice as masking them all).
    """
    if group == 1 and greedy.round_frac > 0 and cells.load.shape[1] == 1 and cells.load.shape[2] > 1:
        _place_column_rounds(cells, cost, tokens, start=start, stop=stop)
        return
    _place_rounds(cells, cost, tokens, group, greedy, start=start, stop=stop)


def _place_rounds(cells: Cells, cost: np.ndarray, tokens: np.ndarray, group: int, greedy: Greedy, *,
                  start: np.ndarray | None = None, stop: np.ndarray | None = None) -> None:
    """``place`` by rounds of at most one item per block (see the module doc)."""
    steps, rows, cols = cells.load.shape
    blocks = rows // group
    used = blocks * group  # a pool that is not a multiple of the group leaves its last ranks out
    per_round = 1 if greedy.round_frac <= 0 else max(1, int(greedy.round_frac * blocks))
    width = cost.shape[1]
    total = ((cost > 0) | (tokens > 0)).sum(axis=1) if stop is None else np.asarray(stop)  # end of each step's items
    ptr = np.zeros(steps, dtype=np.int64) if start is None else start.astype(np.int64)  # next item of each step
    live = np.flatnonzero(ptr < total)  # the steps still placing items (global ids); per-step arrays follow it
    if not live.size:
        return
    item_cost = np.ascontiguousarray(cost, dtype=np.float64).reshape(-1)
    item_tokens = np.ascontiguousarray(tokens, dtype=np.float64).reshape(-1)
    load, eff, tok, room = (_flat(a) for a in (cells.load, cells.eff, cells.tokens, cells.room))
    work, peak, penalty = _flat(cells.work), _flat(cells.peak), cells.penalty.reshape(-1)  # penalty: (S * cols)
    stalls = cells.pp - 1
    offsets = np.arange(per_round)[None, :]
    lane = np.arange(group)
    if group == 1:  # views: updating the cells updates the blocks
        beff, broom = cells.eff, cells.room
    else:  # a block's micro-batch starts when its busiest rank is free and holds what its fullest can
        beff = cells.eff[:, :used].reshape(steps, blocks, group, cols).max(axis=2)
        broom = cells.room[:, :used].reshape(steps, blocks, group, cols).min(axis=2)
    beff_f, broom_f = _flat(beff), _flat(broom)
    beff_rows, broom_rows = beff_f.reshape(-1, cols), broom_f.reshape(-1, cols)
    ptr, total = ptr[live], total[live]
    n_live, fresh = live.size, True
    while n_live:
        if n_live < COMPACT * live.size:  # drop the finished steps
            keep = np.flatnonzero(ptr < total)
            live, ptr, total, fresh = live[keep], ptr[keep], total[keep], True
        if fresh:
            whole = live.size == steps  # no step left out: plain views instead of gathers
            first_item = (live * width)[:, None]
            last_item = first_item + (width - 1)
            first_cell = ((live * blocks)[:, None] + np.arange(blocks)[None, :]) * cols  # (L, blocks) flat cells
            row_start = (np.arange(live.size) * blocks)[:, None]
            no_room = 4.0 * cells.big[live]
            leading = np.zeros((live.size, per_round + 1), dtype=bool)  # taken items: the leading True run
            block_rows = (live * rows)[:, None, None] + np.arange(used).reshape(1, blocks, group)
            fresh = False
        inside = offsets < (total - ptr)[:, None]
        at_item = np.minimum(first_item + ptr[:, None] + offsets, last_item)
        # items past a step's end are never taken (inside is a prefix), so their values do not matter
        c = item_cost[at_item]
        t = item_tokens[at_item]
        c0 = c[:, :1]
        t0 = np.where(inside[:, :1], t[:, :1], 0.0)  # a finished step asks for no room
        # each block's earliest micro-batch; where it lacks room for the round's first (largest) item, the
        # earliest with room (micro-batches without room look full: + no_room)
        if whole:
            col = beff.argmin(axis=2)
        elif 2 * live.size >= steps:
            col = beff.argmin(axis=2)[live]
        else:
            col = beff[live].argmin(axis=2)
        cell = first_cell + col  # (L, blocks) flat index into the blocks' cells
        chosen = beff_f[cell]
        short = broom_f[cell] < t0
        if short.any():
            ss, sb = np.nonzero(short)
            gss = live[ss]
            at_block = gss * blocks + sb  # rows of the (steps * blocks, cols) views: one take each
            masked = beff_rows.take(at_block, axis=0)
            masked += no_room[ss, None] * (broom_rows.take(at_block, axis=0) < t0[ss])
            better = masked.argmin(axis=1)
            col[ss, sb] = better
            chosen[ss, sb] = masked[np.arange(ss.size), better]
            cell[ss, sb] = at_block * cols + better
        if group == 1:
            at = load[cell]  # (L, blocks) load of that micro-batch
            begin = at
            end = begin + c0  # scored with the round's largest item
            after = (cells.work if whole else work[block_rows[:, :, 0]]) + (end - at)
            if stalls:
                after += stalls * np.maximum(cells.peak if whole else peak[block_rows[:, :, 0]], end)
        else:
            at = load[block_rows * cols + col[:, :, None]]  # (L, blocks, group) loads in that micro-batch
            begin = _lanes(np.maximum, at)  # the block's ranks start together
            end = begin + c0
            end3 = end[:, :, None]
            after3 = work[block_rows] + (end3 - at)
            if stalls:
                after3 += stalls * np.maximum(peak[block_rows], end3)
            after = _lanes(np.maximum, after3)
        score = after + (chosen - begin) + 1e-6 * end  # + penalty / no-room
        if per_round == 1:
            block = score.argmin(axis=1)[:, None]
            n_take = inside[:, 0].astype(np.int64)
        else:
            if per_round < blocks:
                part = np.argpartition(score, per_round - 1, axis=1)[:, :per_round]
                block = np.take_along_axis(part, np.argsort(np.take_along_axis(score, part, 1), axis=1), 1)
            else:
                block = np.argsort(score, axis=1)
            # k-th largest item to k-th least-loaded block, while LPT would do the same: block k must not
            # be busier than an earlier block will be once it holds its item.
            sc = score.reshape(-1)[row_start + block] - c0
            reach = np.minimum.accumulate(sc + c, axis=1)
            leading[:, 0] = inside[:, 0]
            np.less_equal(sc[:, 1:], reach[:, :-1], out=leading[:, 1:-1])
            leading[:, 1:-1] &= inside[:, 1:]
            n_take = leading.argmin(axis=1)  # the first False; the last column is always False
        ptr += n_take
        n_live = int(np.count_nonzero(ptr < total))
        # write the taken items only (the others leave the cells as they are); their blocks are distinct
        f = np.flatnonzero(offsets < n_take[:, None])  # flat (step, k) of the taken items
        si = f // per_round  # local step
        gs = live[si]  # global step
        b = block.reshape(-1)[f]
        sb = si * blocks + b  # flat local (step, block)
        bcell = cell.reshape(-1)[sb]
        bcol = col.reshape(-1)[sb]
        ci, ti = c.reshape(-1)[f], t.reshape(-1)[f]
        overflow = broom_f[bcell] < ti  # each item against its own micro-batch
        if overflow.any():
            cells.overflow_tokens += np.bincount(gs[overflow], (ti * group)[overflow], minlength=steps)
        new = begin.reshape(-1)[sb] + ci
        new_eff = new + penalty[gs * cols + bcol]
        if group == 1:
            ri, fi = gs * blocks + b, bcell
        else:
            ri = ((gs * blocks + b) * group)[:, None] + lane + (gs * (rows - used))[:, None]  # flat (step, row)
            fi = ri * cols + bcol[:, None]
            new, new_eff, ti = new[:, None], new_eff[:, None], ti[:, None]
        old = load[fi]
        load[fi] = new
        eff[fi] = new_eff
        tk = tok[fi] + ti
        tok[fi] = tk
        rm = cells.cap - tk + (cells.hard_cap - cells.cap) * (tk <= 0)
        room[fi] = rm
        work[ri] += new - old
        peak[ri] = np.maximum(peak[ri], new)
        if group > 1:
            beff_f[bcell] = new_eff[:, 0]
            broom_f[bcell] = _lanes(np.minimum, rm)


def _place_column_rounds(cells: Cells, cost: np.ndarray, tokens: np.ndarray, *, start: np.ndarray | None,
                         stop: np.ndarray | None) -> None:
    """``place`` on a single row of single ranks: up to ``ROW_ITEMS`` items per step and round, as exact LPT.

    With one row, LPT puts each item on the micro-batch that starts earliest
    and has room. A round offers the next items to the emptiest micro-batches
    that have room for all of them, the k-th item to the k-th emptiest; item k
    is taken while that micro-batch still starts no later than the ones the
    round filled before it and than any left out that has room for it, and is
    open. A step whose first item fails places it by ``_place_rounds``.
    """
    steps, _, cols = cells.load.shape
    total = ((cost > 0) | (tokens > 0)).sum(axis=1) if stop is None else np.asarray(stop)
    ptr = np.zeros(steps, dtype=np.int64) if start is None else start.astype(np.int64)
    width = cost.shape[1]
    item_cost = np.ascontiguousarray(cost, dtype=np.float64).reshape(-1)
    item_tokens = np.ascontiguousarray(tokens, dtype=np.float64).reshape(-1)
    load, eff, tok, room = (_flat(a) for a in (cells.load, cells.eff, cells.tokens, cells.room))
    work, peak = _flat(cells.work), _flat(cells.peak)
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
        part = (np.argpartition(e_in, k_items - 1, axis=1)[:, :k_items] if k_items < cols
                else np.broadcast_to(np.arange(cols), e_in.shape))
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
            room[fi] = cells.cap - tk + (cells.hard_cap - cells.cap) * (tk <= 0)
            ri = live[f // k_items]
            work += np.bincount(ri, ci, minlength=steps)
            np.maximum.at(peak, ri, new)
            ptr[live] += n_take
        stuck = live[inside[:, 0] & (n_take == 0)]
        if stuck.size:  # the emptiest micro-batch lacks room for it, or is a reserve one: LPT as before
            hi = ptr.copy()
            hi[stuck] += 1
            _place_rounds(cells, cost, tokens, 1, EXACT, start=ptr.copy(), stop=hi)
            ptr[stuck] += 1


def _lanes(op: np.ufunc, x: np.ndarray) -> np.ndarray:
    """Reduce the last (short) axis with ``op`` by halving: far faster than ``op.reduce`` over a short axis."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        head = op(x[..., :half], x[..., half:2 * half])
        if x.shape[-1] % 2:
            head[..., :1] = op(head[..., :1], x[..., -1:])
        x = head
    return x[..., 0]


def _flat(a: np.ndarray) -> np.ndarray:
    """A 1-D view of a C-contiguous array (writes through it update ``a``)."""
    if not a.flags.c_contiguous:
        raise ValueError("expected a C-contiguous array")
    return a.reshape(-1)


def pour(cells: Cells, cost: np.ndarray, tokens: np.ndarray) -> None:
    """Pour ``cost`` seconds carried by ``tokens`` tokens (per step) over the cells.

    Water-filling on pipeline time: every row that gets fluid ends at the same
    time T* = work + (pp - 1) * slowest micro-batch, and inside a row the fluid
    fills the emptiest micro-batches first (to a row level lambda), each capped
    by its token room times the fluid's seconds per token (``pipeline_fill``).
    Open micro-batches are used before reserve ones; what fits nowhere is spread
    evenly and counted as overflow. Pouring ends a fill: it updates ``load``,
    ``tokens`` and ``overflow_tokens`` only, not the chooser's views that
    ``place`` keeps (``eff``, ``room``, ``work``, ``peak``).
    """
    has = tokens > 0
    if not has.any():
        return
    density = np.where(has, cost / np.where(has, tokens, 1.0), 0.0)  # seconds per token of the fluid
    per_token = np.where(density > 0, density, 1.0)
    cap = np.clip(cells.cap - cells.tokens, 0.0, None) * density[:, None, None]
    left = np.where(has, cost, 0.0)
    fill = None
    for usable in (cells.open, ~cells.open):
        if not (left > 1e-9 * np.maximum(cost, 1e-300)).any():
            break
        more = pipeline_fill(cells.load if fill is None else cells.load + fill, cap * usable, left, cells.pp)
        fill = more if fill is None else fill + more
        left = np.clip(left - more.sum(axis=(1, 2)), 0.0, None)
    if fill is None:
        fill = np.zeros_like(cells.load)
    spill = np.where(left > 1e-9 * np.maximum(cost, 1e-300), left, 0.0)
    if spill.any():  # no room anywhere: spread the rest over the open cells, count it
        opened = np.broadcast_to(cells.open, fill.shape)
        fill += np.where(opened, spill[:, None, None] / opened.sum(axis=(1, 2))[:, None, None], 0.0)
        cells.overflow_tokens += spill / per_token
    cells.load += fill
    cells.tokens += fill / per_token[:, None, None]


def pipeline_fill(load: np.ndarray, cap: np.ndarray, amount: np.ndarray, pp: int) -> np.ndarray:
    """Fills (S, R, M) that pour ``amount`` (S,) so the rows that take any end at one pipeline time.

    A row of work W and slowest micro-batch P starts at T0 = W + (pp - 1) P.
    Poured lowest-first, its first A1 = sum_j min(P - s_j, cap_j) seconds stay
    below P and raise T one for one. Beyond that its cells rise above P
    together, each by at most r_j = (s_j + cap_j - P)+, and T grows by the
    fluid plus (pp - 1) times the rise x: a(x) = A1 + sum_j min(x, r_j) and
    T(x) = T0 + a(x) + (pp - 1) min(x, max_j r_j), piecewise linear with
    breakpoints at the sorted r_j. Each row's a(T) is read off that table; the
    common T* comes from a safeguarded Newton iteration over all steps at once;
    ``_spread`` then fills each row's amount lowest-first.
    """
    peak = load.max(axis=-1)
    base = load.sum(axis=-1) + (pp - 1) * peak
    below = np.minimum(peak[..., None] - load, cap).sum(axis=-1)  # A1
    rise = np.sort(np.clip(load + cap - peak[..., None], 0.0, None), axis=-1)  # r_j ascending
    cols = rise.shape[-1]
    g = _cumsum_rows(rise.reshape(-1, cols)).reshape(rise.shape) + (cols - 1 - np.arange(cols)) * rise  # sum_j min(r_k, r_j)
    a_tab = np.concatenate([np.zeros_like(below)[..., None], below[..., None], below[..., None] + g], axis=-1)
    t_tab = np.concatenate([base[..., None], (base + below)[..., None],
                            (base + below)[..., None] + g + (pp - 1) * rise], axis=-1)

    def taken(level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's amount a(T) at pipeline time ``level`` (S,), and its slope da/dT there."""
        k = (t_tab < level[:, None, None]).sum(axis=-1)
        hi = np.minimum(k, t_tab.shape[-1] - 1)[..., None]
        lo = np.maximum(k - 1, 0)[..., None]
        t0, t1 = np.take_along_axis(t_tab, lo, -1)[..., 0], np.take_along_axis(t_tab, hi, -1)[..., 0]
        v0, v1 = np.take_along_axis(a_tab, lo, -1)[..., 0], np.take_along_axis(a_tab, hi, -1)[..., 0]
        span = t1 - t0
        slope = np.where(span > 0, (v1 - v0) / np.where(span > 0, span, 1.0), 0.0)
        return v0 + slope * np.clip(level[:, None] - t0, 0.0, None) * (span > 0), slope

    # Safeguarded Newton on F(T) = sum of the rows' a(T), piecewise linear: each step lands on the root
    # unless it crosses a breakpoint; a step out of the bracket falls back to bisection.
    full = a_tab[..., -1].sum(axis=1)
    lo_t, hi_t = t_tab[..., 0].min(axis=1), t_tab[..., -1].max(axis=1)
    level = lo_t.copy()
    for _ in range(60):
        got, slope = taken(level)
        f, df = got.sum(axis=1), slope.sum(axis=1)
        miss = amount - f
        open_ = np.abs(miss) > 1e-10 * np.maximum(amount, 1e-300)  # steps still iterating; the others stay put
        if not open_.any():
            break
        lo_t, hi_t = np.where(miss > 0, level, lo_t), np.where(miss > 0, hi_t, level)
        step = level + miss / np.where(df > 0, df, np.inf)
        inside = (step > lo_t) & (step < hi_t) & (df > 0)
        level = np.where(open_, np.where(inside, step, 0.5 * (lo_t + hi_t)), level)
    rows = np.where((full > amount)[:, None], taken(level)[0], a_tab[..., -1])
    total = rows.sum(axis=1)
    rows = rows * np.where(total > amount, amount / np.where(total > 0, total, 1.0), 1.0)[:, None]
    # Rows that rise above their peak: their level is peak + x, with x read off the same table.
    x_tab = np.concatenate([np.zeros_like(below)[..., None], np.zeros_like(below)[..., None], rise], axis=-1)
    k = (a_tab < rows[..., None]).sum(axis=-1)
    hi = np.minimum(k, a_tab.shape[-1] - 1)[..., None]
    lo = np.maximum(k - 1, 0)[..., None]
    a0, a1 = np.take_along_axis(a_tab, lo, -1)[..., 0], np.take_along_axis(a_tab, hi, -1)[..., 0]
    x0, x1 = np.take_along_axis(x_tab, lo, -1)[..., 0], np.take_along_axis(x_tab, hi, -1)[..., 0]
    span = a1 - a0
    lam = peak + x0 + (x1 - x0) * np.clip((rows - a0) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    fill = np.clip(lam[..., None] - load, 0.0, cap) * (rows > 0)[..., None]
    low = (rows > 0) & (rows < below)  # rows that stay below their peak: capped leveling underneath
    if low.any():
        at = np.flatnonzero(low)
        cols = load.shape[-1]
        fill.reshape(-1, cols)[at] = _spread(load.reshape(-1, cols)[at][None], cap.reshape(-1, cols)[at][None],
                                             rows.reshape(-1)[at][None])[0]
    return fill


def _spread(load: np.ndarray, cap: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Split each row's ``amount`` over its cells, lowest first, within ``cap``: (S, R, M) fills.

    Capped water-filling by rounds: level the free cells as if uncapped; a cell
    whose cap lies below that level is full in the capped answer too (capping
    only raises the level), so fix it at its cap and level the rest again.
    """
    steps, rows, cols = load.shape
    base = load.reshape(-1, cols)
    limit = cap.reshape(-1, cols)
    fill = np.zeros_like(base)
    fixed = limit <= 0  # cells out of the game: no room, or already full
    left = amount.reshape(-1).copy()
    tiny = 1e-12 * left
    active = np.flatnonzero(left > tiny)
    while active.size:
        every = active.size == base.shape[0]  # the first round usually has every row: no gathers
        b, fx, lim = (base, fixed, limit) if every else (base[active], fixed[active], limit[active])
        lam = _level(b, fx, left[active])
        trial = np.clip(lam[:, None] - b, 0.0, None) * ~fx
        over = trial > lim
        done = ~over.any(axis=1)
        fill[active[done]] += trial[done]
        rows_full = active[~done]
        full = over[~done] * lim[~done]
        fill[rows_full] += full
        left[rows_full] -= full.sum(axis=1)
        fixed[rows_full] |= over[~done]
        active = rows_full[left[rows_full] > tiny[rows_full]]
    return fill.reshape(steps, rows, cols)


def _level(base: np.ndarray, fixed: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Uncapped water level per row over the cells not ``fixed``: sum_k (lam - base_k)+ = amount."""
    cols = base.shape[1]
    huge = 1e300
    srt = np.sort(np.where(fixed, huge, base), axis=1)  # fixed cells sort last
    free = srt < huge
    count = np.arange(1, cols + 1)
    levels = _cumsum_rows(srt * free)
    levels += amount[:, None]
    levels /= count  # level if the lowest k cells share it
    valid = free & (levels >= srt)
    k = cols - 1 - np.argmax(valid[:, ::-1], axis=1)
    lam = np.take_along_axis(levels, k[:, None], 1)[:, 0]
    return np.where(valid.any(axis=1), lam, -np.inf)  # no free cell: nothing more can be placed


def _cumsum_rows(x: np.ndarray) -> np.ndarray:
    """``np.cumsum(x, axis=1)`` (the same sums, in the same order), column by column when there are many rows."""
    if x.shape[0] < 256:
        return np.cumsum(x, axis=1)
    out = np.empty_like(x)
    out[:, 0] = x[:, 0]
    for j in range(1, x.shape[1]):
        np.add(out[:, j - 1], x[:, j], out=out[:, j])
    return out


def gather_sorted(mask: np.ndarray, key: np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray],
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
