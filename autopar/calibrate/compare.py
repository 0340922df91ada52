"""Predicted against measured, row by row. Pure: the renderer, --save and the tests share it."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from autopar.calibrate.predict import Prediction
from autopar.calibrate.results import RunResult
from autopar.spec.plan import Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One compared quantity."""

    key: str  # stable name (JSON, tests), e.g. rank0.params, acts.block, coll.all_gather
    label: str  # what the table prints
    predicted: float | None  # None: the model has no number for it here
    measured: float | None  # None: not measured on this device
    unit: str  # B (bytes), s (seconds), n (a count)

    @property
    def error(self) -> float | None:
        """measured / predicted - 1, or None."""
        if self.predicted is None or self.measured is None or self.predicted == 0:
            return None
        return self.measured / self.predicted - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStats:
    """Measured step times."""

    median_s: float
    min_s: float
    p90_s: float
    cv: float  # standard deviation / mean
    steps: int


def step_stats(times: tuple[float, ...]) -> StepStats:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    mean = statistics.fmean(ordered)
    cv = statistics.pstdev(ordered) / mean if len(ordered) > 1 and mean > 0 else 0.0
    return StepStats(median_s=statistics.median(ordered), min_s=ordered[0], p90_s=p90, cv=cv, steps=len(ordered))


def stage_leaders(run: RunResult) -> list[int]:
    """The lowest global rank of each pipeline stage, by stage."""
    first: dict[int, int] = {}
    for r in run.ranks:
        first.setdefault(r.pp_rank, r.rank)
    return [first[s] for s in sorted(first)]


def compare(pred: Prediction, run: RunResult, plan: Plan) -> tuple[Row, ...]:
    rows: list[Row] = []
    for r in run.ranks:
        p = pred.ranks[r.pp_rank]
        tag = f"rank {r.rank}" + (f" (stage {r.pp_rank})" if plan.pp > 1 else "")
        rows += [
            Row(key=f"rank{r.rank}.params", label=f"{tag} params", predicted=p.param_bytes, measured=float(r.param_bytes), unit="B"),
            Row(key=f"rank{r.rank}.grads", label=f"{tag} grads", predicted=p.grad_bytes, measured=float(r.grad_bytes), unit="B"),
            Row(
                key=f"rank{r.rank}.optimizer",
                label=f"{tag} optimizer",
                predicted=p.optimizer_bytes,
                measured=float(r.optimizer_bytes),
                unit="B",
            ),
        ]
    lead = run.ranks[0]
    rows.append(
        Row(
            key="acts.block",
            label=f"acts/block ({pred.stack_saves})",
            predicted=pred.block_activation_stack,
            measured=lead.block_activation_bytes,
            unit="B",
        )
    )
    rows.append(
        Row(
            key="acts.block_fused",
            label="acts/block (fused formula)",
            predicted=pred.block_activation_fused,
            measured=lead.block_activation_bytes,
            unit="B",
        )
    )
    rows.append(
        Row(key="in_flight", label="micro-batches in flight", predicted=pred.in_flight, measured=lead.in_flight_chunks / plan.vpp, unit="n")
    )
    for leader in stage_leaders(run):
        r = run.ranks[leader]
        predicted = pred.ranks[r.pp_rank].collective_bytes
        tag = f"rank {r.rank} " if plan.pp > 1 else ""
        for kind in sorted(set(predicted) | set(r.collective_bytes)):
            rows.append(
                Row(
                    key=f"rank{r.rank}.coll.{kind}",
                    label=f"{tag}{kind}/step",
                    predicted=predicted.get(kind, 0.0),
                    measured=r.collective_bytes.get(kind, 0.0),
                    unit="B",
                )
            )
    if lead.peak_memory_bytes is not None:
        p0 = pred.ranks[0]
        blocks = lead.blocks_metered
        acts = pred.block_activation_stack * blocks / plan.vpp * pred.in_flight
        peak = p0.param_bytes + p0.grad_bytes + p0.optimizer_bytes + acts
        rows.append(Row(key="peak_memory", label="peak memory (rank 0)", predicted=peak, measured=lead.peak_memory_bytes, unit="B"))
    stats = step_stats(lead.step_times_s)
    rows.append(Row(key="step_time", label="step time (median)", predicted=pred.step_time_s, measured=stats.median_s, unit="s"))
    return tuple(rows)
