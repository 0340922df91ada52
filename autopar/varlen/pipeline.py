"""From a cost grid to step time: the 1F1B pipeline with uneven micro-batches.

The formula is cost/pipeline.py's (the one pipeline model, shared with the
fixed-length cost); with vpp chunks per rank the fill/drain slots shrink by vpp.

A rank (one pipeline stage of one row) processes its micro-batches j = 1..m,
each taking s_j seconds forward + backward in that stage. Under 1F1B, the
stage waits for the pipeline to fill and drain: with equal micro-batches the
step takes (m + pp - 1) * s, the bubble fraction (pp - 1) / m of Narayanan et
al. 2021 (SC'21, sec. 2.2). With unequal micro-batches we use

    T = sum_j s_j + (pp - 1) * max_j s_j

the steady-state work plus pp - 1 fill/drain slots, each as long as the
slowest micro-batch, because in 1F1B every stage is paced by the slowest
micro-batch in flight. It is exact for equal micro-batches and a conservative
bound otherwise: one long micro-batch stalls every stage, the pipeline
imbalance that WLB-LLM (OSDI'25) measures. Written per stage; in terms of
whole-model micro-batch costs c_j = pp * s_j it reads
sum_j c_j / pp + (pp - 1) * max_j c_j / pp.

Every row waits for the slowest at the gradient sync, so the step time is the
maximum of T over rows. Reported per step:

- ``imbalance``: max over rows of the work sum_j s_j divided by its mean (1.0
  is perfect balance; waits inside CP groups count as work of the waiting rank);
- ``stall_frac``: the critical row's (pp - 1) * (max_j s_j - mean_j s_j), the
  time lost to uneven micro-batches (0 when they are equal), as a share of the
  step time (T plus any fixed per-step overhead);
- ``bubble_frac``: the critical row's (pp - 1) * max_j s_j, the whole fill and
  drain, as a share of the step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar.cost.pipeline import varlen_time
from autopar.varlen.assign import Assignment


def row_times(cell_cost_s: np.ndarray, pp: int, vpp: int = 1) -> np.ndarray:
    """Per-row pipeline time (S, rows) = sum_j s_j + (pp - 1) * max_j s_j / vpp over micro-batches
    (cost/pipeline.py's varlen_time)."""
    return varlen_time(cell_cost_s, pp=pp, vpp=vpp)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StepMetrics:
    """Per-step figures of one strategy, arrays of shape (S,)."""

    step_time_s: np.ndarray  # max over rows of the pipeline time, plus the fixed overhead
    imbalance: np.ndarray  # max / mean of per-row work
    stall_frac: np.ndarray  # share of the step lost to uneven micro-batches on the critical row
    bubble_frac: np.ndarray  # share of the step in pipeline fill and drain on the critical row
    tokens: np.ndarray  # tokens trained in the step


def step_metrics(assignment: Assignment, pp: int, *, vpp: int = 1, overhead_s: float | np.ndarray = 0.0) -> StepMetrics:
    """Step time, imbalance and pipeline stall of every step in ``assignment`` (vpp chunks per rank)."""
    cells = assignment.cell_cost_s
    work = cells.sum(axis=-1)
    peak = cells.max(axis=-1) / vpp  # fill/drain slots: (pp - 1) of them, each max_j s_j / vpp
    times = varlen_time(cells, pp=pp, vpp=vpp)
    crit = times.argmax(axis=1)[:, None]
    step = np.take_along_axis(times, crit, 1)[:, 0]
    used = np.maximum((assignment.cell_tokens.sum(axis=1) > 0).sum(axis=1), 1)  # micro-batches in use
    crit_peak = np.take_along_axis(peak, crit, 1)[:, 0]
    crit_mean = np.take_along_axis(work, crit, 1)[:, 0] / used / vpp
    total = step + overhead_s
    safe = np.where(total > 0, total, 1.0)
    mean_work = work.mean(axis=1)
    tokens = assignment.cell_tokens.sum(axis=(1, 2))  # rows hold L (fixed CP) or L / g on each of g ranks
    return StepMetrics(
        step_time_s=total,
        imbalance=np.where(mean_work > 0, work.max(axis=1) / np.where(mean_work > 0, mean_work, 1.0), 1.0),
        stall_frac=(pp - 1) * (crit_peak - crit_mean) / safe,
        bubble_frac=(pp - 1) * crit_peak / safe,
        tokens=tokens,
    )
