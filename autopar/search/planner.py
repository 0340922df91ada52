"""Search every plan the rules accept, prune by memory, rank by tokens/s.

The space is search/space.py's: all factorizations gpus = dp * tp * pp * cp with
vpp, micro-batch size, recompute, ZeRO stage and sequence parallelism, under the
rules of spec/plan.py. Pipeline stages may hold uneven layer counts; the cost
model charges the imbalance.

Two facts of the cost model keep the search exact while timing few plans:

- a layout's memory under every recompute mode and ZeRO stage comes from
  parts found once per layout (cost/memory.py variant_peaks), with the same
  sums as a fresh estimate;
- step time never falls from ZeRO-1 to 2 to 3 (each moves at least as much,
  behind no more compute: cost/step.py), so per layout and recompute mode only
  the lowest ZeRO stage that fits is timed; the higher ones that fit count as
  feasible;
- step time never falls with more recompute, so a layout's more-recomputing
  variant is at most as fast as its first fitting one: it is timed only when no
  timed plan with no more memory is strictly faster than that (otherwise it can
  be neither recommended nor on the Pareto front, and is left out of the
  ranking; it still counts as feasible).

Ranking (``rank``): by tokens/s; plans within TIE_BAND (0.5%) of the fastest
are ordered by simplicity, those on the Pareto front of (tokens/s, memory)
first, so the recommended plan is never beaten on both speed and memory.
"""

from __future__ import annotations

import bisect
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol, TypeVar, overload

from autopar.cost.memo import Memo
from autopar.cost.memory import memory_breakdown, peak_bytes, variant_peaks
from autopar.cost.step import Estimate, step_parts, timed_estimate, variant_step_seconds
from autopar.errors import InfeasibleError
from autopar.search.space import (
    choices,
    enumerate_plans,
    enumerate_skeletons,
    searched_zero,
    stack_limits,
    with_knobs,
)
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import RECOMPUTE, Plan
from autopar.spec.stack import NEUTRAL, StackProfile

__all__ = ["TIE_BAND", "Candidate", "RankedPlans", "SearchResult", "enumerate_plans", "rank", "search", "simplicity"]

TIE_BAND = 0.005  # plans within 0.5% of the fastest rank as equal; the simpler one first
PROGRESS_EVERY = 1024  # layouts between progress reports
CP_VARIANT_CANDIDATES = 64  # leading plans on which the all-gather CP variant is tried


class Candidate(NamedTuple):
    """A timed plan, before its Estimate is built."""

    tokens_per_s: float  # whole job
    memory_bytes: float  # peak on the worst GPU
    plan: Plan


