"""Fixed-CP strategies: a step's sequences packed into micro-batches of one static mesh.

All strategies take ``lengths`` of shape (S, N) (S steps of N sequences; a 1-D
array is one step; zeros are padding) and return an :class:`Assignment`: a
cost grid (S, rows, micro-batches) in seconds per pipeline stage, from which
``pipeline.py`` derives step time, imbalance and pipeline stall.

A micro-batch on a fixed CP group of size ``cp`` costs what it does when it
runs (``seqcost.py``): every document's linear work and its own causal
attention (document masks), plus ONE ring exchange of the whole packed
micro-batch, less what that attention hides.

1. ``naive``: sequences in sampled order are packed next-fit into
   micro-batches of ``micro_batch_tokens`` tokens (the context window), dealt
   round-robin to the DP replicas. Packing equalizes tokens, not cost. This
   is the "Plain-4D" baseline of WLB-LLM (Wang et al., OSDI'25, sec. 7) and
   the static-mesh baseline of ByteScale (Ge et al. 2025, arXiv 2502.21231,
   sec. 8).
2. ``balanced``: the same window, but sequences placed by cost, longest first,
   on the least-loaded (replica, micro-batch) with room: LPT (Graham 1969),
   WLB-LLM's "fixed-length packing" baseline (sec. 7).
3. ``wlb`` (WLB-LLM, sec. 4): the same greedy, but a micro-batch may hold more
   tokens than the window, up to what the CP group's memory holds
   (variable-length packing), after ``outlier_delay`` (in ``simulate.py``)
   has held documents longer than ``OUTLIER_FRAC`` of the window back until
   there is one for every micro-batch of a step.

The pool strategies (one DP x CP pool of single ranks) are in ``pool.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar.errors import SpecError
from autopar.varlen.place import EXACT, Cells, Greedy, gather_sorted, place, pour
from autopar.varlen.seqcost import SeqCost, attention_one

SLAB = 128  # next_fit transposes this many sequences at a time (a slab of all steps stays in the caches)
TIGHT = 0.9  # share of the token room a step fills beyond which the fluid needs one cost per token (light)
TIGHT_SHARE = 0.125  # there the fluid takes the sequences under this share of the light threshold,
POUR_SPREAD = 0.01  # and those whose cost per token is within this share of the lightest's


@dataclass(frozen=True, slots=True, kw_only=True)
class VarlenPlan:
    """The parts of a parallel plan that matter to variable lengths."""

    dp: int  # data-parallel replicas
    cp: int  # context-parallel degree of the fixed plan (the pool is dp * cp ranks)
    pp: int  # pipeline stages
    micro_batch_tokens: int  # tokens in one micro-batch of one replica in the fixed plan (mbs * seq_len)
    max_tokens_per_rank: int  # tokens one GPU's activation memory holds in one micro-batch

    def __post_init__(self) -> None:
        for name in ("dp", "cp", "pp", "micro_batch_tokens", "max_tokens_per_rank"):
            if getattr(self, name) < 1:
                raise SpecError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.micro_batch_tokens > self.cp * self.max_tokens_per_rank:
            raise SpecError(
                f"micro_batch_tokens ({self.micro_batch_tokens}) does not fit: cp ({self.cp}) x "
                f"max_tokens_per_rank ({self.max_tokens_per_rank}) = {self.cp * self.max_tokens_per_rank}"
            )

    @property
    def pool_ranks(self) -> int:
        """Ranks in one pipeline stage's DP x CP pool."""
        return self.dp * self.cp

    @property
    def token_cap(self) -> float:
        """Tokens per rank per micro-batch in the fixed plan: the budget the pool strategies keep."""
        return self.micro_batch_tokens / self.cp

    @property
    def largest_group(self) -> int:
        """Largest power-of-two CP group that fits in the pool."""
        return 1 << (self.pool_ranks.bit_length() - 1)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Assignment:
    """Where one batch of steps went: cost and tokens per (step, row, micro-batch)."""

    strategy: str  # a strategy name (strategies.py)
    cell_cost_s: np.ndarray  # (S, rows, micro-batches) seconds per pipeline stage
    cell_tokens: np.ndarray  # (S, rows, micro-batches) tokens in the cell (a row's group; 1/g shares on pool ranks)
    gpus_per_row: int  # GPUs a row stands for (cp for fixed-CP strategies, 1 for the pool)
    group_size: np.ndarray  # (S, N) CP group size each sequence ran with, in the order given
    n_microbatches: np.ndarray  # (S,) micro-batches per row budgeted (before reserve ones)
    overflow_tokens: np.ndarray  # (S,) tokens placed beyond the memory limit


