"""Skipping disaggregated points that cannot change a serving sweep's answer.

A disaggregated point's decode pool runs b requests per attention rank, R
ranks, steps of t(b) seconds (cost/serve_disagg.py): its TPOT is t(b) and its
output tokens/s per GPU is R b / (t(b) G). The closed loop only decides b, which
is at most `most` = min(C / R, what the decode KV cache holds) and at least 0.
The decode step is non-decreasing in the batch and so is b / t(b) (weights read
once, KV, experts touched and tensor-core time all grow no faster than the
batch: tests/unit/search/test_serve_speed.py checks both over models, GPUs and layouts).
So without solving the loop (the costly part: the prefill queue and the decode
step at the solution) the point lies in a box:

    tokens/s per user  <= 1 / t(0)
    tokens/s per GPU   <= R most / (t(most) G)
    TPOT within [t(0), t(most)]

A point strictly inside what an already priced, not queue-saturated point beats
on both axes is off the Pareto front, and removing it changes no other point's
place on the front. It cannot be the recommendation either when its throughput
bound is below the best that meets the targets so far, or when t(0) already
misses the TPOT target. `Staircase` holds the front of the points priced so far.

An aggregated point is bounded the same way before its closed loop is
simulated (cost/serve_sim.py, the costly part): R attention ranks of at most
k = round(b) requests each, b = min(C / R, what the KV cache holds), steps
that cost at least the decode step at their decode batch (prompt tokens,
eager launches and the serving process only add to it), linear between the
steps at batch 1 and b (cost/serve_loop.py closed_loop). So

    tokens/s per user  <= 1 / t(1)        (t(b) when k = 1: the step is t(b))
    tokens/s per GPU   <= R max(b, k) / (t(b) G)
    TTFT               >= (prefill_slowdown - 1) x one prompt's prefill + the TTFT overhead

the first because every token a request gets takes a step that holds it, the
second Little's law on the loop, whose engine writes at most k tokens per
t(b); the last are the parts of TTFT that the loop does not set. A
disaggregated point's TTFT is at least its prompt's prefill (with the
slowdown), the first decode step, the KV transfer and the overhead.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from autopar.cost.serve import StepTime, decode_step, prefill_in_step, prefill_time
from autopar.cost.serve_load import ServeEstimate, kv_transfer_time
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Deployment, Workload, for_deployment

MARGIN = 1e-9  # relative: a bound must lose by more than rounding


@dataclass(frozen=True, slots=True, kw_only=True)
class Box:
    """Bounds on a disaggregated point before its loop is solved."""

    per_gpu: float  # output tokens/s per GPU, at most
    per_user: float  # tokens/s per user, at most
    tpot_lo: float  # TPOT, at least
    tpot_hi: float  # TPOT, at most (inf: not bounded)


def box(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, held: int) -> Box:
    """The box of `dep` under `wl`; `held`: requests its decode pool's KV cache holds (the pool's
    max_concurrency, which does not depend on the concurrency). The decode steps it prices are the
    ones the estimate prices (cached: cost/serve_memo.py)."""
    fw = for_deployment(dep)
    ranks = dep.replicas * dep.engine.dp
    if dep.prefill is None:
        running = _running(dep, wl, held=held)
        k = max(1, round(running))
        high = _step(model, hw, dep, wl, running).total
        low = high if k == 1 or fw.host_token_s == 0 else _step(model, hw, dep, wl, 1.0).total
        return Box(per_gpu=ranks * max(running, k) / high / dep.gpus, per_user=1 / low, tpot_lo=low, tpot_hi=math.inf)
    most = min(wl.concurrency / ranks, max(held / ranks, 1e-9))  # as cost/serve_load.py _disagg bounds b
    low, high = _step(model, hw, dep, wl, 0.0).total, _step(model, hw, dep, wl, most).total
    return Box(per_gpu=ranks * most / high / dep.gpus, per_user=1 / low, tpot_lo=low, tpot_hi=high)


def ttft_floor(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, held: int) -> float:
    """TTFT at least (see the module docstring): asked only when the box alone does not settle a point."""
    fw = for_deployment(dep)
    if dep.prefill is None:
        step = _step(model, hw, dep, wl, _running(dep, wl, held=held))
        alone = prefill_time(model, hw, dep.engine, weights=dep.weights, tokens=wl.isl, seq_len=wl.isl, fw=fw)
        riding = prefill_in_step(alone, step, chunks=max(1.0, wl.isl / fw.chunk_tokens))
        return riding + (fw.prefill_slowdown - 1) * alone.total + fw.ttft_overhead_s
    pstep = prefill_time(model, hw, dep.prefill, weights=dep.weights, tokens=wl.isl, seq_len=wl.isl, fw=for_deployment(dep, "prefill"))
    return (
        pstep.total * fw.prefill_slowdown
        + _step(model, hw, dep, wl, 0.0).total
        + kv_transfer_time(model, hw, dep, isl=wl.isl)
        + fw.ttft_overhead_s
    )


def _running(dep: Deployment, wl: Workload, *, held: int) -> float:
    """Requests per attention rank of an aggregated point, as cost/serve_load.py _agg bounds them."""
    ranks = dep.replicas * dep.engine.dp
    return min(wl.concurrency / ranks, max(held / ranks, 1.0))


def _step(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, batch: float) -> StepTime:
    """The decode step the estimate prices at `batch` (cached: cost/serve_memo.py)."""
    return decode_step(
        model, hw, dep.engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=batch, context=wl.isl + wl.osl / 2, fw=for_deployment(dep)
    )


class Staircase:
    """The Pareto front (tokens/s per GPU, tokens/s per user) of the points added so far."""

    __slots__ = ("_neg_users", "_per_gpu")

    def __init__(self) -> None:
        self._neg_users: list[float] = []  # -tokens/s per user, ascending (fastest users first)
        self._per_gpu: list[float] = []  # tokens/s per GPU, ascending along the front

    def add(self, est: ServeEstimate) -> None:
        if est.saturated:
            return
        x, y = est.output_tokens_per_s / est.deployment.gpus, 1 / est.tpot_s
        k = bisect_left(self._neg_users, -y)  # the points with more tokens/s per user come before k
        if k and self._per_gpu[k - 1] >= x:
            return  # a point faster per user has as many tokens/s per GPU
        if k < len(self._neg_users) and self._neg_users[k] == -y and self._per_gpu[k] >= x:
            return  # a point as fast per user has as many tokens/s per GPU
        end = k
        while end < len(self._per_gpu) and self._per_gpu[end] <= x:
            end += 1  # slower per user and not more per GPU: beaten by the new point
        self._neg_users[k:end] = [-y]
        self._per_gpu[k:end] = [x]

    def beats(self, b: Box) -> bool:
        """A point here has more tokens/s per user and more tokens/s per GPU than anything in the box."""
        k = bisect_left(self._neg_users, -b.per_user * (1 + MARGIN))  # strictly faster per user before k
        return k > 0 and self._per_gpu[k - 1] > b.per_gpu * (1 + MARGIN)
