"""The plans a chart of a pruned search draws (`suggest --plot`): those it timed, and every plan
that may be on the Pareto front (more tokens/s for no more memory), timed now.

The front of every plan that fits is the front of these: a plan left out has an upper bound of
tokens/s (cost/floors.py, or its layout's faster variant: recomputing more is never faster)
strictly below a plan with no more memory already drawn, so it is beaten on both axes. Plans are
read by increasing memory; a bound that clears the fastest plan drawn so far is refined (the plan's
own step_floor) and then timed. Timing every plan of a 10^5-plan search (the whole ranking) costs
about 2.5x the search; the front needs a few thousand of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from autopar.cost.floors import class_floors, step_floors
from autopar.cost.memo import Memo
from autopar.cost.step import variant_step_seconds
from autopar.search.ranking import Candidate
from autopar.search.scan import Deferred, Scan, Work
from autopar.search.space import Block, with_knobs
from autopar.search.timing import beaten_by


def drawn(memo: Memo, found: Scan, tps: dict[int, float], ranked: Sequence[Candidate], *, picked: bool) -> list[Candidate]:
    """`ranked` (the search's timed plans, exact) and, after them, the plans of `found` not in it
    that may be on the front, by increasing memory. `tps`: tokens/s of the jobs timed, by index;
    `picked`: the search chose each leading CP plan's K/V exchange (timing.pick_cp_comm), so a
    ranked all-gather plan stands in for its ring layout, which is not drawn."""
    tokens, jobs = memo.job.tokens_per_step, found.jobs
    shown = {c.plan for c in ranked} | {replace(c.plan, cp_comm="ring") for c in ranked if picked and c.plan.cp_comm != "ring"}
    floors = (step_floors if memo.model.moe is None else class_floors)(memo, [(b.skeleton, r) for b, r, _ in found.groups])
    bound: dict[int, float] = {}  # tokens/s no plan of the job's block and recompute mode exceeds
    for (_, _, members), f in zip(found.groups, floors, strict=True):
        for j in members:
            bound[j] = tps.get(j, tokens / f if f > 0 else math.inf)
    beaten = beaten_by(ranked)  # no plan a ranked plan beats can be on the front
    # (peak bytes, 0 for a ranked plan, else 1, its index, bound, what): what is None for a ranked plan,
    # a job's index or a deferred variant; among equal memory the ranked plans first
    items: list[tuple[float, int, int, float, int | Deferred | None]]
    items = [(c.memory_bytes, 0, i, c.tokens_per_s, None) for i, c in enumerate(ranked)]
    items += [(w[5], 1, j, bound[j], j) for j, w in enumerate(jobs) if j not in tps and not beaten(w[5], bound[j])]
    n = len(jobs)
    items += [(d[3], 1, n + i, bound[d[0]], d) for i, d in enumerate(found.deferred) if not beaten(d[3], bound[d[0]])]
    items.sort()
    best, out = -math.inf, list(ranked)
    for need, _, _, upper, what in items:
        if what is None:
            best = max(best, upper)
            continue
        if upper < best:
            continue  # beaten on both axes by a plan drawn
        block, ep, etp, recompute, zero = _knobs(jobs, what)
        layout = block.plan(ep, etp)  # as the search times it (timing.job_seconds)
        (floor,) = step_floors(memo, [(layout, recompute)])
        if floor > 0 and tokens / floor < best:
            continue
        plan = with_knobs(layout, recompute, zero)
        if isinstance(what, tuple) and plan in shown:
            continue  # a deferred variant the search timed
        (step,) = variant_step_seconds(memo, layout, [(recompute, zero)])
        out.append(Candidate(tokens_per_s=tokens / step, memory_bytes=need, plan=plan))
        best = max(best, tokens / step)
    return out


def _knobs(jobs: list[Work], what: int | Deferred) -> tuple[Block, int, int, str, int]:
    """(block, ep, etp, recompute, ZeRO stage) of a job (its index) or of a deferred variant (its layout's
    job's, with its own recompute and stage)."""
    block, ep, etp, recompute, zero, _ = jobs[what if isinstance(what, int) else what[0]]
    if isinstance(what, tuple):
        recompute, zero = what[1], what[2]
    return block, ep, etp, recompute, zero
