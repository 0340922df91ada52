"""The disaggregated closed loop (cost/serve_disagg.py) against hand derivations.

A toy loop with round numbers: one prompt takes s = 1 s on one of S = 2 prefill
servers, a = 0.5 s of overhead and KV transfer, R = 1 decode rank, osl = 10
steps, and a decode step of t(b) = 10 ms + 1 ms per request in the batch.
Little's law on the decode pool gives X = R b / (osl t(b)); the prefill pool is
busy rho = X s / S and queues the M/D/1 mean W = rho s / (2 (1 - rho))
(DistServe, Zhong et al. 2024, sec. 4.1); the loop holds
N(b) = X (a + s + W) + R b.
"""

from __future__ import annotations

import dataclasses

import pytest

from autopar.cost.serve import StepTime, prefill_time
from autopar.cost.serve_disagg import DisaggLoop
from autopar.cost.serve_load import estimate, prefill_server
from autopar.io.frameworks import load_framework
from autopar.render.serve import kv_full
from autopar.spec.families import MoESpec
from autopar.spec.hardware import HardwareProfile
from autopar.spec.serve import Deployment, Engine, EngineArgs, Workload
from tests.conftest import gpt_like

LOOP = DisaggLoop(service_s=1.0, servers=2, ahead_s=0.5, ranks=1, osl=10)


def _step(b: float) -> StepTime:
    return StepTime(weights=0.010 + 0.001 * b, kv=0.0, compute=0.0, tp_comm=0.0, ep_comm=0.0, overhead=0.0)


def test_loop_identities_by_hand() -> None:
    # b = 10: t = 20 ms, X = 10 / (10 x 0.02) = 50 req/s; rho = 50 x 1 / 2 = 25 >= 1: the prefill pool cannot keep up
    assert LOOP.rate(10, 0.02) == pytest.approx(50.0)
    assert LOOP.wait(10, 0.02) == float("inf")
    # b = 0.1: t = 10.1 ms, X = 0.1 / 0.101 = 0.990 req/s, rho = 0.495, W = 0.495 / (2 x 0.505) = 0.490 s
    x = 0.1 / (10 * 0.0101)
    assert LOOP.rho(0.1, 0.0101) == pytest.approx(x / 2)
    w = (x / 2) / (2 * (1 - x / 2))
    assert LOOP.wait(0.1, 0.0101) == pytest.approx(w)
    assert LOOP.population(0.1, 0.0101) == pytest.approx(x * (0.5 + 1.0 + w) + 0.1)  # 2.07 requests


def test_prefill_paced_loop_fills_the_decode_batch_only_to_the_prefill_rate() -> None:
    # Many requests: X tends to S / s = 2 req/s and the decode batch to what that rate fills,
    # b = X osl t(b) / R = X x 10 x (0.01 + 0.001 b) -> b = 0.1 X / (1 - 0.01 X), 0.204 at X = 2; the rest
    # queue at prefill. At C = 1000 nearly all of N = X (1.5 + W) + b is the queue: W = (1000 - 0.204) / 2 - 1.5
    # = 498.4 s, so rho = 2W / (1 + 2W) = 0.998998, X = 2 rho = 1.997996 and b = 0.203873.
    b, step = LOOP.solve(_step, concurrency=1000, most=1000, empty=_step(1e-6))
    assert b == pytest.approx(0.203873, rel=1e-3)
    assert b < 0.2 / 0.98  # below the limit of an unbounded queue
    assert step.total == pytest.approx(0.010 + 0.001 * b)
    assert LOOP.population(b, step.total) == pytest.approx(1000, rel=1e-6)


def test_decode_paced_loop_keeps_every_request_decoding() -> None:
    # Prefill and transfer take no time: N(b) = R b, so b = C / R.
    fast = DisaggLoop(service_s=1e-9, servers=2, ahead_s=0.0, ranks=4, osl=10)
    b, _ = fast.solve(_step, concurrency=40, most=10, empty=_step(1e-6))
    assert b == pytest.approx(10, rel=1e-3)


def test_a_full_decode_cache_stops_the_batch() -> None:
    # The KV cache holds 3 per rank: N(3) = X (a + s + W) + 3 < 1000 with the fast prefill, so b = 3.
    fast = DisaggLoop(service_s=1e-3, servers=2, ahead_s=0.0, ranks=1, osl=10)
    b, _ = fast.solve(_step, concurrency=1000, most=3, empty=_step(1e-6))
    assert b == pytest.approx(3)


