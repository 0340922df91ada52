"""Four ways to assign a step's sequences to ranks and micro-batches.

All four take ``lengths`` of shape (S, N) (S steps of N sequences; a 1-D array
is one step) and return an :class:`Assignment`: a cost grid (S, rows,
micro-batches) in seconds per pipeline stage, from which ``pipeline.py``
derives step time, imbalance and pipeline stall.

1. ``naive_packing``: fixed CP size ``cp``; sequences in sampled order are
   packed next-fit into micro-batches of ``micro_batch_tokens`` tokens (a
   sequence longer than that gets a micro-batch of its own), and micro-batches
   are dealt round-robin to the DP replicas. Packing equalizes tokens, not cost.
2. ``balanced_packing``: the same fixed ``cp`` and token budget, but sequences
   are placed by cost, longest first, on the least-loaded (replica,
   micro-batch) with room: LPT, as WLB-LLM's workload-aware packing does
   (Wang et al., OSDI'25).
3. ``dynamic_cp``: one pool of dp x cp ranks. Each sequence takes the smallest
   power-of-two CP group whose per-rank share fits the token cap (the fixed
   plan's tokens per rank, ``micro_batch_tokens / cp``), up to the largest
   power of two in the pool; groups are then balanced over the pool, largest
   groups first. This is Megatron-LM's hybrid / dynamic context parallelism.
4. ``flexible_pool``: ByteScale's hybrid data parallelism (Ge et al. 2025,
   arXiv 2502.21231): the same pool, but a group is sized by cost, not only by
   memory: a sequence takes the smallest power-of-two group (at least what
   memory needs) whose per-rank cost is at most the mean load of one cell of
   the grid, a micro-batch's share when there are pipeline stages (pp > 1, so
   no micro-batch stalls the pipeline) and a whole rank's share without them.
   Short sequences never pay CP traffic; long ones are split as far as balance
   needs, comm included, and no further.

Strategies 2-4 share the greedy of ``place.py``, whose "least loaded" is the
rank's pipeline time (sum + (pp - 1) * max over micro-batches), so all three
are pipeline-aware in where they put a sequence; they differ in what a
sequence costs and how many ranks it spans. Rows are CP groups of ``cp``
identical GPUs for 1-2 (``gpus_per_row = cp``) and single GPUs for 3-4.
Strategies 2-4 get the same number of micro-batches per row as naive packing
needed, plus reserve micro-batches used only when nothing else has room.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar.errors import SpecError
from autopar.varlen.place import EXACT, Cells, Greedy, gather_sorted, place, pour
from autopar.varlen.seqcost import SeqCost

STRATEGIES = ("naive", "balanced", "dynamic_cp", "flexible")
SLAB = 128  # next_fit transposes this many sequences at a time (a slab of all steps stays in the caches)
TIGHT = 0.9  # share of the token room a step fills beyond which FAST pours less (see _fill)


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

    def longest_fit(self, strategy: str) -> int:
        """Longest sequence a strategy can run: its largest CP group times the per-rank memory."""
        group = self.cp if strategy in ("naive", "balanced") else self.largest_group
        return group * self.max_tokens_per_rank


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Assignment:
    """Where one batch of steps went: cost and tokens per (step, row, micro-batch)."""

    strategy: str  # one of STRATEGIES
    cell_cost_s: np.ndarray  # (S, rows, micro-batches) seconds per pipeline stage
    cell_tokens: np.ndarray  # (S, rows, micro-batches) tokens in the cell (a row's group; 1/g shares on pool ranks)
    gpus_per_row: int  # GPUs a row stands for (cp for fixed-CP strategies, 1 for the pool)
    group_size: np.ndarray  # (S, N) CP group size each sequence ran with, in the order given
    n_microbatches: np.ndarray  # (S,) micro-batches per row budgeted (before reserve ones)
    overflow_tokens: np.ndarray  # (S,) tokens placed beyond the memory limit


def _steps(lengths: np.ndarray) -> np.ndarray:
    arr = np.asarray(lengths)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise SpecError(f"lengths must be a non-empty (steps, sequences) array, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" or (arr <= 0).any():
        raise SpecError("lengths must be positive integers")
    return arr.astype(np.int64, copy=False)


def next_fit(lengths: np.ndarray, budget: int) -> np.ndarray:
    """Micro-batch index of each sequence, packing in order and opening a new one when full."""
    steps, n = lengths.shape
    ids = np.empty((steps, n), dtype=np.int64)
    fill = np.zeros(steps, dtype=lengths.dtype)
    mb = np.zeros(steps, dtype=np.int64)
    new = np.empty(steps, dtype=bool)
    positive = bool((lengths > 0).all())  # then a micro-batch holds tokens once opened: only item 0 finds it empty
    for first in range(0, n, SLAB):  # the loop runs over sequences, each step a lane: a slab at a time, transposed
        by_item = _transposed(lengths[:, first:first + SLAB])
        out = np.empty(by_item.shape, dtype=np.int64)
        for i, x in enumerate(by_item):
            np.add(fill, x, out=fill)
            np.greater(fill, budget, out=new)
            if not positive or first + i == 0:
                new &= fill > x  # the micro-batch was not empty before this sequence
            np.add(mb, new, out=mb)
            np.copyto(fill, x, where=new)
            out[i] = mb
        ids[:, first:first + SLAB] = _transposed(out)
    return ids


def _transposed(a: np.ndarray, tile: int = 128) -> np.ndarray:
    """C-contiguous copy of a 2-D array's transpose, copied in tiles (much faster than one strided copy)."""
    rows, cols = a.shape
    out = np.empty((cols, rows), dtype=a.dtype)
    for i in range(0, rows, tile):
        for j in range(0, cols, tile):
            out[j:j + tile, i:i + tile] = a[i:i + tile, j:j + tile].T
    return out


