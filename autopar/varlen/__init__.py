"""Variable sequence lengths: load balance across DP x CP x PP, dynamic CP, a flexible rank pool.

Packing sequences into micro-batches equalizes tokens, not cost: a sequence of
length L costs about alpha L^2 + beta L, every DP rank waits for the slowest at
the gradient sync, and every pipeline stage waits for the slowest micro-batch.
This package samples training steps from a length distribution and measures,
for one plan, what four assignment strategies make of them.

Public API (everything a caller needs is re-exported here)
----------------------------------------------------------

Distributions (``dist.py``)::

    load_distribution(path) -> LengthDist          # .txt / .jsonl / .npy / .yaml|.yml|.json
    LengthDist.sample(n_or_shape, rng) -> int64 array;  .max_len  .min_len  .mean_len  .source
    check_max(dist, max_seq_len, model_name)       # SpecError if a length exceeds the model

Per-sequence cost (``seqcost.py``)::

    SeqCost                                        # Protocol: time(lengths, cp) -> seconds
    QuadraticSeqCost(alpha_s_per_tok2=, beta_s_per_tok=, comm_s_per_tok=, comm_latency_s=)
        w(L, c) = (alpha L^2 + beta L) / c + [c > 1] (latency (c - 1) + comm L (c - 1) / c)

The cost model supplies its own ``SeqCost``: forward + backward seconds of one
rank of a CP group of size c on one sequence, in one pipeline stage, compute
plus exposed CP communication (vectorized over arrays of lengths and c).

Assignment (``assign.py``), on arrays of shape (steps, sequences)::

    VarlenPlan(dp=, cp=, pp=, micro_batch_tokens=, max_tokens_per_rank=)
    naive_packing(lengths, cost, plan) -> Assignment
    balanced_packing(lengths, cost, plan, n_microbatches=None, greedy=EXACT) -> Assignment
    dynamic_cp(lengths, cost, plan, n_microbatches=None, greedy=EXACT) -> Assignment
    flexible_pool(lengths, cost, plan, n_microbatches=None, greedy=EXACT) -> Assignment
    Assignment: cell_cost_s (steps, rows, micro-batches), cell_tokens, gpus_per_row, group_size,
        n_microbatches, overflow_tokens   (rows: DP replicas for 1-2, GPUs of the dp x cp pool for 3-4)

Greedy settings (``place.py``): ``EXACT`` (plain LPT, one sequence at a time)
and ``FAST`` (LPT in rounds, the smallest sequences poured as a fluid; within
1% of EXACT's mean step time for realistic costs, 25-50x faster). The assignment
functions default to EXACT, ``simulate`` to FAST.

Pipeline and metrics (``pipeline.py``)::

    row_times(cell_cost_s, pp)                     # sum_j s_j + (pp - 1) max_j s_j per rank
    step_metrics(assignment, pp, overhead_s=0) -> StepMetrics (step time, imbalance, stall, bubble)

Simulation (``simulate.py``)::

    simulate(dist, cost, dp=, cp=, pp=, global_batch=, micro_batch_tokens=, max_tokens_per_rank=,
             steps=1000, seed=0, strategies=STRATEGIES, greedy=FAST, step_overhead_s=0.0,
             rel_sem=0.0, min_steps=200) -> dict[str, StrategyResult]
    StrategyResult: step_time_mean_s, step_time_p95_s, step_time_sem_s, imbalance_mean,
        stall_frac_mean, bubble_frac_mean, tokens_per_s, longest_fit_tokens, fits,
        overflow_frac, mean_group_size, steps

How the CLI uses it: ``--seq-len-dist FILE`` -> ``load_distribution`` and
``check_max`` (errors exit 2); for each candidate plan, build the cost model's
``SeqCost`` and call ``simulate`` with the plan's dp, cp, pp, the fixed plan's
tokens per micro-batch (mbs x seq_len) and the per-GPU token capacity from the
memory model; rank by ``step_time_mean_s`` (plus the fixed per-step costs as
``step_overhead_s``) of the chosen strategy. ``estimate`` can chart
``row_times(assignment.cell_cost_s[0], pp)`` for one sampled step.

Speed: 1,000 steps x 4,096 sequences, four strategies, 0.7-0.8 s of CPU on a
shared 2-core VM (about half of what the previous version takes side by side);
``simulate(..., rel_sem=0.005)`` stops at 256 steps, ~0.3 s.
"""

from autopar.varlen.assign import (
    STRATEGIES,
    Assignment,
    VarlenPlan,
    balanced_packing,
    dynamic_cp,
    flexible_pool,
    memory_groups,
    naive_packing,
    next_fit,
)
from autopar.varlen.dist import LengthDist, check_max, load_distribution
from autopar.varlen.pipeline import StepMetrics, row_times, step_metrics
from autopar.varlen.place import EXACT, FAST, Greedy
from autopar.varlen.seqcost import QuadraticSeqCost, SeqCost
from autopar.varlen.simulate import StrategyResult, simulate

__all__ = [
    "EXACT",
    "FAST",
    "STRATEGIES",
    "Assignment",
    "Greedy",
    "LengthDist",
    "QuadraticSeqCost",
    "SeqCost",
    "StepMetrics",
    "StrategyResult",
    "VarlenPlan",
    "balanced_packing",
    "check_max",
    "dynamic_cp",
    "flexible_pool",
    "load_distribution",
    "memory_groups",
    "naive_packing",
    "next_fit",
    "row_times",
    "simulate",
    "step_metrics",
]
