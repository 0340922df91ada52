"""Step assembly (pipeline, DP sync, optimizer) and the search's constraints."""

from __future__ import annotations

import itertools

import pytest

from autopar.cost.compute import block_time, loss_time
from autopar.cost.step import estimate
from autopar.errors import InfeasibleError, SpecError
from autopar.search.planner import enumerate_plans, search
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job, default_global_batch
from autopar.spec.layout import chunk_sizes
from autopar.spec.plan import Plan, validate
from tests.conftest import gpt_like, llama70b


def test_stage_layer_counts_uneven_last_lighter() -> None:
    assert chunk_sizes(8, 4) == [2, 2, 2, 2]
    assert chunk_sizes(126, 16) == [8] * 14 + [7, 7]  # Llama 3 405B-style uneven split


def test_pipeline_bubble_matches_1f1b_and_interleaved(toy_hw: HardwareProfile) -> None:
    # 8 blocks, pp=4 (2 per stage), m = 32/(1*1) = 32 micro-batches.
    m = gpt_like(layers=8)
    job = Job(gpus=4, gpus_per_node=8, global_batch=32, seq_len=2048)
    b = block_time(m, toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=1, sp=False, recompute="none").total
    loss = loss_time(m, toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=1)
    e = estimate(m, toy_hw, job, Plan(dp=1, tp=1, pp=4, zero=0, sp=False))
    # 1F1B: blocking send/recv of 2*2048*1024 B each way per micro-batch, 10 us + 4.19 MB / 100 GB/s
    p2p = 2 * (10e-6 + 2 * 2048 * 1024 / 1e11)
    # stages: 2b+p2p (x3), 2b+p2p+loss -> bubble = (sum - max) / v = 3 * (2b + p2p)
    assert e.time.bubble == pytest.approx(3 * (2 * b + p2p))
    assert e.time.compute == pytest.approx(32 * (2 * b + loss))
    assert e.time.pp_comm == pytest.approx(32 * p2p)
    ev = estimate(m, toy_hw, job, Plan(dp=1, tp=1, pp=4, vpp=2, zero=0, sp=False))
    # interleaved: only latency per chunk boundary (2 * v * 10 us) in steady state; bubble halves
    lat = 2 * 2 * 10e-6
    assert ev.time.bubble == pytest.approx(3 * (2 * b + lat) / 2, rel=1e-6)
    assert ev.time.pp_comm == pytest.approx(32 * lat + 2 * 3 * p2p / 2, rel=1e-6)


def test_dp_sync_overlaps_last_backward_and_first_forward(toy_hw: HardwareProfile) -> None:
    # 133,448,704 params: reduce-scatter of fp32 grads 10 us + 7/8 * 533,794,816 B / 100 GB/s = 4.681 ms,
    # all-gather of bf16 weights 10 us + 7/8 * 266,897,408 B / 100 GB/s = 2.345 ms; 90% of the last
    # backward (8 blocks) and of the first forward hide them.
    m = gpt_like(layers=8)
    job = Job(gpus=8, gpus_per_node=8, global_batch=64, seq_len=2048)
    e = estimate(m, toy_hw, job, Plan(dp=8, tp=1, pp=1, zero=1, sp=False))
    b = block_time(m, toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=1, sp=False, recompute="none")
    rs, ag = 10e-6 + 0.875 * 533_794_816 / 1e11, 10e-6 + 0.875 * 266_897_408 / 1e11
    assert e.time.dp_comm == pytest.approx(max(0, rs - 0.9 * 8 * b.bwd) + max(0, ag - 0.9 * 8 * b.fwd))
    assert 0 < e.time.dp_comm < rs + ag
    # ZeRO-3 gathers every micro-batch: never cheaper than ZeRO-1
    z3 = estimate(m, toy_hw, job, Plan(dp=8, tp=1, pp=1, zero=3, sp=False))
    assert z3.step_time_s >= e.step_time_s
    assert z3.memory.weights == pytest.approx(e.memory.weights / 8)


def test_throughput_identities(toy_hw: HardwareProfile) -> None:
    m = llama70b()
    job = Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192)
    e = estimate(m, toy_hw, job, Plan(dp=2, tp=8, pp=4, vpp=5, recompute="selective"))
    assert e.tokens_per_s == pytest.approx(512 * 8192 / e.step_time_s)
    assert e.step_time_s == pytest.approx(e.time.total)
    assert e.mfu == pytest.approx(e.model_tflops_per_gpu * 1e12 / 1e15)
    assert 0 < e.mfu < 0.5  # GEMM efficiency 0.5 bounds it


PLAN_ERRORS = [
    (dict(dp=4, tp=3, pp=1), "must equal `gpus`"),
    (dict(dp=1, tp=16, pp=1), "tp (16) must fit in one node"),
    (dict(dp=2, tp=8, pp=1, vpp=2), "vpp > 1 needs pp > 1"),
    (dict(dp=1, tp=8, pp=2, vpp=41), "pp*vpp (2*41) exceeds the number of layers (80)"),
    (dict(dp=16, tp=1, pp=1, mbs=3), "must be divisible by dp*mbs (16*3)"),
    (dict(dp=16, tp=1, pp=1, recompute="most"), "`recompute` must be one of"),
    (dict(dp=16, tp=1, pp=1, ep=2), "ep (2) needs an MoE model"),
]