def naive_packing(lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *,
                  mb_ids: np.ndarray | None = None) -> Assignment:
    """Fixed CP, next-fit token packing in sampled order, micro-batches dealt round-robin.

    ``mb_ids`` may pass ``next_fit(lengths, plan.micro_batch_tokens)`` computed
    beforehand (it is a loop over sequences, cheaper over many steps at once).
    """
    lengths = _steps(lengths)
    steps = lengths.shape[0]
    w = cost.time(lengths, plan.cp)
    mb = next_fit(lengths, plan.micro_batch_tokens) if mb_ids is None else mb_ids
    n_mb = mb[:, -1] + 1
    cols = int(-(-n_mb.max() // plan.dp))
    # a micro-batch is a run of equal ids: sum each run, then put it in its cell (replica mb % dp, slot mb // dp)
    head = np.empty(lengths.shape, dtype=bool)
    head[:, 0] = True
    np.not_equal(mb[:, 1:], mb[:, :-1], out=head[:, 1:])
    first = np.flatnonzero(head)
    ids = mb.reshape(-1)[first]
    cell = ((first // lengths.shape[1]) * plan.dp + ids % plan.dp) * cols + ids // plan.dp
    grid = (steps, plan.dp, cols)
    cell_cost, cell_tokens = np.zeros(grid), np.zeros(grid)
    cell_cost.reshape(-1)[cell] = np.add.reduceat(np.ascontiguousarray(w).reshape(-1), first)
    cell_tokens.reshape(-1)[cell] = np.add.reduceat(lengths.reshape(-1), first)
    hard = plan.cp * plan.max_tokens_per_rank
    over = lengths > hard
    return Assignment(
        strategy="naive",
        cell_cost_s=cell_cost,
        cell_tokens=cell_tokens,
        gpus_per_row=plan.cp,
        group_size=np.full(lengths.shape, plan.cp, dtype=np.int64),
        n_microbatches=-(-n_mb // plan.dp),
        overflow_tokens=(lengths * over).sum(axis=1).astype(np.float64) if over.any() else np.zeros(steps),
    )


def _microbatches(lengths: np.ndarray, plan: VarlenPlan, n_microbatches: int | np.ndarray | None) -> np.ndarray:
    if n_microbatches is None:
        return -(-(next_fit(lengths, plan.micro_batch_tokens)[:, -1] + 1) // plan.dp)
    m = np.broadcast_to(np.asarray(n_microbatches, dtype=np.int64), (lengths.shape[0],))
    if (m < 1).any():
        raise SpecError(f"n_microbatches must be >= 1, got {m.min()}")
    return m


def _fill(cells: Cells, lengths: np.ndarray, w: np.ndarray, group: np.ndarray, level: np.ndarray,
          greedy: Greedy) -> None:
    """Place heavy items by LPT (largest groups first, then largest cost), pour the light ones.

    A fluid has one cost per token, so it cannot mix dense and sparse sequences
    the way LPT does when token room is short. In steps whose tokens fill more
    than ``TIGHT`` of the open micro-batches, eight times more sequences are
    placed one by one.
    """
    rows, open_cols = cells.load.shape[1], cells.open.sum(axis=(1, 2))
    step_tokens = lengths.sum(axis=1)
    fullness = step_tokens / (rows * open_cols * cells.cap)
    light_frac = greedy.light_frac * np.where(fullness > TIGHT, 0.125, 1.0)
    heavy = (group > 1) | (w >= light_frac[:, None] * level[:, None])  # all of them when light_frac is 0
    # one sort: by group size, then cost, both decreasing; each group size is then a run of every row
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


def _result(name: str, cells: Cells, gpus_per_row: int, group: np.ndarray, m: np.ndarray) -> Assignment:
    return Assignment(strategy=name, cell_cost_s=cells.load, cell_tokens=cells.tokens, gpus_per_row=gpus_per_row,
                      group_size=group, n_microbatches=m, overflow_tokens=cells.overflow_tokens)


def balanced_packing(lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *,
                     n_microbatches: int | np.ndarray | None = None, greedy: Greedy = EXACT) -> Assignment:
    """Fixed CP, LPT by cost over (replica, micro-batch) cells with a token budget each."""
    lengths = _steps(lengths)
    m = _microbatches(lengths, plan, n_microbatches)
    w = cost.time(lengths, plan.cp)
    total = w.sum(axis=1)
    cells = Cells(steps=lengths.shape[0], rows=plan.dp, open_cols=m, cap_tokens=plan.micro_batch_tokens,
                  hard_cap_tokens=plan.cp * plan.max_tokens_per_rank, big_s=10.0 * total + 1.0, pp=plan.pp)
    group = np.ones_like(lengths)
    _fill(cells, lengths, w, group, total / (plan.dp * m), greedy)
    return _result("balanced", cells, plan.cp, np.full_like(lengths, plan.cp), m)


def memory_groups(lengths: np.ndarray, plan: VarlenPlan) -> np.ndarray:
    """Smallest power-of-two CP group whose per-rank share fits the token cap, at most the pool's largest."""
    group = np.ones(lengths.shape, dtype=lengths.dtype)
    flat = lengths.reshape(-1)
    long = np.flatnonzero(flat > plan.token_cap)
    if long.size:
        need = np.ceil(flat[long] / plan.token_cap).astype(np.int64)
        bits = np.frexp((need - 1).astype(np.float64))[1]  # bit length of need - 1
        group.reshape(-1)[long] = np.minimum(np.left_shift(1, bits), plan.largest_group)
    return group


def _pool(name: str, lengths: np.ndarray, w: np.ndarray, group: np.ndarray, plan: VarlenPlan,
          m: np.ndarray, greedy: Greedy) -> Assignment:
    ranks = plan.pool_ranks
    work = (w * group).sum(axis=1)
    cells = Cells(steps=lengths.shape[0], rows=ranks, open_cols=m, cap_tokens=plan.token_cap,
                  hard_cap_tokens=plan.max_tokens_per_rank, big_s=10.0 * work + 1.0, pp=plan.pp)
    _fill(cells, lengths, w, group, work / (ranks * m), greedy)
    return _result(name, cells, 1, group, m)


def dynamic_cp(lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *,
               n_microbatches: int | np.ndarray | None = None, greedy: Greedy = EXACT) -> Assignment:
    """Per-sequence power-of-two CP group sized by memory, groups balanced over the dp x cp pool."""
    lengths = _steps(lengths)
    m = _microbatches(lengths, plan, n_microbatches)
    group = memory_groups(lengths, plan)
    w = np.ascontiguousarray(cost.time(lengths, 1))
    split = np.flatnonzero(group > 1)
    if split.size:  # most sequences need no CP: evaluate the others at their group size only
        w.reshape(-1)[split] = cost.time(lengths.reshape(-1)[split], group.reshape(-1)[split])
    return _pool("dynamic_cp", lengths, w, group, plan, m, greedy)


def flexible_pool(lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *,
                  n_microbatches: int | np.ndarray | None = None, greedy: Greedy = EXACT) -> Assignment:
    """ByteScale-style pool: a sequence is split only as far as memory and balance require."""
    lengths = _steps(lengths)
    m = _microbatches(lengths, plan, n_microbatches)
    w = np.ascontiguousarray(cost.time(lengths, 1))
    level = w.sum(axis=1) / (plan.pool_ranks * m)
    target = level if plan.pp > 1 else level * m  # a micro-batch's share, or (no pipeline) a rank's
    group = memory_groups(lengths, plan)
    split = np.flatnonzero((group > 1) | (w > target[:, None]))
    if split.size:
        rows = split // lengths.shape[1]
        sizes = 1 << np.arange(plan.largest_group.bit_length())
        lens = lengths.reshape(-1)[split]
        cand = cost.time(np.broadcast_to(lens[:, None], (lens.size, sizes.size)), sizes[None, :])
        allowed = sizes[None, :] >= group.reshape(-1)[split][:, None]
        good = allowed & (cand <= target[rows][:, None])
        best = np.where(good.any(axis=1), good.argmax(axis=1), np.where(allowed, cand, np.inf).argmin(axis=1))
        group.reshape(-1)[split] = sizes[best]
        w.reshape(-1)[split] = cand[np.arange(lens.size), best]
    return _pool("flexible", lengths, w, group, plan, m, greedy)
