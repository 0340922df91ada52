"""Skipping disaggregated points that cannot change a serving sweep's answer.

A disaggregated point's decode pool runs b requests per attention rank, R
ranks, steps of t(b) seconds (cost/serve_disagg.py): its TPOT is t(b) and its
output tokens/s per GPU is R b / (t(b) G). The closed loop only decides b, which
is at most `most` = min(C / R, what the decode KV cache holds, the engine's max
batch) and at least 0. The decode step is non-decreasing in the batch and so is
b / t(b) (weights read once, KV, experts touched and tensor-core time all grow
no faster than the batch: tests/unit/search/test_serve_speed.py checks both over
models, GPUs and layouts). So without solving the loop (the costly part: the
prefill queue and the decode step at the solution) the point lies in a box:

    TPOT within [t(0), t(most)]
    tokens/s per GPU   <= R most / (t(most) G), and <= 0.95 osl S B / (s_B G)
    tokens/s per user  <= 1 / t(b_lo)

The second per-GPU bound is the prefill pool's: a point whose pool is busier
than RHO_SATURATED is queue-saturated, and those are neither on the front nor
recommended, so only the others need bounding. b_lo is what the loop's
population leaves (cost/serve_disagg.py: C = X (a + s + W(X)) + R b): X is at
most min(R most / (osl t(0)), 0.95 S B / s_B) and W grows with X, so
b >= (C - X (a + s + W(X))) / R at that X; SOLVED widens both by the slack of
the loop's secant solution. The steps are priced at the batches 2^(i / GRID)
just outside the bound (t(most) from above, t(b_lo) from below), a few per
engine, instead of one at every point's own batch. A deployment's box at its
largest concurrency, with t(0) for the user bound, holds every one of its points.

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
                       <= 1 / L(min(k, max_num_seqs))  without a serving-process cost
    tokens/s per GPU   <= R max(b, k) / (t(b) G)
    TTFT               >= (prefill_slowdown - 1) x one prompt's prefill + the TTFT overhead

the first because every token a request gets takes a step that holds it, L the
loop's step cost at a decode batch (linear through t(1) and t(b)); where the
process keeps up, a decode step holds the whole running batch, at most
max_num_seqs, less the requests being prefilled, whose prompt tokens cost more
than their decodes would: tests/unit/search/test_serve_speed.py checks the loop's
TPOT against it past and below max_num_seqs (t(b) itself, used before, was seen
at 0.41 of it at 32,768 requests a rank past 1,024). The second is Little's law on the loop, whose engine writes at most k tokens per
t(b); the last are the parts of TTFT that the loop does not set. A
disaggregated point's TTFT is at least its prompt's prefill (with the
slowdown), the first decode step, the KV transfer and the overhead.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from autopar.cost.serve import StepTime, decode_step, prefill_in_step, prefill_time
from autopar.cost.serve_disagg import RHO_SATURATED
from autopar.cost.serve_load import ServeEstimate, kv_transfer_time, prefill_server
from autopar.cost.serve_memo import LIMIT, remembered
from autopar.spec.framework import Framework
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Deployment, Engine, EngineArgs, Workload, for_deployment

MARGIN = 1e-9  # relative: a bound must lose by more than rounding
GRID = 8  # decode-step batches per doubling where a box prices its steps (_grid)
T = TypeVar("T")
SOLVED = 0.02  # relative: how far the loop's solution (cost/serve_disagg.py, a secant) may stray from the root


@dataclass(frozen=True, slots=True, kw_only=True)
class Box:
    """Bounds on a disaggregated point before its loop is solved."""

    per_gpu: float  # output tokens/s per GPU, at most
    per_user: float  # tokens/s per user, at most
    tpot_lo: float  # TPOT, at least
    tpot_hi: float  # TPOT, at most (inf: not bounded)


def box(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, held: int, every: bool = False) -> Box:
    """The box of `dep` under `wl`; `held`: requests its decode pool's KV cache holds (the pool's
    max_concurrency, which does not depend on the concurrency). The decode steps it prices are the
    ones the estimate prices (cached: cost/serve_memo.py)."""
    return Boxes(model, hw, dep, wl, held=held).at(wl.concurrency, every=every)


class Boxes:
    """The boxes of one deployment at each concurrency (`at`), and its TTFT floors (`ttft_floor`): what
    does not depend on the concurrency is found once, and the decode steps by batch are kept."""

    __slots__ = ("cap", "dep", "floor", "fw", "gpus", "held", "host", "hw", "lone", "model", "pre", "ranks", "rate_cap", "steps", "wl")

    def __init__(self, model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, held: int) -> None:
        self.model, self.hw, self.dep, self.wl, self.held = model, hw, dep, wl, held
        self.fw, self.ranks, self.gpus = _framework(dep), dep.replicas * dep.engine.dp, dep.gpus
        # batch -> the decode step's seconds, shared by the deployments of one decode engine (a disaggregated
        # one has a deployment for each prefill pool in front of it)
        key = ("steps", dep.engine, dep.weights, dep.kv_bytes, wl.isl, wl.osl)
        self.steps: dict[float, float] = _seen(model, hw, self.fw, key, dict)
        self.floor = math.nan  # the disaggregated TTFT floor, the same at every concurrency (nan: not found yet)
        self.lone = math.nan  # t(0), the disaggregated user and TPOT bound (nan: not priced yet)
        self.pre = _prefill_pool(model, hw, dep, wl.isl) if dep.prefill is not None else None
        # what `at` reads whatever the concurrency, as it would compute it there: the requests a rank
        # holds at most, the prefill pool's rate at RHO_SATURATED, the serving processes' token rate
        fw, ranks = self.fw, self.ranks
        self.cap = max(held / ranks, 1.0) if self.pre is None else max(held / ranks, 1e-9)
        self.rate_cap = RHO_SATURATED * self.pre.top if self.pre is not None else math.inf
        self.host = dep.replicas / (fw.host_token_s * wl.osl) if fw.host_token_s > 0 else math.inf

    def _t(self, batch: float) -> float:
        t = self.steps.get(batch)
        if t is None:
            t = self.steps[batch] = _step(self.model, self.hw, self.dep, self.wl, batch).total
        return t

    def at(self, concurrency: int, *, every: bool = False) -> Box:
        """The box at `concurrency`; with `every`, one that holds every point up to it."""
        fw, ranks, osl = self.fw, self.ranks, self.wl.osl
        if self.pre is None:
            running = min(concurrency / ranks, self.cap)  # as cost/serve_load.py _agg bounds it
            k = max(1, round(running))
            high = self._t(running)
            low = high if k == 1 else self._t(1.0)
            # every step holds min(k, max_num_seqs) decodes at its cost or more (a serving process that keeps up)
            if k > 1 and fw.host_token_s == 0 and fw.host_prompt_token_s == 0:
                low += (min(k, fw.max_seqs) - 1) * (high - low) / (k - 1)
            return Box(per_gpu=ranks * max(running, k) / high / self.gpus, per_user=1 / low, tpot_lo=low, tpot_hi=math.inf)
        most = min(concurrency / ranks, self.cap, fw.max_seqs)  # as cost/serve_load.py _disagg bounds b
        up = _UP.get(most)  # the step there is at least t(most) and top / t(top) at least most / t(most)
        top = _grids(_UP).setdefault(most, _grid(most, up=True)) if up is None else up
        low = self.lone
        if low != low:  # nan: t(0) not read yet
            low = self.lone = self._t(0.0)
        kept = self.steps.get(top)
        high = self._t(top) if kept is None else kept
        pre = self.pre
        assert pre is not None
        rate = min(ranks * top / (osl * high), self.rate_cap, self.host)  # requests/s of a point not saturated
        user = low
        if not every:  # the loop holds C = X (a + s + W) + R b: b is at least what X at its most leaves
            x = min(ranks * most / (osl * low), self.rate_cap) * (1 + SOLVED)
            rho = x / pre.top
            if rho < 1:
                wait = rho * pre.each_s / (2 * (1 - rho))
                least = min(most, (concurrency - x * (pre.ahead_s + pre.service_s + wait)) / ranks) * (1 - SOLVED)
                user = self._t(_grid(least, up=False)) if least > 0 else low
        return Box(per_gpu=rate * osl / self.gpus, per_user=1 / user, tpot_lo=low, tpot_hi=high)

    def ttft_floor(self, concurrency: int) -> float:
        """ttft_floor at `concurrency`."""
        if self.dep.prefill is None:
            return ttft_floor(self.model, self.hw, self.dep, replace(self.wl, concurrency=concurrency), held=self.held)
        if math.isnan(self.floor):
            self.floor = ttft_floor(self.model, self.hw, self.dep, self.wl, held=self.held)
        return self.floor


@dataclass(frozen=True, slots=True)
class _Prefill:
    """A disaggregated deployment's prefill pool as its closed loop sees it (cost/serve_load.py _disagg)."""

    service_s: float  # s: one prompt's prefill, as the framework prices it (serve_load.py prefill_server)
    each_s: float  # s_B / B: a prompt's share of a full batched prefill step
    ahead_s: float  # a: the per-request overhead and the KV transfer
    top: float  # B S / s_B: requests/s at which the pool is always busy (rho = 1)


