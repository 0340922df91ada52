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
  ranking; it still counts as feasible);
- step time is at least cost/step.py step_floor (the stages' total compute spread
  evenly, with the smallest bubble), found from per-layer times alone. Plans are
  timed from the highest such bound down, and once a bound falls below the KEEP-th
  fastest plan timed (and below the band of the fastest), the rest are skipped: the
  leading plans, all those at least that fast, rank exactly as with every plan
  timed. Reading further (the whole ranking, a plot of every plan) times the rest.

Ranking (``rank``): by tokens/s; plans within TIE_BAND (0.5%) of the fastest
are ordered by simplicity, those on the Pareto front of (tokens/s, memory)
first, so the recommended plan is never beaten on both speed and memory.
"""

from __future__ import annotations

import bisect
import gc
import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol, TypeVar, overload

from autopar.cost.memo import Memo
from autopar.cost.memory import memory_breakdown, peak_bytes, variant_peaks
from autopar.cost.step import Estimate, step_floor, step_parts, timed_estimate, variant_step_seconds
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
KEEP = 256  # a search ranks exactly at least this many plans (and all within TIE_BAND of the best)


class Candidate(NamedTuple):
    """A timed plan, before its Estimate is built."""

    tokens_per_s: float  # whole job
    memory_bytes: float  # peak on the worst GPU
    plan: Plan


class RankedPlans(Sequence[Estimate]):
    """Ranked plans, best first. Each Estimate is built when first read, by the functions estimate()
    uses (a search times ~10^5 plans and shows a few); ``candidates`` has every plan's figures.

    A pruned search (see _search) ranks exactly only its first `exact` plans, every plan at least
    as fast as its threshold; reading past them, the length or ``candidates`` first completes the
    ranking with `complete` (the unpruned search, whose first `exact` plans are the same)."""

    def __init__(self, memo: Memo, candidates: list[Candidate], *, exact: int | None = None,
                 complete: Callable[[], list[Candidate]] | None = None) -> None:
        self._memo = memo
        self._candidates: tuple[Candidate, ...] = tuple(candidates)
        self._exact = len(self._candidates) if exact is None or complete is None else exact
        self._complete = complete if self._exact < len(self._candidates) else None
        self._built: dict[int, Estimate] = {}

    @property
    def exact(self) -> int:
        """How many leading plans are ranked without completing the ranking."""
        return self._exact

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every ranked plan's figures, best first."""
        self._completed()
        return self._candidates

    @property
    def plans(self) -> Sequence[Plan]:
        """The ranked plans alone, read lazily (no Estimate is built)."""
        return _PlanView(self)

    def plan(self, i: int) -> Plan:
        """The i-th plan, without building its Estimate."""
        if i < 0 or i >= self._exact:
            self._completed()
        return self._candidates[i].plan

    def _completed(self) -> None:
        if self._complete is not None:
            self._candidates = tuple(self._complete())
            self._exact, self._complete = len(self._candidates), None

    def __len__(self) -> int:
        self._completed()
        return len(self._candidates)

    @overload
    def __getitem__(self, i: int) -> Estimate: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Estimate, ...]: ...

    def __getitem__(self, i: int | slice) -> Estimate | tuple[Estimate, ...]:
        if isinstance(i, slice):
            if i.step in (None, 1) and (i.start or 0) >= 0 and i.stop is not None and 0 <= i.stop <= self._exact:
                return tuple(self[j] for j in range(i.start or 0, i.stop))
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0 or i >= self._exact:
            self._completed()
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self._candidates):
            raise IndexError(i)
        if i not in self._built:
            plan = self._candidates[i].plan
            memo = self._memo
            self._built[i] = timed_estimate(memo, plan, memory_breakdown(memo.model, memo.job, plan, memo=memo))
        return self._built[i]


