"""Output lengths spread over [ratio x osl, osl] (cost/serve_spread.py) and SGLang's receive interval
(Scheduler.recv_interval) in the closed loop, on cases derived by hand.

Every step costs 1 s (ONE), so each time is a step count. Lengths: class j of sixteen is the mean of the
j-th sixteenth of [ratio x osl, osl], rounded; the requests take the classes in bit-reversed order 0, 8, 4, 12, ...
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


def test_class_steps_are_the_sixteenths_means_less_the_first_token() -> None:
    # osl 1024, ratio 0.8: [819.2, 1024] in sixteenths of 12.8; class 0's mean 825.6 -> 826 tokens (825 steps after
    # the first), class 8's 928.0 (927), class 4's 876.8 -> 877 (876), class 15's 1017.6 -> 1018 (1017)
    steps = class_steps(1024, 0.8)
    assert (steps[0], steps[1], steps[2], steps[-1]) == (825, 927, 876, 1017)
    # [4.5, 9] in sixteenths of 0.28125: class 0 4.64 -> 5 tokens (4 steps), class 8 6.89 -> 7 (6), class 4 5.77 -> 6 (5)
    assert class_steps(9, 0.5)[:3] == (4, 6, 5)
    assert set(class_steps(300, 1.0)) == {299}


def test_join_gives_request_number_k_class_k_mod_8_and_keeps_the_cohorts_in_order_of_their_end() -> None:
    decoding: deque[list[float]] = deque()
    steps = class_steps(9, 0.5)
    join(decoding, 20, 2.0, 5, last=8, steps=steps, seen=3)  # requests 3..22: positions 3..15, 0..6
    assert sum(c[0] for c in decoding) == 20
    by_steps = {}
    for count, first, start, n in decoding:
        assert first == 2.0 and start == 5 - (8 - n)  # moved back by the steps it does not run
        by_steps[n] = by_steps.get(n, 0) + count
    # positions 3 to 6 twice, the others once
    want: dict[int, int] = {}
    for pos in [*range(3, 16), *range(7)]:
        want[steps[pos]] = want.get(steps[pos], 0) + 1
    assert by_steps == want
    starts = [c[2] for c in decoding]
    assert starts == sorted(starts)


def test_a_spread_run_ends_each_request_at_its_own_length_and_its_tpot_over_its_own_steps() -> None:
    # decode_first, two prompts of 10 in step 1 (first tokens at 1 s); osl 5 at ratio 0.5 ([2.5, 5] in sixteenths
    # of 0.15625): request 0 of class 0 (2.58 -> 3 tokens, 2 decode steps) ends after step 3, request 1 of class 8
    # (3.83 -> 4 tokens, 3 steps) after step 4.
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
        # C's 5 (class 4 of osl 9) end at 12 s
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
