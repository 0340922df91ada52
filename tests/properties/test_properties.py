"""Properties of the search and the cost model over random models, hardware and plans (hypothesis).

Small models (2-12 layers, dense, MoE or hybrid Mamba) on 1-16 GPUs of a round-number profile
whose memory, node size and overlap slowdown vary, so the spaces stay small enough to search
exhaustively. Examples are derandomized (the same in CI as here) and few per property.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autopar.cost.floors import class_floors, stage_floor, step_floor
from autopar.cost.memo import Memo
from autopar.cost.memory import memory_breakdown
from autopar.cost.step import estimate
from autopar.emit.megatron import pipeline_items
from autopar.errors import InfeasibleError, SpecError
from autopar.io.profiles import parse_profile
from autopar.io.stacks import load_stack
from autopar.search import lead, planner, timing
from autopar.search.planner import dominated, search
from autopar.search.space import MICRO_BATCH_SIZES, SEARCHED_ZERO, divisors, enumerate_plans, powers_of_two, virtual_stages
from autopar.spec.families import MambaSpec, MoESpec
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.layout import stage_layers
from autopar.spec.model import ModelSpec
from autopar.spec.plan import END_SLOTS, RECOMPUTE, Plan, searched_modules, validate
from autopar.spec.stack import NEUTRAL, StackProfile
from tests.conftest import toy_profile_dict

SETTINGS = settings(
    max_examples=int(os.environ.get("AUTOPAR_EXAMPLES", "12")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    family = draw(st.sampled_from(["dense", "moe", "mamba"]))
    seq = draw(st.sampled_from([1024, 2048, 4096]))
    if family == "mamba":
        pattern = draw(st.sampled_from(["M*M-", "M*", "MM*-M*", "M-M*M-"]))
        return ModelSpec(
            name="hybrid",
            layers=len(pattern),
            hidden_size=1024,
            num_attention_heads=16,
            num_kv_heads=8,
            head_dim=64,
            ffn_hidden_size=4096,
            ffn_activation="relu2",
            vocab_size=32000,
            seq_len=seq,
            max_seq_len=seq,
            tie_embeddings=True,
            mamba=MambaSpec(state_size=64, head_dim=64, expand=2, layer_pattern=pattern, num_groups=8, chunk_size=256),
        )
    layers = draw(st.integers(2, 12))
    hidden = draw(st.sampled_from([512, 1024, 2048]))
    heads = draw(st.sampled_from([8, 16]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8) if heads % h == 0]))
    moe = None
    if family == "moe":
        experts = draw(st.sampled_from([4, 8, 16]))
        moe = MoESpec(
            num_experts=experts, top_k=draw(st.integers(1, 2)), expert_ffn_hidden_size=hidden, first_dense_layers=draw(st.integers(0, 1))
        )
    return ModelSpec(
        name=family,
        layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=hidden // heads,
        ffn_hidden_size=draw(st.sampled_from([2 * hidden, 3 * hidden, 4 * hidden])),
        ffn_activation=draw(st.sampled_from(["swiglu", "gelu"])),
        vocab_size=32000,
        seq_len=seq,
        max_seq_len=seq,
        tie_embeddings=draw(st.booleans()),
        moe=moe,
    )


@st.composite
def hardware(draw: st.DrawFn) -> HardwareProfile:
    data = toy_profile_dict(overlap={"compute_slowdown": draw(st.sampled_from([1.0, 1.15])), "comm_slowdown": 1.0})
    data["gpu"]["memory_gib"] = draw(st.sampled_from([4, 12, 40, 80]))
    data["node"]["gpus_per_node"] = draw(st.sampled_from([4, 8]))
    return parse_profile(data, where="toy.yaml")


@st.composite
def setups(draw: st.DrawFn) -> tuple[ModelSpec, HardwareProfile, Job]:
    model, hw = draw(models()), draw(hardware())
    gpus = draw(st.sampled_from([g for g in (1, 2, 4, 8, 16) if g <= hw.gpus_per_node or g % hw.gpus_per_node == 0]))
    batch = draw(st.sampled_from([8, 16, 24, 32, 64]))
    return model, hw, Job(gpus=gpus, gpus_per_node=hw.gpus_per_node, global_batch=batch, seq_len=model.seq_len)


def _search(model: ModelSpec, hw: HardwareProfile, job: Job, **kw: object):  # type: ignore[no-untyped-def]
    try:
        return search(model, hw, job, **kw)  # type: ignore[arg-type]
    except InfeasibleError:
        return None


@SETTINGS
@given(setups())
def test_every_ranked_plan_equals_a_fresh_estimate(setup: tuple[ModelSpec, HardwareProfile, Job]) -> None:
    model, hw, job = setup
    r = _search(model, hw, job)
    if r is None:
        return
    for cand, est in itertools.islice(zip(r.ranked.candidates, r.ranked, strict=True), 40):
        fresh = estimate(model, hw, job, est.plan)
        assert est == fresh
        assert (cand.tokens_per_s, cand.memory_bytes) == (fresh.tokens_per_s, fresh.memory.total)
        assert fresh.fits


def _domain(model: ModelSpec, job: Job, stack: StackProfile = NEUTRAL) -> set[Plan]:
    """Every combination of the values the search tries, valid or not (dp follows from the GPU count);
    selective recomputes the stack's searched modules (Megatron, MoE: moe_act and layernorm)."""
    modules = searched_modules(model, stack)
    out = set()
    moe = model.moe
    for tp, cp in itertools.product(powers_of_two(job.gpus_per_node), powers_of_two(job.gpus)):
        if job.gpus % (tp * cp):
            continue
        for pp in divisors(job.gpus // (tp * cp)):
            dp = job.gpus // (tp * cp * pp)
            vpps = [1, *virtual_stages(model.layers, pp)]
            eps = divisors(moe.num_experts) if moe else [1]
            etps = sorted({1, tp}) if moe else [1]
            sps = [True, False] if tp > 1 else [False]
            for mbs, vpp, ep, etp, sp, rc, zero in itertools.product(MICRO_BATCH_SIZES, vpps, eps, etps, sps, RECOMPUTE, SEARCHED_ZERO):
                out.add(
                    Plan(
                        dp=dp,
                        tp=tp,
                        pp=pp,
                        cp=cp,
                        vpp=vpp,
                        ep=ep,
                        etp=etp,
                        mbs=mbs,
                        sp=sp,
                        recompute=rc,
                        zero=zero,
                        recompute_modules=modules if rc == "selective" else (),
                    )
                )
    return out


def _valid(plan: Plan, model: ModelSpec, job: Job, stack: StackProfile | None = None) -> bool:
    try:
        validate(plan, model, job, stack=stack)
    except SpecError:
        return False
    return True


@SETTINGS
@given(setups(), st.sampled_from(["neutral", "megatron"]))
def test_validate_accepts_exactly_the_plans_the_search_enumerates(setup: tuple[ModelSpec, HardwareProfile, Job], stack_name: str) -> None:
    """On the neutral stack and on Megatron's (EP over TP, no ZeRO-2, up to two pipeline stages beyond
    the layers for the embedding and the loss)."""
    model, _, job = setup
    stack = NEUTRAL if stack_name == "neutral" else load_stack(stack_name)
    enumerated = list(enumerate_plans(model, job, stack=stack))
    assert len(enumerated) == len(set(enumerated))
    domain = _domain(model, job, stack)
    assert set(enumerated) == {p for p in domain if _valid(p, model, job, stack)}


@SETTINGS
@given(setups())
def test_search_best_equals_exhaustive_best(setup: tuple[ModelSpec, HardwareProfile, Job]) -> None:
    model, hw, job = setup
    r = _search(model, hw, job, fixed={"cp_comm": "ring"})
    memo = Memo(model, hw, job)
    fitting = [
        p for p in enumerate_plans(model, job, {"cp_comm": "ring"}) if memory_breakdown(model, job, p, memo=memo).total <= hw.memory_bytes
    ]
    if r is None:
        assert not fitting
        return
    assert r.feasible == len(fitting)
    best = max(estimate(model, hw, job, p, memo=memo).tokens_per_s for p in fitting)
    assert max(c.tokens_per_s for c in r.ranked.candidates) == best
    assert r.ranked[0].tokens_per_s >= best * (1 - 0.005)


@SETTINGS
@given(setups())
def test_recommended_plan_is_on_the_pareto_front(setup: tuple[ModelSpec, HardwareProfile, Job]) -> None:
    model, hw, job = setup
    r = _search(model, hw, job)
    if r is not None:
        assert 0 not in dominated(r.ranked.candidates)


@SETTINGS
@given(setups(), st.sampled_from([None, "ring"]))
def test_a_pruned_search_ranks_its_leading_plans_as_the_full_one(
    setup: tuple[ModelSpec, HardwareProfile, Job], cp_comm: str | None
) -> None:
    """Pruning by step_floor (planner.py) keeps the first `exact` plans, at least `keep` of them, as
    timing every plan ranks them; reading on completes the ranking to the full one."""
    model, hw, job = setup
    fixed = {} if cp_comm is None else {"cp_comm": cp_comm}
    full = _search(model, hw, job, fixed=fixed, keep=None)
    pruned = _search(model, hw, job, fixed=fixed, keep=4)
    if full is None:
        assert pruned is None
        return
    everything = full.ranked.candidates
    exact = pruned.ranked.exact
    assert exact >= min(4 if cp_comm else 64, len(everything))
    assert pruned.ranked[:exact] == full.ranked[:exact]
    assert (pruned.considered, pruned.feasible) == (full.considered, full.feasible)
    assert pruned.ranked.candidates == everything


@SETTINGS
@given(setups(), st.sampled_from([1, 4, 16]), st.sampled_from([8, 64]))
def test_a_leading_search_ranks_its_leading_plans_as_the_full_one(
    setup: tuple[ModelSpec, HardwareProfile, Job], chunk: int, variants: int
) -> None:
    """search(lead=True) (search/lead.py), which checks the memory of the blocks in order of their bounds
    (`chunk` at a time: the presets' searches hold hundreds to thousands), ranks its first `exact` plans,
    at least the band of the fastest, as timing every plan of every block does, with the all-gather CP
    variant tried on the `variants` fastest plans (8: a count the toy spaces' bars reach, so that the band
    alone is not all that is exact); reading on, and `feasible`, give the full search's."""
    model, hw, job = setup
    with (
        mock.patch.object(planner, "CP_VARIANT_CANDIDATES", variants),
        mock.patch.object(timing, "CP_VARIANT_CANDIDATES", variants),
        mock.patch.object(lead, "CP_VARIANT_CANDIDATES", variants),
        mock.patch.object(lead, "CHUNK", chunk),
    ):
        full = _search(model, hw, job, keep=None)
        led = _search(model, hw, job, keep=1, lead=True)
        if full is None:
            assert led is None
            return
        exact = led.ranked.exact
        band = sum(1 for c in full.ranked.candidates if c.tokens_per_s >= full.ranked.candidates[0].tokens_per_s * (1 - planner.TIE_BAND))
        assert exact >= min(band, len(full.ranked.candidates))
        assert led.ranked[0] == full.ranked[0]
        assert led.ranked[:exact] == full.ranked[:exact]
        assert (led.considered, led.feasible) == (full.considered, full.feasible)
        assert led.ranked.candidates == full.ranked.candidates


@SETTINGS
@given(setups(), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([8, 16, 24, 32, 64]))
def test_a_search_with_a_memo_of_other_gpu_counts_ranks_as_a_fresh_one(
    setup: tuple[ModelSpec, HardwareProfile, Job], gpus: int, batch: int
) -> None:
    """cost/memo.py share=: `suggest --gpus auto` searches the counts of its curve with one store of values; a
    search after one at another GPU count and batch (in either order) finds what a fresh search finds."""
    model, hw, job = setup
    assume(gpus <= hw.gpus_per_node or gpus % hw.gpus_per_node == 0)
    other = replace(job, gpus=gpus, global_batch=batch)
    shared = Memo(model, hw, job)
    for first, then in ((other, job), (job, other)):
        _search(model, hw, first, keep=None, share=shared)
        fresh, reused = _search(model, hw, then, keep=None), _search(model, hw, then, keep=None, share=shared)
        if fresh is None:
            assert reused is None
            continue
        assert (reused.considered, reused.feasible) == (fresh.considered, fresh.feasible)
        assert reused.ranked.candidates == fresh.ranked.candidates
        assert reused.ranked[:8] == fresh.ranked[:8]
        assert [c.plan for c in _search(model, hw, then, keep=1, share=shared).ranked.candidates[:1]] == [fresh.ranked.candidates[0].plan]


def test_a_memo_is_shared_only_across_gpu_counts_and_batches() -> None:
    model = ModelSpec(
        name="m",
        layers=2,
        hidden_size=512,
        num_attention_heads=8,
        num_kv_heads=8,
        head_dim=64,
        ffn_hidden_size=1024,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=1024,
        max_seq_len=1024,
        tie_embeddings=True,
    )
    hw = parse_profile(toy_profile_dict(), where="toy.yaml")
    job = Job(gpus=8, gpus_per_node=hw.gpus_per_node, global_batch=16, seq_len=1024)
    shared = Memo(model, hw, job)
    Memo(model, hw, replace(job, gpus=16, global_batch=64), share=shared)
    with pytest.raises(ValueError, match="differ in GPU count and global batch"):
        Memo(model, hw, replace(job, seq_len=512), share=shared)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.integers(2, 130), st.integers(2, 32), st.sampled_from([1, 1, 2, 3, 4]))