def steps_of(lengths: np.ndarray) -> np.ndarray:
    """(S, N) int64 lengths; zeros are padding."""
    arr = np.asarray(lengths)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise SpecError(f"lengths must be a non-empty (steps, sequences) array, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" or (arr < 0).any() or not (arr > 0).any(axis=1).all():
        raise SpecError("lengths must be integers >= 0 (0 pads), with a positive one in every step")
    return arr.astype(np.int64, copy=False)


def next_fit(lengths: np.ndarray, budget: float) -> np.ndarray:
    """Micro-batch index of each sequence, packing in order and opening a new one when full."""
    steps, n = lengths.shape
    ids = np.empty((steps, n), dtype=np.int64)
    fill = np.zeros(steps, dtype=lengths.dtype)
    mb = np.zeros(steps, dtype=np.int64)
    new = np.empty(steps, dtype=bool)
    positive = bool((lengths > 0).all())  # then a micro-batch holds tokens once opened: only item 0 finds it empty
    for first in range(0, n, SLAB):  # the loop runs over sequences, each step a lane: a slab at a time, transposed
        by_item = _transposed(lengths[:, first : first + SLAB])
        out = np.empty(by_item.shape, dtype=np.int64)
        for i, x in enumerate(by_item):
            np.add(fill, x, out=fill)
            np.greater(fill, budget, out=new)
            if not positive or first + i == 0:
                new &= fill > x  # the micro-batch was not empty before this sequence
            np.add(mb, new, out=mb)
            np.copyto(fill, x, where=new)
            out[i] = mb
        ids[:, first : first + SLAB] = _transposed(out)
    return ids


def _transposed(a: np.ndarray, tile: int = 128) -> np.ndarray:
    """C-contiguous copy of a 2-D array's transpose, copied in tiles (much faster than one strided copy)."""
    rows, cols = a.shape
    out = np.empty((cols, rows), dtype=a.dtype)
    for i in range(0, rows, tile):
        for j in range(0, cols, tile):
            out[j : j + tile, i : i + tile] = a[i : i + tile, j : j + tile].T
    return out


def deal(values: tuple[np.ndarray, ...], mb: np.ndarray, rows: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Sum each run of equal micro-batch ids and deal micro-batch k to row k % rows, slot k // rows.

    Returns the (S, rows, slots) grids of each value and the micro-batches per row.
    """
    steps, n = mb.shape
    n_mb = mb[:, -1] + 1
    cols = int(-(-n_mb.max() // rows))
    head = np.empty(mb.shape, dtype=bool)
    head[:, 0] = True
    np.not_equal(mb[:, 1:], mb[:, :-1], out=head[:, 1:])
    first = np.flatnonzero(head)
    ids = mb.reshape(-1)[first]
    cell = ((first // n) * rows + ids % rows) * cols + ids // rows
    grids = []
    for v in values:
        g = np.zeros((steps, rows, cols))
        g.reshape(-1)[cell] = np.add.reduceat(np.ascontiguousarray(v, dtype=np.float64).reshape(-1), first)
        grids.append(g)
    return tuple(grids), -(-n_mb // rows)


def packed_parts(lengths: np.ndarray, cost: SeqCost, cp: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document on a fixed CP group: (linear + attention, attention) seconds per rank.

    Inside a packed micro-batch a document's attention runs at the efficiency
    of its own length (the rank's chunk holds whole short documents).
    """
    attn = attention_one(cost, lengths) / cp
    return cost.linear(lengths, cp) + attn, attn


def with_exchange(cost: SeqCost, load: np.ndarray, tokens: np.ndarray, attn: np.ndarray, cp: int) -> np.ndarray:
    """Cell loads plus one CP exchange per non-empty micro-batch."""
    if cp == 1:
        return load
    return load + np.where(tokens > 0, cost.exposed(tokens, cp, attn), 0.0)


def _overflow(lengths: np.ndarray, hard: float) -> np.ndarray:
    over = lengths > hard
    return (lengths * over).sum(axis=1).astype(np.float64) if over.any() else np.zeros(lengths.shape[0])


def naive_packing(lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *, mb_ids: np.ndarray | None = None) -> Assignment:
    """Fixed CP, next-fit token packing in sampled order, micro-batches dealt round-robin.

    ``mb_ids`` may pass ``next_fit(lengths, plan.micro_batch_tokens)`` computed
    beforehand (it is a loop over sequences, cheaper over many steps at once).
    """
    lengths = steps_of(lengths)
    comp, attn = packed_parts(lengths, cost, plan.cp)
    mb = next_fit(lengths, plan.micro_batch_tokens) if mb_ids is None else mb_ids
    (load, tokens, attn_cells), m = deal((comp, lengths, attn), mb, plan.dp)
    return Assignment(
        strategy="naive",
        cell_cost_s=with_exchange(cost, load, tokens, attn_cells, plan.cp),
        cell_tokens=tokens,
        gpus_per_row=plan.cp,
        group_size=np.full(lengths.shape, plan.cp),
        n_microbatches=m,
        overflow_tokens=_overflow(lengths, plan.cp * plan.max_tokens_per_rank),
    )


def microbatches(lengths: np.ndarray, plan: VarlenPlan, n_microbatches: int | np.ndarray | None) -> np.ndarray:
    if n_microbatches is None:
        return -(-(next_fit(lengths, plan.micro_batch_tokens)[:, -1] + 1) // plan.dp)
    m = np.broadcast_to(np.asarray(n_microbatches, dtype=np.int64), (lengths.shape[0],))
    if (m < 1).any():
        raise SpecError(f"n_microbatches must be >= 1, got {m.min()}")
    return m


def light(cells: Cells, lengths: np.ndarray, w: np.ndarray, group: np.ndarray, level: np.ndarray, greedy: Greedy) -> np.ndarray:
    """The sequences FAST pours as a fluid: single-rank ones costing under ``light_frac`` x the mean cell load.

    A fluid has one cost per token, so where token room binds (a step's tokens
    fill more than ``TIGHT`` of its open micro-batches) it cannot mix dense and
    sparse sequences the way LPT does. There it takes only the sequences under
    ``TIGHT_SHARE`` of that threshold, and those whose cost per token is within
    ``POUR_SPREAD`` of the lightest's: one cost per token is then right for them.
    """
    rows, open_cols = cells.load.shape[1], cells.open.sum(axis=(1, 2))
    out = (lengths > 0) & (group == 1) & (w < greedy.light_frac * level[:, None])
    tight = lengths.sum(axis=1) > TIGHT * (rows * open_cols * cells.cap)
    if tight.any():
        density = w / np.maximum(lengths, 1)
        lowest = np.where(out, density, np.inf).min(axis=1)
        small = w < (TIGHT_SHARE * greedy.light_frac) * level[:, None]
        out &= ~tight[:, None] | small | (density <= (1.0 + POUR_SPREAD) * lowest[:, None])
    return out


def fill(cells: Cells, lengths: np.ndarray, w: np.ndarray, group: np.ndarray, level: np.ndarray, greedy: Greedy) -> None:
    """Place heavy items by LPT (largest groups first, then largest cost), pour the light ones (``light``)."""
    step_tokens = lengths.sum(axis=1)
    heavy = (lengths > 0) & ~light(cells, lengths, w, group, level, greedy)
    scale = 1.000001 * max(float(w.max()), 1e-300)
    n = lengths.shape[1]
    group_f, w_f = group.reshape(-1), w.reshape(-1)
    idx, real = gather_sorted(heavy, lambda r, c: np.log2(group_f[r * n + c]) + w_f[r * n + c] / scale)
    flat = idx + (np.arange(lengths.shape[0]) * n)[:, None]
    g_h = group_f[flat] * real
    cost = w_f[flat] * real
    tok = lengths.reshape(-1)[flat] * real
    per_rank = tok / np.maximum(g_h, 1)
    for g in np.flatnonzero(np.bincount(g_h.reshape(-1)))[::-1]:  # group sizes present, largest first
        if g > 0:
            place(cells, cost, per_rank, int(g), greedy, start=(g_h > g).sum(axis=1), stop=(g_h >= g).sum(axis=1))
    if greedy.light_frac > 0:  # the light ones are all the others
        light_cost = w.sum(axis=1) - cost.sum(axis=1)
        light_tokens = (step_tokens - tok.sum(axis=1)).astype(np.float64)
        pour(cells, np.clip(light_cost, 0.0, None), np.clip(light_tokens, 0.0, None))


def _fixed_greedy(name: str, lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, m: np.ndarray, cap: float, greedy: Greedy) -> Assignment:
    comp, _ = packed_parts(lengths, cost, plan.cp)
    total = comp.sum(axis=1)
    hard = plan.cp * plan.max_tokens_per_rank
    cells = Cells(
        steps=lengths.shape[0], rows=plan.dp, open_cols=m, cap_tokens=cap, hard_cap_tokens=hard, big_s=10.0 * total + 1.0, pp=plan.pp
    )
    fill(cells, lengths, comp, np.ones_like(lengths), total / (plan.dp * m), greedy)
    # the cells hold linear + attention; linear is exact in tokens, so attention is what is left
    attn = np.clip(cells.load - cost.linear(cells.tokens, plan.cp), 0.0, None)
    return Assignment(
        strategy=name,
        cell_cost_s=with_exchange(cost, cells.load, cells.tokens, attn, plan.cp),
        cell_tokens=cells.tokens,
        gpus_per_row=plan.cp,
        group_size=np.full(lengths.shape, plan.cp),
        n_microbatches=m,
        overflow_tokens=cells.overflow_tokens,
    )


def balanced_packing(
    lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *, n_microbatches: int | np.ndarray | None = None, greedy: Greedy = EXACT
) -> Assignment:
    """Fixed CP, LPT by cost over (replica, micro-batch) cells of at most the window's tokens."""
    lengths = steps_of(lengths)
    m = microbatches(lengths, plan, n_microbatches)
    return _fixed_greedy("balanced", lengths, cost, plan, m, plan.micro_batch_tokens, greedy)


def wlb_packing(
    lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *, n_microbatches: int | np.ndarray | None = None, greedy: Greedy = EXACT
) -> Assignment:
    """WLB-LLM's variable-length packing: LPT by cost, micro-batches up to the CP group's memory."""
    lengths = steps_of(lengths)
    cap = plan.cp * plan.max_tokens_per_rank
    # the step's micro-batch count, or more when the released outliers would not fit its memory
    m = np.maximum(microbatches(lengths, plan, n_microbatches), -(-lengths.sum(axis=1) // (plan.dp * cap)))
    return _fixed_greedy("wlb", lengths, cost, plan, m, cap, greedy)
