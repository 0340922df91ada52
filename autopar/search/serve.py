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
from dataclasses import dataclass

from autopar.cost.serve_load import ServeEstimate, estimate
from autopar.errors import SpecError
from autopar.search.serve_prune import MARGIN, Staircase, box
from autopar.spec.framework import Framework
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import DEFAULT_ARGS, Deployment, Engine, EngineArgs, Workload, kv_auto

# Requests in flight per GPU where the sweep stops even if the KV cache holds more (4,096 on 8 GPUs);
# per GPU so that a fleet's throughput per GPU does not fall only because its concurrency was capped.
MAX_CONCURRENCY_PER_GPU = 512
ALL_COUNTS = 16  # disaggregated prefill-engine counts tried one by one up to here, then about 10% apart


@dataclass(frozen=True, slots=True, kw_only=True)
class Targets:
    """Latency targets a deployment must meet (None: no target)."""

    ttft_s: float | None = None  # time to first token
    tpot_s: float | None = None  # inter-token latency after the first token
    default: bool = False  # not given by the user: no early stop of the sweep, and the knee if none meets them

    def met(self, est: ServeEstimate) -> bool:
        return ((self.ttft_s is None or est.ttft_s <= self.ttft_s) and (self.tpot_s is None or est.tpot_s <= self.tpot_s)
                and not est.saturated)


