"""The memory check of every layout of a search: which of its plans fit, and which to time.

The layouts come in Blocks (search/space.py), the layouts that differ only in ep and etp, whose peaks
cost/memory.py block_peaks finds at once. Per layout and recompute mode only the lowest ZeRO stage
that fits is kept (step time never falls from ZeRO-1 to 2 to 3: cost/step.py); the least recompute
that fits is timed, and a more-recomputing variant at no lower ZeRO stage waits (deferred) until it is
known whether a timed plan beats it on both axes (search/planner.py _undominated).

The plans kept are tuples of the block and the knobs, not Plans: a Plan is built only for the few
thousand a search refines or times (Work.plan), so a layout that fits costs a tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autopar.cost.memo import Memo
from autopar.cost.memory import block_peaks
from autopar.search.space import Block, with_knobs
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

# a plan to time: (its block, ep, etp, recompute, ZeRO stage, peak bytes)
Work = tuple[Block, int, int, str, int, float]
# a deferred variant: (the index of its layout's job, which it is no faster than, recompute, ZeRO stage, peak bytes)
Deferred = tuple[int, str, int, float]


def work_plan(w: Work) -> Plan:
    """The plan of a Work, with its knobs."""
    block, ep, etp, recompute, zero, _ = w
    return block.knobbed(ep, etp, recompute, zero)


@dataclass(slots=True)
class Scan:
    """What the memory check of every layout leaves, in search order."""

    jobs: list[Work] = field(default_factory=list)  # plans to time
    # per block and recompute mode with a job: (the block, the mode, its jobs' indices, ascending)
    groups: list[tuple[Block, str, list[int]]] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    layouts: int = 0
    feasible: int = 0  # plans (any recompute, any ZeRO stage) that fit
    smallest: tuple[float, Plan] | None = None  # the leanest plan when none fits (the first of equals)


def scan(
    memo: Memo,
    blocks: Sequence[Block],
    recomputes: tuple[str, ...],
    zeros: tuple[int, ...],
    progress: Callable[[int, int], None] | None = None,
    every: int = 1024,
    found: Sequence[list[float]] | None = None,
) -> Scan:
    """The plans of `blocks` under each recompute mode and ZeRO stage that fit in the GPU's memory, as jobs
    and deferred variants; `progress(n, layouts)` every `every` layouts. `found`: each block's
    block_peaks, where the caller has them already."""
    cap, nz = memo.profile.memory_bytes, len(zeros)
    out = Scan(layouts=sum(len(b.experts) for b in blocks))
    jobs, deferred, groups = out.jobs, out.deferred, out.groups
    feasible, leanest_seen = 0, float("inf")
    least: tuple[float, Block, int, int, str, int] | None = None
    n, width = 0, len(recomputes) * nz
    # the more-recomputing modes, with their offset among a layout's peaks at the lowest ZeRO stage
    later = [(recomputes[i], i * nz) for i in range(1, len(recomputes))]
    modes = [(r, recompute, r * nz, (r + 1) * nz) for r, recompute in enumerate(recomputes)]
    add_job, defer, z0 = jobs.append, deferred.append, zeros[0]
    for b, block in enumerate(blocks):
        experts = block.experts
        if progress is not None:
            for m in range(-(-n // every) * every, n + len(experts), every):
                progress(m, out.layouts)
        n += len(experts)
        peaks = block_peaks(memo, block.skeleton, experts, recomputes, zeros) if found is None else found[b]
        members: list[list[int]] = [[] for _ in recomputes]  # per recompute mode, its jobs in this block
        least_jobs = members[0]
        at = 0
        for ep, etp in experts:
            mine = peaks[at : at + width]
            at += width
            if max(mine) <= cap:  # every variant fits: the least recompute at the lowest ZeRO stage is timed
                feasible += width
                first = len(jobs)
                least_jobs.append(first)
                add_job((block, ep, etp, recomputes[0], z0, mine[0]))
                for recompute, o in later:
                    defer((first, recompute, z0, mine[o]))
                continue
            first, first_zero = -1, 0
            for r, recompute, lo, hi in modes:
                fit = [i for i in range(lo, hi) if mine[i] <= cap]
                if not fit:
                    continue
                feasible += len(fit)
                i = fit[0]
                zero, need = zeros[i - lo], mine[i]
                if first < 0:
                    first, first_zero = len(jobs), zero
                elif zero >= first_zero:
                    defer((first, recompute, zero, need))
                    continue
                members[r].append(len(jobs))
                add_job((block, ep, etp, recompute, zero, need))
            # none fits: its first leanest variant, for the message when no plan fits at all (only then is
            # the least read, and then every layout is here)
            if first < 0 and (leanest := min(mine)) < leanest_seen:
                i = mine.index(leanest)
                leanest_seen = leanest
                least = (leanest, block, ep, etp, recomputes[i // nz], zeros[i % nz])
        groups.extend((block, r, js) for r, js in zip(recomputes, members, strict=True) if js)
    out.feasible = feasible
    if least is not None:
        need, block, ep, etp, recompute, zero = least
        out.smallest = (need, with_knobs(block.plan(ep, etp), recompute, zero))
    return out


def why_none(model: ModelSpec, hw: HardwareProfile, job: Job, considered: int, smallest: tuple[float, Plan] | None) -> str:
    """Why no plan fits: no layout the batch divides, or the leanest plan and what it needs."""
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
        f"but one {hw.gpu_name} has {hw.memory_bytes / 2**30:.1f} GiB; use more GPUs or a shorter `seq_len`"
    )
