"""Timing the plans a search keeps (search/planner.py, search/lead.py): the bar a plan must clear to be
ranked exactly, the step seconds a search keeps between its passes, the deferred recompute variants no
timed plan beats, and the all-gather CP variant of the leading plans."""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import replace

from autopar.cost.floors import placed_floor
from autopar.cost.memo import Memo
from autopar.cost.memory import peak_bytes
from autopar.cost.step import step_parts, variant_step_seconds
from autopar.search.ranking import TIE_BAND, Candidate
from autopar.search.scan import Deferred, Work
from autopar.search.space import Block

CP_VARIANT_CANDIDATES = 64  # leading plans on which the all-gather CP variant is tried


def space_size(blocks: list[Block], recomputes: tuple[str, ...], zeros: tuple[int, ...]) -> int:
    """Plans in the space of `blocks`: every layout under each recompute mode and ZeRO stage."""
    return sum(len(b.experts) for b in blocks) * len(recomputes) * len(zeros)


class Bar:
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


FLOOR = -1  # in a Seen key, the ZeRO stage of a job's step_floor
# (id of a Block, ep, etp, recompute, ZeRO stage or FLOOR): step seconds or step_floor, kept by a leading search
# and the search of every block after it, which reads the same blocks (their ids hold while it keeps the list)
Seen = dict[tuple[int, int, int, str, int], float]


def job_seconds(memo: Memo, seen: Seen | None, block: Block, ep: int, etp: int, recompute: str, zero: int) -> float:
    """Step seconds of a job (its step_floor where zero is FLOOR), from `seen` when there."""
    key = (id(block), ep, etp, recompute, zero)
    if seen is not None and key in seen:
        return seen[key]
    if zero == FLOOR:
        step = placed_floor(memo, block.skeleton, ep, etp, recompute)
    else:
        (step,) = variant_step_seconds(memo, block.plan(ep, etp), [(recompute, zero)])
    if seen is not None:
        seen[key] = step
    return step


def beaten_by(plans: Sequence[Candidate]) -> Callable[[float, float], bool]:
    """Whether a plan of `need` peak bytes and at most `bound` tokens/s is beaten on both axes by one of
    `plans`: one with no more memory is strictly faster (it can be neither recommended nor on the front)."""
    order = sorted(plans, key=lambda c: c.memory_bytes)
    mems = [c.memory_bytes for c in order]
    fastest = list(itertools.accumulate((c.tokens_per_s for c in order), max))

    def beaten(need: float, bound: float) -> bool:
        i = bisect.bisect_right(mems, need)
        return i > 0 and fastest[i - 1] > bound

    return beaten


def undominated(
    memo: Memo,
    timed: list[Candidate],
    jobs: list[Work],
    deferred: list[Deferred],
    tps: dict[int, float],
    bar: Bar,
    seen: Seen | None = None,
) -> list[Candidate]:
    """The deferred recompute variants that no timed plan beats: each is at most `bound` tokens/s (its
    layout's faster variant, tps of its job); one is left out when a timed plan with no more memory is
    strictly faster than that bound, so it is neither recommended nor on the Pareto front. A variant
    whose faster one was not timed, or whose bound is below the bar, is left out by a pruned search.

    `deferred` is in the order of its jobs' indices: the variants of the timed jobs are read by
    bisection, in that order, and the others only counted."""
    beaten = beaten_by(timed)
    tokens = memo.job.tokens_per_step
    out = []
    keys = list(map(operator.itemgetter(0), deferred))  # their jobs' indices, bisected in C (a key function is called per probe)
    starts = ((j, bisect.bisect_left(keys, j)) for j in sorted(tps))
    spans = [(lo, bisect.bisect_right(keys, j, lo=lo)) for j, lo in starts if lo < len(keys) and keys[lo] == j]
    if sum(hi - lo for lo, hi in spans) < len(deferred):
        bar.pruned = True  # some variant's faster one was not timed
    for j, recompute, zero, need in (d for lo, hi in spans for d in deferred[lo:hi]):
        bound = tps[j]
        if beaten(need, bound) or bar.skips(bound):
            continue
        block, ep, etp = jobs[j][:3]
        step = job_seconds(memo, seen, block, ep, etp, recompute, zero)
        out.append(Candidate(tokens_per_s=tokens / step, memory_bytes=need, plan=block.knobbed(ep, etp, recompute, zero)))
        bar.admit(tokens / step)
    return out


def pick_cp_comm(memo: Memo, ranked: list[Candidate]) -> list[Candidate]:
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
