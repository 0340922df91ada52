"""Output lengths spread over [ratio x osl, osl] (cost/serve_spread.py) and SGLang's receive interval
(Scheduler.recv_interval) in the closed loop, on cases derived by hand.

Every step costs 1 s (ONE), so each time is a step count. Lengths: class j of eight is the mean of the
j-th eighth of [ratio x osl, osl], rounded; the requests take the classes in the order 0, 4, 2, 6, 1, 5, 3, 7
(sglang.bench_serving --random-range-ratio draws each output length uniformly from that range).
"""

from __future__ import annotations

from collections import deque

import pytest

from autopar.cost.serve_admit import Scheduler
from autopar.cost.serve_sim import simulate
from autopar.cost.serve_spread import class_steps, join
from autopar.cost.serve_step import StepCost

ONE = StepCost(fixed=1.0, per_decode=0.0, per_token=0.0)


def test_class_steps_are_the_eighths_means_less_the_first_token() -> None:
    # osl 1024, ratio 0.8: [819.2, 1024] in eighths of 25.6; class 0's mean 832.0 (831 steps after the first
    # token), class 4's 934.4 -> 934 (933), class 7's 1011.2 -> 1011 (1010); listed in the order 0, 4, 2, 6, 1, 5, 3, 7
    assert class_steps(1024, 0.8) == (831, 933, 882, 985, 857, 959, 908, 1010)
    assert class_steps(9, 0.5) == (4, 6, 5, 7, 4, 7, 5, 8)  # [4.5, 9]: 4.78 -> 5 tokens (4 steps), 7.03 -> 7 (6), ...
    assert set(class_steps(300, 1.0)) == {299}


def test_join_gives_request_number_k_class_k_mod_8_and_keeps_the_cohorts_in_order_of_their_end() -> None:
    decoding: deque[list[float]] = deque()
    steps = class_steps(9, 0.5)
    join(decoding, 10, 2.0, 5, last=8, steps=steps, seen=3)  # requests 3..12: classes 3, 4, 5, 6, 7, 0, 1, 2, 3, 4
    assert sum(c[0] for c in decoding) == 10
    by_steps = {}
    for count, first, start, n in decoding:
        assert first == 2.0 and start == 5 - (8 - n)  # moved back by the steps it does not run
        by_steps[n] = by_steps.get(n, 0) + count
    # positions 3 and 4 twice, the others once
    want: dict[int, int] = {}
    for pos in (3, 4, 5, 6, 7, 0, 1, 2, 3, 4):
        want[steps[pos]] = want.get(steps[pos], 0) + 1
    assert by_steps == want
    starts = [c[2] for c in decoding]
    assert starts == sorted(starts)


def test_a_spread_run_ends_each_request_at_its_own_length_and_its_tpot_over_its_own_steps() -> None:
    # decode_first, two prompts of 10 in step 1 (first tokens at 1 s); osl 5 at ratio 0.5: request 0 of class 0
    # (3 tokens, 2 decode steps) ends after step 3, request 1 of class 4 (4 tokens, 3 steps) after step 4.
    # TPOT (3 - 1) / 2 = (4 - 1) / 3 = 1 s; at one length both would end after step 5
    sched = Scheduler(policy="decode_first", budget=100, chunked=True, max_seqs=100)
    r = simulate(ONE, sched, concurrency=2, isl=10, osl=5, prompts=2, spread=0.5)
    assert (r.ttft_s, r.tpot_s, r.seconds, r.steps) == (1.0, 1.0, 4.0, 4)
    fixed = simulate(ONE, sched, concurrency=2, isl=10, osl=5, prompts=2)
    assert (fixed.tpot_s, fixed.seconds) == (1.0, 5.0)
    assert simulate(ONE, sched, concurrency=2, isl=10, osl=5, prompts=2, spread=1.0) == fixed


@pytest.mark.parametrize(
    ("every", "ttft", "tpot", "seconds"),
    [
        # SGLang's default: A (4 decode steps) ends after step 5; C reaches the scheduler in step 6 and is prefilled
        # in step 7 (prefill first, B's decodes wait): TTFT (1 + 1 + 2) / 3; B's 6 decode steps end at 8 s, (8 - 1) / 6;
        # C's 5 (class 2 of osl 9) end at 12 s
        (1, 4 / 3, (1 + 7 / 6 + 1) / 3, 12.0),
        # --scheduler-recv-interval 4: after A ends (4 decode steps since the prefill's receive) the next receive is
        # 4 decode steps on; B ends first (after step 7), and the idle engine takes C at once: prefilled in step 8,
        # TTFT 8 - 5 = 3; B decodes uninterrupted, (7 - 1) / 6 = 1; C ends at 13 s
        (4, 5 / 3, 1.0, 13.0),
    ],
)
def test_a_receive_interval_holds_a_returning_request_until_its_decode_steps_are_run(
    every: int, ttft: float, tpot: float, seconds: float
) -> None:
    sched = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, recv_interval=every)
    r = simulate(ONE, sched, concurrency=2, isl=10, osl=9, prompts=3, spread=0.5)
    assert r.ttft_s == pytest.approx(ttft) and r.tpot_s == pytest.approx(tpot) and r.seconds == seconds


def test_a_receive_interval_changes_nothing_where_every_request_ends_together() -> None:
    # one output length: the batch ends at once, the idle engine takes the next wave at once (SGLang's idle step
    # weighs the whole interval)
    one = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100)
    thirty = Scheduler(policy="prefill_first", budget=100, chunked=True, max_seqs=100, recv_interval=30)
    assert simulate(ONE, thirty, concurrency=4, isl=10, osl=9, prompts=12) == simulate(ONE, one, concurrency=4, isl=10, osl=9, prompts=12)
