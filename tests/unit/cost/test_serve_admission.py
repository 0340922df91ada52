"""How each engine admits requests when its KV pool cannot hold every request at full length
(cost/serve_sim.py Scheduler.admission, Framework.admission), on cases derived by hand.

Every step takes 1 s (StepCost fixed=1), so times are read off step counts. Requests of a
10-token prompt and 11 output tokens (10 decode steps after the first token)."""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import pytest

from autopar.cost.serve_admit import Scheduler, _preempt, _ratio_after_retract
from autopar.cost.serve_load import estimate
from autopar.cost.serve_sim import _Loop, simulate
from autopar.cost.serve_step import StepCost
from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.spec.framework import FRAMEWORKS
from autopar.spec.serve import Deployment, Engine, Workload

ONE = StepCost(fixed=1.0, per_decode=0.0, per_token=0.0)


def blocks(kv_tokens: int) -> Scheduler:
    return Scheduler(policy="decode_first", budget=100, chunked=True, max_seqs=100, kv_tokens=kv_tokens, admission="blocks")


def test_vllm_admits_by_blocks_now_and_preempts_the_newest() -> None:
    # Pool 30 tokens, two requests at t = 0. Their prompts need 2 x 10 = 20 <= 30: both are admitted
    # (reserving isl + osl, 42 > 30, would admit one) and prefilled in step 1: TTFT 1 s each.
    # Decode steps 2-5 bring each to 5 written tokens: 2 x 15 = 30 held; step 6 needs 2 more tokens:
    # the newest is preempted (vLLM pops the last running request), its 15 tokens freed. The other
    # decodes alone to its 11th token at t = 11: TPOT (11 - 1) / 10 = 1.0. The preempted one then
    # recomputes its 10 + 5 tokens in one step (t = 12, giving its 6th token) and decodes 5 more
    # (t = 17): TPOT (17 - 1) / 10 = 1.6. Mean TTFT 1.0 (the preemption does not touch it), TPOT 1.3.
    r = simulate(ONE, blocks(30), concurrency=2, isl=10, osl=11, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.preempted) == (1.0, 1.3, 17.0, 1)
    # a pool of 42 holds both at full length: no preemption, 11 s, TPOT 1
    r = simulate(ONE, blocks(42), concurrency=2, isl=10, osl=11, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.preempted) == (1.0, 1.0, 11.0, 0)


def test_vllm_preempts_as_soon_as_a_step_lacks_room() -> None:
    # Pool 25: step 1 admits both prompts (20 <= 25). After step 2 each holds 10 + 2 = 12 (24); step 3's
    # two tokens would make 26 > 25: one is preempted with 2 tokens written. The other runs to t = 11
    # (TPOT 1.0); the preempted one recomputes 10 + 2 at t = 12 (token 3) and decodes 8 more to t = 20:
    # TPOT (20 - 1) / 10 = 1.9, mean 1.45.
    r = simulate(ONE, blocks(25), concurrency=2, isl=10, osl=11, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.preempted) == (1.0, 1.45, 20.0, 1)
    # Pool 21: both prompts fit (20 <= 21), their first tokens do not (22): one is preempted before step
    # 2 with 1 token written, recomputes 10 + 1 at t = 12 (token 2) and ends at t = 21: TPOT 2.0, mean 1.5
    r = simulate(ONE, blocks(21), concurrency=2, isl=10, osl=11, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.preempted) == (1.0, 1.5, 21.0, 1)


def test_vllm_takes_no_new_prompt_behind_a_preempted_request_it_cannot_resume() -> None:
    # vLLM's waiting queue is FCFS with preempted requests prepended, and Scheduler.schedule breaks at
    # the first waiting request allocate_slots refuses (vllm/v1/core/sched/scheduler.py, 0.15.1 and
    # 0.19.0): a new prompt behind it waits even where its own blocks are free. Pool 30, prompts of 4,
    # osl 21. At step 7 (t = 7) A decodes with 1 + 6 = 7 tokens written (holds 11); B, preempted with
    # 16 written, needs 4 + 16 = 20 to recompute, more than the 30 - 11 - 1 = 18 left; C (sent at
    # t = 5) needs 4, which is free. C waits: the step is a decode-only run of A to its 21st token at
    # decode step 20, 14 steps, t = 21 (admitting C there would have given its first token at t = 8).
    loop = _Loop(ONE, blocks(30), concurrency=2, isl=4, osl=21, prompts=3, staggered=False, warmup=0)
    loop.waiting, loop.resumed = [[1, 5.0, 0]], [[1, 0.0, 16, 0]]
    loop.decoding, loop.n_dec, loop.start_sum, loop.dsteps, loop.steps, loop.t = deque([[1, 0.0, 0]]), 1, 0, 6, 7, 7.0
    loop.step()
    assert (loop.t, loop.ttft_n, loop.waiting[0], loop.resumed) == (21.0, 0, [1, 5.0, 0], [[1, 0.0, 16, 0]])
    # A's end frees its 25 tokens: B recomputes its 20 and C's 4 fit behind it in the same step, t = 22:
    # C's TTFT 22 - 5 = 17 s
    loop.step()
    assert (loop.t, loop.ttft_n, loop.ttft_sum, loop.resumed) == (22.0, 1, 17.0, [])


