"""Simulate training steps under each strategy and summarize them.

``simulate`` samples ``steps`` global batches of ``global_batch`` sequences
from the distribution (a fixed seed, so every strategy sees the same batches),
runs each strategy's assignment, and turns the cost grids into step times with
the pipeline formula of ``pipeline.py``. Steps are sampled in blocks of
``SAMPLE_ITEMS`` sequences and assigned in chunks of ``CHUNK_ITEMS``, so the
working arrays stay small; the chunking changes nothing but speed.

The balanced strategies run greedy LPT with the ``FAST`` settings (rounds and
fluid pouring of small items, see ``place.py``); pass ``greedy=EXACT`` for
exact LPT at 25 to 50 times the cost. The standard error of the mean step time
(``step_time_sem_s``) says whether ``steps`` was enough: it falls as
1/sqrt(steps). With ``rel_sem`` the run stops as soon as every strategy's mean
is known that well.

Speed (``benchmarks/bench_varlen.py``; one core of a shared 2-core VM): 1,000
steps x 4,096 sequences of the long-context example, all four strategies,
0.7 to 0.8 s of CPU (1.5 to 1.75 s before the greedy, the pour and the
sampler were reworked, timed side by side), most of it in the greedy and the
pour of strategies 2-4. The convergence check (``rel_sem=0.005``) stops after
256 steps, about 0.3 s.

Step time here is the pipeline part only (compute plus exposed CP
communication, with fill/drain); gradient sync and the optimizer step are the
same under every strategy and enter through ``step_overhead_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autopar.errors import SpecError
from autopar.varlen.assign import (
    STRATEGIES,
    Assignment,
    VarlenPlan,
    balanced_packing,
    dynamic_cp,
    flexible_pool,
    naive_packing,
    next_fit,
)
from autopar.varlen.dist import LengthDist
from autopar.varlen.pipeline import StepMetrics, step_metrics
from autopar.varlen.place import FAST, Greedy
from autopar.varlen.seqcost import SeqCost

CHUNK_ITEMS = 2**19  # sequences assigned together (128 steps of 4,096): small enough for the caches
SAMPLE_ITEMS = 2**22  # sequences sampled and packed next-fit together (its loop is per sequence)


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyResult:
    """One strategy's step time and balance over the sampled steps."""

    strategy: str  # naive | balanced | dynamic_cp | flexible
    steps: int  # steps simulated
    step_time_mean_s: float  # mean step time, seconds
    step_time_p95_s: float  # 95th percentile step time, seconds
    step_time_sem_s: float  # standard error of the mean step time, seconds
    imbalance_mean: float  # mean over steps of max / mean per-rank work (1.0 = perfect)
    stall_frac_mean: float  # mean share of a step lost to uneven micro-batches in the pipeline
    bubble_frac_mean: float  # mean share of a step in pipeline fill and drain
    tokens_per_s: float  # tokens trained per second, whole job
    longest_fit_tokens: int  # longest sequence the strategy can run within memory
    fits: bool  # every length the distribution can produce fits
    overflow_frac: float  # share of tokens that had to be placed beyond the memory limit
    mean_group_size: float  # token-weighted mean CP group size the sequences ran with


