"""Simulate training steps under each strategy and summarize them.

``simulate`` samples ``steps`` global batches of ``global_batch`` sequences
from the distribution (a fixed seed, so every strategy sees the same batches),
runs each strategy's assignment, and turns the cost grids into step times with
the pipeline formula of ``pipeline.py`` (cost/pipeline.py's, with vpp), each
micro-batch paying the pipeline send/recv of its tokens (``SeqCost.p2p``). Steps are sampled in blocks and
assigned in chunks, so the working arrays stay small.

Across steps: ``wlb`` holds documents longer than ``OUTLIER_FRAC`` of the
window in a queue and releases them when there are enough for one per
micro-batch of a step (WLB-LLM's outlier delay, sec. 4.2, one queue level);
the queue carries over from one block of steps to the next.

Each strategy's overheads (``strategies.py``) are charged per step: its
communicators' memory comes out of the token room before it plans, its
scheduling time (where not overlapped) and its re-sharding traffic are added
to the step. Gradient sync and the optimizer step are the same under every
strategy and enter through ``step_overhead_s``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from autopar.errors import SpecError
from autopar.spec.distribution import LengthDist
from autopar.varlen import strategies as st
from autopar.varlen.assign import (
    Assignment,
    VarlenPlan,
    balanced_packing,
    microbatches,
    naive_packing,
    next_fit,
    steps_of,
    wlb_packing,
)
from autopar.varlen.pipeline import StepMetrics, step_metrics
from autopar.varlen.place import EXACT, FAST, Greedy
from autopar.varlen.pool import hdp, hdp_no_balance, megatron_dynamic_cp
from autopar.varlen.seqcost import SeqCost

CHUNK_ITEMS = 2**19  # sequences assigned together: small enough for the caches
SAMPLE_ITEMS = 2**22  # sequences sampled and packed next-fit together
MIN_CHUNK = 8  # the fewest steps assigned between two convergence checks
OUTLIER_FRAC = 0.5  # wlb: documents longer than this share of the window wait in the outlier queue


@dataclass(frozen=True, slots=True, kw_only=True)
class Overheads:
    """What the caller knows about memory and network, for the strategies' own overheads (0: not charged)."""

    bytes_per_token: float = 0.0  # activation bytes one token costs one GPU (memory model)
    nic_bytes_per_s: float = 0.0  # one GPU's network bandwidth, for re-sharding
    gpus_per_node: int = 8  # ByteScale's groups are whole nodes past one node


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyResult:
    """One strategy's step time and balance over the sampled steps."""

    strategy: str
    steps: int  # steps simulated
    step_time_mean_s: float
    step_time_p50_s: float
    step_time_p90_s: float
    step_time_p99_s: float
    step_time_sem_s: float  # standard error of the mean step time
    imbalance_mean: float  # mean over steps of max / mean per-rank work (1.0 = perfect)
    stall_frac_mean: float  # share of a step lost to uneven micro-batches in the pipeline
    bubble_frac_mean: float  # share of a step in pipeline fill and drain
    overhead_frac_mean: float  # share of a step in the strategy's own overheads (planning, re-sharding)
    tokens_per_s: float  # tokens trained per second, whole job
    sq_tokens_per_s: float  # sum of squared document lengths per second (attention FLOPs scale with it)
    token_room: int  # tokens per GPU per micro-batch left after the strategy's communicators
    longest_fit_tokens: int  # longest sequence the strategy can run within memory
    fits: bool  # every length the distribution can produce fits
    overflow_frac: float  # share of tokens placed beyond the memory limit
    mean_group_size: float  # token-weighted mean CP group size the sequences ran with