def test_sglang_retracts_to_leave_room_for_its_retract_steps() -> None:
    # two requests decoding since step 0, now at decode step 4: 5 tokens written each, 2 x 15 = 30 held
    # of a 30-token pool. Keeping room for retract_steps = 2 more tokens each needs 30 + 4 - 30 = 4
    # tokens freed; retracting one frees its 15 and its 2: one is moved, with its 5 tokens written.
    sched = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, kv_tokens=30, retract_steps=2)
    decoding: deque[list[float]] = deque([[2.0, 0.0, 0.0]])
    resumed: list[list[float]] = []
    moved, n_dec, start_sum, held = _preempt(sched, decoding, resumed, n_dec=2, isl=10, dsteps=4, start_sum=0.0, held=30.0)
    assert (moved, n_dec, start_sum, held, resumed) == (1, 1, 0.0, 15.0, [[1, 0.0, 5, 0]])
    # SGLang's ratio after it (0.5.6 retract_decode): (5 written + 2 x 1) / (1 x 11 + 1) = 7 / 12
    assert _ratio_after_retract(sched, decoding, n_dec=1, osl=11, dsteps=4) == 7 / 12


def test_each_engine_names_its_admission() -> None:
    got = {name: load_framework(name).admission for name in FRAMEWORKS}
    assert got == {"vllm": "blocks_now_preempt", "sglang": "reserve_ratio", "trtllm": "reserve_full"}
    assert load_framework("sglang@0.5.6").retract_steps == 20  # SGLANG_RETRACT_DECODE_STEPS


def test_vllm_0_15_reads_the_touched_experts() -> None:
    # vLLM 0.15 (the default, the newest file): the experts a decode batch touches at the profile's rate;
    # 0.12 its local read
    new, old = load_framework("vllm@0.15.1"), load_framework("vllm@0.12")
    assert load_framework("vllm").version == "0.15"
    assert (new.version, new.moe_decode_reads, new.moe_decode_slowdown) == ("0.15", "touched", 1.0)
    assert (old.version, old.moe_decode_reads, old.moe_decode_slowdown) == ("0.12", "local", 1.5)
    assert new.admission == old.admission == "blocks_now_preempt"


def _vllm(monkeypatch: pytest.MonkeyPatch, admission: str, concurrency: int) -> tuple[float, float, bool, int]:
    # Qwen3-32B bf16 on one H100 at 1024/2048: the vLLM pool holds 30k tokens, 9 requests at full length
    fw = replace(load_framework("vllm@0.12"), admission=admission)
    model, hw = load_model("qwen3-32b"), load_hardware("h100-sxm")
    dep = Deployment(fw=fw, mode="agg", engine=Engine(tp=1), replicas=1, weights="bf16")
    est = estimate(model, hw, dep, Workload(isl=1024, osl=2048, concurrency=concurrency))
    return est.ttft_s, est.tpot_s, est.saturated, est.pools[0].max_concurrency


def test_blocks_now_holds_what_full_reservation_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    # 12 requests: 12 x 3072 = 36.9k tokens at full length, more than the 30.2k pool (9 held), but in the
    # steady loop their progress is spread: 12 x (1024 + 1024) = 24.6k on average. Reserving whole
    # requests queues 3 of them for a request's whole latency; admitting by the blocks they need now
    # holds all 12 without a wait.
    ttft_full, _, sat_full, held = _vllm(monkeypatch, "reserve_full", 12)
    ttft_now, _, sat_now, _ = _vllm(monkeypatch, "blocks_now_preempt", 12)
    assert held == 9 and sat_full and not sat_now
    assert ttft_now < 1.0 < 10 * ttft_now < ttft_full


def test_preemption_produces_no_more_tokens_than_the_pool_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # 64 requests on the 30,214-token pool: the reserve queue grows with the concurrency (64 / 9 - 1
    # latencies). Admitting by blocks runs more at once, but no more than the pool holds: a running
    # request holds 1024 + 1024 tokens on average, so at most 30,214 / 2048 = 14.75 run, each giving a
    # token per decode step of at least 26.87 ms (the step at batch 9, reserve_full's TPOT: 22.05 ms of
    # weights, 9 x 2048 x 256 KiB of KV at 1.5 x 1 / (3.35 TB/s x 0.866) = 2.50 ms (kv_decode_slowdown),
    # 2 ms host, 0.33 ms of prompts): at most 14.75 / 0.02687 = 549 output tokens/s. The rest wait, the new
    # ones behind the preempted (vLLM's FCFS queue), so TTFT stays minutes long, below the reserve queue's.
    ttft_full, tpot_full, _, _ = _vllm(monkeypatch, "reserve_full", 64)
    fw = replace(load_framework("vllm@0.12"), admission="blocks_now_preempt")
    dep = Deployment(fw=fw, mode="agg", engine=Engine(tp=1), replicas=1, weights="bf16")
    est = estimate(load_model("qwen3-32b"), load_hardware("h100-sxm"), dep, Workload(isl=1024, osl=2048, concurrency=64))
    assert tpot_full == pytest.approx(0.02687, abs=1e-5)
    assert est.saturated and est.output_tokens_per_s <= 30214 / 2048 / 0.02687
    assert 60.0 < est.ttft_s < ttft_full
