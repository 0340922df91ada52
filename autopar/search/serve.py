"""Serving sweep: engine layouts x replicas x attention-DP x EP x {agg, disagg xPyD} x KV dtype x concurrency.

Layouts the frameworks accept (heads divisible by tp, experts by ep, tp within
a node, expert TP = tp x dp / ep); each one is priced at concurrencies 1, 2, 4,
... up to what its KV cache holds. Deployments that do not fit are dropped.
The answer is the Pareto front of output tokens/s per GPU against tokens/s per
user, and the recommended deployment, picked by one of `RULES`:

- targets (a TTFT or TPOT target given): the most output tokens/s per GPU
  among the points that meet the targets and are not queue-saturated;
- default (no target given): the same under DEFAULT_TARGETS, MLPerf
  Inference's interactive bounds for Llama-2-70B (mlcommons/inference
  loadgen/mlperf.conf, llama2-70b-interactive.Server: ttft_latency 450,
  tpot_latency 40 ms; there at the 99th percentile, here on the means). With
  no target the most tokens/s per GPU is the front's last point, the largest
  batch, at a TPOT no one deploys (Qwen3-235B on 64 H200: 70-137 ms, 7-14
  tokens/s per user); the sweep still prices the whole front;
- knee (no target given and nothing meets the default ones): the point of the
  front with the largest product of tokens/s per GPU and tokens/s per user,
  where one percent more of the one costs one percent of the other. On a
  memory-bound decode step t(b) = t0 + k b the product b / t(b)^2 is largest
  at b = t0 / k, TPOT twice the near-empty step's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial

from autopar.cost.serve_load import ServeEstimate, capacity
from autopar.cost.serve_load import estimate as _estimate
from autopar.cost.serve_memo import remembered
from autopar.errors import SpecError
from autopar.search.serve_prune import MARGIN, Box, Boxes, Staircase, box, ttft_floor
from autopar.spec.framework import Framework
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import DEFAULT_ARGS, Deployment, Engine, EngineArgs, Workload, kv_auto, launched_model

# Requests in flight per GPU where the sweep stops even if the KV cache holds more (4,096 on 8 GPUs);
# per GPU so that a fleet's throughput per GPU does not fall only because its concurrency was capped.
MAX_CONCURRENCY_PER_GPU = 512
ALL_COUNTS = 16  # disaggregated prefill-engine counts tried one by one up to here, then about 10% apart
# a point priced once per process: serve suggest --emit sweeps again over the deployments it can launch
estimate = remembered(_estimate)


@dataclass(frozen=True, slots=True, kw_only=True)
class Targets:
    """Latency targets a deployment must meet (None: no target)."""

    ttft_s: float | None = None  # time to first token
    tpot_s: float | None = None  # inter-token latency after the first token
    default: bool = False  # not given by the user: no early stop of the sweep, and the knee if none meets them

    def met(self, est: ServeEstimate) -> bool:
        return (
            (self.ttft_s is None or est.ttft_s <= self.ttft_s) and (self.tpot_s is None or est.tpot_s <= self.tpot_s) and not est.saturated
        )


# MLPerf Inference, llama2-70b-interactive.Server (mlcommons/inference loadgen/mlperf.conf): see the module docstring
DEFAULT_TTFT_S, DEFAULT_TPOT_S = 0.450, 0.040
DEFAULT_TARGETS = Targets(ttft_s=DEFAULT_TTFT_S, tpot_s=DEFAULT_TPOT_S, default=True)
_BOUNDS = f"TTFT <= {DEFAULT_TTFT_S * 1e3:g} ms, TPOT <= {DEFAULT_TPOT_S * 1e3:g} ms"
_MLPERF = f"MLPerf's interactive bounds ({_BOUNDS})"
# How the recommendation was picked: rule name -> the sentence outputs print (see the module docstring)
RULES = {
    "targets": "the most output tokens/s per GPU meeting the targets, not queue-saturated",
    "default": f"no --ttft-ms/--tpot-ms given, so {_MLPERF}: the most output tokens/s per GPU meeting them, not queue-saturated",
    "knee": f"no --ttft-ms/--tpot-ms given and nothing meets {_MLPERF}, so the knee of the front: the largest "
    "tokens/s per GPU x tokens/s per user",
}
DEFAULT_TARGETS_TEXT = f"default {_BOUNDS} (MLPerf interactive)"  # the targets line of suggest


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSweep:
    """Everything the sweep priced that fits, and what it recommends."""

    points: tuple[ServeEstimate, ...]  # every (deployment, concurrency) that fits
    pareto: tuple[ServeEstimate, ...]  # tokens/s per GPU against tokens/s per user, fastest users first
    best: ServeEstimate | None  # the recommendation, picked by `rule`
    layouts: int  # deployments tried (before concurrency)
    rule: str = "targets"  # a key of RULES
    skipped: int = 0  # points that fit but were bounded without solving (search/serve_prune.py), not in `points`


def _powers(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def counts(limit: int) -> list[int]:
    """1 .. min(limit, ALL_COUNTS), then counts about 10% apart up to `limit`: the prefill-to-decode
    split is priced finely where it matters (few engines) and sparsely on large fleets, where the sweep
    would otherwise grow with the GPU count squared."""
    out, v = list(range(1, min(limit, ALL_COUNTS) + 1)), float(ALL_COUNTS)
    while True:
        v *= 1.1
        if round(v) > limit:
            return out
        out.append(round(v))


def runs_on(engine: Engine, framework: str) -> bool:
    """The framework can express the layout (Engine.check_framework)."""
    try:
        engine.check_framework(framework)
    except SpecError:
        return False
    return True


def engines(model: ModelSpec, hw: HardwareProfile, gpus: int, *, max_pp: int, framework: str) -> Iterator[Engine]:
    """Engine layouts on at most `gpus` GPUs that the framework accepts."""
    for tp in _powers(min(gpus, hw.gpus_per_node)):
        for pp in _powers(min(max_pp, gpus // tp)):
            dps = _powers(gpus // (tp * pp)) if model.moe is not None else [1]
            for dp in dps:
                eps = [e for e in _powers(tp * dp) if model.moe is not None and model.moe.num_experts % e == 0] or [1]
                for ep in eps:
                    try:
                        engine = Engine(tp=tp, pp=pp, dp=dp, ep=ep)
                        engine.check(model)
                    except SpecError:
                        continue
                    if runs_on(engine, framework):
                        yield engine


def deployments(
    model: ModelSpec,
    hw: HardwareProfile,
    *,
    gpus: int,
    framework: Framework,
    weights: str,
    kv_dtypes: tuple[str, ...],
    modes: tuple[str, ...],
    args: EngineArgs = DEFAULT_ARGS,
    pool_args: tuple[EngineArgs, EngineArgs] | None = None,
) -> Iterator[Deployment]:
    """Every deployment of `gpus` GPUs in the given modes, each engine launched with `args` (a disaggregated
    deployment's prefill and decode engines with `pool_args`, where given)."""
    prefill_args, decode_args = (args, args) if pool_args is None else pool_args
    layouts = list(engines(model, hw, gpus, max_pp=gpus, framework=framework.name))
    auto = kv_auto(model)[0]
    for kv in kv_dtypes:
        if "agg" in modes:
            for e in layouts:
                if gpus % e.gpus == 0:
                    yield Deployment(
                        fw=framework, mode="agg", engine=e, replicas=gpus // e.gpus, weights=weights, kv_dtype=kv, kv_auto=auto, args=args
                    )
        if "disagg" in modes:
            flat = [e for e in layouts if e.pp == 1]
            for pre in flat:
                for dec in flat:
                    for x in counts(gpus // pre.gpus - 1):
                        rest = gpus - x * pre.gpus
                        if rest > 0 and rest % dec.gpus == 0:
                            yield Deployment(
                                fw=framework,
                                mode="disagg",
                                engine=dec,
                                replicas=rest // dec.gpus,
                                prefill=pre,
                                prefill_replicas=x,
                                weights=weights,
                                kv_dtype=kv,
                                kv_auto=auto,
                                args=decode_args,
                                prefill_args=prefill_args,
                            )


def pareto(points: list[ServeEstimate]) -> tuple[ServeEstimate, ...]:
    """Points no other point beats on both tokens/s per GPU and tokens/s per user."""
    ranked = sorted(points, key=lambda e: (-1 / e.tpot_s, -e.output_tokens_per_s))
    front: list[ServeEstimate] = []
    best = -1.0
    for est in ranked:
        per_gpu = est.output_tokens_per_s / est.deployment.gpus
        if per_gpu > best:
            front.append(est)
            best = per_gpu
    return tuple(front)


def sweep(
    model: ModelSpec,
    hw: HardwareProfile,
    *,
    gpus: int,
    isl: int,
    osl: int,
    framework: Framework,
    weights: str,
    kv_dtypes: tuple[str, ...],
    modes: tuple[str, ...],
    targets: Targets,
    concurrency: int | None = None,
    args: EngineArgs = DEFAULT_ARGS,
    pool_args: tuple[EngineArgs, EngineArgs] | None = None,
    progress: Callable[[int, int], None] | None = None,
    prune: bool = True,
    keep: Callable[[Deployment], bool] | None = None,
) -> ServeSweep:
    """Price every deployment at every concurrency (or the one given) and pick the best that meets the targets;
    `progress(done, total)`, if given, is told of each deployment priced; `keep`, if given, says which
    deployments to consider (serve suggest --emit: those its engine can launch).

    With `prune`, points that provably change neither the front nor the recommendation are not solved
    (search/serve_prune.py): the aggregated deployments are priced first, so that their points bound the
    rest, and a disaggregated deployment whose every point is bounded out is not walked. The answer is
    the same; `points` then lacks the skipped ones (and when nothing meets given targets, the sweep runs
    again for the message's lowest TPOT and TTFT: _unmet). `pool_args`: (prefill, decode) launch settings of
    the disaggregated deployments (default `args` for both)."""
    model = launched_model(model, args)  # the Mamba state dtype the launch sets, once for the whole sweep
    todo = [
        d
        for d in deployments(
            model, hw, gpus=gpus, framework=framework, weights=weights, kv_dtypes=kv_dtypes, modes=modes, args=args, pool_args=pool_args
        )
        if keep is None or keep(d)
    ]
    layouts = len(todo)
    priced: list[list[ServeEstimate]] = [[] for _ in todo]
    state = _Bounds(targets=targets, gpus=gpus)
    one = Workload(isl=isl, osl=osl, concurrency=concurrency or 1)
    if concurrency is not None or not prune:
        plans = [_Plan(index=i) for i in range(layouts)]
    else:
        plans = sorted(p for i, dep in enumerate(todo) if (p := _plan(model, hw, dep, one, index=i, gpus=gpus)))
    for done, plan in enumerate(plans, start=1):
        if progress is not None:
            progress(done, layouts)
        dep = todo[plan.index]
        if concurrency is not None:
            est = estimate(model, hw, dep, one)
            if est.fits:
                priced[plan.index].append(est)
                state.add(est)
            continue
        priced[plan.index] = _walk(model, hw, dep, one, state=state, plan=plan)
    if progress is not None and len(plans) < layouts:  # the rest do not fit: nothing to price
        progress(layouts, layouts)
    points = [p for group in priced for p in group]
    result = _answer(points, targets=targets, layouts=layouts, skipped=state.skipped)
    if state.skipped and result.best is None and not targets.default:
        return _unmet(model, hw, todo, one, targets=targets, gpus=gpus)
    return result


class _Bounds:
    """What the points priced so far bound: their front, the most output tokens/s meeting the targets,
    and the points skipped."""

    def __init__(self, *, targets: Targets, gpus: int) -> None:
        self.targets, self.gpus = targets, gpus
        self.front, self.best, self.skipped = Staircase(), 0.0, 0
        self.tpot = targets.tpot_s if targets.tpot_s is not None else math.inf
        self.ttft = targets.ttft_s if targets.ttft_s is not None else math.inf
        self.stop = 2 * self.tpot if not targets.default else math.inf  # TPOT past which a deployment's sweep stops

    def add(self, est: ServeEstimate) -> None:
        self.front.add(est)
        if self.targets.met(est):
            self.best = max(self.best, est.output_tokens_per_s)

    def useless(self, b: Box, ttft: Callable[[], float]) -> bool:
        """No point in the box (with a TTFT of at least `ttft()`) is on the front or can be the recommendation."""
        if not self.front.beats(b):
            return False
        if b.per_gpu * self.gpus * (1 + MARGIN) < self.best or 1 / b.per_user > self.tpot * (1 + MARGIN):
            return True
        return self.ttft < math.inf and ttft() > self.ttft * (1 + MARGIN)

    def skips(self, b: Box, *, first: bool) -> str:
        """For a useless point: "next" (skip it), "rest" (skip it and the deployment's later points) or ""
        (price it: whether the whole sweep stops after it is not decided by its box). The first point
        of a deployment never stops it."""
        if first or b.tpot_hi * (1 + MARGIN) <= self.stop:
            return "next"
        return "rest" if b.tpot_lo > self.stop * (1 + MARGIN) else ""


@dataclass(frozen=True, slots=True, order=True)
class _Plan:
    """A deployment that fits, as the pruned sweep walks it: the aggregated ones first, each kind in
    order of its most tokens/s per GPU (that order fills the front early, so that it bounds more
    points; it changes no answer: the points are gathered in the deployments' order)."""

    disagg: bool = False
    neg_per_gpu: float = 0.0
    index: int = 0  # in the sweep's list of deployments
    held: int = 0  # requests the decode (or only) pool holds; 0: not known yet (the whole sweep)
    whole: Box | None = field(default=None, compare=False)  # the box at the largest concurrency
    boxes: Boxes | None = field(default=None, compare=False)  # its boxes at each concurrency


def _levels(held: int, gpus: int) -> list[int]:
    """The concurrencies a deployment is priced at: 1, 2, 4, ... up to what its KV cache holds."""
    return [1, *_powers(min(MAX_CONCURRENCY_PER_GPU * gpus, held))[1:]]


def _plan(model: ModelSpec, hw: HardwareProfile, dep: Deployment, one: Workload, *, index: int, gpus: int) -> _Plan | None:
    """The deployment's plan, None when it does not fit."""
    fits, held = capacity(model, hw, dep, one)
    if not fits:
        return None
    boxes = Boxes(model, hw, dep, one, held=held)
    whole = boxes.at(_levels(held, gpus)[-1], every=True)
    return _Plan(disagg=dep.mode != "disagg", neg_per_gpu=-whole.per_gpu, index=index, held=held, whole=whole, boxes=boxes)


def _walk(model: ModelSpec, hw: HardwareProfile, dep: Deployment, one: Workload, *, state: _Bounds, plan: _Plan) -> list[ServeEstimate]:
    """The points of one deployment at its levels, less those bounded out (when `plan` holds a box:
    the pruned sweep; counted in state.skipped)."""
    first = None if plan.whole is not None else estimate(model, hw, dep, one)
    if first is not None and not first.fits:
        return []
    levels = _levels(plan.held if first is None else first.pools[-1].max_concurrency, state.gpus)
    whole, boxes = plan.whole, plan.boxes  # the box at the largest concurrency holds every point's
    if whole is not None and boxes is not None and dep.mode == "disagg" and state.useless(whole, partial(boxes.ttft_floor, 1)):
        if whole.tpot_hi * (1 + MARGIN) <= state.stop:
            state.skipped += len(levels)
            return []
        if whole.tpot_lo > state.stop * (1 + MARGIN):  # the whole sweep prices 1 and 2, then stops
            state.skipped += min(2, len(levels))
            return []
    out: list[ServeEstimate] = []
    for j, c in enumerate(levels):
        if boxes is not None:
            b = boxes.at(c)
            useless = state.useless(b, partial(boxes.ttft_floor, c))
            skip = state.skips(b, first=j == 0) if useless else ""
            if skip:
                state.skipped += 1
                if skip == "rest":
                    break
                continue
        est = first if first is not None and j == 0 else estimate(model, hw, dep, replace(one, concurrency=c))
        out.append(est)
        state.add(est)
        if j > 0 and est.tpot_s > state.stop:
            break  # TPOT only grows with concurrency; far past the target nothing better follows
    return out


def _unmet(model: ModelSpec, hw: HardwareProfile, todo: list[Deployment], one: Workload, *, targets: Targets, gpus: int) -> ServeSweep:
    """The sweep again when nothing meets the given targets, for the message's lowest TPOT and TTFT
    (advise/serve.py suggest): every point the whole sweep prices, less the disaggregated deployments
    whose every point has a TPOT (at least t(0)) and a TTFT (at least ttft_floor) above the lowest ones
    priced so far and is off the front; the aggregated ones are priced first. Nothing meets the targets
    here either: the pruned sweep skips only points that cannot be the recommendation."""
    state = _Bounds(targets=targets, gpus=gpus)
    priced: list[list[ServeEstimate]] = [[] for _ in todo]
    tpot = ttft = math.inf
    for i in sorted(range(len(todo)), key=lambda i: todo[i].mode == "disagg"):
        dep = todo[i]
        if dep.mode == "disagg":
            fits, held = capacity(model, hw, dep, one)
            if not fits:
                continue
            levels = _levels(held, gpus)
            whole = box(model, hw, dep, replace(one, concurrency=levels[-1]), held=held, every=True)
            # the whole sweep walks every level, or stops after the first two (as _walk counts them)
            walked = len(levels) if whole.tpot_hi * (1 + MARGIN) <= state.stop else 0
            if whole.tpot_lo > state.stop * (1 + MARGIN):
                walked = min(2, len(levels))
            low = whole.tpot_lo > tpot * (1 + MARGIN) and ttft_floor(model, hw, dep, one, held=held) > ttft * (1 + MARGIN)
            if walked and low and state.front.beats(whole):  # nor on the front
                state.skipped += walked
                continue
        priced[i] = _walk(model, hw, dep, one, state=state, plan=_Plan(index=i))
        tpot = min([tpot, *(p.tpot_s for p in priced[i])])
        ttft = min([ttft, *(p.ttft_s for p in priced[i])])
    points = [p for group in priced for p in group]
    return _answer(points, targets=targets, layouts=len(todo), skipped=state.skipped)


def _answer(points: list[ServeEstimate], *, targets: Targets, layouts: int, skipped: int) -> ServeSweep:
    front = pareto([p for p in points if not p.saturated])
    ok = [p for p in points if targets.met(p)]
    best = max(ok, key=lambda e: (e.output_tokens_per_s, -e.deployment.gpus), default=None)
    if targets.default and best is None:
        return ServeSweep(points=tuple(points), pareto=front, best=knee(front), layouts=layouts, rule="knee", skipped=skipped)
    return ServeSweep(
        points=tuple(points), pareto=front, best=best, layouts=layouts, rule="default" if targets.default else "targets", skipped=skipped
    )


def knee(front: tuple[ServeEstimate, ...]) -> ServeEstimate | None:
    """The front's point with the largest tokens/s per GPU x tokens/s per user (the first of equals)."""
    return max(front, key=lambda e: e.output_tokens_per_s / e.deployment.gpus / e.tpot_s, default=None)