def test_disagg_estimate_obeys_littles_law(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    dep = Deployment(fw=load_framework("vllm"), mode="disagg", engine=Engine(tp=1), replicas=2, prefill=Engine(tp=1), prefill_replicas=1)
    for conc in (2, 16, 256):
        est = estimate(m, toy_hw, dep, Workload(isl=8192, osl=16, concurrency=conc))
        decode = est.pools[1]
        assert est.ttft_s == pytest.approx(sum(est.ttft_parts.values()))
        assert est.requests_per_s * est.latency_s == pytest.approx(conc, rel=1e-3)  # the whole loop
        # the decode pool: requests in it = rate x their time in it (the first step and osl - 1 more)
        assert 2 * decode.requests_per_rank == pytest.approx(est.requests_per_s * 16 * est.tpot_s, rel=1e-6)
    few = estimate(m, toy_hw, dep, Workload(isl=8192, osl=16, concurrency=2))
    many = estimate(m, toy_hw, dep, Workload(isl=8192, osl=16, concurrency=256))
    # one prefill engine paces 256 requests: they wait at its queue, and the decode batch stays small
    assert many.ttft_parts["queue"] > 10 * few.ttft_parts["queue"]
    assert many.pools[1].requests_per_rank < 256 / 2 / 4


def test_saturation_names_the_pool_that_sets_the_rate(toy_hw: HardwareProfile) -> None:
    m = gpt_like(max_seq_len=131072)
    # one prefill engine for 256 requests of 8192 tokens: it sets the rate (rho >= 0.95), and the
    # requests it queues hold no decode KV, so the decode engines' cache is far from full
    one = Deployment(fw=load_framework("vllm"), mode="disagg", engine=Engine(tp=1), replicas=2, prefill=Engine(tp=1), prefill_replicas=1)
    paced = estimate(m, toy_hw, one, Workload(isl=8192, osl=16, concurrency=256))
    assert paced.saturated and not kv_full(paced)
    assert 2 * paced.pools[1].requests_per_rank < paced.pools[1].max_concurrency
    # 64 prefill engines keep up; 2,000 requests of 36,864 tokens overflow the decode KV cache
    # (4 layers x K and V x 16 heads x 64 x 2 B = 16 KiB a token): the batch stops at what it holds
    wide = dataclasses.replace(one, prefill_replicas=64)
    full = estimate(m, toy_hw, wide, Workload(isl=32768, osl=4096, concurrency=2000))
    assert full.saturated and kv_full(full)
    assert 2 * full.pools[1].requests_per_rank == pytest.approx(full.pools[1].max_concurrency)


def test_the_decode_engines_max_batch_caps_the_decode_batch(toy_hw: HardwareProfile) -> None:
    # --max-batch-size 2 on the decode engines (vLLM --max-num-seqs, per rank): with 64 prefill engines
    # keeping up, 64 requests would decode 32 a rank; capped, each of the R = 2 ranks runs b = 2 and the
    # loop's rate is X = R b / (osl t(2)) = 4 / (16 t(2)); the other 60 wait for a slot (Little's law:
    # C = X x latency, so the queue is 64 / X less the time in the pools).
    from autopar.cost.serve import decode_step
    from autopar.spec.serve import EngineArgs

    m = gpt_like()
    dep = Deployment(fw=load_framework("vllm"), mode="disagg", engine=Engine(tp=1), replicas=2, prefill=Engine(tp=1), prefill_replicas=64)
    wl = Workload(isl=1024, osl=16, concurrency=64)
    free = estimate(m, toy_hw, dep, wl)
    assert free.pools[1].requests_per_rank > 2
    capped = estimate(m, toy_hw, dataclasses.replace(dep, args=EngineArgs(max_batch_size=2)), wl)
    t2 = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=2, context=1024 + 8, fw=load_framework("vllm")).total
    assert capped.pools[1].requests_per_rank == pytest.approx(2)
    assert capped.tpot_s == pytest.approx(t2)
    assert capped.requests_per_s == pytest.approx(4 / (16 * t2))
    assert capped.requests_per_s * capped.latency_s == pytest.approx(64, rel=1e-6)
    assert not capped.saturated  # a batch cap is a queue, not a full KV cache


