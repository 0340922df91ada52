"""Variable sequence lengths: what packing, CP groups and schedulers make of a length distribution.

Packing sequences into micro-batches equalizes tokens, not cost: attention is
quadratic in each document, every DP rank waits for the slowest at the
gradient sync, and every pipeline stage waits for the slowest micro-batch. A
fixed CP group pays one ring exchange per packed micro-batch whatever the
documents inside. This package samples training steps from a length
distribution and measures, for one plan, what each strategy makes of them.

Public API (everything a caller needs is re-exported here)
----------------------------------------------------------

Distributions (``spec/distribution.py``; read from a file by ``io/distributions.py``, as this
package reads no file)::

    autopar.io.distributions.load_distribution(path) -> LengthDist   # .txt / .jsonl / .npy / .yaml|.json
    check_max(dist, max_seq_len, model_name)       # SpecError if a length exceeds the model

Cost (``seqcost.py``): ``SeqCost`` answers linear(T, c), attention(L, c),
exposed(T, c, attn) and time(L, c) for one rank of a CP group of c in one
pipeline stage; ``QuadraticSeqCost`` is the textbook form, the cost model's
``ModelSeqCost`` (cost/sequence.py) the real one.

Strategies (``strategies.py`` names them, cites them and lists their overheads)::

    naive_packing, balanced_packing, wlb_packing   # fixed CP (assign.py)
    megatron_dynamic_cp, hdp, hdp_no_balance       # per-sequence groups from the DP x CP pool (pool.py)
    run_strategy(name, lengths, cost, plan, overheads=) -> Assignment

Simulation (``simulate.py``)::

    simulate(dist, cost, dp=, cp=, pp=, global_batch=, micro_batch_tokens=, max_tokens_per_rank=,
             steps=, overheads=Overheads(...), ...) -> dict[str, StrategyResult]
    StrategyResult: step time mean and p50/p90/p99, imbalance, stall, bubble, overhead share,
        tokens/s, sum of squared lengths/s (for MFU), token room, longest fit, overflow, CP group

``step_metrics`` (``pipeline.py``) turns a cost grid into step times; the
greedy engine is ``place.py`` (``EXACT`` LPT or ``FAST`` rounds and pouring), on the
state of ``cells.py``, by ``rounds.py`` (many rows), ``column.py`` (one row) and ``pour.py``.
"""

from autopar.spec.distribution import LengthDist, check_max
from autopar.varlen.assign import (
    Assignment,
    VarlenPlan,
    balanced_packing,
    naive_packing,
    next_fit,
    wlb_packing,
)
from autopar.varlen.pipeline import StepMetrics, row_times, step_metrics
from autopar.varlen.place import EXACT, FAST, Greedy
from autopar.varlen.pool import hdp, hdp_no_balance, megatron_dynamic_cp, power_of_two_groups
from autopar.varlen.seqcost import QuadraticSeqCost, SeqCost
from autopar.varlen.simulate import (
    Overheads,
    StrategyResult,
    delay_outliers,
    longest_fit,
    run_strategy,
    simulate,
    strategy_plan,
    with_p2p,
)
from autopar.varlen.strategies import STRATEGIES, STRATEGY_INFO

__all__ = [
    "EXACT",
    "FAST",
    "STRATEGIES",
    "STRATEGY_INFO",
    "Assignment",
    "Greedy",
    "LengthDist",
    "Overheads",
    "QuadraticSeqCost",
    "SeqCost",
    "StepMetrics",
    "StrategyResult",
    "VarlenPlan",
    "balanced_packing",
    "check_max",
    "delay_outliers",
    "hdp",
    "hdp_no_balance",
    "longest_fit",
    "megatron_dynamic_cp",
    "naive_packing",
    "next_fit",
    "power_of_two_groups",
    "row_times",
    "run_strategy",
    "simulate",
    "step_metrics",
    "strategy_plan",
    "with_p2p",
    "wlb_packing",
]
