"""search/front.py: a pruned search's chart draws its timed plans and every plan that may be on the
Pareto front, and that front is the front of every plan the completed ranking times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar.cost.memo import Memo
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.render.plot import pareto_front
from autopar.search.front import _knobs, drawn
from autopar.search.planner import SearchResult, search
from autopar.search.ranking import Candidate
from autopar.search.scan import Scan, scan
from autopar.search.space import choices, enumerate_blocks, searched_zero, stack_limits, with_knobs
from autopar.spec.job import Job, default_global_batch
from autopar.spec.plan import RECOMPUTE

H100 = load_hardware("h100-sxm")


def _search(model: str, gpus: int, seq_len: int) -> SearchResult:
    batch = default_global_batch(gpus, H100.gpus_per_node, seq_len)
    job = Job(gpus=gpus, gpus_per_node=H100.gpus_per_node, global_batch=batch, seq_len=seq_len)
    return search(load_model(model), H100, job, stack=load_stack("megatron"))


def _points(plans: object) -> list[tuple[object, float, float]]:
    return [(c.plan, c.tokens_per_s, c.memory_bytes) for c in pareto_front(plans)]  # type: ignore[arg-type]


# (model, GPUs, seq_len): a dense model with CP plans whose all-gather variant leads (the ring layout a
# ranked all-gather plan stands for is not drawn), a long-context one, and an MoE model (class bounds)
CASES = [("llama3.1-70b", 64, 32768), ("llama3.1-8b", 16, 65536), ("mixtral-8x7b", 32, 4096)]


@pytest.mark.parametrize(("model", "gpus", "seq_len"), CASES)
def test_the_drawn_front_is_the_front_of_every_plan(model: str, gpus: int, seq_len: int) -> None:
    result = _search(model, gpus, seq_len)
    assert result.ranked.pruned
    timed = result.ranked.exact
    drawn = result.drawn()
    assert result.ranked.pruned  # drawing did not complete the ranking
    complete = result.ranked.candidates
    assert len(drawn) < len(complete)
    assert timed <= len(drawn)
    assert {c.plan for c in complete[:timed]} <= {c.plan for c in drawn.candidates}
    assert _points(drawn.candidates) == _points(complete)
    assert len(_points(complete)) > 10


def test_the_all_gather_plans_lead_where_the_ring_layouts_are_left_out() -> None:
    drawn = _search("llama3.1-70b", 64, 32768).drawn().candidates
    gathered = {c.plan for c in drawn if c.plan.cp_comm == "allgather"}
    assert gathered  # the case the first test holds to: leading CP plans exchange K/V by all-gather
    ring = {c.plan for c in drawn if c.plan.cp_comm == "ring"}
    assert not {replace(p, cp_comm="ring") for p in gathered} & ring


def test_a_complete_ranking_is_what_is_drawn() -> None:
    result = _search("llama3.1-8b", 16, 65536)
    assert result.ranked.pruned
    complete = result.ranked.candidates  # reading every plan completes the ranking
    assert not result.ranked.pruned
    assert result.drawn() is result.ranked
    assert len(result.drawn()) == len(complete)


def test_a_deferred_variant_the_search_ranked_by_its_all_gather_twin_is_not_drawn_again() -> None:
    """A ranked all-gather plan stands for the ring layout it replaced (timing.pick_cp_comm), a deferred
    variant's included: drawing that ring plan too would put a point the complete ranking lacks, at less
    memory than its twin, where it could join the front."""
    model, seq_len, gpus = load_model("llama3.1-8b"), 65536, 16
    stack = load_stack("megatron")
    job = Job(gpus=gpus, gpus_per_node=H100.gpus_per_node, global_batch=16, seq_len=seq_len)
    memo = Memo(model, H100, job, stack)
    fixed = stack_limits(stack, {})
    blocks = list(enumerate_blocks(model, job, fixed, stack=stack))
    found = scan(memo, blocks, tuple(choices(fixed, "recompute", list(RECOMPUTE))), tuple(sorted(searched_zero(stack))))
    d = next(d for d in found.deferred if found.jobs[d[0]][0].skeleton.cp > 1)
    block, ep, etp, recompute, zero = _knobs(found.jobs, d)
    ring = with_knobs(block.plan(ep, etp), recompute, zero)
    twin = Candidate(tokens_per_s=1e12, memory_bytes=d[3] + 1, plan=replace(ring, cp_comm="allgather"))
    # every job timed (at any speed) and this variant the only one deferred: it alone may be drawn
    one = Scan(jobs=found.jobs, groups=found.groups, deferred=[d])
    tps = dict.fromkeys(range(len(found.jobs)), 1.0)
    assert [c.plan for c in drawn(memo, one, tps, [twin], picked=True)] == [twin.plan]
    assert [c.plan for c in drawn(memo, one, tps, [twin], picked=False)] == [twin.plan, ring]  # cp_comm fixed: its own plan
