"""The closed-loop step simulation (cost/serve_sim.py) on tiny cases derived by hand.

Step costs are chosen so each step's time is read off directly: `fixed` seconds per step,
`per_token` per prompt token, `per_decode` per decoding request.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopar.cost.serve_admit import Scheduler, admissible, pool_rules
from autopar.cost.serve_sim import _Loop, _run, simulate
from autopar.cost.serve_step import StepCost, _sent
from autopar.io.frameworks import load_framework
from tests.unit.cost.test_serve_sim_frozen import draw

ONE = StepCost(fixed=1.0, per_decode=0.0, per_token=0.0)  # every step takes 1 s


def sched(policy: str = "decode_first", *, budget: int = 100, chunked: bool = True, max_seqs: int = 100) -> Scheduler:
    return Scheduler(policy=policy, budget=budget, chunked=chunked, max_seqs=max_seqs)


def test_one_request_prefill_then_decodes() -> None:
    # step 1 prefills and gives token 1, steps 2 and 3 give tokens 2 and 3
    r = simulate(ONE, sched(), concurrency=1, isl=10, osl=3, prompts=1)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.steps) == (1.0, 1.0, 3.0, 3)


def test_decode_first_cuts_the_second_prompt() -> None:
    # budget 100, prompts of 60: step 1 holds A (60) and 40 tokens of B; A's first token at 1 s.
    # Step 2: A decodes, B's last 20 tokens: B's first token at 2 s. Step 3: A ends (3 - 1) / 2 = 1 s per
    # token; step 4: B ends, (4 - 2) / 2. TTFT (1 + 2) / 2.
    r = simulate(ONE, sched(), concurrency=2, isl=60, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.steps) == (1.5, 1.0, 4)


def test_prefill_first_stalls_the_decodes() -> None:
    # as above, but step 2 is B's prefill alone: A gets no token in it. A: tokens at 1, 3, 4 -> (4 - 1) / 2;
    # B: 2, 3, 4 -> (4 - 2) / 2. TPOT (1.5 + 1) / 2.
    r = simulate(ONE, sched("prefill_first"), concurrency=2, isl=60, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.steps) == (1.5, 1.25, 4)


def test_whole_prompts_without_chunking() -> None:
    cost = StepCost(fixed=1.0, per_decode=0.0, per_token=0.01)
    # chunked: step 1 = 60 + 40 tokens (2 s), A first at 2; step 2 = 20 tokens + A's decode (1.2 s), B first
    # at 3.2; steps 3, 4 decode (1 s): A ends at 4.2 -> (4.2 - 2) / 2 = 1.1, B at 5.2 -> (5.2 - 3.2) / 2 = 1.
    r = simulate(cost, sched(), concurrency=2, isl=60, osl=3, prompts=2)
    assert r.ttft_s == pytest.approx((2 + 3.2) / 2) and r.tpot_s == pytest.approx((1.1 + 1.0) / 2)
    # unchunked (TensorRT-LLM): B does not fit beside A; step 1 = A (1.6 s), step 2 = B + A's decode (1.6 s):
    # firsts at 1.6 and 3.2; A ends at 4.2 -> 1.3, B at 5.2 -> 1.
    r = simulate(cost, sched(chunked=False), concurrency=2, isl=60, osl=3, prompts=2)
    assert r.ttft_s == pytest.approx((1.6 + 3.2) / 2) and r.tpot_s == pytest.approx((1.3 + 1.0) / 2)


def test_decode_and_prompt_costs_add_in_a_step() -> None:
    cost = StepCost(fixed=1.0, per_decode=0.5, per_token=0.01)
    # step 1: A and B whole (d 0, p 80): 1.8 s; steps 2, 3: two decodes, 2 s each: both end at 5.8, (5.8 - 1.8) / 2
    r = simulate(cost, sched(), concurrency=2, isl=40, osl=3, prompts=2)
    assert r.ttft_s == pytest.approx(1.8) and r.tpot_s == pytest.approx(2.0) and r.seconds == pytest.approx(5.8)


def test_closed_loop_replaces_each_request_and_waits_for_the_step_in_progress() -> None:
    # staggered start, 2 in flight, osl 3: the old requests end after 1 and 2 decode steps (1 s each).
    # The one sent at 1 s misses step 2 (it reaches the scheduler during it) and is prefilled in step 3:
    # first token at 3 (TTFT 2). The one sent at 2 s joins step 4 beside a decode: first token at 4 (TTFT 2).
    # Their tokens: 3, 4, 5 and 4, 5, 6: TPOT 1. The old requests are not counted.
    r = simulate(ONE, sched(), concurrency=2, isl=10, osl=3, prompts=2, staggered=True)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (2.0, 1.0, 6.0)


def test_an_idle_engine_takes_a_new_request_at_once() -> None:
    # one in flight: request 1 at 0 (tokens 1, 2 s), request 2 sent at 2 s finds the engine idle
    r = simulate(ONE, sched(), concurrency=1, isl=10, osl=2, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.steps) == (1.0, 1.0, 4.0, 4)


@pytest.mark.parametrize("overlap", [False, True])
def test_a_wave_re_forms_under_prefill_first(overlap: bool) -> None:
    # 4 prompts of 50 in a 100-token budget: two prefill steps (firsts at 1 and 2: TTFT 1.5), then all four
    # decode together (3 steps) and end together at 5 s; the next wave repeats it. With the overlap scheduler
    # (SGLang's default) the engine is idle when the wave returns: it takes all four at once, the two that do
    # not fit its first prefill step are in its queue for the second, and the wave keeps its shape.
    s = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, overlap=overlap)
    one = simulate(ONE, s, concurrency=4, isl=50, osl=4, prompts=4)
    three = simulate(ONE, s, concurrency=4, isl=50, osl=4, prompts=12)
    assert one.ttft_s == three.ttft_s == 1.5
    assert one.seconds == 5.0 and three.seconds == 15.0


def test_max_seqs_holds_requests_back() -> None:
    # one running at a time: B waits for A to end (A: steps 1-3), then runs steps 4-6
    r = simulate(ONE, sched(max_seqs=1), concurrency=2, isl=10, osl=3, prompts=2)
    assert r.ttft_s == pytest.approx((1 + 4) / 2) and r.seconds == 6.0


def test_kv_room_holds_a_request_back() -> None:
    # SGLang admission (schedule_policy.py PrefillAdder.add_one_req): a request needs isl + osl = 13 tokens
    # below what is left. Pool 25: A (13 < 25) is admitted, B (13 + 13 = 26, not < 25) is refused and the
    # batch is full until A ends. A: prefill at 1, decodes at 2, 3 (ends). B: prefill at 4 (TTFT 4),
    # decodes at 5, 6. TTFT (1 + 4) / 2, TPOT 1, 6 s: as if one request ran at a time.
    sched = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, kv_tokens=25)
    r = simulate(ONE, sched, concurrency=2, isl=10, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (2.5, 1.0, 6.0)
    # a pool of 27 holds both (26 < 27): both prefilled in step 1, TTFT 1, 3 s
    roomy = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, kv_tokens=27)
    r = simulate(ONE, roomy, concurrency=2, isl=10, osl=3, prompts=2)
    assert (r.ttft_s, r.seconds) == (1.0, 3.0)


def test_admission_counts_the_running_output_at_the_new_token_ratio() -> None:
    # two requests decoding since decode step 0, now at step 4: each has written 1 + 4 = 5 of osl 500
    # tokens after a prompt of 100, so they hold 2 x 105 = 210 tokens and have 2 x 495 = 990 to come.
    # A newcomer needs 100 + 500 = 600. Pool 3000:
    #   ratio 0.7 (SGLANG_INIT_NEW_TOKEN_RATIO): left 3000 - 210 - 693 = 2097 -> 600, 1200, 1800 < 2097: 3
    #   ratio 0.098 (its floor): left 3000 - 210 - 97.02 = 2692.98 -> 2400 < 2692.98 too: 4
    sched = Scheduler(policy="prefill_first", budget=8192, chunked=True, max_seqs=1024, kv_tokens=3000)
    decoding = deque([[2.0, 0.0, 0.0]])
    walk = dict(n_dec=2, n_pre=0, isl=100, osl=500, dsteps=4)
    assert admissible(sched, decoding, ratio=0.7, **walk) == 3
    assert admissible(sched, decoding, ratio=0.098, **walk) == 4
    # the same from the running sums (start_sum = 2 x 0)
    assert admissible(sched, decoding, ratio=0.7, start_sum=0.0, **walk) == 3
    # outputs past SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION (4096) count 4096: osl 10000 after 5 written ->
    # 2 x 4096 reserved at ratio 1; need 100 + 4096 = 4196; pool 20000: left 20000 - 210 - 8192 = 11598
    # -> 4196, 8392 < 11598: 2
    big = Scheduler(policy="prefill_first", budget=8192, chunked=True, max_seqs=1024, kv_tokens=20000)
    assert admissible(big, decoding, ratio=1.0, **{**walk, "osl": 10000}) == 2


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="policy"):
        simulate(ONE, sched("fifo"), concurrency=1, isl=1, osl=2, prompts=1)


def test_the_loop_runs_as_many_requests_as_the_printed_benchmark() -> None:
    from autopar.cost.serve_loop import PROMPTS_PER_REQUEST
    from autopar.emit.serving import PROMPTS_PER_SLOT

    assert PROMPTS_PER_REQUEST == PROMPTS_PER_SLOT == 10


def test_steps_without_a_captured_cuda_graph_take_the_host_launch_time() -> None:
    # TensorRT-LLM replays a CUDA graph only for decode-only batches of a captured size; other steps
    # take max(GPU time, host launch time). GPU 1 s a step, host 3 s. Step 1 holds both prompts (eager,
    # 3 s): first tokens at 3. Steps 2 and 3 decode 2 requests: with no graph for batch 2 they take 3 s
    # each (ends at 9, TPOT (9 - 3) / 2 = 3); with one, 1 s each (ends at 5, TPOT 1).
    eager = StepCost(fixed=1.0, per_decode=0.0, per_token=0.0, eager_s=3.0, graph_sizes=frozenset({1}))
    r = simulate(eager, sched(chunked=False), concurrency=2, isl=10, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (3.0, 3.0, 9.0)
    graphed = StepCost(fixed=1.0, per_decode=0.0, per_token=0.0, eager_s=3.0, graph_sizes=frozenset({1, 2}))
    r = simulate(graphed, sched(chunked=False), concurrency=2, isl=10, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (3.0, 1.0, 5.0)
    # a step whose GPU time is above the host's is not changed: 2 prompts of 10 tokens at 0.2 s a token
    slow = StepCost(fixed=1.0, per_decode=0.0, per_token=0.2, eager_s=3.0, graph_sizes=frozenset({1, 2}))
    assert slow(0, 20) == 5.0 and slow(2, 0) == 1.0 and slow(3, 0) == 3.0


def test_trtllm_captures_cuda_graphs_at_its_default_batch_sizes_only() -> None:
    # TensorRT-LLM 1.0 CudaGraphConfig defaults: max_batch_size 128, no padding -> 1..31, 32, 64, 128
    from autopar.io.frameworks import builtin_frameworks

    shipped = {key: load_framework("@".join(key)) for key in builtin_frameworks()}
    sizes = set(shipped["trtllm", "1.0"].graph_sizes)
    assert sizes == set(range(1, 33)) | {64, 128}
    assert all(not fw.graph_sizes and fw.eager_layer_s == 0 for (name, _), fw in shipped.items() if name != "trtllm")
    # TensorRT-LLM's serving process: a request's life at c128 when that process is the bottleneck is its
    # time for one request times C, osl x host_token_s + isl x host_prompt_token_s (it tokenizes the prompt).
    # Llama-3.1-8B tp8 c128, latency / C: 27.7 ms at 1024/256, 56.4 at 1024/512, 58.5 at 2048/512, 64.0 at
    # 4096/512: 28.7 ms per 256 output tokens (1.12e-4 s each) and 2.1-2.5 us per prompt token. Over the
    # nine tp4/tp8 rows (docs/calibration.md) least squares gives 1.024e-4 and 3.13e-6, kept as 1.02e-4, 3.1e-6.
    # SGLang 0.5.6's TokenizerManager cap (1 / 19.6k) was tried and not kept (docs/calibration.md)
    trt = shipped["trtllm", "1.0"]
    assert 512 * trt.host_token_s + 1024 * trt.host_prompt_token_s == pytest.approx(56.4e-3, rel=0.03)
    assert 256 * trt.host_token_s + 1024 * trt.host_prompt_token_s == pytest.approx(27.7e-3, rel=0.06)
    assert 512 * trt.host_token_s + 4096 * trt.host_prompt_token_s == pytest.approx(64.0e-3, rel=0.03)
    assert all(fw.host_token_s == 0 == fw.host_prompt_token_s for key, fw in shipped.items() if key != ("trtllm", "1.0"))
    assert all(fw.host_prompt_token_s == 0 for key, fw in shipped.items() if key != ("trtllm", "1.0"))


def test_the_overlap_scheduler_takes_a_new_request_one_step_later() -> None:
    # TensorRT-LLM's overlap scheduler launches step n + 1 before it returns step n's tokens, so a
    # request sent when its predecessor's last token comes back joins a step later than without it.
    # Staggered, 2 in flight, osl 4: the old ones end after 1 and 3 decode steps (1 s each). A, sent at
    # 1 s, is ready for step 4 (without overlap: step 3), alone in it: first token at 4, TTFT 3. B, sent
    # at 3 s, is ready for step 6: first token at 6, TTFT 3. A ends at 7, B at 9: TPOT 1.
    overlap = Scheduler(policy="decode_first", budget=100, chunked=True, max_seqs=100, overlap=True)
    r = simulate(ONE, overlap, concurrency=2, isl=10, osl=4, prompts=2, staggered=True)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (3.0, 1.0, 9.0)
    r = simulate(ONE, sched(), concurrency=2, isl=10, osl=4, prompts=2, staggered=True)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (2.0, 1.0, 8.0)


def test_mixed_chunk_runs_the_decodes_in_the_prefill_step() -> None:
    # SGLang --enable-mixed-chunk (0.5.6.post2 scheduler.py get_new_batch_prefill: mix_with_running): as
    # test_prefill_first_stalls_the_decodes, but step 2 holds A's decode beside B's last 20 tokens, so A's
    # tokens come at 1, 2, 3 (TPOT 1) as under decode_first, not 1, 3, 4 (1.5)
    mixed = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, mixed=True)
    r = simulate(ONE, mixed, concurrency=2, isl=60, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.steps) == (1.5, 1.0, 4)


def test_max_prefill_tokens_admits_the_first_prompt_and_those_below_what_is_left() -> None:
    # SGLang PrefillAdder (0.5.6.post2 schedule_policy.py): rem_input_tokens = --max-prefill-tokens less the
    # running decodes (mixed); a prompt joins a step holding others only while its length is below what is
    # left. Cap 201, prompts of 100, 4 at once, osl 3, chunk budget 1000:
    #   step 1, d 0: A (first; 101 left), B (100 < 101; 1 left), C (100 >= 1): stop. Firsts A, B at 1.
    #   step 2, d 2: 199 left: C (first), D (100 >= 99): stop. C first at 2; A, B token 2.
    #   step 3, d 3: 198: D first at 3; A, B end (3 - 1) / 2 = 1; C token 2.
    #   steps 4, 5: C ends at 4, D at 5, TPOT 1. TTFT (1 + 1 + 2 + 3) / 4.
    capped = Scheduler(policy="prefill_first", budget=1000, chunked=True, max_seqs=100, mixed=True, prefill_tokens=201)
    r = simulate(ONE, capped, concurrency=4, isl=100, osl=3, prompts=4)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (7 / 4, 1.0, 5.0)
    # without the cap all four fit the first step: TTFT 1, 3 s
    free = Scheduler(policy="prefill_first", budget=1000, chunked=True, max_seqs=100, mixed=True)
    r = simulate(ONE, free, concurrency=4, isl=100, osl=3, prompts=4)
    assert (r.ttft_s, r.seconds) == (1.0, 3.0)
    # a cap below one prompt still admits the first one of each step: one a step, firsts at 1, 2, 3, 4
    tight = Scheduler(policy="prefill_first", budget=1000, chunked=True, max_seqs=100, mixed=True, prefill_tokens=50)
    r = simulate(ONE, tight, concurrency=4, isl=100, osl=3, prompts=4)
    assert r.ttft_s == (1 + 2 + 3 + 4) / 4


def test_a_prompt_over_the_chunk_is_cut_when_it_passes_the_cap() -> None:
    # cap 1000, chunk budget 150, prompts of 100: A whole (first), B passes (100 < 900) and is cut to the
    # 50 tokens left of the chunk; step 2 (d 1): B's last 50 tokens, first at 2
    s = Scheduler(policy="prefill_first", budget=150, chunked=True, max_seqs=100, mixed=True, prefill_tokens=1000)
    r = simulate(ONE, s, concurrency=2, isl=100, osl=2, prompts=2)
    assert (r.ttft_s, r.steps) == (1.5, 3)


def test_the_hosts_walk_over_the_running_requests_bounds_a_step_from_below() -> None:
    # StepCost.host_per_decode (SGLang: the scheduler's per-request Python after each step, run beside the
    # GPU's next step): a step takes max(GPU, d x host). GPU 1 s + 0.1 s a request, host 0.5 s a request:
    # 2 requests: max(1.2, 1.0) = 1.2; 4: max(1.4, 2.0) = 2.0; a prompt-only step (d 0) is the GPU's
    host = StepCost(fixed=1.0, per_decode=0.1, per_token=0.01, host_per_decode=0.5)
    assert host(2, 0) == pytest.approx(1.2) and host(4, 0) == pytest.approx(2.0)
    assert host(0, 100) == pytest.approx(2.0) and host(4, 100) == pytest.approx(2.4)


def test_without_the_overlap_scheduler_the_hosts_walk_follows_the_gpus_step() -> None:
    # StepCost.host_serial (SGLang's event_loop_normal: run the batch, then process its result; the overlap
    # scheduler is off for a hybrid Mamba model, Framework.hybrid_overlap): a step takes GPU + d x host.
    # GPU 1 s + 0.1 s a request, host 0.5 s a request: 2 requests 1.2 + 1.0 = 2.2; 4: 1.4 + 2.0 = 3.4
    host = StepCost(fixed=1.0, per_decode=0.1, per_token=0.01, host_per_decode=0.5, host_serial=True)
    assert host(2, 0) == pytest.approx(2.2) and host(4, 0) == pytest.approx(3.4)
    assert host(0, 100) == pytest.approx(2.0) and host(4, 100) == pytest.approx(4.4)
    np = pytest.importorskip("numpy")
    d, p = np.array([2, 4, 0, 4]), np.array([0, 0, 100, 100])
    assert list(host.many(d, p)) == [host(2, 0), host(4, 0), host(0, 100), host(4, 100)]


def serving(seconds_per_token: float) -> Scheduler:
    return Scheduler(policy="decode_first", budget=100, chunked=True, max_seqs=100, host_token_s=seconds_per_token)


def test_a_serving_process_that_keeps_up_adds_its_token_time() -> None:
    # 0.5 s per token after each 1 s step: A's first token leaves at 1.5 (step 1 ends at 1), its tokens 2
    # and 3 at 2.5 and 3.5 (steps end at 2, 3): TTFT 1.5, TPOT 1. B is sent at 3.5, when the client
    # sees A end; the idle engine waits for it: steps 3.5-4.5, 4.5-5.5, 5.5-6.5, tokens out at 5, 6, 7.
    r = simulate(ONE, serving(0.5), concurrency=1, isl=10, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.steps) == (1.5, 1.0, 7.0, 6)
    assert r.late_s == 0.5  # of each TTFT, the first token's 0.5 s in the process
    r = simulate(ONE, serving(0.0), concurrency=1, isl=10, osl=3, prompts=2)  # B sent at 3, ends at 6
    assert (r.ttft_s, r.tpot_s, r.seconds, r.steps) == (1.0, 1.0, 6.0, 6)


def test_a_serving_process_that_falls_behind_sets_the_pace() -> None:
    # 2 s per token, 2 tokens a step: step 1 (0-1) gives both first tokens, sent by 1 + 4 = 5; step 2
    # (1-2) both last tokens, sent once the first two are out, by 5 + 4 = 9. TTFT 5, TPOT (9 - 5) / 1.
    r = simulate(ONE, serving(2.0), concurrency=2, isl=10, osl=2, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.late_s) == (5.0, 4.0, 9.0, 4.0)  # first tokens made at 1, sent at 5


def test_the_host_queue_of_several_steps_at_once() -> None:
    # k decode steps taken in one jump leave the process when k single steps would: c = 1 s a step
    # from t = 0, one token a step. Slower process (2 s a token): out at max(0, 1) + 2 = 3, then 5, 7.
    # Faster (0.5 s): each step's token 0.5 s after its step, the third at 3.5.
    assert _sent(serving(2.0), 0.0, 0.0, 1.0, 1, 3) == 7.0
    assert _sent(serving(0.5), 0.0, 0.0, 1.0, 1, 3) == 3.5
    assert _sent(serving(0.5), 10.0, 0.0, 1.0, 1, 3) == 11.5  # still sending older tokens until 10
    assert _sent(serving(0.0), 10.0, 0.0, 1.0, 1, 3) == 3.0  # no process time: the steps' own end


def test_the_serving_process_caps_the_closed_loop_at_one_token_per_host_token_s() -> None:
    # 8 clients, 50 tokens each, 10 ms steps (800 tokens/s from the engine) and 5 ms of process time a
    # token (200 tokens/s): once the lag has built (2 rounds left out), a request's life is what the
    # process takes to send the 8 x 50 tokens in flight, 8 x 50 x 5 ms = 2.0 s, against 0.51 s without
    # it; its TPOT stays near the engine's 10 ms a step and the wait shows in TTFT (Little's law: the
    # engine holds 10 ms / 5 ms = 2 requests, the other 6 wait for their predecessors' tokens).
    fast = StepCost(fixed=0.01, per_decode=0.0, per_token=0.0)
    r = simulate(fast, serving(0.005), concurrency=8, isl=10, osl=50, prompts=16 + 40, staggered=True, warmup=16)
    assert r.ttft_s + 49 * r.tpot_s == pytest.approx(2.0, rel=0.01)
    assert r.tpot_s == pytest.approx(0.01, rel=0.15)
    r = simulate(fast, serving(0.0), concurrency=8, isl=10, osl=50, prompts=40, staggered=True)
    assert (r.ttft_s, r.tpot_s) == (pytest.approx(0.02), pytest.approx(0.01))


def test_the_serving_process_tokenizes_each_prompt_in_its_queue() -> None:
    # 0.5 s a streamed token and 0.3 s a prompt token, one client, prompts of 10 tokens, osl 3, 1 s steps.
    # A's prompt takes the process 0-3; step 1 (0-1) makes its first token, sent at 3 + 0.5 = 3.5, then
    # steps 2 and 3 (ending at 2, 3) give tokens sent at 4.0 and 4.5: TTFT 3.5, TPOT 0.5. B is sent at 4.5
    # (the client sees A end), tokenized 4.5-7.5; its steps run 4.5-7.5, its tokens leave at 8.0, 8.5, 9.0.
    both = Scheduler(policy="decode_first", budget=100, chunked=True, max_seqs=100, host_token_s=0.5, host_prompt_token_s=0.3)
    r = simulate(ONE, both, concurrency=1, isl=10, osl=3, prompts=2)
    assert (r.ttft_s, r.tpot_s, r.seconds) == (pytest.approx(3.5), pytest.approx(0.5), pytest.approx(9.0))
    # 8 clients, 100-token prompts, 50 tokens out, 10 ms steps; 5 ms a streamed token, 1 ms a prompt token:
    # a request's life is the process's time for the 8 in flight, 8 x (50 x 5 + 100 x 1) ms = 2.8 s
    fast = StepCost(fixed=0.01, per_decode=0.0, per_token=0.0)
    tok = Scheduler(policy="decode_first", budget=1000, chunked=True, max_seqs=100, host_token_s=0.005, host_prompt_token_s=0.001)
    r = simulate(fast, tok, concurrency=8, isl=100, osl=50, prompts=16 + 40, staggered=True, warmup=16)
    assert r.ttft_s + 49 * r.tpot_s == pytest.approx(2.8, rel=0.01)


def test_the_estimate_names_the_wait_in_the_serving_process() -> None:
    # TensorRT-LLM 1.0, Llama-3.1-8B tp4 on H100, 128 requests of 1024 / 512 tokens: the engine's decode
    # step gives 128 tokens every ~10 ms, more than the serving process's 9.35k tokens/s, so most of TTFT
    # is the first token's wait there (the measured row: 1981 ms TTFT, 10.0 ms TPOT); vLLM has no such part
    from autopar.cost.serve_load import estimate
    from autopar.io.models import load_model
    from autopar.io.profiles import load_hardware
    from autopar.spec.serve import Deployment, Engine, Workload

    model, hw, wl = load_model("llama3.1-8b"), load_hardware("h100-sxm"), Workload(isl=1024, osl=512, concurrency=128)
    trt = estimate(model, hw, Deployment(fw=load_framework("trtllm"), mode="agg", engine=Engine(tp=4), replicas=1), wl)
    assert trt.ttft_s == pytest.approx(sum(trt.ttft_parts.values()))
    assert trt.ttft_parts["serving"] > 0.5 * trt.ttft_s
    vllm = estimate(model, hw, Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(tp=4), replicas=1), wl)
    assert vllm.ttft_parts["serving"] == 0.0


def test_each_disaggregated_decode_engine_streams_at_most_what_its_serving_process_sends() -> None:
    # the same limit per decode engine (it streams every output token): Llama-3.1-8B, 4 tp1 prefill engines
    # and 1 tp4 decode engine on H100, 128 requests of 1024 / 512: the decode step (5.7 ms at 128) would give
    # 22k tokens/s (vLLM's loop, with its own constants, 18k); TensorRT-LLM sends 1 / 1.07e-4 = 9,346 and
    # the rest waits before the first token (Little's law: requests/s x latency = 128); two engines twice
    from autopar.cost.serve_load import estimate
    from autopar.io.models import load_model
    from autopar.io.profiles import load_hardware
    from autopar.spec.serve import Deployment, Engine, Workload

    model, hw, wl = load_model("llama3.1-8b"), load_hardware("h100-sxm"), Workload(isl=1024, osl=512, concurrency=128)

    def disagg(framework: str, decoders: int) -> Deployment:
        return Deployment(
            fw=load_framework(framework), mode="disagg", engine=Engine(tp=4), replicas=decoders, prefill=Engine(tp=1), prefill_replicas=4
        )

    trt = estimate(model, hw, disagg("trtllm", 1), wl)
    assert trt.requests_per_s * 512 == pytest.approx(1 / load_framework("trtllm@1.0").host_token_s)
    assert trt.requests_per_s * trt.latency_s == pytest.approx(128)
    assert trt.ttft_s == pytest.approx(sum(trt.ttft_parts.values())) and trt.ttft_parts["serving"] > 1.0
    vllm = estimate(model, hw, disagg("vllm", 1), wl)
    assert vllm.requests_per_s * 512 > 1.5 / load_framework("trtllm@1.0").host_token_s and vllm.ttft_parts["serving"] == 0
    two = estimate(model, hw, disagg("trtllm", 2), wl)
    assert two.requests_per_s * 512 <= 2 / load_framework("trtllm@1.0").host_token_s * (1 + 1e-9)


def test_a_pool_that_cannot_refuse_is_not_followed() -> None:
    # 2 requests of 10 + 3 tokens: each holds and reserves at most 13. SGLang's room admission may bind
    # below (2 + 1) x 13 = 39 tokens, the pool may be outgrown below 2 x 13 = 26; vLLM's blocks only that
    room = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, kv_tokens=25)
    kw = dict(concurrency=2, isl=10, osl=3)
    assert pool_rules(room, **kw) == (True, True)
    assert pool_rules(replace(room, kv_tokens=38), **kw) == (False, True)
    assert pool_rules(replace(room, kv_tokens=39), **kw) == (False, False)
    assert pool_rules(replace(room, kv_tokens=39, ratio_init=1.5), **kw) == (False, True)  # a reservation above its tokens
    blocks = replace(room, admission="blocks")
    assert pool_rules(blocks, **kw) == (True, False) and pool_rules(replace(blocks, kv_tokens=26), **kw) == (False, False)
    assert pool_rules(replace(room, kv_tokens=0), **kw) == (False, False)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6), extra=st.sampled_from([0, 1, 7, 1000, 10**6]))
def test_an_ample_pool_runs_the_loop_of_no_pool(seed: int, extra: int) -> None:
    # serve_admit.pool_rules: from (C + 1)(isl + osl) tokens up, SGLang's admission by room admits every
    # waiting request, so the loop that follows it (by_room forced on) and the loop without it give the
    # same result to the bit, and neither refuses a request
    cost, sched_kw, loop = draw(random.Random(seed))
    c, isl, osl = loop["concurrency"], loop["isl"], loop["osl"]
    sched = Scheduler(**{**sched_kw, "admission": "room", "kv_tokens": (c + 1) * (isl + osl) + extra})
    step_cost = StepCost(**{**cost, "graph_sizes": frozenset(cost["graph_sizes"])})
    followed = _Loop(step_cost, sched, **loop)
    assert not followed.by_room and not followed.tracked
    followed.by_room, followed.plain = True, False
    runs = []
    for run in (followed, _Loop(step_cost, sched, **loop)):
        try:
            runs.append(_run(run, loop["prompts"]).result())
        except RuntimeError as err:  # a loop that stalls stalls either way
            runs.append(str(err))
    assert runs[0] == runs[1]
    assert isinstance(runs[0], str) or runs[0].refused == 0