def _prefill_pool(model: ModelSpec, hw: HardwareProfile, dep: Deployment, isl: int) -> _Prefill:
    assert dep.prefill is not None
    fw, pre = _framework(dep), dep.prefill

    def make() -> _Prefill:
        ahead = fw.ttft_overhead_s + kv_transfer_time(model, hw, dep, isl=isl)
        pfw = _framework(dep, "prefill")
        return _prefill_of(model, hw, pre, dep.prefill_replicas, pfw, dep.weights, fw.prefill_slowdown, ahead, isl)

    key = ("prefill", pre, dep.prefill_replicas, dep.prefill_args, dep.weights, dep.kv_bytes, isl)
    return _seen(model, hw, fw, key, make)


@remembered
def _prefill_of(
    model: ModelSpec,
    hw: HardwareProfile,
    pre: Engine,
    replicas: int,
    pfw: Framework,
    weights: str,
    slowdown: float,
    ahead_s: float,
    isl: int,
) -> _Prefill:
    """_Prefill of `replicas` prefill engines `pre` (cached: the same for every decode pool and concurrency)."""
    server = prefill_server(model, hw, pre, weights=weights, isl=isl, fw=pfw, slowdown=slowdown)
    step_s, batch = server.batch_s, server.batch
    return _Prefill(service_s=server.service_s, each_s=step_s / batch, ahead_s=ahead_s, top=batch * replicas * pre.dp / step_s)