def strategy_plan(name: str, plan: VarlenPlan, over: Overheads) -> VarlenPlan:
    """The plan as the strategy sees it: token room less its communicators' memory."""
    comm = {
        "hdp": st.HDP_COMM_BYTES,
        "hdp_no_balance": st.HDP_COMM_BYTES,
        "megatron_dynamic_cp": st.NCCL_COMM_BYTES * max(1, int(math.log2(plan.largest_group))),
    }.get(name, 0.0)
    if comm == 0.0 or over.bytes_per_token <= 0:
        return plan
    room = max(1, plan.max_tokens_per_rank - int(comm / over.bytes_per_token))
    return replace(plan, max_tokens_per_rank=room, micro_batch_tokens=min(plan.micro_batch_tokens, plan.cp * room))


def longest_fit(name: str, plan: VarlenPlan) -> int:
    if st.STRATEGY_INFO[name].fixed_cp:
        return plan.cp * plan.max_tokens_per_rank
    group = plan.largest_group if name == "megatron_dynamic_cp" else plan.pool_ranks
    return group * plan.max_tokens_per_rank


def delay_outliers(block: np.ndarray, threshold: float, per_release: int, queue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """WLB-LLM's outlier delay over a block of steps: (new block, zero-padded; the queue left over).

    Lengths above ``threshold`` leave their step and join the queue (after the
    ``queue`` carried in); each time it holds ``per_release`` of them, they all
    join the step in which the last one arrived.
    """
    out = block > threshold
    rows = np.nonzero(out)[0]
    waiting = np.concatenate([queue, block[out]])
    arrival = np.concatenate([np.zeros(queue.size, dtype=np.int64), rows])
    n_go = (waiting.size // per_release) * per_release
    at = np.repeat(arrival[per_release - 1 : n_go : per_release], per_release) if n_go else np.zeros(0, np.int64)
    counts = np.bincount(at, minlength=block.shape[0])
    kept = np.where(out, 0, block)
    width = block.shape[1] + int(counts.max(initial=0))
    new = np.zeros((block.shape[0], width), dtype=np.int64)
    new[:, : block.shape[1]] = kept
    if n_go:
        slot = block.shape[1] + np.arange(n_go) - np.repeat(np.cumsum(counts) - counts, counts)
        new[at, slot] = waiting[:n_go]
    return new, waiting[n_go:]


def run_strategy(
    name: str,
    lengths: np.ndarray,
    cost: SeqCost,
    plan: VarlenPlan,
    *,
    overheads: Overheads | None = None,
    greedy: Greedy = EXACT,
    n_microbatches: np.ndarray | None = None,
    mb_ids: np.ndarray | None = None,
) -> Assignment:
    """One strategy on given steps (no outlier delay), under its own token room."""
    over = overheads or Overheads()
    p = strategy_plan(name, plan, over)
    lengths = steps_of(lengths)
    if name == "naive":
        return naive_packing(lengths, cost, p, mb_ids=mb_ids)
    m = microbatches(lengths, plan, n_microbatches)
    if name == "balanced":
        return balanced_packing(lengths, cost, p, n_microbatches=m, greedy=greedy)
    if name == "wlb":
        return wlb_packing(lengths, cost, p, n_microbatches=m, greedy=greedy)
    if name == "megatron_dynamic_cp":
        return megatron_dynamic_cp(lengths, cost, p, n_microbatches=m, greedy=greedy)
    if name == "hdp":
        return hdp(lengths, cost, p, n_microbatches=m, greedy=greedy, node=over.gpus_per_node)
    if name == "hdp_no_balance":
        return hdp_no_balance(lengths, cost, p, node=over.gpus_per_node)
    raise SpecError(f"unknown strategy {name!r}; choose from {', '.join(st.STRATEGIES)}")


def _compact(lengths: np.ndarray) -> np.ndarray:
    """Non-zero lengths first in each step, trailing all-padding columns dropped."""
    ordered = -np.sort(-lengths, axis=1)
    return ordered[:, : max(1, int((ordered > 0).sum(axis=1).max()))]


def _extra_s(name: str, lengths: np.ndarray, plan: VarlenPlan, over: Overheads) -> np.ndarray:
    """Per-step planning and re-sharding seconds the strategy adds."""
    extra = np.zeros(lengths.shape[0])
    if st.STRATEGY_INFO[name].fixed_cp:
        return extra
    if name == "megatron_dynamic_cp":
        extra += st.PLAN_S_PER_SEQ * (lengths > 0).sum(axis=1)
    if over.nic_bytes_per_s > 0:
        extra += st.RESHARD_BYTES_PER_TOKEN * lengths.sum(axis=1) / plan.pool_ranks / over.nic_bytes_per_s
    return extra


Part = tuple[StepMetrics, float, float, np.ndarray, np.ndarray]


def with_p2p(a: Assignment, cost: SeqCost) -> tuple[Assignment, np.ndarray]:
    """The pipeline's send/recv added to every micro-batch in use; and each step's fill/drain share."""
    per_rank = a.cell_tokens / a.gpus_per_row
    per_mb, fill = cost.p2p(per_rank)
    used = a.cell_tokens > 0
    cells = a.cell_cost_s + np.where(used, per_mb, 0.0)
    return replace(a, cell_cost_s=cells), np.where(used, fill, 0.0).max(axis=(1, 2))


def simulate(
    dist: LengthDist,
    cost: SeqCost,
    *,
    dp: int,
    cp: int,
    pp: int,
    global_batch: int,
    micro_batch_tokens: int,
    max_tokens_per_rank: int,
    steps: int = 1000,
    seed: int = 0,
    strategies: Sequence[str] = st.STRATEGIES,
    greedy: Greedy = FAST,
    step_overhead_s: float = 0.0,
    overheads: Overheads | None = None,
    rel_sem: float = 0.0,
    min_steps: int = 200,
    vpp: int = 1,
) -> dict[str, StrategyResult]:
    """Expected step time of each strategy for one plan; see the module doc.

    With ``rel_sem > 0`` each strategy stops early, after at least ``min_steps``,
    once its standard error of the mean step time is below ``rel_sem`` times the
    mean; ``steps`` is then the most it runs. The strategies still running go on
    with the same sampled steps; the next check comes where the spread so far
    says the first of them will have converged (at least ``MIN_CHUNK`` steps on).
    """
    for name in strategies:
        if name not in st.STRATEGIES:
            raise SpecError(f"unknown strategy {name!r}; choose from {', '.join(st.STRATEGIES)}")
    if steps < 1 or global_batch < 1:
        raise SpecError(f"steps and global_batch must be >= 1, got {steps} and {global_batch}")
    over = overheads or Overheads()
    plan = VarlenPlan(dp=dp, cp=cp, pp=pp, micro_batch_tokens=micro_batch_tokens, max_tokens_per_rank=max_tokens_per_rank)
    plans = {name: strategy_plan(name, plan, over) for name in strategies}
    rng = np.random.default_rng(seed)
    parts: dict[str, list[Part]] = {name: [] for name in strategies}
    inner = max(1, CHUNK_ITEMS // global_batch)
    outer = inner * max(1, SAMPLE_ITEMS // (inner * global_batch))
    queue = np.zeros(0, dtype=np.int64)
    done, active = 0, list(strategies)
    chunk = min(inner, max(min_steps, 2)) if rel_sem > 0 else inner  # the first check comes at min_steps
    while done < steps and active:
        block = dist.sample((min(outer, steps - done), global_batch), rng)
        block_mb = _packed(block, micro_batch_tokens)
        delayed = block
        if "wlb" in strategies:
            per_release = max(1, int(np.median(-(-(block_mb[:, -1] + 1) // dp))) * dp)
            delayed, queue = delay_outliers(block, OUTLIER_FRAC * micro_batch_tokens, per_release, queue)
        first = 0
        while first < block.shape[0] and active:
            lengths, mb = block[first : first + chunk], block_mb[first : first + chunk]
            m = -(-(mb[:, -1] + 1) // dp)
            for name in active:
                p = plans[name]
                used = _compact(delayed[first : first + chunk]) if name == "wlb" else lengths
                # wlb keeps the step's micro-batch count; released outliers make its micro-batches longer
                a = run_strategy(
                    name, used, cost, plan, overheads=over, greedy=greedy, n_microbatches=m, mb_ids=mb if name == "naive" else None
                )
                a, fill = with_p2p(a, cost)
                extra = _extra_s(name, used, p, over)
                metrics = step_metrics(a, pp, vpp=vpp, overhead_s=step_overhead_s + extra + fill)
                weighted = float((a.group_size * used).sum())
                parts[name].append((metrics, float(a.overflow_tokens.sum()), weighted, extra, (used.astype(np.float64) ** 2).sum(axis=1)))
            first, done = first + lengths.shape[0], done + lengths.shape[0]
            needed = {name: _steps_needed(parts[name], rel_sem) for name in active} if rel_sem > 0 and done >= max(min_steps, 2) else {}
            active = [name for name in active if needed.get(name, steps) > done]
            # the next check where the standard errors so far say the first of the others will have converged
            chunk = min(inner, max(MIN_CHUNK, min((needed[n] for n in active), default=steps) - done)) if needed else chunk
    return {name: _summarize(name, parts[name], plans[name], dist) for name in strategies}


_PACKED: dict[tuple[bytes, tuple[int, ...], float], np.ndarray] = {}  # next_fit answers, the last few


def _packed(block: np.ndarray, budget: float) -> np.ndarray:
    """``next_fit(block, budget)``, read-only, remembered: the plans of one suggest sample the same steps."""
    key = (hashlib.blake2b(np.ascontiguousarray(block).tobytes(), digest_size=16).digest(), block.shape, float(budget))
    hit = _PACKED.get(key)
    if hit is None:
        if len(_PACKED) >= 4:
            _PACKED.pop(next(iter(_PACKED)))
        hit = _PACKED[key] = next_fit(block, budget)
        hit.flags.writeable = False
    return hit


def _steps_needed(parts: list[Part], rel_sem: float) -> int:
    """Steps after which one strategy's mean step time is known to within rel_sem (relative standard error),
    at the spread of the steps run so far; the steps run so far where it already is."""
    times = np.concatenate([p[0].step_time_s for p in parts])
    sem, mean = times.std(ddof=1) / np.sqrt(times.size), times.mean()
    if sem <= rel_sem * mean:
        return times.size
    return math.ceil(times.size * (sem / (rel_sem * mean)) ** 2)


def _summarize(name: str, parts: list[Part], plan: VarlenPlan, dist: LengthDist) -> StrategyResult:
    def cat(field: str) -> np.ndarray:
        return np.concatenate([getattr(p[0], field) for p in parts])

    times, tokens = cat("step_time_s"), cat("tokens")
    total_time = float(times.sum())
    total_tokens = float(tokens.sum())
    extra = np.concatenate([p[3] for p in parts])
    longest = longest_fit(name, plan)
    p50, p90, p99 = np.percentile(times, [50, 90, 99])
    return StrategyResult(
        strategy=name,
        steps=int(times.size),
        step_time_mean_s=float(times.mean()),
        step_time_p50_s=float(p50),
        step_time_p90_s=float(p90),
        step_time_p99_s=float(p99),
        step_time_sem_s=float(times.std(ddof=1) / np.sqrt(times.size)) if times.size > 1 else 0.0,
        imbalance_mean=float(cat("imbalance").mean()),
        stall_frac_mean=float(cat("stall_frac").mean()),
        bubble_frac_mean=float(cat("bubble_frac").mean()),
        overhead_frac_mean=float((extra / times).mean()),
        tokens_per_s=total_tokens / total_time,
        sq_tokens_per_s=float(sum(float(p[4].sum()) for p in parts)) / total_time,
        token_room=plan.max_tokens_per_rank,
        longest_fit_tokens=longest,
        fits=dist.max_len <= longest,
        overflow_frac=sum(p[1] for p in parts) / total_tokens,
        mean_group_size=sum(p[2] for p in parts) / total_tokens,
    )
