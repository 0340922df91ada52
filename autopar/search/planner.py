"""Search every plan the rules accept, prune by memory, rank by tokens/s.

The space is search/space.py's: all factorizations gpus = dp * tp * pp * cp with
vpp, micro-batch size, recompute, ZeRO stage and sequence parallelism, under the
rules of spec/plan.py. Pipeline stages may hold uneven layer counts; the cost
model charges the imbalance.

Two facts of the cost model keep the search exact while timing few plans:

- a layout's memory under every recompute mode and ZeRO stage comes from
  parts found once per layout, and the layouts that differ only in ep and etp
  (a Block, search/space.py) are checked at once (cost/memory.py block_peaks,
  search/scan.py), with the same sums as a fresh estimate;
- step time never falls from ZeRO-1 to 2 to 3 (each moves at least as much,
  behind no more compute: cost/step.py), so per layout and recompute mode only
  the lowest ZeRO stage that fits is timed; the higher ones that fit count as
  feasible;
- step time never falls with more recompute, so a layout's more-recomputing
  variant is at most as fast as its first fitting one: it is timed only when no
  timed plan with no more memory is strictly faster than that (otherwise it can
  be neither recommended nor on the Pareto front, and is left out of the
  ranking; it still counts as feasible);
- step time is at least cost/floors.py step_floor (the stages' total compute spread
  evenly, with the smallest bubble), found from per-layer times alone. Plans are
  timed from the highest such bound down, and once a bound falls below the KEEP-th
  fastest plan timed (and below the band of the fastest), the rest are skipped: the
  leading plans, all those at least that fast, rank exactly as with every plan
  timed. Reading further (the whole ranking, a plot of every plan) times the rest
  with the same memo. The bound is found in two levels (_time_jobs): one per layer
  class first (cost/floors.py class_floors, any ep and etp), a plan's own only where
  that one still clears the bar.

Ranking: search/ranking.py.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache

from autopar.cost.floors import class_floors, step_floors
from autopar.cost.memo import Memo
from autopar.cost.memory import peak_bytes
from autopar.cost.step import step_parts, variant_step_seconds
from autopar.errors import InfeasibleError
from autopar.search.front import drawn
from autopar.search.ranking import TIE_BAND, Candidate, RankedPlans, dominated, rank, simplicity
from autopar.search.scan import Deferred, Scan, Work, scan, why_none, work_plan
from autopar.search.space import (
    Block,
    choices,
    enumerate_blocks,
    enumerate_plans,
    searched_zero,
    stack_limits,
    with_knobs,
)
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import RECOMPUTE
from autopar.spec.stack import NEUTRAL, StackProfile

__all__ = ["TIE_BAND", "Candidate", "RankedPlans", "SearchResult", "dominated", "enumerate_plans", "rank", "search", "simplicity"]

PROGRESS_EVERY = 1024  # layouts between progress reports
CP_VARIANT_CANDIDATES = 64  # leading plans on which the all-gather CP variant is tried
KEEP = 256  # a search ranks exactly at least this many plans (and all within TIE_BAND of the best)
LEAD_BLOCKS = 256  # a search with lead=True checks the memory of the blocks of the highest bounds first
LEAD_TRIES = 2  # then those of a bound at least its bar; a search of every block after that


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """Ranked feasible plans and what the search looked at."""

    ranked: RankedPlans  # best first: per layout and recompute, the lowest ZeRO stage that fits (less variants a plan beats)
    considered: int  # plans in the space
    # plans that fit in memory, or how to count them (a search with lead=True: the memory check of every layout)
    fits: int | Callable[[], int]
    front: Callable[[], RankedPlans] | None = None  # while the ranking is pruned: what a chart draws (search/front.py)

    @property
    def feasible(self) -> int:
        """Plans that fit in memory."""
        return self.fits if isinstance(self.fits, int) else self.fits()

    def drawn(self) -> RankedPlans:
        """The plans a chart draws: every ranked plan, or, while the ranking is pruned, those timed and
        every plan that may be on the Pareto front (search/front.py)."""
        return self.ranked if self.front is None or not self.ranked.pruned else self.front()


def search(
    model: ModelSpec,
    hw: HardwareProfile,
    job: Job,
    *,
    fixed: Mapping[str, object] | None = None,
    stack: StackProfile = NEUTRAL,
    progress: Callable[[int, int], None] | None = None,
    keep: int | None = KEEP,
    share: Memo | None = None,
    lead: bool = False,
) -> SearchResult:
    """All feasible plans `stack` can launch, ranked by tokens/s as it runs them.

    `keep`: time at least the plans needed to rank this many exactly (the rest of the
    ranking is completed if read); None times every plan. `share`: a memo of this job at
    another GPU count and batch, whose values the search reuses (cost/memo.py). `lead`: check
    the memory of the layouts that can reach the leading plans first (_leading), for a caller that
    reads the first plans alone (`suggest --gpus auto`); the rest, and `feasible`, when read.
    Raises InfeasibleError when none fits, saying why.
    """
    memo = Memo(model, hw, job, stack, share=share)
    with _no_cyclic_gc():
        return _search(memo, stack_limits(stack, dict(fixed or {})), progress, keep=keep, lead=lead)


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


def _search(
    memo: Memo, fixed: dict[str, object], progress: Callable[[int, int], None] | None = None, *, keep: int | None = KEEP, lead: bool = False
) -> SearchResult:
    recomputes = tuple(choices(fixed, "recompute", list(RECOMPUTE)))
    zeros = tuple(sorted(int(str(z)) for z in choices(fixed, "zero", searched_zero(memo.stack))))
    blocks = list(enumerate_blocks(memo.model, memo.job, fixed, stack=memo.stack))
    if lead and keep is not None:
        led = _leading(memo, fixed, blocks, recomputes, zeros, keep)
        if led is not None:
            return led
    return _ranked(memo, fixed, blocks, recomputes, zeros, progress, keep)[0]


def _leading(
    memo: Memo, fixed: dict[str, object], blocks: list[Block], recomputes: tuple[str, ...], zeros: tuple[int, ...], keep: int
) -> SearchResult | None:
    """The search of the blocks whose upper bound of tokens/s reaches a cut, when its bar ends at or above
    the cut (else a try at the bar it reached, LEAD_TRIES in all; None when none holds).

    A block's bound is its skeleton's step floor under the least recompute (class_floors where ep and etp
    vary; recomputing more and a higher ZeRO stage are never faster, as scan reads them): no plan of a
    block left out is as fast as the cut. So every plan at least as fast as the bar is in the blocks
    searched, and timed there as a search of all blocks times it: both rank those plans alike (the
    leading ones: rank reads only the plans within TIE_BAND of the fastest, _pick_cp_comm the
    CP_VARIANT_CANDIDATES fastest, both above the bar; ties in the blocks' order, kept). Reading past
    them, or `feasible`, runs the search of every block with the same memo."""
    tokens = memo.job.tokens_per_step
    floors = (step_floors if memo.model.moe is None else class_floors)(memo, [(b.skeleton, recomputes[0]) for b in blocks])
    bounds = [tokens / f if f > 0 else math.inf for f in floors]
    seen: _Seen = {}  # the step seconds and floors of the jobs, kept between tries
    whole = cache(lambda: _ranked(memo, fixed, blocks, recomputes, zeros, None, keep, seen)[0])
    cut = sorted(bounds, reverse=True)[LEAD_BLOCKS] if len(blocks) > LEAD_BLOCKS else math.inf
    for _ in range(LEAD_TRIES):
        if cut == -math.inf or cut > max(bounds, default=-math.inf):
            break
        try:
            _, bar, plans = _ranked(
                memo, fixed, [b for b, u in zip(blocks, bounds, strict=True) if u >= cut], recomputes, zeros, None, keep, seen
            )
        except InfeasibleError:
            bar, plans = -math.inf, []
        exact = sum(1 for c in plans if c.tokens_per_s >= bar)
        if bar >= cut and exact < len(plans):  # (a ranking all exact would not be completed when read further)
            ranked = RankedPlans(memo, plans, exact=exact, complete=lambda: list(whole().ranked.candidates))
            return SearchResult(ranked=ranked, considered=_considered(blocks, recomputes, zeros), fits=lambda: whole().feasible)
        cut = bar  # more blocks' plans only raise the bar: the next try holds those this one leaves it at
    return None


def _considered(blocks: list[Block], recomputes: tuple[str, ...], zeros: tuple[int, ...]) -> int:
    """Plans in the space of `blocks`: every layout under each recompute mode and ZeRO stage."""
    return sum(len(b.experts) for b in blocks) * len(recomputes) * len(zeros)


def _ranked(
    memo: Memo,
    fixed: dict[str, object],
    blocks: list[Block],
    recomputes: tuple[str, ...],
    zeros: tuple[int, ...],
    progress: Callable[[int, int], None] | None,
    keep: int | None,
    seen: _Seen | None = None,
) -> tuple[SearchResult, float, list[Candidate]]:
    """The search of `blocks`, its bar's final floor (every plan at least that fast is ranked exactly) and
    its ranked plans (not completed)."""
    model, hw, job = memo.model, memo.profile, memo.job
    found = scan(memo, blocks, recomputes, zeros, progress, PROGRESS_EVERY)
    considered = _considered(blocks, recomputes, zeros)
    jobs, deferred = found.jobs, found.deferred
    if keep is not None and "cp_comm" not in fixed:
        keep = max(keep, CP_VARIANT_CANDIDATES)  # _pick_cp_comm's plans are then all ranked exactly
    bar = _Bar(keep if keep is not None and len(jobs) + len(deferred) > keep else None)
    tps = _time_jobs(memo, found, bar, seen)
    timed = [Candidate(tokens_per_s=tps[j], memory_bytes=jobs[j][5], plan=work_plan(jobs[j])) for j in sorted(tps)]
    timed += _undominated(memo, timed, jobs, deferred, tps, bar, seen)
    if not timed:
        raise InfeasibleError(why_none(model, hw, job, considered, found.smallest))
    if "cp_comm" not in fixed:
        timed = _pick_cp_comm(memo, sorted(timed, key=lambda c: -c.tokens_per_s))
    ranked = rank(timed)
    pick = "cp_comm" not in fixed
    complete = (lambda: _unpruned(memo, jobs, tps, deferred, pick=pick)) if bar.pruned else None
    front = cache(lambda: RankedPlans(memo, drawn(memo, found, tps, ranked, picked=pick))) if bar.pruned else None
    exact = sum(1 for c in ranked if c.tokens_per_s >= bar.floor)
    result = SearchResult(
        ranked=RankedPlans(memo, ranked, exact=exact, complete=complete), considered=considered, fits=found.feasible, front=front
    )
    return result, bar.floor, ranked


def _unpruned(memo: Memo, jobs: list[Work], tps: dict[int, float], deferred: list[Deferred], *, pick: bool) -> list[Candidate]:
    """_complete without the cyclic collector, as the search runs: the ~10^5 objects it makes are acyclic
    (deepseek-v3 on 1,024 GPUs, the completion of `--plot`: about a third of its CPU in process)."""
    with _no_cyclic_gc():
        return _complete(memo, jobs, tps, deferred, pick=pick)


def _complete(memo: Memo, jobs: list[Work], tps: dict[int, float], deferred: list[Deferred], *, pick: bool) -> list[Candidate]:
    """The ranking of the unpruned search (keep=None), from a pruned one's jobs: the jobs it skipped are
    timed with its memo (the same values: cost functions are pure) and the rest runs as _search runs it."""
    tokens = memo.job.tokens_per_step
    full = {}
    timed = []
    for j, work in enumerate(jobs):
        plan = work_plan(work)  # its knobs are the variant's: variant_step_seconds reads the layout only
        t = full[j] = tps[j] if j in tps else tokens / variant_step_seconds(memo, plan, [(work[3], work[4])])[0]
        timed.append(Candidate(tokens_per_s=t, memory_bytes=work[5], plan=plan))
    timed += _undominated(memo, timed, jobs, deferred, full, _Bar(None))
    if pick:
        timed = _pick_cp_comm(memo, sorted(timed, key=lambda c: -c.tokens_per_s))
    return rank(timed)


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


def _time_jobs(memo: Memo, found: Scan, bar: _Bar, seen: _Seen | None = None) -> dict[int, float]:
    """Tokens/s of each job by its index, but those a pruned search skips: jobs are timed from the highest
    upper bound (cost/floors.py step_floor) down, until the bound falls below the bar.

    Two levels: each job starts at its layer class's bound (floors.py class_floors, looser, shared by
    every ep and etp) and is refined to its step_floor only when it reaches the top of the heap, so a
    job whose class bound falls below the bar is never refined. Every bound held is at least the
    job's step_floor bound, so jobs are timed in the order of that bound (ties by index, as a stable
    sort would), and the search stops where timing every bound in order would. The jobs of one block
    and recompute mode share their class bound: the heap holds the first of them not yet refined,
    which comes off before the others (ties by index), so it pops the jobs in the order a heap of
    every job would.

    `seen`: step seconds and floors found before by the same caller (_Seen), read and added to."""
    tokens, jobs = memo.job.tokens_per_step, found.jobs
    out: dict[int, float] = {}
    if not bar.active:
        for j, (block, ep, etp, recompute, zero, _) in enumerate(jobs):
            out[j] = tokens / _seconds(memo, seen, block, ep, etp, recompute, zero)
        return out
    exact = memo.model.moe is None  # without experts a block is one layout, its layer class one plan's layers
    groups = found.groups
    floors = (step_floors if exact else class_floors)(memo, [(block.skeleton, r) for block, r, _ in groups])
    heap = [(-(tokens / f) if f > 0 else float("-inf"), groups[g][2][0], exact, g, 0) for g, f in enumerate(floors)]
    heapq.heapify(heap)
    while heap:
        neg, j, refined, g, at = heap[0]
        if bar.skips(-neg):
            break
        block, ep, etp, recompute, zero, _ = jobs[j]
        members = groups[g][2]
        if not refined:
            f = _seconds(memo, seen, block, ep, etp, recompute, FLOOR)
            heapq.heapreplace(heap, (-(tokens / f) if f > 0 else float("-inf"), j, True, g, -1))
        else:
            heapq.heappop(heap)
            step = _seconds(memo, seen, block, ep, etp, recompute, zero)
            out[j] = tokens / step
            bar.admit(tokens / step)
        if 0 <= at < len(members) - 1:  # the group's next job takes its place at the group's bound
            heapq.heappush(heap, (neg, members[at + 1], refined, g, at + 1))
    return out


FLOOR = -1  # in a _Seen key, the ZeRO stage of a job's step_floor
# (id of a Block, ep, etp, recompute, ZeRO stage or FLOOR): step seconds or step_floor, kept by _leading
# between its tries, which search the same blocks (their ids hold while it keeps the list)
_Seen = dict[tuple[int, int, int, str, int], float]


def _seconds(memo: Memo, seen: _Seen | None, block: Block, ep: int, etp: int, recompute: str, zero: int) -> float:
    """Step seconds of a job (its step_floor where zero is FLOOR), from `seen` when there."""
    key = (id(block), ep, etp, recompute, zero)
    if seen is not None and key in seen:
        return seen[key]
    if zero == FLOOR:
        (step,) = step_floors(memo, [(block.plan(ep, etp), recompute)])
    else:
        (step,) = variant_step_seconds(memo, block.plan(ep, etp), [(recompute, zero)])
    if seen is not None:
        seen[key] = step
    return step


def _undominated(
    memo: Memo,
    timed: list[Candidate],
    jobs: list[Work],
    deferred: list[Deferred],
    tps: dict[int, float],
    bar: _Bar,
    seen: _Seen | None = None,
) -> list[Candidate]:
    """The deferred recompute variants that no timed plan beats: each is at most `bound` tokens/s (its
    layout's faster variant, tps of its job); one is left out when a timed plan with no more memory is
    strictly faster than that bound, so it is neither recommended nor on the Pareto front. A variant
    whose faster one was not timed, or whose bound is below the bar, is left out by a pruned search.

    `deferred` is in the order of its jobs' indices: the variants of the timed jobs are read by
    bisection, in that order, and the others only counted."""
    order = sorted(timed, key=lambda c: c.memory_bytes)
    mems = [c.memory_bytes for c in order]
    best: list[float] = []
    for c in order:
        best.append(max(best[-1], c.tokens_per_s) if best else c.tokens_per_s)
    tokens = memo.job.tokens_per_step
    out = []
    starts = ((j, bisect.bisect_left(deferred, j, key=_job_of)) for j in sorted(tps))
    spans = [(lo, bisect.bisect_right(deferred, j, lo=lo, key=_job_of)) for j, lo in starts if lo < len(deferred) and deferred[lo][0] == j]
    if sum(hi - lo for lo, hi in spans) < len(deferred):
        bar.pruned = True  # some variant's faster one was not timed
    for j, recompute, zero, need in (d for lo, hi in spans for d in deferred[lo:hi]):
        bound = tps[j]
        i = bisect.bisect_right(mems, need)
        if (i and best[i - 1] > bound) or bar.skips(bound):
            continue
        block, ep, etp = jobs[j][:3]
        step = _seconds(memo, seen, block, ep, etp, recompute, zero)
        out.append(Candidate(tokens_per_s=tokens / step, memory_bytes=need, plan=with_knobs(block.plan(ep, etp), recompute, zero)))
        bar.admit(tokens / step)
    return out


def _job_of(d: Deferred) -> int:
    return d[0]


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