class _MemoCost:
    """Remembers cost.time(lengths, cp) for a scalar cp, so strategies sharing it pay once per chunk."""

    def __init__(self, inner: SeqCost) -> None:
        self.inner = inner
        self.memo: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def time(self, lengths: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        if not isinstance(cp, int | np.integer):
            return self.inner.time(lengths, cp)
        key = (id(lengths), int(cp))
        if key not in self.memo:
            self.memo[key] = (lengths, self.inner.time(lengths, cp))
        return self.memo[key][1].copy()


def _run(name: str, lengths: np.ndarray, cost: SeqCost, plan: VarlenPlan, naive: Assignment,
         greedy: Greedy) -> Assignment:
    if name == "naive":
        return naive
    fn = {"balanced": balanced_packing, "dynamic_cp": dynamic_cp, "flexible": flexible_pool}[name]
    return fn(lengths, cost, plan, n_microbatches=naive.n_microbatches, greedy=greedy)


def simulate(dist: LengthDist, cost: SeqCost, *, dp: int, cp: int, pp: int, global_batch: int,
             micro_batch_tokens: int, max_tokens_per_rank: int, steps: int = 1000, seed: int = 0,
             strategies: Sequence[str] = STRATEGIES, greedy: Greedy = FAST, step_overhead_s: float = 0.0,
             rel_sem: float = 0.0, min_steps: int = 200) -> dict[str, StrategyResult]:
    """Expected step time of each strategy for one plan; see the module doc.

    With ``rel_sem > 0`` the simulation stops early, after at least
    ``min_steps``, once every strategy's standard error of the mean step time is
    below ``rel_sem`` times the mean (a convergence check); ``steps`` is then the
    most it runs. The steps it did run are the first ones of the full run.
    """
    for name in strategies:
        if name not in STRATEGIES:
            raise SpecError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    if steps < 1 or global_batch < 1:
        raise SpecError(f"steps and global_batch must be >= 1, got {steps} and {global_batch}")
    plan = VarlenPlan(dp=dp, cp=cp, pp=pp, micro_batch_tokens=micro_batch_tokens,
                      max_tokens_per_rank=max_tokens_per_rank)
    rng = np.random.default_rng(seed)
    parts: dict[str, list[tuple[StepMetrics, float, float]]] = {name: [] for name in strategies}
    inner = max(1, CHUNK_ITEMS // global_batch)
    outer = inner * max(1, SAMPLE_ITEMS // (inner * global_batch))
    done = 0
    while done < steps and not _converged(parts, done, rel_sem, min_steps):
        block = dist.sample((min(outer, steps - done), global_batch), rng)
        block_mb = next_fit(block, micro_batch_tokens)
        for first in range(0, block.shape[0], inner):
            lengths, mb = block[first:first + inner], block_mb[first:first + inner]
            memo = _MemoCost(cost)
            naive = naive_packing(lengths, memo, plan, mb_ids=mb)
            tokens = int(lengths.sum())
            for name in strategies:
                a = _run(name, lengths, memo, plan, naive, greedy)
                # fixed-CP strategies run every sequence at cp
                weighted_group = float(plan.cp * tokens if name in ("naive", "balanced") else (a.group_size * lengths).sum())
                parts[name].append((step_metrics(a, pp, overhead_s=step_overhead_s),
                                    float(a.overflow_tokens.sum()), weighted_group))
            done += lengths.shape[0]
            if _converged(parts, done, rel_sem, min_steps):
                break
    return {name: _summarize(name, parts[name], plan, dist) for name in strategies}


def _converged(parts: dict[str, list[tuple[StepMetrics, float, float]]], done: int, rel_sem: float,
               min_steps: int) -> bool:
    """Every strategy's mean step time known to within rel_sem (relative standard error)."""
    if rel_sem <= 0 or done < max(min_steps, 2):
        return False
    for chunks in parts.values():
        times = np.concatenate([m.step_time_s for m, _, _ in chunks])
        if times.std(ddof=1) / np.sqrt(times.size) > rel_sem * times.mean():
            return False
    return True


def _summarize(name: str, parts: list[tuple[StepMetrics, float, float]], plan: VarlenPlan,
               dist: LengthDist) -> StrategyResult:
    def cat(field: str) -> np.ndarray:
        return np.concatenate([getattr(m, field) for m, _, _ in parts])

    times, tokens = cat("step_time_s"), cat("tokens")
    total_tokens = float(tokens.sum())
    longest = plan.longest_fit(name)
    return StrategyResult(
        strategy=name,
        steps=int(times.size),
        step_time_mean_s=float(times.mean()),
        step_time_p95_s=float(np.percentile(times, 95)),
        step_time_sem_s=float(times.std(ddof=1) / np.sqrt(times.size)) if times.size > 1 else 0.0,
        imbalance_mean=float(cat("imbalance").mean()),
        stall_frac_mean=float(cat("stall_frac").mean()),
        bubble_frac_mean=float(cat("bubble_frac").mean()),
        tokens_per_s=total_tokens / float(times.sum()),
        longest_fit_tokens=longest,
        fits=dist.max_len <= longest,
        overflow_frac=sum(o for _, o, _ in parts) / total_tokens,
        mean_group_size=sum(g for _, _, g in parts) / total_tokens,
    )
