"""Pool strategies: per-sequence CP groups carved out of one DP x CP pool of ranks.

The pool is the dp x cp ranks of one pipeline stage. Each sequence runs on a
group of g ranks (g = 1 for most), alone in its group for g > 1, so it pays
its own CP exchange (``SeqCost.time``); sequences on one rank are packed into
its micro-batches of at most ``token_cap`` tokens.

1. ``megatron_dynamic_cp``: Megatron-LM's dynamic (hybrid) context
   parallelism (``--hybrid-context-parallel``; NVIDIA Megatron-LM,
   megatron/core/pipeline_parallel/data_schedule.py): the smallest
   power-of-two group whose per-rank share fits the fixed plan's tokens per
   rank; groups balanced by cost over the pool, largest first, but every DP
   rank runs the same number of micro-batches (its schedule is shared), so a
   rank's tokens are capped at m micro-batches' worth.
2. ``hdp`` (ByteScale's Hybrid Data Parallelism with its balance scheduler,
   Ge et al. 2025, arXiv 2502.21231, secs. 4-6): a group of any size, the
   fewest ranks whose memory holds the sequence (rounded up to whole nodes
   past one node, as its topology-aware groups are); balanced by cost, and a
   rank may run more micro-batches than another (up to ``HDP_EXTRA`` times
   the fixed count), so ranks with short sequences absorb the work that
   ranks with long ones cannot (without pipeline stages; with them every rank
   keeps the same count, as a pipeline schedule needs).
3. ``hdp_no_balance`` (ByteScale, sec. 8.3, "w/o balance"): the same groups,
   sequences dealt in sampled order, each rank filled with ``token_cap``
   tokens per micro-batch: tokens balanced, cost not.
"""

from __future__ import annotations

import numpy as np

from autopar.varlen.assign import Assignment, VarlenPlan, deal, fill, microbatches, next_fit, steps_of
from autopar.varlen.place import EXACT, Cells, Greedy
from autopar.varlen.seqcost import SeqCost, attention_one

HDP_EXTRA = 2.0  # micro-batches a rank may run under ByteScale's balance scheduler, over the fixed count


def power_of_two_groups(lengths: np.ndarray, plan: VarlenPlan) -> np.ndarray:
    """Smallest power-of-two group whose per-rank share fits the token cap, at most the pool's largest."""
    group = np.ones(lengths.shape, dtype=np.int64)
    flat = lengths.reshape(-1)
    long = np.flatnonzero(flat > plan.token_cap)
    if long.size:
        need = np.ceil(flat[long] / plan.token_cap).astype(np.int64)
        bits = np.frexp((need - 1).astype(np.float64))[1]  # bit length of need - 1
        group.reshape(-1)[long] = np.minimum(np.left_shift(1, bits), plan.largest_group)
    return group