def test_prefill_server_batches_prompts_up_to_its_token_budget() -> None:
    # 2 servers, a prompt alone 1 s, a step of 4 prompts (the budget holds 4) 2 s: a busy server serves a
    # prompt every 0.5 s. At b = 2, t = 0.1 s: X = 2 / (10 x 0.1) = 2 req/s, rho = 2 x 0.5 / 2 = 0.5,
    # W = 0.5 x 0.5 / (2 x 0.5) = 0.25 s (M/D/1 at 0.5 s a prompt); one prompt a step: rho 1
    batched = DisaggLoop(service_s=1.0, servers=2, ahead_s=0.5, ranks=1, osl=10, batch=4, batch_s=2.0)
    assert batched.rho(2, 0.1) == pytest.approx(0.5)
    assert batched.wait(2, 0.1) == pytest.approx(0.25)
    assert batched.population(2, 0.1) == pytest.approx(2 * (0.5 + 1.0 + 0.25) + 2)
    alone = DisaggLoop(service_s=1.0, servers=2, ahead_s=0.5, ranks=1, osl=10)
    assert alone.rho(2, 0.1) == pytest.approx(1.0) and alone.wait(2, 0.1) == float("inf")
    # prefill-paced at C = 1000: the pool's rate is B S / s_B = 4 req/s, twice the unbatched 2
    b, step = batched.solve(_step, concurrency=1000, most=1000, empty=_step(1e-6))
    assert batched.rate(b, step.total) == pytest.approx(4.0, rel=5e-3)


def test_disagg_prefill_batches_short_prompts(toy_hw: HardwareProfile) -> None:
    # 256-token prompts: the default 8192-token budget takes 32 a step, a prefill pool capped at one
    # prompt a step (--max-num-batched-tokens 256) paces the loop lower
    m = gpt_like()
    wl = Workload(isl=256, osl=16, concurrency=512)
    dep = Deployment(
        fw=load_framework("vllm"), mode="disagg", engine=Engine(tp=1), replicas=1, prefill=Engine(tp=1), prefill_replicas=1, weights="bf16"
    )
    one = dataclasses.replace(dep, prefill_args=EngineArgs(max_num_tokens=256))
    fast, slow = estimate(m, toy_hw, dep, wl), estimate(m, toy_hw, one, wl)
    assert fast.requests_per_s > 1.5 * slow.requests_per_s
    assert fast.ttft_s < slow.ttft_s


def test_a_trtllm_context_server_runs_at_its_steps_cost(toy_hw: HardwareProfile) -> None:
    # Framework.disagg_prefill: TensorRT-LLM's context servers ("engine") price a prompt at the profile's
    # curves, the aggregated fit prefill_slowdown (2.5) left to aggregated TTFT; vLLM's ("slowdown") keep it
    m = gpt_like(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512), ffn_activation="swiglu")
    trt, vllm = load_framework("trtllm"), load_framework("vllm")
    assert (trt.disagg_prefill, vllm.disagg_prefill) == ("engine", "slowdown") and trt.prefill_slowdown > 1
    pre = Engine(tp=1, dp=2, ep=2)
    alone = prefill_time(m, toy_hw, pre, weights="bf16", tokens=1024, seq_len=1024, fw=trt)
    server = prefill_server(m, toy_hw, pre, weights="bf16", isl=1024, fw=trt, slowdown=trt.prefill_slowdown)
    assert server.service_s == alone.total
    # max_num_tokens 8192 takes 8 prompts of 1024 a step; busy, both attention-DP ranks hold 8 each and
    # the MoE layer computes all 16 (as a padded step would), more than one rank's 8 alone
    assert server.batch == 8
    both = prefill_time(m, toy_hw, pre, weights="bf16", tokens=8192, seq_len=1024, fw=dataclasses.replace(trt, dp_padding=True))
    one = prefill_time(m, toy_hw, pre, weights="bf16", tokens=8192, seq_len=1024, fw=trt)
    assert server.batch_s == both.total > one.total
    v_alone = prefill_time(m, toy_hw, pre, weights="bf16", tokens=1024, seq_len=1024, fw=vllm)
    v_server = prefill_server(m, toy_hw, pre, weights="bf16", isl=1024, fw=vllm, slowdown=vllm.prefill_slowdown)
    assert v_server.service_s == pytest.approx(vllm.prefill_slowdown * v_alone.total)
    # the estimate's TTFT holds the context server's prompt as priced, no slowdown on it
    dep = Deployment(fw=trt, mode="disagg", engine=Engine(tp=2), replicas=1, prefill=pre, prefill_replicas=1, weights="bf16")
    est = estimate(m, toy_hw, dep, Workload(isl=1024, osl=16, concurrency=1))
    assert est.ttft_parts["prefill"] == alone.total


