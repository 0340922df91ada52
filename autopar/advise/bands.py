"""Error bands of estimates: each prediction's class, its [p10, p90] interval and how sure a fit is.

The classes (spec/error_model.py LEVELS) are named here, once, for the CLI and
for benchmarks/error_model.py alike: training by stack, dtype, family and scale;
memory by stack; serving by engine, mode and load.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autopar.cost.step import Estimate
from autopar.spec.error_model import ErrorModel, Interval, Lookup
from autopar.spec.model import ModelSpec
from autopar.spec.units import GIB

if TYPE_CHECKING:  # serving's cost model is not imported by a training answer
    from autopar.cost.serve_load import ServeEstimate

# Scale buckets by GPU count: one node; up to 16 nodes of 8; beyond
SCALES = ((8, "gpus<=8"), (128, "gpus<=128"))
SCALE_BEYOND = "gpus>128"
# Serving load: concurrency over the requests the KV cache holds; "near" from NEAR_LOAD up to 1
NEAR_LOAD = 0.8
FIT_CONFIDENCE = ("sure", "likely", "borderline")


def family_of(model: ModelSpec) -> str:
    """dense, moe or hybrid (any Mamba layers)."""
    return "hybrid" if model.mamba is not None else "moe" if model.moe is not None else "dense"


def scale_of(gpus: int) -> str:
    return next((name for most, name in SCALES if gpus <= most), SCALE_BEYOND)


def training_keys(*, stack: str, dtype: str, model: ModelSpec, gpus: int) -> tuple[str, str, str, str]:
    return (stack, dtype, family_of(model), scale_of(gpus))


def load_of(est: ServeEstimate) -> str:
    """below, near or above the KV capacity: concurrency over the requests the (decode) pool holds;
    a saturated estimate (the KV cache or the prefill queue cannot keep up) is above."""
    held = est.pools[-1].max_concurrency
    if est.saturated or held < 1 or est.workload.concurrency > held:
        return "above"
    return "near" if est.workload.concurrency >= NEAR_LOAD * held else "below"


def serving_keys(est: ServeEstimate) -> tuple[str, str, str]:
    return (est.deployment.framework, est.deployment.mode, load_of(est))


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingBands:
    """A training estimate's intervals, their classes and its fit."""

    speed: Lookup  # class of tokens/s
    memory: Lookup  # class of memory
    tokens_per_s_per_gpu: Interval | None  # None: too few rows
    tokens_per_s: Interval | None
    step_time_s: Interval | None
    memory_gib: Interval | None
    fit_margin_gib: float  # the GPU's memory less the predicted device peak; negative: over
    fit_confidence: str | None  # sure | likely | borderline; None when it does not fit


def fit_confidence(value: float, capacity: float, band: Interval | None) -> str | None:
    """How sure a plan that fits by the model is to fit: sure when the band's upper end fits; likely when the
    capacity holds at least half the way from the prediction to it (or there is no band); else borderline.
    None: it does not fit by the model."""
    if value > capacity:
        return None
    if band is None:
        return "likely"
    if band.hi <= capacity:
        return "sure"
    return "likely" if capacity - value >= (band.hi - value) / 2 else "borderline"


def training_bands(errors: ErrorModel, *, stack: str, dtype: str, model: ModelSpec, est: Estimate) -> TrainingBands:
    gpus = est.plan.gpus
    speed = errors.lookup("tokens_per_s", training_keys(stack=stack, dtype=dtype, model=model, gpus=gpus))
    memory = errors.lookup("memory", (stack,))
    per_gpu = speed.interval(est.tokens_per_s_per_gpu)
    # the memory rows measure torch's allocator (benchmarks/error_model.py): the band is set on that part and
    # the fixed part outside it added back, so the band is the device peak's, as the fit test reads it
    outside = est.memory.outside_allocator / GIB
    reserved = memory.interval(est.memory.allocator_reserved / GIB)
    mem = None if reserved is None else reserved.shifted(outside)
    capacity = est.memory_capacity_bytes / GIB
    return TrainingBands(
        speed=speed,
        memory=memory,
        tokens_per_s_per_gpu=per_gpu,
        tokens_per_s=None if per_gpu is None else per_gpu.scaled(est.tokens_per_s / est.tokens_per_s_per_gpu),
        step_time_s=None if per_gpu is None else per_gpu.inverse().scaled(est.step_time_s * est.tokens_per_s_per_gpu),
        memory_gib=mem,
        fit_margin_gib=capacity - est.memory.total / GIB,
        fit_confidence=fit_confidence(est.memory.total / GIB, capacity, mem),
    )


def with_speed(b: TrainingBands, *, tokens_per_s: float, gpus: int, step_time_s: float) -> TrainingBands:
    """The same classes' bands on another throughput of the plan (a --seq-len-dist strategy's simulated
    tokens/s and mean step): the tokens/s class was set on fixed-length rows; memory is the plan's own."""
    per_gpu = b.speed.interval(tokens_per_s / gpus)
    if per_gpu is None:
        return replace(b, tokens_per_s_per_gpu=None, tokens_per_s=None, step_time_s=None)
    step = per_gpu.inverse().scaled(step_time_s * per_gpu.value)
    return replace(b, tokens_per_s_per_gpu=per_gpu, tokens_per_s=per_gpu.scaled(gpus), step_time_s=step)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingBands:
    """A serving estimate's TTFT and TPOT intervals and their classes."""

    ttft_class: Lookup
    tpot_class: Lookup
    ttft_ms: Interval | None
    tpot_ms: Interval | None


def serving_bands(errors: ErrorModel, est: ServeEstimate) -> ServingBands:
    keys = serving_keys(est)
    ttft, tpot = errors.lookup("ttft", keys), errors.lookup("tpot", keys)
    return ServingBands(ttft_class=ttft, tpot_class=tpot, ttft_ms=ttft.interval(est.ttft_s * 1e3), tpot_ms=tpot.interval(est.tpot_s * 1e3))


def pair(band: Interval | None) -> list[float] | None:
    """[lo, hi] for JSON, or None (too few rows)."""
    return None if band is None else [band.lo, band.hi]