@pytest.mark.parametrize(("kw", "message"), PLAN_ERRORS)
def test_plan_validation(kw: dict, message: str) -> None:
    job = Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=8192)
    with pytest.raises(SpecError) as err:
        validate(Plan(**kw), llama70b(), job)
    assert message in str(err.value)


def test_job_validation_and_default_batch() -> None:
    with pytest.raises(SpecError, match=r"`gpus` \(12\) must be a multiple of the node size"):
        Job(gpus=12, gpus_per_node=8, global_batch=8, seq_len=8)
    assert default_global_batch(64, 8, 8192) == 512  # 4M tokens
    assert default_global_batch(16384, 8, 8192) == 2048  # one sequence per node at least
    assert default_global_batch(4, 8, 4096) == 1024
    # a multiple of the GPU count nearest 4M tokens (issue 25: the node-count rounding gave 513, 516, 625)
    assert default_global_batch(24, 8, 8192) == 504  # 24 x 21 (512 / 24 = 21.3)
    assert default_global_batch(96, 8, 8192) == 480  # 96 x 5 (5.33)
    assert default_global_batch(48, 8, 8192) == 528  # 48 x 11 (10.67)
    # more GPUs than 4M tokens have sequences: the largest nodes x k (k | 8) up to 512, once
    assert default_global_batch(1000, 8, 8192) == 500  # 125 nodes x 4
    assert default_global_batch(1536, 8, 8192) == 384  # 192 nodes x 2


def test_enumeration_respects_framework_rules() -> None:
    m = llama70b()
    job = Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192)
    plans = list(enumerate_plans(m, job))
    assert plans, "space is not empty"
    for p in plans:
        validate(p, m, job)  # every enumerated plan is valid
    assert {p.tp for p in plans} == {1, 2, 4, 8}
    assert any(p.cp == 4 for p in plans) and any(p.vpp > 1 for p in plans)
    assert all(p.sp is False for p in plans if p.tp == 1)
    fixed = list(enumerate_plans(m, job, {"tp": 8, "pp": 4, "recompute": "full"}))
    assert {(p.tp, p.pp, p.recompute) for p in fixed} == {(8, 4, "full")}


def test_search_ranks_by_throughput_and_all_fit(toy_hw: HardwareProfile) -> None:
    m = llama70b()
    job = Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192)
    r = search(m, toy_hw, job)
    tps = [e.tokens_per_s for e in r.ranked]
    assert all(a >= b * (1 - 0.006) for a, b in itertools.pairwise(tps))
    assert all(e.fits for e in r.ranked)
    assert len(r.ranked) <= r.feasible < r.considered  # higher ZeRO stages of a fitting plan count, untimed
    # 70B does not fit on one toy GPU with 80 GiB: 70e9 params alone need > 130 GiB in bf16
    with pytest.raises(InfeasibleError, match="no plan fits"):
        search(m, toy_hw, Job(gpus=1, gpus_per_node=8, global_batch=8, seq_len=8192))


def test_distinct_layouts_keep_the_best_variant_of_each(toy_hw: HardwareProfile) -> None:
    from autopar.render.labels import distinct_layouts

    ranked = search(llama70b(), toy_hw, Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192)).ranked
    shown = distinct_layouts(ranked, 5)
    keys = [(e.plan.dp, e.plan.tp, e.plan.pp, e.plan.cp, e.plan.ep) for e in shown]
    assert len(shown) == 5 and len(set(keys)) == 5
    assert shown[0] is ranked[0]
    for e in shown:  # each is the first of its layout in the ranking
        first = next(
            x
            for x in ranked
            if (x.plan.dp, x.plan.tp, x.plan.pp, x.plan.cp, x.plan.ep) == (e.plan.dp, e.plan.tp, e.plan.pp, e.plan.cp, e.plan.ep)
        )
        assert first is e


def test_memo_get_by_shares_the_key_built_from_its_values() -> None:
    """cost/memo.py get_by: looked up by the key's field values (a NamedTuple equals their tuple), the value is
    the one get() caches for the built key; a build that is not the values' key is refused."""
    from typing import NamedTuple

    from autopar.cost.memo import Memo

    class Key(NamedTuple):
        a: int
        b: int

    calls: list[Key] = []

    def fn(memo: Memo, key: Key) -> int:
        calls.append(key)
        return key.a * 10 + key.b

    memo = Memo(gpt_like(), None, Job(gpus=1, gpus_per_node=1, global_batch=1, seq_len=8))
    assert memo.get_by(fn, (1, 2), Key._make) == 12 and memo.get(fn, Key(1, 2)) == 12
    assert calls == [Key(1, 2)] and isinstance(calls[0], Key)
    with pytest.raises(ValueError, match="is not the key of"):
        memo.get_by(fn, (3, 4), lambda v: Key(v[1], v[0]))