def _on_line_by_calls(loop: DisaggLoop, p: tuple[float, StepTime], q: tuple[float, StepTime], *, concurrency: float, most: float) -> float:
    """_on_line written with the loop's own calls (_wait_at, population's sum), as it was before its
    halvings were written out: the reference the fast loop must match float for float."""
    (b1, s1), (b2, s2) = p, q
    k = (s2.total - s1.total) / (b2 - b1) if b2 != b1 else 0.0
    t0 = max(s1.total - k * b1, 1e-12)
    per = loop.osl / loop.ranks

    def batch(x: float) -> float:
        return x * per * t0 / (1 - x * per * k) if x * per * k < 1 else float("inf")

    top = loop.batch * loop.servers / loop.step_s
    if k > 0:
        top = min(top, 1 / (per * k))
    lo, hi = 0.0, top
    for _ in range(40):
        x = (lo + hi) / 2
        b = batch(x)
        if b > most or x * (loop.ahead_s + loop.service_s + loop._wait_at(x)) + loop.ranks * b > concurrency:
            hi = x
        else:
            lo = x
    return min(batch(lo), most)


def test_on_line_makes_the_float_operations_of_the_loops_calls() -> None:
    # the halvings the root lets skip their test decide as the test would: the same b, float for float, on
    # random loops and lines (rising, flat, falling: k < 0 runs every test), batched prefill or not
    import random

    rng = random.Random(23)
    for _ in range(3000):
        loop = DisaggLoop(
            service_s=10 ** rng.uniform(-5, 0),
            servers=rng.choice((1, 2, 3, 8, 64)),
            ahead_s=rng.choice((0.0, 10 ** rng.uniform(-4, -0.5))),
            ranks=rng.choice((1, 2, 4, 16, 32, 256)),
            osl=rng.choice((2, 16, 256, 1024, 4096)),
            batch=rng.choice((1, 2, 4, 16)),
            batch_s=rng.choice((0.0, 10 ** rng.uniform(-4, 0))),
        )
        b1, b2 = rng.choice((1e-6, 0.5, 1.0)), 10 ** rng.uniform(0, 3)
        t1 = 10 ** rng.uniform(-4, -1)
        t2 = rng.choice((t1, t1 * (1 + 10 ** rng.uniform(-6, 1)), t1 * rng.uniform(0.5, 1)))
        p = (b1, StepTime(weights=t1, kv=0, compute=0, tp_comm=0, ep_comm=0, overhead=0))
        q = (b2, StepTime(weights=t2, kv=0, compute=0, tp_comm=0, ep_comm=0, overhead=0))
        if rng.random() < 0.5:
            p, q = q, p
        conc, most = 10 ** rng.uniform(0, 5), 10 ** rng.uniform(-1, 3)
        assert loop._on_line(p, q, concurrency=conc, most=most) == _on_line_by_calls(loop, p, q, concurrency=conc, most=most)
    # the hand case above: the prefill-paced root through the steps at 1e-6 and 1,000
    b = LOOP._on_line((1e-6, _step(1e-6)), (1000, _step(1000)), concurrency=1000, most=1000)
    assert b == _on_line_by_calls(LOOP, (1e-6, _step(1e-6)), (1000, _step(1000)), concurrency=1000, most=1000)
    assert b == pytest.approx(0.203873, rel=1e-3)


def test_root_is_where_the_population_passes_the_concurrency() -> None:
    # The hand case's line t(b) = 10 ms + 1 ms b (t0 = 0.01, k = 0.001): X = 1.997996 req/s (above), and N
    # on either side of the root within CERTIFIED straddles C = 1,000; where the KV cache holds 0.1 a rank
    # the batch reaches it first: b(X) = X 10 t0 / (1 - X 10 k) = 0.1 at X = 0.1 / (0.1 + 0.001) = 0.990099.
    from autopar.cost.serve_disagg import CERTIFIED

    root = LOOP._root(k=0.001, t0=0.01, fixed=1.5, concurrency=1000, most=1000, top=2.0)
    assert root == pytest.approx(1.997996, rel=1e-6)

    def population(x: float) -> float:
        b = x * 10 * 0.01 / (1 - x * 10 * 0.001)
        return x * (1.5 + LOOP._wait_at(x)) + b

    assert population(root * (1 - CERTIFIED)) < 1000 < population(root * (1 + CERTIFIED))
    assert LOOP._root(k=0.001, t0=0.01, fixed=1.5, concurrency=1000, most=0.1, top=2.0) == pytest.approx(0.1 / 0.101, rel=1e-12)