def test_launched_pipeline_layout_equals_the_estimated_one(layers: int, pp: int, vpp: int) -> None:
    """Up to two chunks more than layers, as stacks that count the embedding and the loss allow."""
    if pp * vpp > layers + END_SLOTS:
        return
    chunks = stage_layers(layers, pp, vpp, ends=True)  # as Megatron (pipeline_counts_embedding) lays them out
    by_model_order = [chunks[c % pp][c // pp] for c in range(pp * vpp)]
    dense = ModelSpec(
        name="dense",
        layers=layers,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=16,
        head_dim=64,
        ffn_hidden_size=4096,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=2048,
        max_seq_len=2048,
        tie_embeddings=False,
    )
    items = [shlex.split(i) for i in pipeline_items(dense, Plan(dp=1, tp=1, pp=pp, vpp=vpp))]
    flags = {i[0]: i[1:] for i in items}
    if "--pipeline-model-parallel-layout" in flags:
        (layout,) = flags["--pipeline-model-parallel-layout"]
        # long layouts repeat runs as (t*n|)*k, which Megatron unrolls first (parse_str_to_list)
        unrolled = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), layout)
        launched = [int(part.split("*")[1]) for part in unrolled.strip("EL").split("|")]
    elif "--account-for-loss-in-pipeline-split" in flags:
        # Megatron's even split of layers + 1 (+ 1 for the embedding) slots, one decoder layer fewer in
        # the last (and first) chunk (get_num_layers_to_build at core_v0.16.1)
        ends = 1 + ("--account-for-embedding-in-pipeline-split" in flags)
        assert (layers + ends) % (pp * vpp) == 0
        launched = [(layers + ends) // (pp * vpp)] * (pp * vpp)
        launched[-1] -= 1
        if ends == 2:
            launched[0] -= 1
    elif "--decoder-first-pipeline-num-layers" in flags:
        first, last = int(flags["--decoder-first-pipeline-num-layers"][0]), int(flags["--decoder-last-pipeline-num-layers"][0])
        middle = (layers - first - last) // (pp - 2) if pp > 2 else 0
        assert first + last + middle * (pp - 2) == layers
        launched = [first, *[middle] * (pp - 2), last]
    else:  # even: Megatron splits evenly, into vpp chunks per rank when interleaving
        assert layers % (pp * vpp) == 0
        launched = [layers // (pp * vpp)] * (pp * vpp)
    assert launched == by_model_order


@st.composite
def plans(draw: st.DrawFn) -> tuple[ModelSpec, Job, Plan]:
    model, _, job = draw(setups())
    valid = list(enumerate_plans(model, job))
    assume(valid)
    return model, job, draw(st.sampled_from(valid))


@SETTINGS
@given(plans())
def test_memory_never_falls_as_mbs_grows(case: tuple[ModelSpec, Job, Plan]) -> None:
    model, job, plan = case
    sizes = [b for b in MICRO_BATCH_SIZES if _valid(replace(plan, mbs=b), model, job)]
    mem = [memory_breakdown(model, job, replace(plan, mbs=b)).total for b in sizes]
    assert all(a <= b for a, b in itertools.pairwise(mem)), list(zip(sizes, mem, strict=True))


@SETTINGS
@given(plans())
def test_memory_never_rises_with_more_recompute(case: tuple[ModelSpec, Job, Plan]) -> None:
    model, job, plan = case
    mem = [memory_breakdown(model, job, replace(plan, recompute=r)).total for r in RECOMPUTE]
    assert mem[0] >= mem[1] >= mem[2], mem


@SETTINGS
@given(plans(), st.sampled_from([1.0, 1.15]))
def test_step_floor_never_exceeds_the_step(case: tuple[ModelSpec, Job, Plan], slowdown: float) -> None:
    model, job, plan = case
    hw = parse_profile(toy_profile_dict(overlap={"compute_slowdown": slowdown, "comm_slowdown": 1.0}), where="toy.yaml")
    job = replace(job, gpus_per_node=hw.gpus_per_node)
    memo = Memo(model, hw, job)
    assume(_valid(plan, model, job))
    step = estimate(model, hw, job, plan, memo=memo).step_time_s
    assert 0 < step_floor(memo, plan, plan.recompute) <= step
    assert 0 < stage_floor(memo, plan, plan.ep, plan.etp, plan.recompute) <= step  # the searches' refinement


@SETTINGS
@given(plans(), st.sampled_from([1.0, 1.15]))
def test_class_floor_never_exceeds_the_step_floor(case: tuple[ModelSpec, Job, Plan], slowdown: float) -> None:
    """The search's first bound (one per layer class, any ep and etp) is below the plan's own, so refining
    only the plans it keeps times the plans a search of step_floor alone would (planner.py _time_jobs)."""
    model, job, plan = case
    hw = parse_profile(toy_profile_dict(overlap={"compute_slowdown": slowdown, "comm_slowdown": 1.0}), where="toy.yaml")
    job = replace(job, gpus_per_node=hw.gpus_per_node)
    memo = Memo(model, hw, job, load_stack("megatron"))
    assume(_valid(plan, model, job))
    (coarse,) = class_floors(memo, [(plan, plan.recompute)])
    assert 0 < coarse <= step_floor(memo, plan, plan.recompute)