class RankedPlans(Sequence[Estimate]):
    """Ranked plans, best first. Each Estimate is built when first read, by the functions estimate()
    uses (a search times ~10^5 plans and shows a few); ``candidates`` has every plan's figures."""

    def __init__(self, memo: Memo, candidates: list[Candidate]) -> None:
        self._memo = memo
        self.candidates: tuple[Candidate, ...] = tuple(candidates)
        self._built: dict[int, Estimate] = {}

    def __len__(self) -> int:
        return len(self.candidates)

    @overload
    def __getitem__(self, i: int) -> Estimate: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Estimate, ...]: ...

    def __getitem__(self, i: int | slice) -> Estimate | tuple[Estimate, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        if i not in self._built:
            plan = self.candidates[i].plan
            memo = self._memo
            self._built[i] = timed_estimate(memo, plan, memory_breakdown(memo.model, memo.job, plan, memo=memo))
        return self._built[i]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """Ranked feasible plans and what the search looked at."""

    ranked: RankedPlans  # best first: per layout and recompute, the lowest ZeRO stage that fits (less variants a plan beats)
    considered: int  # plans in the space
    feasible: int  # plans that fit in memory


class _Ranks(Protocol):
    @property
    def tokens_per_s(self) -> float: ...

    @property
    def memory_bytes(self) -> float: ...

    @property
    def plan(self) -> Plan: ...


R = TypeVar("R", bound=_Ranks)


def simplicity(plan: Plan) -> tuple[int, ...]:
    """Smaller is simpler: fewer stages, no interleaving, no CP, less TP, default ZeRO-1, less recompute."""
    return (plan.pp, plan.vpp, plan.cp, plan.tp, plan.zero != 1, RECOMPUTE.index(plan.recompute), plan.mbs)


def dominated(plans: Sequence[_Ranks]) -> set[int]:
    """Indices of the plans another beats on both axes: at least as fast and as lean, and better on one."""
    order = sorted(range(len(plans)), key=lambda i: (plans[i].memory_bytes, -plans[i].tokens_per_s))
    out: set[int] = set()
    best_tps, best_mem = float("-inf"), float("nan")
    for i in order:
        e = plans[i]
        if e.tokens_per_s < best_tps or (e.tokens_per_s == best_tps and e.memory_bytes > best_mem):
            out.add(i)
        elif e.tokens_per_s > best_tps:
            best_tps, best_mem = e.tokens_per_s, e.memory_bytes
    return out


def rank(plans: Sequence[R]) -> list[R]:
    """Best first: the plans within TIE_BAND of the fastest by (dominated, simplicity), then the rest by tokens/s."""
    if not plans:
        return []
    by_speed = sorted(plans, key=lambda e: -e.tokens_per_s)
    floor = by_speed[0].tokens_per_s * (1 - TIE_BAND)
    band = [e for e in by_speed if e.tokens_per_s >= floor]
    beaten = dominated(by_speed)
    order = sorted(range(len(band)), key=lambda i: (i in beaten, simplicity(band[i].plan)))
    return [band[i] for i in order] + by_speed[len(band):]


def search(
    model: ModelSpec, hw: HardwareProfile, job: Job, *, fixed: Mapping[str, object] | None = None,
    stack: StackProfile = NEUTRAL,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """All feasible plans `stack` can launch, ranked by tokens/s as it runs them.

    Raises InfeasibleError when none fits, saying why.
    """
    with _no_cyclic_gc():
        return _search(model, hw, job, stack_limits(stack, dict(fixed or {})), stack, progress)


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The search allocates ~10^5 short-lived, acyclic objects; the cyclic collector's passes over
    them cost about a fifth of the time and free nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()  # what the search made moves to the oldest generation without a collection pass now
            gc.unfreeze()
            gc.enable()


def _search(model: ModelSpec, hw: HardwareProfile, job: Job, fixed: dict[str, object], stack: StackProfile,
            progress: Callable[[int, int], None] | None = None) -> SearchResult:
    memo = Memo(model, hw, job, stack)
    cap = hw.memory_bytes
    tokens = job.tokens_per_step
    considered = feasible = 0
    smallest: tuple[float, Plan, str, int] | None = None
    timed = []
    recomputes = choices(fixed, "recompute", list(RECOMPUTE))
    zeros = sorted(int(str(z)) for z in choices(fixed, "zero", searched_zero(stack)))
    per_skeleton = len(recomputes) * len(zeros)
    deferred: list[tuple[Plan, tuple[str, int, float], float]] = []
    skeletons = list(enumerate_skeletons(model, job, fixed, stack=stack))
    for n, skeleton in enumerate(skeletons):
        if progress is not None and n % PROGRESS_EVERY == 0:
            progress(n, len(skeletons))
        considered += per_skeleton
        picks = []
        for recompute, needs in zip(recomputes, variant_peaks(memo, skeleton, recomputes, zeros), strict=True):
            chosen = -1
            for i, need in enumerate(needs):
                if need <= cap:
                    feasible += 1
                    if chosen < 0:
                        chosen = i
                elif smallest is None or need < smallest[0]:
                    smallest = (need, skeleton, recompute, zeros[i])
            if chosen >= 0:
                picks.append((recompute, zeros[chosen], needs[chosen]))
        if picks:
            # the least recompute that fits now; more recompute at no lower ZeRO stage is never faster
            # (cost/step.py), so it waits until it is known whether a timed plan beats it on both axes
            (recompute, zero, need), rest = picks[0], picks[1:]
            (step,) = variant_step_seconds(memo, skeleton, [(recompute, zero)])
            timed.append(Candidate(tokens_per_s=tokens / step, memory_bytes=need, plan=with_knobs(skeleton, recompute, zero)))
            now = [p for p in rest if p[1] < zero]
            deferred += [(skeleton, p, tokens / step) for p in rest if p[1] >= zero]
            if now:
                for (r, z, m), t in zip(now, variant_step_seconds(memo, skeleton, [(r, z) for r, z, _ in now]), strict=True):
                    timed.append(Candidate(tokens_per_s=tokens / t, memory_bytes=m, plan=with_knobs(skeleton, r, z)))
    timed += _undominated(memo, timed, deferred)
    if not timed:
        least = None if smallest is None else (smallest[0], with_knobs(smallest[1], smallest[2], smallest[3]))
        raise InfeasibleError(_why_none(model, hw, job, considered, least))
    if "cp_comm" not in fixed:
        timed = _pick_cp_comm(memo, sorted(timed, key=lambda c: -c.tokens_per_s))
    return SearchResult(ranked=RankedPlans(memo, rank(timed)), considered=considered, feasible=feasible)


def _undominated(memo: Memo, timed: list[Candidate], deferred: list[tuple[Plan, tuple[str, int, float], float]]) -> list[Candidate]:
    """The deferred recompute variants that no timed plan beats: each is at most `bound` tokens/s (its
    layout's faster variant); one is left out when a timed plan with no more memory is strictly faster
    than that bound, so it is neither recommended nor on the Pareto front."""
    order = sorted(timed, key=lambda c: c.memory_bytes)
    mems = [c.memory_bytes for c in order]
    best: list[float] = []
    for c in order:
        best.append(max(best[-1], c.tokens_per_s) if best else c.tokens_per_s)
    tokens = memo.job.tokens_per_step
    out = []
    for skeleton, (recompute, zero, need), bound in deferred:
        i = bisect.bisect_right(mems, need)
        if i and best[i - 1] > bound:
            continue
        (step,) = variant_step_seconds(memo, skeleton, [(recompute, zero)])
        out.append(Candidate(tokens_per_s=tokens / step, memory_bytes=need, plan=with_knobs(skeleton, recompute, zero)))
    return out


def _pick_cp_comm(memo: Memo, ranked: list[Candidate]) -> list[Candidate]:
    """For the leading plans with CP, keep all-gather K/V instead of the ring where it is faster and fits.

    The ring is enumerated for every plan; the all-gather variant is tried only on
    the plans that can matter (the CP_VARIANT_CANDIDATES fastest), which keeps the
    search fast.
    """
    out = list(ranked)
    for i, cand in enumerate(out[:CP_VARIANT_CANDIDATES]):
        if cand.plan.cp == 1:
            continue
        plan = replace(cand.plan, cp_comm="allgather")
        need = peak_bytes(memo, plan)
        if need <= memo.profile.memory_bytes:
            tps = memo.job.tokens_per_step / sum(step_parts(memo, plan))
            if tps > cand.tokens_per_s:
                out[i] = Candidate(tokens_per_s=tps, memory_bytes=need, plan=plan)
    return out


def _why_none(model: ModelSpec, hw: HardwareProfile, job: Job, considered: int, smallest: tuple[float, Plan] | None) -> str:
    if smallest is None:
        return (
            f"no valid plan for {model.name} on {job.gpus} GPUs with global batch {job.global_batch}: "
            "check that the batch is divisible by the data-parallel degrees the GPU count allows"
        )
    need, plan = smallest
    p = plan
    return (
        f"no plan fits: the smallest of {considered} plans needs {need / 2**30:.1f} GiB per GPU "
        f"(dp{p.dp} tp{p.tp} pp{p.pp} cp{p.cp} mbs{p.mbs} recompute={p.recompute} zero={p.zero}) "
        f"but plans may use {hw.memory_bytes / 2**30:.1f} GiB of a {hw.gpu_name}; use more GPUs or a shorter --seq-len"
    )