def ttft_floor(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, held: int) -> float:
    """TTFT at least (see the module docstring): asked only when the box alone does not settle a point."""
    fw = for_deployment(dep)
    if dep.prefill is None:
        step = _step(model, hw, dep, wl, _running(dep, wl, held=held))
        alone = prefill_time(model, hw, dep.engine, weights=dep.weights, tokens=wl.isl, seq_len=wl.isl, fw=fw)
        riding = prefill_in_step(alone, step, chunks=max(1.0, wl.isl / fw.chunk_tokens))
        return riding + (fw.prefill_slowdown - 1) * alone.total + fw.ttft_overhead_s
    server = prefill_server(
        model, hw, dep.prefill, weights=dep.weights, isl=wl.isl, fw=for_deployment(dep, "prefill"), slowdown=fw.prefill_slowdown
    )
    return server.service_s + _step(model, hw, dep, wl, 0.0).total + kv_transfer_time(model, hw, dep, isl=wl.isl) + fw.ttft_overhead_s


def _grid(batch: float, *, up: bool) -> float:
    """The nearest of the batches 2^(i / GRID) at or above (`up`) or at or below `batch` (0 below the
    smallest), where a disaggregated box prices its decode steps: a few per decode engine, cached,
    instead of one at every point's own batch."""
    if batch <= 0:
        return 0.0
    i = math.log2(batch) * GRID
    g = 2.0 ** ((math.ceil(i) if up else math.floor(i)) / GRID)
    if up and g < batch:
        return g * 2.0 ** (1 / GRID)
    if not up and g > batch:
        g /= 2.0 ** (1 / GRID)
    return g if up or g >= 2.0**-GRID else 0.0


_UP: dict[float, float] = {}  # batch -> _grid(batch, up=True): a deployment's boxes ask for the same few


def _grids(memo: dict[float, float]) -> dict[float, float]:
    """`memo`, emptied when it has grown past LIMIT."""
    if len(memo) >= LIMIT:
        memo.clear()
    return memo


def _running(dep: Deployment, wl: Workload, *, held: int) -> float:
    """Requests per attention rank of an aggregated point, as cost/serve_load.py _agg bounds them."""
    ranks = dep.replicas * dep.engine.dp
    return min(wl.concurrency / ranks, max(held / ranks, 1.0))


# the steps and prefill pools boxes read, by the identity of the model, profile and framework objects
# (checked on a hit) and the values of the rest: a box asks for a few of them, and hashing the framework
# by value, as cost/serve_memo.py keys them, costs more than the box's own arithmetic
_SEEN: dict[tuple[Any, ...], tuple[object, object, object, Any]] = {}


def _seen(model: ModelSpec, hw: HardwareProfile, fw: Framework, key: tuple[Any, ...], make: Callable[[], T]) -> T:
    full = (id(model), id(hw), id(fw), *key)
    hit = _SEEN.get(full)
    if hit is not None and hit[0] is model and hit[1] is hw and hit[2] is fw:
        return cast(T, hit[3])
    if len(_SEEN) >= LIMIT:
        _SEEN.clear()
    value = make()
    _SEEN[full] = (model, hw, fw, value)
    return value


_FRAMEWORKS: dict[tuple[int, EngineArgs], tuple[Framework, Framework]] = {}


def _framework(dep: Deployment, role: str | None = None) -> Framework:
    """for_deployment(dep, role), one object per framework and launch settings: a deployment launched
    with settings of its own gets a new framework object at every call, which _seen would never find."""
    args = dep.args_for(role)
    key = (id(dep.fw), args)
    hit = _FRAMEWORKS.get(key)
    if hit is not None and hit[0] is dep.fw:
        return hit[1]
    if len(_FRAMEWORKS) >= LIMIT:
        _FRAMEWORKS.clear()
    value = for_deployment(dep, role)
    _FRAMEWORKS[key] = (dep.fw, value)
    return value


def _step(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, batch: float) -> StepTime:
    """The decode step the estimate prices at `batch` (cached: cost/serve_memo.py)."""
    fw = _framework(dep)

    def make() -> StepTime:
        context = wl.isl + wl.osl / 2
        return decode_step(model, hw, dep.engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=batch, context=context, fw=fw)

    return _seen(model, hw, fw, ("step", dep.engine, dep.weights, dep.kv_bytes, batch, wl.isl, wl.osl), make)


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
