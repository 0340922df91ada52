"""The leading plans of a search, checking the memory of only the blocks that can reach them
(search(lead=True), `suggest --gpus auto`, whose curve reads each count's first plan alone).

One heap holds the blocks at an upper bound of their tokens/s (the skeleton's step floor under the
least recompute, class_floors where ep and etp vary: recomputing more and a higher ZeRO stage are never
faster), and the plans of the blocks checked so far at theirs (planner.py _time_jobs' two levels). A
block is checked for memory (search/scan.py) when it reaches the top, a plan timed when its own bound
does; the search stops when the top falls below the bar (timing.py Bar). Every plan at least as fast
as the bar is then timed, as a search of every block times it, and both rank those plans alike (ties
in the blocks' order: the blocks checked are put back in it).

The all-gather CP variant is tried on the CP_VARIANT_CANDIDATES fastest plans (timing.py
pick_cp_comm); to rank fewer than those exactly, each bound is also the variant's (the step floor
with cp_comm allgather), and the band of the fastest is known when no plan outside the plans ranked
exactly can reach it as its variant: a plan timed and below the bar only when its variant's floor, and
then its variant's step time (any recompute and ZeRO stage: never faster), is below the band. Else the
search returns None, and the caller searches every block (planner.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import replace

from autopar.cost.floors import class_floors, stage_floor, step_floors
from autopar.cost.memo import Memo
from autopar.cost.memory import block_peaks
from autopar.cost.step import step_parts
from autopar.errors import InfeasibleError
from autopar.search.ranking import TIE_BAND, Candidate, rank
from autopar.search.scan import Deferred, Scan, Work, scan, why_none, work_plan
from autopar.search.space import Block, with_knobs
from autopar.search.timing import CP_VARIANT_CANDIDATES, Bar, Seen, job_seconds, pick_cp_comm, space_size, undominated
from autopar.spec.plan import Plan

ALLGATHER = "allgather"  # the CP variant pick_cp_comm tries
Floors = Callable[..., list[float]]  # step_floors or class_floors
_Leanest = tuple[float, int, int] | None  # (bytes, block index, index in its block_peaks)
CHUNK = 32  # blocks checked by one scan, at most (a search checks up to about CHUNK - 1 more than it needs)
# a heap entry: (-bound, index of its chunk, job index in the chunk's scan, refined, group, at)
_Entry = tuple[float, int, int, bool, int, int]


def leading(
    memo: Memo, fixed: dict[str, object], blocks: list[Block], recomputes: tuple[str, ...], zeros: tuple[int, ...], keep: int, seen: Seen
) -> tuple[list[Candidate], int] | None:
    """The ranked plans of the blocks checked and how many lead it exactly (at least `keep`, fewer than
    all), or None where that cannot be told from them. Raises InfeasibleError when no plan fits."""
    pick = "cp_comm" not in fixed
    checked: list[tuple[list[int], Scan]] = []
    bar = Bar(keep)
    tps, leanest = _heap_search(memo, blocks, recomputes, zeros, bar, seen, checked, pick=pick)
    jobs, deferred, timed_tps = _merged(blocks, checked, tps)
    if not jobs:  # no block fits (each block's peaks were found: nothing was timed to raise the bar)
        smallest = None
        if leanest is not None:  # as scan finds it: the first of equals, in search order
            need, i, at = leanest
            width = len(recomputes) * len(zeros)
            ep, etp = blocks[i].experts[at // width]
            r, z = divmod(at % width, len(zeros))
            smallest = (need, with_knobs(blocks[i].plan(ep, etp), recomputes[r], zeros[z]))
        raise InfeasibleError(why_none(memo.model, memo.profile, memo.job, space_size(blocks, recomputes, zeros), smallest))
    timed = [Candidate(tokens_per_s=timed_tps[j], memory_bytes=jobs[j][5], plan=work_plan(jobs[j])) for j in sorted(timed_tps)]
    timed += undominated(memo, timed, jobs, deferred, timed_tps, bar, seen)
    by_speed = sorted(timed, key=lambda c: -c.tokens_per_s)
    cut = bar.floor
    if not pick:
        ranked = rank(by_speed)
    else:
        ranked = rank(pick_cp_comm(memo, by_speed))
        if sum(1 for c in by_speed if c.tokens_per_s >= cut) < CP_VARIANT_CANDIDATES:
            # pick_cp_comm's plans are not all ranked exactly: the band alone is, where no other plan's variant reaches it
            cut = max(c.tokens_per_s for c in ranked) * (1 - TIE_BAND)
            if _variant_may_reach(memo, timed, bar.floor, cut):
                return None
    exact = sum(1 for c in ranked if c.tokens_per_s >= cut)
    return (ranked, exact) if keep <= exact < len(ranked) else None


def _heap_search(
    memo: Memo,
    blocks: list[Block],
    recomputes: tuple[str, ...],
    zeros: tuple[int, ...],
    bar: Bar,
    seen: Seen,
    checked: list[tuple[list[int], Scan]],
    *,
    pick: bool,
) -> tuple[dict[tuple[int, int], float], _Leanest]:
    """Tokens/s of the plans timed, by (index in `checked`, job index in its scan), best bound first until
    the bound falls below the bar, and the leanest variant of the blocks where none fits (what the message
    reads when no plan fits). A block reaching the top first has its peaks found (block_peaks): one where
    nothing fits goes, one that fits only recomputing more waits at the bound of those modes; the blocks
    waiting are checked (search/scan.py) in order of their bounds, up to CHUNK at a time while none of a
    fresh block or a plan checked is higher, each chunk in search order by one scan, left in `checked`
    with its blocks' indices. Bounds are clamped to their parent's, so the heap pops them in descending
    order."""
    tokens = memo.job.tokens_per_step
    exact = memo.model.moe is None  # a dense block is one layout: its class bound is its plan's step_floor
    floors = step_floors if exact else class_floors
    tops = _bounds(memo, floors, [(b.skeleton, recomputes[0]) for b in blocks], pick)
    order = sorted(range(len(blocks)), key=tops.__getitem__, reverse=True)  # stable: ties in search order
    heap: list[_Entry] = []
    waiting: list[tuple[float, int]] = []  # blocks whose peaks are known: (-bound, index)
    known: dict[int, list[float]] = {}  # their peaks
    leanest: _Leanest = None
    out: dict[tuple[int, int], float] = {}
    nxt = 0
    while True:
        top = -heap[0][0] if heap else -math.inf
        fresh = tops[order[nxt]] if nxt < len(order) else -math.inf
        ready = -waiting[0][0] if waiting else -math.inf
        if (nxt < len(order) or waiting) and max(fresh, ready) >= top:
            if bar.skips(max(fresh, ready)):
                break
            if fresh >= ready:  # fresh blocks: their peaks, then each waits at the bound of what fits
                end = nxt + 1
                while end < len(order) and end - nxt < CHUNK and tops[order[end]] >= max(top, ready, bar.floor):
                    end += 1
                chosen = order[nxt:end]
                leanest = _find_peaks(memo, [blocks[i] for i in chosen], chosen, tops, recomputes, zeros, pick, waiting, known, leanest)
                nxt = end
                continue
            chunk = [heapq.heappop(waiting)[1]]
            while waiting and len(chunk) < CHUNK and -waiting[0][0] >= max(top, fresh, bar.floor):
                chunk.append(heapq.heappop(waiting)[1])
            chunk.sort()
            c = len(checked)
            found = scan(memo, [blocks[i] for i in chunk], recomputes, zeros, found=[known.pop(i) for i in chunk])
            checked.append((chunk, found))
            bounds = _bounds(memo, floors, [(block.skeleton, r) for block, r, _ in found.groups], pick)
            for k, u in enumerate(bounds):
                heapq.heappush(heap, (-u, c, found.groups[k][2][0], False, k, 0))
            continue
        if not heap or bar.skips(top):
            break
        neg, c, j, refined, g, at = heap[0]
        found = checked[c][1]
        block, ep, etp, recompute, zero, _ = found.jobs[j]
        members = found.groups[g][2]
        if not refined:
            f = stage_floor(memo, block.skeleton, ep, etp, recompute, either=pick)
            u = tokens / f if f > 0 else math.inf  # as _bounds
            heapq.heapreplace(heap, (max(neg, -u), c, j, True, g, -1))
        else:
            heapq.heappop(heap)
            out[c, j] = tokens / job_seconds(memo, seen, block, ep, etp, recompute, zero)
            bar.admit(out[c, j])
        if 0 <= at < len(members) - 1:  # the group's next job takes its place at the group's bound
            heapq.heappush(heap, (neg, c, members[at + 1], refined, g, at + 1))
    return out, leanest


def _find_peaks(
    memo: Memo,
    blocks: list[Block],
    indices: list[int],
    tops: list[float],
    recomputes: tuple[str, ...],
    zeros: tuple[int, ...],
    pick: bool,
    waiting: list[tuple[float, int]],
    known: dict[int, list[float]],
    leanest: _Leanest,
) -> _Leanest:
    """The peaks of `blocks` (at `indices`) into `known`, each block into the heap `waiting` at the bound of
    the modes from the least it fits under (its top where that is the least searched); a block where
    nothing fits goes. Returns `leanest` or a leaner variant of those (the first of equals, as scan finds it)."""
    cap, nr, nz = memo.profile.memory_bytes, len(recomputes), len(zeros)
    later: list[tuple[Block, int, int]] = []  # (block, index, the least recompute that fits), when not the least searched
    for i, block in zip(indices, blocks, strict=True):
        peaks = block_peaks(memo, block.skeleton, block.experts, recomputes, zeros)
        r = _least(peaks, nr, nz, cap)
        if r is None:
            x = min(peaks)
            if leanest is None or (x, i) < leanest[:2]:
                leanest = (x, i, peaks.index(x))
            continue
        known[i] = peaks
        if r == 0:
            heapq.heappush(waiting, (-tops[i], i))
        else:
            later.append((block, i, r))
    if later:
        floors = step_floors if memo.model.moe is None else class_floors
        items = [(block.skeleton, m) for block, _, r in later for m in recomputes[r:]]
        each = iter(_bounds(memo, floors, items, pick))
        for _, i, r in later:
            u = max(next(each) for _ in recomputes[r:])
            heapq.heappush(waiting, (-min(u, tops[i]), i))
    return leanest


def _least(peaks: list[float], nr: int, nz: int, cap: float) -> int | None:
    """The index of the least recompute mode under which some variant of block_peaks' `peaks` (expert
    major, then `nr` modes, then `nz` ZeRO stages) fits in `cap`, or None."""
    if min(peaks) > cap:
        return None
    width = nr * nz
    for r in range(nr):
        for at in range(r * nz, len(peaks), width):
            if min(peaks[at : at + nz]) <= cap:
                return r
    return None


def _bounds(memo: Memo, floors: Floors, items: list[tuple[Plan, str]], pick: bool) -> list[float]:
    """Upper bounds of tokens/s from `floors` (step_floors or class_floors) of each (plan, recompute): the
    ring's, or where `pick` the greater of it and the all-gather CP variant's."""
    tokens = memo.job.tokens_per_step
    return [tokens / f if f > 0 else math.inf for f in floors(memo, items, either=pick)]


def _merged(
    blocks: list[Block], checked: list[tuple[list[int], Scan]], tps: dict[tuple[int, int], float]
) -> tuple[list[Work], list[Deferred], dict[int, float]]:
    """The blocks checked as one scan of them in search order (what planner.py _ranked reads): its jobs,
    deferred variants and the tokens/s of the jobs timed by their index there. A block's jobs are
    consecutive in its chunk's scan, each in a group."""
    pieces: list[tuple[int, int, int, int]] = []  # (block index, chunk, first job, past the last)
    for c, (chunk, found) in enumerate(checked):
        where = {id(blocks[i]): i for i in chunk}
        span: dict[int, tuple[int, int]] = {}
        for block, _, js in found.groups:
            lo, hi = span.get(where[id(block)], (js[0], js[-1] + 1))
            span[where[id(block)]] = (min(lo, js[0]), max(hi, js[-1] + 1))
        pieces.extend((i, c, lo, hi) for i, (lo, hi) in span.items())
    jobs: list[Work] = []
    moved = [[0] * len(found.jobs) for _, found in checked]  # per chunk: each job's index in `jobs`
    for _, c, lo, hi in sorted(pieces):
        moved[c][lo:hi] = range(len(jobs), len(jobs) + hi - lo)
        jobs.extend(checked[c][1].jobs[lo:hi])
    deferred = sorted(((moved[c][j], r, z, need) for c, (_, f) in enumerate(checked) for j, r, z, need in f.deferred), key=lambda d: d[0])
    return jobs, deferred, {moved[c][j]: t for (c, j), t in tps.items()}


def _variant_may_reach(memo: Memo, timed: list[Candidate], floor: float, band: float) -> bool:
    """Whether the all-gather variant of a plan not ranked exactly may reach `band`: of a plan timed below the
    bar's `floor` (its floor first, then its step time), which bounds its layout's more-recomputing variants
    too (no faster). A plan not timed has a bound below `floor` that is also its variant's (_bounds)."""
    tokens = memo.job.tokens_per_step
    plans = [(replace(c.plan, cp_comm=ALLGATHER), c.plan.recompute) for c in timed if c.plan.cp > 1 and c.tokens_per_s < floor]
    for (plan, _), f in zip(plans, step_floors(memo, plans), strict=True):
        if (f <= 0 or tokens / f >= band) and tokens / sum(step_parts(memo, plan)) >= band:
            return True
    return False
