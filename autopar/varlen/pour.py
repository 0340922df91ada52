"""Light items as a fluid: water-filling on pipeline time (``FAST``'s ``light_frac``).

Single-rank items costing below ``light_frac`` x the mean cell load are not
placed one by one: their seconds and tokens are poured over the cells, rows
up to a common pipeline time, inside a row its emptiest micro-batches first,
capped by token room. LPT places such small items last and they level the
cells to within one small item, so pouring differs from LPT by at most one
small item per cell.
"""

from __future__ import annotations

import numpy as np

from autopar.varlen.cells import Cells


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
    for usable in (cells.open, cells.spare):
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
    g = cumsum_rows(rise.reshape(-1, cols)).reshape(rise.shape) + (cols - 1 - np.arange(cols)) * rise  # sum_j min(r_k, r_j)
    a_tab = np.concatenate([np.zeros_like(below)[..., None], below[..., None], below[..., None] + g], axis=-1)
    t_tab = np.concatenate([base[..., None], (base + below)[..., None], (base + below)[..., None] + g + (pp - 1) * rise], axis=-1)

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
        fill.reshape(-1, cols)[at] = _spread(load.reshape(-1, cols)[at][None], cap.reshape(-1, cols)[at][None], rows.reshape(-1)[at][None])[
            0
        ]
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
    levels = cumsum_rows(srt * free)
    levels += amount[:, None]
    levels /= count  # level if the lowest k cells share it
    valid = free & (levels >= srt)
    k = cols - 1 - np.argmax(valid[:, ::-1], axis=1)
    lam = np.take_along_axis(levels, k[:, None], 1)[:, 0]
    return np.where(valid.any(axis=1), lam, -np.inf)  # no free cell: nothing more can be placed


def cumsum_rows(x: np.ndarray) -> np.ndarray:
    """``np.cumsum(x, axis=1)`` (the same sums, in the same order), column by column when there are many rows."""
    if x.shape[0] < 256:
        return np.cumsum(x, axis=1)
    out = np.empty_like(x)
    out[:, 0] = x[:, 0]
    for j in range(1, x.shape[1]):
        np.add(out[:, j - 1], x[:, j], out=out[:, j])
    return out