def any_size_groups(lengths: np.ndarray, plan: VarlenPlan, node: int) -> np.ndarray:
    """Fewest ranks whose share fits the token cap; past one node, whole nodes; at most the pool."""
    need = np.maximum(np.ceil(lengths / plan.token_cap), 1).astype(np.int64)
    if node > 1:
        need = np.where(need > node, -(-need // node) * node, need)
    return np.minimum(need, plan.pool_ranks)


def _standalone(lengths: np.ndarray, cost: SeqCost, group: np.ndarray) -> np.ndarray:
    """Each sequence alone in its group (g = 1: its share of a packed micro-batch, no exchange)."""
    w = np.ascontiguousarray(cost.linear(lengths, 1) + attention_one(cost, lengths))
    split = np.flatnonzero(group > 1)
    if split.size:
        w.reshape(-1)[split] = cost.time(lengths.reshape(-1)[split], group.reshape(-1)[split])
    return w


def _balanced(
    name: str, lengths: np.ndarray, w: np.ndarray, group: np.ndarray, plan: VarlenPlan, m: np.ndarray, open_cols: np.ndarray, greedy: Greedy
) -> Assignment:
    ranks = plan.pool_ranks
    work = (w * group).sum(axis=1)
    cells = Cells(
        steps=lengths.shape[0],
        rows=ranks,
        open_cols=open_cols,
        cap_tokens=plan.token_cap,
        hard_cap_tokens=plan.max_tokens_per_rank,
        big_s=10.0 * work + 1.0,
        pp=plan.pp,
    )
    fill(cells, lengths, w, group, work / (ranks * open_cols), greedy)
    return Assignment(
        strategy=name,
        cell_cost_s=cells.load,
        cell_tokens=cells.tokens,
        gpus_per_row=1,
        group_size=group,
        n_microbatches=m,
        overflow_tokens=cells.overflow_tokens,
    )


def megatron_dynamic_cp(
    lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *, n_microbatches: int | np.ndarray | None = None, greedy: Greedy = EXACT
) -> Assignment:
    """Power-of-two groups sized by memory, balanced by cost, the same micro-batch count on every rank."""
    lengths = steps_of(lengths)
    m = microbatches(lengths, plan, n_microbatches)
    group = power_of_two_groups(lengths, plan)
    return _balanced("megatron_dynamic_cp", lengths, _standalone(lengths, cost, group), group, plan, m, m, greedy)


def hdp(
    lengths: np.ndarray,
    cost: SeqCost,
    plan: VarlenPlan,
    *,
    node: int = 8,
    n_microbatches: int | np.ndarray | None = None,
    greedy: Greedy = EXACT,
) -> Assignment:
    """ByteScale's HDP with its balance scheduler: any group size, micro-batch counts free per rank."""
    lengths = steps_of(lengths)
    m = microbatches(lengths, plan, n_microbatches)
    group = any_size_groups(lengths, plan, node)
    # more, smaller micro-batches would also shrink the pipeline bubble for free here (linear work is priced
    # per token), so with pipeline stages every rank keeps m; without them, room for HDP_EXTRA x m
    open_cols = np.ceil(HDP_EXTRA * m).astype(np.int64) if plan.pp == 1 else m
    return _balanced("hdp", lengths, _standalone(lengths, cost, group), group, plan, m, open_cols, greedy)


def hdp_no_balance(lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, *, node: int = 8) -> Assignment:
    """ByteScale's HDP without its balance scheduler: groups of any size, ranks filled with tokens in order.

    A sequence of g ranks becomes g units of L / g tokens on consecutive ranks;
    units are packed next-fit into micro-batches of ``token_cap`` tokens, and
    micro-batch k goes to rank k % pool, slot k // pool (the units of one
    sequence land on consecutive ranks, in one slot unless the pool wraps).
    """
    lengths = steps_of(lengths)
    group = any_size_groups(lengths, plan, node) * (lengths > 0)
    w = _standalone(lengths, cost, np.maximum(group, 1)) * (lengths > 0)
    units = group.sum(axis=1)
    width = int(units.max())
    owner = np.zeros((lengths.shape[0], width), dtype=np.int64)  # which sequence each unit belongs to
    rows_idx = np.repeat(np.arange(lengths.shape[0]), units)
    starts = np.cumsum(units) - units
    pos = np.arange(rows_idx.size) - np.repeat(starts, units)
    owner[rows_idx, pos] = np.repeat(np.tile(np.arange(lengths.shape[1]), lengths.shape[0]), group.reshape(-1))
    real = np.arange(width)[None, :] < units[:, None]
    take = np.take_along_axis
    g_u = np.maximum(take(group, owner, 1), 1)
    tok = np.where(real, take(lengths, owner, 1) / g_u, 0.0)
    cost_u = np.where(real, take(w, owner, 1), 0.0)
    # a unit of a split sequence fills its micro-batch: give it the whole budget so the next unit moves on
    budget = plan.token_cap
    pack = np.where(g_u > 1, budget, np.ceil(tok)).astype(np.int64) * real
    mb = next_fit(pack, budget)
    (load, cells_tok), m = deal((cost_u, tok), mb, plan.pool_ranks)
    over = (tok > plan.max_tokens_per_rank).any()
    overflow = (tok * (tok > plan.max_tokens_per_rank)).sum(axis=1) if over else np.zeros(lengths.shape[0])
    return Assignment(
        strategy="hdp_no_balance",
        cell_cost_s=load,
        cell_tokens=cells_tok,
        gpus_per_row=1,
        group_size=np.maximum(group, 1),
        n_microbatches=m,
        overflow_tokens=overflow,
    )
