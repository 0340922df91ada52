"""Skipping disaggregated points that cannot change a serving sweep's answer.

A disaggregated point's decode pool runs b requests per attention rank, R
ranks, steps of t(b) seconds (cost/serve_disagg.py): its TPOT is t(b) and its
output tokens/s per GPU is R b / (t(b) G). The closed loop only decides b, which
is at most `most` = min(C / R, what the decode KV cache holds) and at least 0.
The decode step is non-decreasing in the batch and so is b / t(b) (weights read
once, KV, experts touched and tensor-core time all grow no faster than the
batch: tests/test_serve_speed.py checks both over models, GPUs and layouts).
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
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from autopar.cost.serve import decode_step
from autopar.cost.serve_load import ServeEstimate
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
    tpot_hi: float  # TPOT, at most


def box(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, held: int) -> Box:
    """The box of `dep` (disaggregated) under `wl`; `held`: requests its decode pool's KV cache holds
    (the pool's max_concurrency, which does not depend on the concurrency)."""
    fw = for_deployment(dep)
    ranks = dep.replicas * dep.engine.dp
    most = min(wl.concurrency / ranks, max(held / ranks, 1e-9))  # as cost/serve_load.py _disagg bounds b

    def t(b: float) -> float:  # the call the loop makes (cached: cost/serve_memo.py)
        return decode_step(model, hw, dep.engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=b,
                           context=wl.isl + wl.osl / 2, fw=fw).total

    low, high = t(0.0), t(most)
    return Box(per_gpu=ranks * most / high / dep.gpus, per_user=1 / low, tpot_lo=low, tpot_hi=high)


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