# MLPerf Inference, llama2-70b-interactive.Server (mlcommons/inference loadgen/mlperf.conf): see the module docstring
DEFAULT_TTFT_S, DEFAULT_TPOT_S = 0.450, 0.040
DEFAULT_TARGETS = Targets(ttft_s=DEFAULT_TTFT_S, tpot_s=DEFAULT_TPOT_S, default=True)
_BOUNDS = f"TTFT <= {DEFAULT_TTFT_S * 1e3:g} ms, TPOT <= {DEFAULT_TPOT_S * 1e3:g} ms"
_MLPERF = f"MLPerf's interactive bounds ({_BOUNDS})"
# How the recommendation was picked: rule name -> the sentence outputs print (see the module docstring)
RULES = {
    "targets": "the most output tokens/s per GPU meeting the targets, not queue-saturated",
    "default": f"no --ttft-ms/--tpot-ms given, so {_MLPERF}: the most output tokens/s per GPU meeting them, "
               "not queue-saturated",
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


def deployments(model: ModelSpec, hw: HardwareProfile, *, gpus: int, framework: Framework, weights: str,
                kv_dtypes: tuple[str, ...], modes: tuple[str, ...],
                args: EngineArgs = DEFAULT_ARGS) -> Iterator[Deployment]:
    """Every deployment of `gpus` GPUs in the given modes, each engine launched with `args`."""
    layouts = list(engines(model, hw, gpus, max_pp=gpus, framework=framework.name))
    auto = kv_auto(model)[0]
    for kv in kv_dtypes:
        if "agg" in modes:
            for e in layouts:
                if gpus % e.gpus == 0:
                    yield Deployment(fw=framework, mode="agg",
                                     engine=e, replicas=gpus // e.gpus, weights=weights,
                                     kv_dtype=kv, kv_auto=auto, args=args)
        if "disagg" in modes:
            flat = [e for e in layouts if e.pp == 1]
            for pre in flat:
                for dec in flat:
                    for x in counts(gpus // pre.gpus - 1):
                        rest = gpus - x * pre.gpus
                        if rest > 0 and rest % dec.gpus == 0:
                            yield Deployment(fw=framework, mode="disagg",
                                             engine=dec, replicas=rest // dec.gpus,
                                             prefill=pre, prefill_replicas=x, weights=weights, kv_dtype=kv,
                                             kv_auto=auto, args=args, prefill_args=args)


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


def sweep(model: ModelSpec, hw: HardwareProfile, *, gpus: int, isl: int, osl: int, framework: Framework, weights: str,
          kv_dtypes: tuple[str, ...], modes: tuple[str, ...], targets: Targets,
          concurrency: int | None = None, args: EngineArgs = DEFAULT_ARGS,
          progress: Callable[[int, int], None] | None = None, prune: bool = True) -> ServeSweep:
    """Price every deployment at every concurrency (or the one given) and pick the best that meets the targets;
    `progress(done, total)`, if given, is told of each deployment priced.

    With `prune`, disaggregated points that provably change neither the front nor the recommendation are
    not solved (search/serve_prune.py): the aggregated deployments are priced first, so that their points
    bound the rest. The answer is the same; `points` then lacks the skipped ones (and when nothing meets
    given targets, the sweep runs again whole, for the message's lowest TTFT)."""
    todo = list(deployments(model, hw, gpus=gpus, framework=framework, weights=weights, kv_dtypes=kv_dtypes,
                            modes=modes, args=args))
    layouts = len(todo)
    order = sorted(range(layouts), key=lambda i: todo[i].mode == "disagg") if prune else range(layouts)
    priced: list[list[ServeEstimate]] = [[] for _ in todo]
    front, best = Staircase(), 0.0  # the priced front, the most output tokens/s meeting the targets so far
    tpot = targets.tpot_s if targets.tpot_s is not None else math.inf
    stop = 2 * tpot if not targets.default else math.inf  # TPOT past which a deployment's sweep stops
    skipped = 0
    for done, i in enumerate(order, start=1):
        if progress is not None:
            progress(done, layouts)
        dep, out = todo[i], priced[i]
        first = estimate(model, hw, dep, Workload(isl=isl, osl=osl, concurrency=concurrency or 1))
        if not first.fits:
            continue
        out.append(first)
        front.add(first)
        best = max(best, first.output_tokens_per_s) if targets.met(first) else best
        if concurrency is not None:
            continue
        cap = min(MAX_CONCURRENCY_PER_GPU * gpus, first.pools[-1].max_concurrency)
        for c in _powers(cap)[1:]:
            wl = Workload(isl=isl, osl=osl, concurrency=c)
            if prune and dep.mode == "disagg":
                b = box(model, hw, dep, wl, held=first.pools[-1].max_concurrency)
                useless = front.beats(b) and (b.per_gpu * gpus * (1 + MARGIN) < best or b.tpot_lo > tpot * (1 + MARGIN))
                # a skipped point must still decide the early stop below: its TPOT past `stop` for sure, or not
                if useless and b.tpot_lo > stop * (1 + MARGIN):
                    skipped += 1
                    break
                if useless and b.tpot_hi * (1 + MARGIN) <= stop:
                    skipped += 1
                    continue
            est = estimate(model, hw, dep, wl)
            out.append(est)
            front.add(est)
            best = max(best, est.output_tokens_per_s) if targets.met(est) else best
            if est.tpot_s > stop:
                break  # TPOT only grows with concurrency; far past the target nothing better follows
    points = [p for group in priced for p in group]
    result = _answer(points, targets=targets, layouts=layouts, skipped=skipped)
    if skipped and result.best is None and not targets.default:
        return sweep(model, hw, gpus=gpus, isl=isl, osl=osl, framework=framework, weights=weights,
                     kv_dtypes=kv_dtypes, modes=modes, targets=targets, args=args, prune=False)
    return result


def _answer(points: list[ServeEstimate], *, targets: Targets, layouts: int, skipped: int) -> ServeSweep:
    front = pareto([p for p in points if not p.saturated])
    ok = [p for p in points if targets.met(p)]
    best = max(ok, key=lambda e: (e.output_tokens_per_s, -e.deployment.gpus), default=None)
    if targets.default and best is None:
        return ServeSweep(points=tuple(points), pareto=front, best=knee(front), layouts=layouts, rule="knee",
                          skipped=skipped)
    return ServeSweep(points=tuple(points), pareto=front, best=best, layouts=layouts,
                      rule="default" if targets.default else "targets", skipped=skipped)


def knee(front: tuple[ServeEstimate, ...]) -> ServeEstimate | None:
    """The front's point with the largest tokens/s per GPU x tokens/s per user (the first of equals)."""
    return max(front, key=lambda e: e.output_tokens_per_s / e.deployment.gpus / e.tpot_s, default=None)