class _PlanView(Sequence[Plan]):
    def __init__(self, ranked: RankedPlans) -> None:
        self._ranked = ranked

    def __len__(self) -> int:
        return len(self._ranked)

    @overload
    def __getitem__(self, i: int) -> Plan: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Plan, ...]: ...

    def __getitem__(self, i: int | slice) -> Plan | tuple[Plan, ...]:
        if isinstance(i, slice):
            return tuple(self._ranked.plan(j) for j in range(*i.indices(len(self))))
        return self._ranked.plan(i)


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
    progress: Callable[[int, int], None] | None = None, keep: int | None = KEEP,
) -> SearchResult:
    """All feasible plans `stack` can launch, ranked by tokens/s as it runs them.

    `keep`: time at least the plans needed to rank this many exactly (the rest of the
    ranking is completed if read); None times every plan. Raises InfeasibleError when
    none fits, saying why.
    """
    with _no_cyclic_gc():
        return _search(model, hw, job, stack_limits(stack, dict(fixed or {})), stack, progress, keep=keep)


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
            progress: Callable[[int, int], None] | None = None, *, keep: int | None = KEEP) -> SearchResult:
    memo = Memo(model, hw, job, stack)
    cap = hw.memory_bytes
    considered = feasible = 0
    smallest: tuple[float, Plan, str, int] | None = None
    recomputes = choices(fixed, "recompute", list(RECOMPUTE))
    zeros = sorted(int(str(z)) for z in choices(fixed, "zero", searched_zero(stack)))
    per_skeleton = len(recomputes) * len(zeros)
    jobs: list[tuple[Plan, str, int, float]] = []  # plans to time: (skeleton, recompute, zero, memory)
    deferred: list[tuple[Plan, tuple[str, int, float], int]] = []  # (skeleton, variant, its layout's job)
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
            # the least recompute that fits is timed; more recompute at no lower ZeRO stage is never faster
            # (cost/step.py), so it waits until it is known whether a timed plan beats it on both axes
            (recompute, zero, need), rest = picks[0], picks[1:]
            deferred += [(skeleton, p, len(jobs)) for p in rest if p[1] >= zero]
            jobs.append((skeleton, recompute, zero, need))
            jobs += [(skeleton, r, z, m) for r, z, m in rest if z < zero]
    if keep is not None and "cp_comm" not in fixed:
        keep = max(keep, CP_VARIANT_CANDIDATES)  # _pick_cp_comm's plans are then all ranked exactly
    bar = _Bar(keep if keep is not None and len(jobs) + len(deferred) > keep else None)
    tps = _time_jobs(memo, jobs, bar)
    timed = [Candidate(tokens_per_s=t, memory_bytes=jobs[j][3], plan=with_knobs(*jobs[j][:3]))
             for j, t in enumerate(tps) if t is not None]
    timed += _undominated(memo, timed, [(s, v, tps[j]) for s, v, j in deferred], bar)
    if not timed:
        least = None if smallest is None else (smallest[0], with_knobs(smallest[1], smallest[2], smallest[3]))
        raise InfeasibleError(_why_none(model, hw, job, considered, least))
    if "cp_comm" not in fixed:
        timed = _pick_cp_comm(memo, sorted(timed, key=lambda c: -c.tokens_per_s))
    ranked = rank(timed)
    complete = (lambda: list(_search(model, hw, job, fixed, stack, keep=None).ranked.candidates)) if bar.pruned else None
    exact = sum(1 for c in ranked if c.tokens_per_s >= bar.floor)
    return SearchResult(ranked=RankedPlans(memo, ranked, exact=exact, complete=complete), considered=considered,
                        feasible=feasible)


class _Bar:
    """The bar a plan must clear to be ranked exactly by a pruned search: at least as fast as the
    `keep`-th fastest plan timed so far and within TIE_BAND of the fastest (None: no bar). It only
    rises, so a plan whose upper bound falls below it at any time is slower than every plan ranked
    exactly."""

    def __init__(self, keep: int | None) -> None:
        self.active = keep is not None
        self._keep = keep or 0
        self.floor = float("-inf")
        self.pruned = False
        self._best = float("-inf")
        self._top: list[float] = []  # heap of the `keep` fastest tokens/s timed

    def admit(self, tokens_per_s: float) -> None:
        if not self.active:
            return
        self._best = max(self._best, tokens_per_s)
        if len(self._top) < self._keep:
            heapq.heappush(self._top, tokens_per_s)
        elif tokens_per_s > self._top[0]:
            heapq.heapreplace(self._top, tokens_per_s)
        if len(self._top) == self._keep:
            self.floor = min(self._top[0], self._best * (1 - TIE_BAND))

    def skips(self, bound: float) -> bool:
        """A plan of at most `bound` tokens/s cannot clear the bar (and is left out)."""
        if bound < self.floor:
            self.pruned = True
            return True
        return False


def _time_jobs(memo: Memo, jobs: list[tuple[Plan, str, int, float]], bar: _Bar) -> list[float | None]:
    """Tokens/s of each job, None for those a pruned search skips: jobs are timed from the highest
    upper bound (cost/step.py step_floor) down, until the bound falls below the bar."""
    tokens = memo.job.tokens_per_step
    out: list[float | None] = [None] * len(jobs)
    order: Sequence[int] = range(len(jobs))
    bounds: list[float] = []
    if bar.active:
        bounds = [tokens / f if (f := step_floor(memo, s, r)) > 0 else float("inf") for s, r, _, _ in jobs]
        order = sorted(order, key=lambda j: -bounds[j])
    for j in order:
        if bar.active and bar.skips(bounds[j]):
            break
        skeleton, recompute, zero, _ = jobs[j]
        (step,) = variant_step_seconds(memo, skeleton, [(recompute, zero)])
        out[j] = tokens / step
        bar.admit(tokens / step)
    return out


def _undominated(memo: Memo, timed: list[Candidate], deferred: list[tuple[Plan, tuple[str, int, float], float | None]],
                 bar: _Bar) -> list[Candidate]:
    """The deferred recompute variants that no timed plan beats: each is at most `bound` tokens/s (its
    layout's faster variant); one is left out when a timed plan with no more memory is strictly faster
    than that bound, so it is neither recommended nor on the Pareto front. A bound of None (the faster
    variant was not timed) or below the bar is left out by a pruned search."""
    order = sorted(timed, key=lambda c: c.memory_bytes)
    mems = [c.memory_bytes for c in order]
    best: list[float] = []
    for c in order:
        best.append(max(best[-1], c.tokens_per_s) if best else c.tokens_per_s)
    tokens = memo.job.tokens_per_step
    out = []
    for skeleton, (recompute, zero, need), bound in deferred:
        if bound is None:
            bar.pruned = True
            continue
        i = bisect.bisect_right(mems, need)
        if (i and best[i - 1] > bound) or bar.skips(bound):
            continue
        (step,) = variant_step_seconds(memo, skeleton, [(recompute, zero)])
        out.append(Candidate(tokens_per_s=tokens / step, memory_bytes=need, plan=with_knobs(skeleton, recompute, zero)))
        bar.admit(tokens / step)
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
