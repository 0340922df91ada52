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

import gc
import heapq
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

from autopar.cost.floors import class_floors, placed_floors, step_floors
from autopar.cost.memo import Memo
from autopar.cost.step import variant_step_seconds
from autopar.errors import InfeasibleError
from autopar.search.front import drawn
from autopar.search.lead import leading
from autopar.search.ranking import TIE_BAND, Candidate, RankedPlans, dominated, rank, simplicity
from autopar.search.scan import Deferred, Scan, Work, scan, why_none, work_plan
from autopar.search.space import (
    Block,
    choices,
    enumerate_blocks,
    enumerate_plans,
    searched_zero,
    stack_limits,
)
from autopar.search.timing import (
    CP_VARIANT_CANDIDATES,
    FLOOR,
    Bar,
    Seen,
    job_seconds,
    pick_cp_comm,
    space_size,
    undominated,
)
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import RECOMPUTE
from autopar.spec.stack import NEUTRAL, StackProfile

__all__ = ["TIE_BAND", "Candidate", "RankedPlans", "SearchResult", "dominated", "enumerate_plans", "rank", "search", "simplicity"]

PROGRESS_EVERY = 1024  # layouts between progress reports
KEEP = 256  # a search ranks exactly at least this many plans (and all within TIE_BAND of the best)


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
    the memory of the layouts that can reach the leading plans first (search/lead.py), for a caller that
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
    seen: Seen | None = None
    if lead and keep is not None:
        seen = {}  # the step seconds and floors of the jobs, kept for the search of every block
        led = leading(memo, fixed, blocks, recomputes, zeros, keep, seen)
        if led is not None:
            # reading past the leading plans, or `feasible`, runs the search of every block with the same memo
            whole = cache(lambda: _ranked(memo, fixed, blocks, recomputes, zeros, None, keep, seen)[0])
            ranked = RankedPlans(memo, led[0], exact=led[1], complete=lambda: list(whole().ranked.candidates))
            return SearchResult(ranked=ranked, considered=space_size(blocks, recomputes, zeros), fits=lambda: whole().feasible)
    return _ranked(memo, fixed, blocks, recomputes, zeros, progress, keep, seen)[0]


def _ranked(
    memo: Memo,
    fixed: dict[str, object],
    blocks: list[Block],
    recomputes: tuple[str, ...],
    zeros: tuple[int, ...],
    progress: Callable[[int, int], None] | None,
    keep: int | None,
    seen: Seen | None = None,
) -> tuple[SearchResult, float, list[Candidate]]:
    """The search of `blocks`, its bar's final floor (every plan at least that fast is ranked exactly) and
    its ranked plans (not completed)."""
    model, hw, job = memo.model, memo.profile, memo.job
    found = scan(memo, blocks, recomputes, zeros, progress, PROGRESS_EVERY)
    considered = space_size(blocks, recomputes, zeros)
    jobs, deferred = found.jobs, found.deferred
    if keep is not None and "cp_comm" not in fixed:
        keep = max(keep, CP_VARIANT_CANDIDATES)  # pick_cp_comm's plans are then all ranked exactly
    bar = Bar(keep if keep is not None and len(jobs) + len(deferred) > keep else None)
    tps = _time_jobs(memo, found, bar, seen)
    timed = [Candidate(tokens_per_s=tps[j], memory_bytes=jobs[j][5], plan=work_plan(jobs[j])) for j in sorted(tps)]
    timed += undominated(memo, timed, jobs, deferred, tps, bar, seen)
    if not timed:
        raise InfeasibleError(why_none(model, hw, job, considered, found.smallest))
    if "cp_comm" not in fixed:
        timed = pick_cp_comm(memo, sorted(timed, key=lambda c: -c.tokens_per_s))
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
    timed += undominated(memo, timed, jobs, deferred, full, Bar(None))
    if pick:
        timed = pick_cp_comm(memo, sorted(timed, key=lambda c: -c.tokens_per_s))
    return rank(timed)


def _time_jobs(memo: Memo, found: Scan, bar: Bar, seen: Seen | None = None) -> dict[int, float]:
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

    `seen`: step seconds and floors found before by the same caller (Seen), read and added to."""
    tokens, jobs = memo.job.tokens_per_step, found.jobs
    out: dict[int, float] = {}
    if not bar.active:
        for j, (block, ep, etp, recompute, zero, _) in enumerate(jobs):
            out[j] = tokens / job_seconds(memo, seen, block, ep, etp, recompute, zero)
        return out
    exact = memo.model.moe is None  # without experts a block is one layout, its layer class one plan's layers
    groups = found.groups
    floors = (step_floors if exact else class_floors)(memo, [(block.skeleton, r) for block, r, _ in groups])
    heap = [(-(tokens / f) if f > 0 else float("-inf"), groups[g][2][0], exact, g, 0) for g, f in enumerate(floors)]
    heapq.heapify(heap)
    refiners: list[Callable[[int, int], float] | None] = [None] * len(groups)
    skips, admit, push, replace, pop = bar.skips, bar.admit, heapq.heappush, heapq.heapreplace, heapq.heappop
    while heap:
        neg, j, refined, g, at = heap[0]
        if skips(-neg):
            break
        block, ep, etp, recompute, zero, _ = jobs[j]
        if not refined:
            if seen is None:  # job_seconds's step_floor, without its key, by the group's placed_floors
                if (floor := refiners[g]) is None:
                    floor = refiners[g] = placed_floors(memo, block.skeleton, recompute)
                f = floor(ep, etp)
            else:
                f = job_seconds(memo, seen, block, ep, etp, recompute, FLOOR)
            replace(heap, (-(tokens / f) if f > 0 else float("-inf"), j, True, g, -1))
        else:
            pop(heap)
            step = job_seconds(memo, seen, block, ep, etp, recompute, zero)
            out[j] = tokens / step
            admit(tokens / step)
        if at >= 0 and at < len(members := groups[g][2]) - 1:  # the group's next job takes its place at the group's bound
            push(heap, (neg, members[at + 1], refined, g, at + 1))
    return out
