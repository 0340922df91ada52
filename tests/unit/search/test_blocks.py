"""The search's layouts in blocks (search/space.py Block): their memory found at once, and the heap of
one entry per block and recompute mode (search/planner.py _time_jobs), against the per-plan rules."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autopar.cost.floors import placed_floor, stage_floor, step_floors
from autopar.cost.memo import Memo
from autopar.cost.memory import block_peaks, memory_breakdown
from autopar.cost.step import estimate
from autopar.io.models import load_model
from autopar.io.stacks import load_stack
from autopar.search import planner, timing
from autopar.search.scan import scan, work_plan
from autopar.search.space import Block, enumerate_blocks, stack_limits, with_knobs
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import RECOMPUTE, Plan
from autopar.spec.stack import NEUTRAL, StackProfile
from tests.properties.test_properties import SETTINGS, setups

STACKS = ["neutral", "megatron", "torchtitan"]


def _stack(name: str) -> StackProfile:
    return NEUTRAL if name == "neutral" else load_stack(name)


@SETTINGS
@given(setups(), st.sampled_from(STACKS))
def test_block_peaks_are_the_memory_of_a_fresh_estimate(setup: tuple[ModelSpec, HardwareProfile, Job], stack_name: str) -> None:
    """Every layout of every block, under every recompute mode and ZeRO stage: the peak the search tests
    is memory_breakdown(...).total to the last bit."""
    model, _, job = setup
    stack = _stack(stack_name)
    blocks = list(enumerate_blocks(model, job, stack_limits(stack, {}), stack=stack))
    for block in blocks[:: max(1, len(blocks) // 24)]:  # about 24 blocks of each space, from all of it
        _check_block(Memo(model, None, job, stack), block, sorted(stack.zero_stages))


def _check_block(memo: Memo, block: Block, zeros: list[int]) -> None:
    """block_peaks of `block`, flat by expert, recompute mode and ZeRO stage, against fresh estimates."""
    peaks = block_peaks(memo, block.skeleton, block.experts, RECOMPUTE, zeros)
    keys = list(itertools.product(block.experts, RECOMPUTE, zeros))
    assert len(peaks) == len(keys)
    for need, ((ep, etp), recompute, zero) in zip(peaks, keys, strict=True):
        plan = with_knobs(block.plan(ep, etp), recompute, zero)
        assert need == memory_breakdown(memo.model, memo.job, plan, memo=memo, stack=memo.stack).total


PRESETS = [
    ("deepseek-v3", 256, "megatron"),
    ("mixtral-8x7b", 32, "megatron"),
    ("qwen3-30b-a3b", 64, "torchtitan"),
    ("llama3-70b", 64, "megatron"),
]


@pytest.mark.parametrize(("name", "gpus", "stack_name"), PRESETS)
def test_block_peaks_of_presets_are_the_memory_of_a_fresh_estimate(name: str, gpus: int, stack_name: str) -> None:
    """The same on presets at full size, where the sums' terms span more binary orders than a toy's."""
    model, stack = load_model(name), load_stack(stack_name)
    job = Job(gpus=gpus, gpus_per_node=8, global_batch=4 * gpus, seq_len=model.seq_len)
    memo = Memo(model, None, job, stack)
    blocks = list(enumerate_blocks(model, job, stack_limits(stack, {}), stack=stack))
    for block in blocks[:: max(1, len(blocks) // 40)]:
        _check_block(memo, block, sorted(stack.zero_stages))


def test_a_block_holds_the_layouts_that_differ_only_in_their_experts() -> None:
    """DeepSeek-V3 on 64 GPUs, Megatron: a block's layouts differ only in ep and etp, and every layout
    is in one block (its 256 experts: ep 1-64 within dp x cp, etp 1 with ep > 1)."""
    model, stack = load_model("deepseek-v3"), load_stack("megatron")
    job = Job(gpus=64, gpus_per_node=8, global_batch=256, seq_len=4096)
    blocks = list(enumerate_blocks(model, job, stack_limits(stack, {}), stack=stack))
    flat = [block.plan(ep, etp) for block in blocks for ep, etp in block.experts]
    assert len(flat) == len(set(flat))
    assert {(p.dp, p.tp, p.pp, p.cp, p.vpp, p.mbs, p.sp) for p in flat} == {
        (b.skeleton.dp, b.skeleton.tp, b.skeleton.pp, b.skeleton.cp, b.skeleton.vpp, b.skeleton.mbs, b.skeleton.sp) for b in blocks
    }
    assert len(blocks) == len({b.skeleton for b in blocks})
    for block in blocks:
        s = block.skeleton
        assert (s.ep, s.etp) == block.experts[0]
        assert len(set(block.experts)) == len(block.experts)
        assert {(p.dp, p.tp, p.pp, p.cp, p.vpp, p.mbs, p.sp) for p in (block.plan(*e) for e in block.experts)} == {
            (s.dp, s.tp, s.pp, s.cp, s.vpp, s.mbs, s.sp)
        }
    # tp1 pp1: dp = 64, every ep dividing both 256 and 64 (Megatron's EP lies within DP x CP)
    first = next(b for b in blocks if (b.skeleton.tp, b.skeleton.pp, b.skeleton.cp) == (1, 1, 1))
    assert [ep for ep, _ in first.experts] == [1, 2, 4, 8, 16, 32, 64]


@SETTINGS
@given(setups(), st.sampled_from([1, 4, 16]))
def test_the_heap_of_groups_times_jobs_in_the_order_of_their_bounds(setup: tuple[ModelSpec, HardwareProfile, Job], keep: int) -> None:
    """_time_jobs, whose heap holds one entry per block and recompute mode, times a prefix of the jobs
    sorted by their step_floor bound (highest first, ties by index), as a heap of every job would, and
    stops at the first whose bound is below the bar those timings set."""
    model, hw, job = setup
    memo = Memo(model, hw, job)
    blocks = list(enumerate_blocks(model, job, {}))
    found = scan(memo, blocks, RECOMPUTE, (1, 2, 3))
    if len(found.jobs) <= keep:
        return
    order: list[int] = []
    index = {work_plan(w): j for j, w in enumerate(found.jobs)}
    original = timing.variant_step_seconds

    def record(memo_: Memo, skeleton: Plan, variants: list[tuple[str, int]]) -> list[float]:
        ((recompute, zero),) = variants
        order.append(index[with_knobs(skeleton, recompute, zero)])
        return original(memo_, skeleton, variants)

    timing.variant_step_seconds = record  # type: ignore[assignment]
    try:
        bar = timing.Bar(keep)
        tps = planner._time_jobs(memo, found, bar)
    finally:
        timing.variant_step_seconds = original
    tokens = job.tokens_per_step
    floors = step_floors(memo, [(w[0].plan(w[1], w[2]), w[3]) for w in found.jobs])
    bounds = [tokens / f if f > 0 else float("inf") for f in floors]
    ranked = sorted(range(len(found.jobs)), key=lambda j: (-bounds[j], j))
    assert order == ranked[: len(order)]
    assert sorted(order) == sorted(tps)
    if len(order) < len(ranked):
        assert bounds[ranked[len(order)]] < bar.floor


@SETTINGS
@given(setups())
def test_placed_floor_is_step_floors_of_the_placed_plan(setup: tuple[ModelSpec, HardwareProfile, Job]) -> None:
    """floors.py placed_floor, which the searches refine jobs by without building their plans: the same float
    as step_floors of the skeleton with each (ep, etp) of its block, with and without the all-gather variant."""
    model, hw, job = setup
    memo = Memo(model, hw, job)
    for block in enumerate_blocks(model, job, {}):
        for (ep, etp), r in itertools.product(block.experts, RECOMPUTE):
            for either in (False, True):
                (want,) = step_floors(memo, [(block.plan(ep, etp), r)], either=either)
                assert placed_floor(memo, block.skeleton, ep, etp, r, either=either) == want


@SETTINGS
@given(setups())
def test_stage_floor_bounds_the_step_and_is_at_least_step_floor(setup: tuple[ModelSpec, HardwareProfile, Job]) -> None:
    """floors.py stage_floor, which a leading search refines jobs by: at most the step time of the placed plan
    at every ZeRO stage, and of its all-gather CP variant with `either`; at least step_floor (up to rounding)."""
    model, hw, job = setup
    memo = Memo(model, hw, job)
    for block in enumerate_blocks(model, job, {}):
        for (ep, etp), r in itertools.product(block.experts, RECOMPUTE):
            plan = block.plan(ep, etp)
            (coarse,) = step_floors(memo, [(plan, r)])
            tight = stage_floor(memo, block.skeleton, ep, etp, r)
            assert tight >= coarse * (1 - 1e-9)
            variants = [plan, replace(plan, cp_comm="allgather")] if plan.cp > 1 else [plan]
            either = stage_floor(memo, block.skeleton, ep, etp, r, either=True)
            gathered = stage_floor(memo, replace(block.skeleton, cp_comm="allgather"), ep, etp, r)
            assert either == (min(tight, gathered) if plan.cp > 1 else tight)
            for zero in (1, 2, 3):
                assert tight <= estimate(model, hw, job, with_knobs(plan, r, zero), memo=memo).step_time_s
                for v in variants:
                    assert either <= estimate(model, hw, job, with_knobs(v, r, zero), memo=memo).step_time_s


@SETTINGS
@given(setups())
def test_either_floor_bounds_the_ring_and_the_allgather_variant(setup: tuple[ModelSpec, HardwareProfile, Job]) -> None:
    """floors.py step_floors(either=True), the bound search/lead.py orders and skips by: for a CP plan the
    lesser of its floor and its all-gather variant's, each at most that plan's step time; without CP its own."""
    model, hw, job = setup
    memo = Memo(model, hw, job)
    items = [(b.skeleton, r) for b in enumerate_blocks(model, job, {}) for r in RECOMPUTE]
    gathered = [(replace(p, cp_comm="allgather"), r) for p, r in items]
    either = step_floors(memo, items, either=True)
    for (p, r), ring, ag, e in zip(items, step_floors(memo, items), step_floors(memo, gathered), either, strict=True):
        assert e == (min(ring, ag) if p.cp > 1 else ring)
        for plan in (with_knobs(p, r, 1), with_knobs(replace(p, cp_comm="allgather"), r, 1)):
            assert e <= estimate(model, hw, job, plan, memo=memo).step_time_s
