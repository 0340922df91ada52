"""Questions users ask beside "which plan": how few GPUs will do, and is my batch holding me back.

- ``train.batch_warning``: does the global batch force a poor DP degree.
- ``scaling``: ``suggest --gpus auto``. The fewest GPUs on which some plan fits
  (1, 2, 4, ... up to a node, then whole nodes doubling), and the best plan's
  throughput as the GPU count doubles from there: tokens/s, per GPU, MFU and the
  scaling efficiency against the smallest fitting count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from autopar.advise.train import Context, Suggestion
from autopar.cost.memo import Memo
from autopar.cost.states import memory_floor
from autopar.errors import InfeasibleError, SpecError
from autopar.io.error_model import error_model
from autopar.search.planner import search
from autopar.spec.job import default_global_batch

MAX_AUTO_GPUS = 16384  # --gpus auto looks no further
CURVE_POINTS = 6  # GPU counts on the curve, the fewest that fit first


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalePoint:
    """The best plan at one GPU count."""

    gpus: int  # GPU count
    suggestion: Suggestion  # the search there (its ctx holds the job at this count)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scaling:
    """--gpus auto: the fewest GPUs that fit, and the curve above it."""

    min_gpus: int  # fewest GPUs on which a plan fits
    tried: tuple[int, ...]  # counts searched below it, none fitting
    points: tuple[ScalePoint, ...]  # min_gpus first, then doubling

    def efficiency(self, point: ScalePoint) -> float:
        """Tokens/s per GPU at `point` over that at the fewest GPUs (1.0 = linear scaling)."""
        base = self.points[0].suggestion.result.ranked[0].tokens_per_s_per_gpu
        return point.suggestion.result.ranked[0].tokens_per_s_per_gpu / base


def gpu_counts(gpus_per_node: int, limit: int = MAX_AUTO_GPUS) -> list[int]:
    """1, 2, 4, ... up to a node, then 2, 4, 8, ... nodes, up to `limit` GPUs."""
    out = [g for g in (2**i for i in range(32)) if g < gpus_per_node]
    n = gpus_per_node
    while n <= limit:
        out.append(n)
        n *= 2
    return out


def scaling(ctx: Context, *, batch_given: bool, points: int = CURVE_POINTS, progress: Callable[[int, int], None] | None = None) -> Scaling:
    """Search at growing GPU counts. Without a given batch each count takes its default (about 4M tokens)."""
    counts = gpu_counts(ctx.hw.gpus_per_node)
    errors = error_model()  # each point's bands: its class at its GPU count
    tried: list[int] = []
    found: list[ScalePoint] = []
    shared = Memo(ctx.model, ctx.hw, ctx.job, ctx.stack)  # layer times and the like, the same at every count
    for i, gpus in enumerate(counts):
        if progress is not None:
            progress(i, len(counts))
        batch = ctx.job.global_batch if batch_given else default_global_batch(gpus, ctx.hw.gpus_per_node, ctx.job.seq_len)
        job = replace(ctx.job, gpus=gpus, global_batch=batch)
        here = replace(ctx, job=job)
        if not found and memory_floor(here.model, job, here.stack) > here.hw.memory_bytes:
            tried.append(gpus)  # no plan can fit: not searched
            continue
        start = time.perf_counter()
        try:
            # the curve reads each count's best plan alone: a search ranking one plan exactly ranks it
            # as the full one does (search/planner.py)
            result = search(here.model, here.hw, job, stack=here.stack, keep=1, share=shared, lead=True)
        except InfeasibleError:
            if found:
                break  # a larger count that fits nothing (the batch no longer splits): the curve ends
            tried.append(gpus)
            continue
        found.append(
            ScalePoint(gpus=gpus, suggestion=Suggestion(ctx=here, result=result, errors=errors, search_s=time.perf_counter() - start))
        )
        if len(found) == points:
            break
    if not found:
        raise InfeasibleError(f"no plan for {ctx.model.name} fits on up to {counts[-1]} x {ctx.hw.gpu_name}; hardware: {ctx.hw_reason}")
    return Scaling(min_gpus=found[0].gpus, tried=tuple(tried), points=tuple(found))


def parse_gpus(value: str | None) -> tuple[int | None, bool]:
    """--gpus: (count, False), or (None, True) for "auto"."""
    if value is None:
        return None, False
    if value.strip().lower() == "auto":
        return None, True
    try:
        return int(value), False
    except ValueError:
        raise SpecError(f"`gpus` must be a whole number or auto, got {value!r}") from None
