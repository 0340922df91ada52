"""The closed loop's bookkeeping after a step (cost/serve_sim.py `_Loop`): the first tokens it gave, the
recomputes it finished, the requests that ended and those the clients send in their place, and the means
over the counted requests. A base of `_Loop`, which holds the state (its __slots__)."""

from __future__ import annotations

import math
from collections import deque

from autopar.cost.serve_admit import Scheduler, _rejoin
from autopar.cost.serve_step import LoopResult


class _Ends:
    """The end of a step in the closed loop, and the slots of `_Loop`'s state (typed here, set by `_Loop`)."""

    __slots__ = (
        "by_room", "cap", "cost", "decoding", "dsteps", "ended", "firsts_all", "full", "host", "isl", "lag", "last", "late_sum", "n_dec",
        "n_pre", "osl", "paced", "pending", "plain", "preempted", "prefilling", "prompts", "ratio", "recv_base", "refused", "resumed",
        "sched", "seen", "sent", "spread", "staggered", "start_sum", "steps", "t", "tpot_n", "tpot_sum", "tracked", "ttft_n", "ttft_sum",
        "waiting", "warmup", "waves",
    )  # fmt: skip
    decoding: deque[list[float]]
    prefilling: list[list[float]]
    resumed: list[list[float]]
    waiting: list[list[float]]
    pending: deque[list[float]]
    sched: Scheduler
    spread: tuple[int, ...]
    isl: int
    last: int
    prompts: int
    warmup: int
    lag: int
    staggered: bool
    paced: bool
    t: float
    host: float
    steps: int
    dsteps: int
    recv_base: int
    seen: int
    sent: int
    ended: int
    n_dec: int
    n_pre: int
    start_sum: float
    firsts_all: int
    ttft_n: int
    tpot_n: int
    ttft_sum: float
    late_sum: float
    tpot_sum: float
    preempted: int
    refused: int

    def _firsts(self, items: list[tuple[int, float, int]]) -> int:
        """Count the first tokens of the step's items; the prompts not done go on prefilling."""
        firsts, isl, host, t = 0, self.isl, self.host, self.t
        for count, arrival, done in items:
            if done >= isl:
                firsts += count
                if self.firsts_all >= self.warmup:
                    self.ttft_sum += count * (host - arrival)
                    self.late_sum += count * (host - t)
                    self.ttft_n += count
                self.firsts_all += count
            else:
                self.prefilling.append([count, arrival, done])
        self.n_pre = int(sum(c[0] for c in self.prefilling)) if self.prefilling else 0
        return firsts

    def _recomputed(self, back: list[tuple[int, float, int, int]]) -> None:
        """Preempted requests whose recompute the step held: done, its step gives the next token and
        they decode on; else they lead the resumed queue."""
        for count, first, written, computed in back:
            if computed >= self.isl + written:
                _rejoin(self.decoding, [count, first, self.dsteps - written])
                self.n_dec += count
                self.start_sum += count * (self.dsteps - written)
            else:
                self.resumed.insert(0, [count, first, written, computed])

    def _ends(self) -> int:
        """Take off the requests whose osl - 1 decode steps are done; returns how many."""
        n, decoding, last, dsteps = 0, self.decoding, self.last, self.dsteps
        while decoding and decoding[0][2] + last <= dsteps:  # its osl - 1 decode steps are done
            cohort = decoding.popleft()
            size, first, start = cohort[0], cohort[1], cohort[2]
            self.start_sum -= size * start
            if not math.isnan(first):
                if self.ended >= self.warmup:  # a spread cohort's TPOT is over its own decode steps
                    weight = size * last / cohort[3] if len(cohort) > 3 else size
                    self.tpot_sum += weight * (self.host - first) / self.last
                    self.tpot_n += int(size)
                self.ended += int(size)
            n += int(size)
        self.n_dec -= n
        return n

    def _send(self, n: int) -> None:
        """The requests sent during the step join the next but `lag`; `n` ended ones are replaced."""
        pending, t, steps = self.pending, self.t, self.steps
        while pending and pending[0][1] < t:  # sent during the step just run: joins the next but `lag`
            self.waiting.append([pending[0][0], pending.popleft()[1], steps + self.lag])
        new = min(n, self.prompts - self.sent) if not self.staggered else n
        if new:  # the client's new request reaches the scheduler during the next step and joins the one after
            if self.host > t:  # the client sees the end when the process sends it
                pending.append([new, self.host])
            else:
                self.waiting.append([new, t, steps + self._recv_wait() + self.lag])
            if self.paced:  # the serving process tokenizes the new prompts, in its queue (Scheduler.host_prompt_token_s)
                self.host = max(self.host, t) + new * self.isl * self.sched.host_prompt_token_s
            self.sent += new

    def _recv_wait(self) -> int:
        """Steps until the scheduler takes a request sent now: the next, or with a receive interval R
        (SGLang --scheduler-recv-interval: SchedulerRecvSkipper) the step after the next R-th decode
        step since it last took some (a step with prompts counts R)."""
        every = self.sched.recv_interval
        return 1 if every <= 1 else every - (self.dsteps - self.recv_base) % every

    def result(self) -> LoopResult:
        """Means over the counted requests."""
        return LoopResult(
            ttft_s=self.ttft_sum / max(1, self.ttft_n),
            tpot_s=self.tpot_sum / max(1, self.tpot_n),
            seconds=max(self.t, self.host),
            steps=self.steps,
            late_s=self.late_sum / max(1, self.ttft_n),
            preempted=self.preempted,
            refused=self.refused,
        )
