"""Step-level simulation of a closed-loop benchmark on one attention rank.

The benchmark client (`vllm bench serve --max-concurrency C`, `sglang.bench_serving`,
genai-perf, aiperf) keeps C requests of `isl` prompt and `osl` output tokens in
flight until it has sent `prompts`. The engine runs in steps: what a step holds is
the framework's scheduler (`Scheduler`: decode_first for vLLM V1 and TensorRT-LLM,
prefill_first for SGLang, its admission by KV room or blocks, retraction and
preemption, CUDA graphs, the overlap scheduler, the serving process); what it costs
is `StepCost`. Identical requests move together as cohorts, decode-only steps are taken
in one jump, and a loop without the rarer rules runs `_Loop.quick` (bit for bit the same).
Each policy's rule and its source: docs/serving.md, "The step simulation, engine by engine".
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from autopar.cost.serve_admit import (
    Scheduler,
    _decayed,
    _held,
    _plan,
    _preempt,
    _ratio_after_retract,
    _resume,
    admissible,
    pool_rules,
)
from autopar.cost.serve_ends import _Ends
from autopar.cost.serve_replay import PLANS, Ticks, plan_key, record, watch
from autopar.cost.serve_spread import class_steps, join
from autopar.cost.serve_step import LoopResult, StepCost, _sent
from autopar.spec.framework import POLICIES

_NONE: list = []  # read-only: a step without prompts or recomputes
Cost = Callable[[int, int], float]  # a StepCost, or the Ticks of a recorded run
_JOINS = itemgetter(2)  # the step a waiting cohort [count, arrival, step it may join] may join


def simulate(
    cost: StepCost,
    sched: Scheduler,
    *,
    concurrency: int,
    isl: int,
    osl: int,
    prompts: int,
    staggered: bool = False,
    warmup: int = 0,
    spread: float = 1.0,
) -> LoopResult:
    """Run the closed loop until `prompts` requests have ended; means over those requests.

    The run starts as the clients start it, all `concurrency` requests arriving
    together, or with `staggered` as a loop already in its steady state: the
    requests in flight are decoding, their progress spread evenly over the
    output length, and only the requests sent after the start are counted.
    Where the serving process keeps up, the run's plan is recorded once and
    replayed for each cost (cost/serve_replay.py)."""
    if sched.policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {sched.policy!r}")
    kw: dict[str, Any] = {"concurrency": concurrency, "isl": isl, "osl": osl, "prompts": prompts, "staggered": staggered}
    kw.update(warmup=warmup, spread=spread)
    key, reads = plan_key(sched, **kw)
    # the serving process may fall behind (what a step takes reads the times), or a plan of a pool's own size,
    # seldom asked for twice in a sweep, is asked for the first time: run the loop itself
    if sched.host_token_s > 0 or sched.host_prompt_token_s > 0 or (reads and PLANS.first(key)):
        return _run(_Loop(cost, sched, **kw), prompts).result()
    plan = PLANS.get(key)
    if plan is None:
        ticks = Ticks()
        loop = _Loop(ticks, key[0], **kw)
        watch(loop)
        plan = PLANS.add(key, record(_run(loop, prompts), ticks))
    return plan.replay(cost)


def _run(loop: _Loop, prompts: int) -> _Loop:
    step = loop.quick if loop.plain else loop.step
    while loop.ended < prompts:
        step()
    return loop


class _Loop(_Ends):
    """The closed loop's state between steps; `step` runs one engine step (or one jump of decode-only
    steps): the queue it takes from, the KV room, the step's prompt tokens, its cost, then the requests
    that got their first token, ended, or were sent."""

    __slots__ = ()  # the state's slots: _Ends

    def __init__(
        self,
        cost: Cost,
        sched: Scheduler,
        *,
        concurrency: int,
        isl: int,
        osl: int,
        prompts: int,
        staggered: bool,
        warmup: int,
        spread: float = 1.0,
    ) -> None:
        self.cost, self.sched, self.isl, self.osl = cost, sched, isl, osl
        self.prompts, self.staggered, self.warmup = prompts, staggered, warmup
        conc, self.cap, last = max(1, concurrency), max(1, sched.max_seqs), max(1, osl - 1)
        self.recv_base = 0  # the decode steps run when the scheduler last took new requests (Scheduler.recv_interval)
        self.last, self.seen = last, 0  # output lengths spread (cost/serve_spread.py): the requests given one so far
        self.spread = class_steps(osl, spread) if spread < 1 else ()
        self.waiting: list[list[float]] = []  # [count, arrival, first step it may join]
        self.prefilling: list[list[float]] = []  # [count, arrival, prompt tokens done]
        # decoding, oldest first: [count, first-token time, decode steps run before its first token]; a request
        # gives a token in every step that holds decodes (all running ones are in it), so the oldest ends first
        self.decoding: deque[list[float]] = deque()
        if staggered:
            for i in range(min(conc, last)):  # request i ends after (i + 1) (osl - 1) / conc more decode steps
                here = (conc * (i + 1)) // last - (conc * i) // last if conc >= last else 1
                ahead = (i + 1) * last // min(conc, last)
                self.decoding.append([here, math.nan, ahead - last])
            self.sent = 0
        else:
            self.waiting.append([conc, 0.0, 0])
            self.sent = conc
        self.n_dec = int(sum(c[0] for c in self.decoding))
        self.start_sum = sum(c[0] * c[2] for c in self.decoding)
        self.n_pre = 0
        self.ended, self.t, self.steps, self.dsteps = 0, 0.0, 0, 0
        self.ttft_sum = self.tpot_sum = self.late_sum = 0.0
        self.firsts_all = self.ttft_n = self.tpot_n = 0
        # admission by room: the ratio (a loop already in its steady state has decayed it to the floor) and
        # whether a refusal holds the batch full until a request ends
        self.ratio, self.full = (sched.ratio_min if staggered else sched.ratio_init), False
        self.host = 0.0 if staggered else conc * isl * sched.host_prompt_token_s  # when the serving process has sent all so far
        self.paced = sched.host_token_s > 0 or sched.host_prompt_token_s > 0  # the serving process may fall behind
        # the KV pool is tracked (admission by blocks, preemption) where the requests in flight could outgrow it;
        # SGLang's admission by room, which alone reads the ratio, where it could refuse one (pool_rules)
        self.tracked, self.by_room = pool_rules(sched, concurrency=conc, isl=isl, osl=osl)
        self.resumed: list[list[float]] = []  # preempted, to recompute: [count, first-token time, tokens written, computed]
        self.preempted = self.refused = 0
        self.waves = sched.policy == "prefill_first" and not sched.mixed  # a step with prompt tokens holds no decodes
        self.lag = 1 if sched.overlap else 0  # steps between a request reaching the scheduler and the step it joins
        self.pending: deque[list[float]] = deque()  # sent after `t` (the process was behind): [count, arrival]
        # none of the rules `quick` leaves out applies: a pool that is not tracked, no admission by room, a
        # process that keeps up, no prefill waves, no prefill-token cap, one output length (no spread), more
        # than one output token
        rules = self.tracked or self.by_room or self.paced or self.waves or sched.prefill_tokens > 0 or bool(self.spread)
        self.plain = not (rules or osl <= 1 or isl < 1)

    def step(self) -> None:
        """One step: what it takes, what it holds, its cost, and the requests it moves on."""
        waiting, resumed = self.waiting, self.resumed
        later: list[list[float]] = []
        if waiting and waiting[-1][2] <= self.steps:  # the usual case: every waiting cohort may join
            ready = waiting
        else:
            ready, later = self._ready()
        free, stop = 0, False  # KV tokens left after the running requests' next token (tracked pools)
        if self.tracked:
            ready, later, stop, free = self._room(ready, later)
        slots, by_kv = self._slots(ready) if self.by_room else (self.cap - self.n_dec - self.n_pre, -1)
        has_prompts = bool(self.prefilling) or (bool(ready or resumed) and slots > 0)  # it may hold prompt tokens
        d = 0 if self.waves and has_prompts else self.n_dec
        asked = sum(w[0] for w in ready) + sum(r[0] for r in resumed) if by_kv >= 0 else 0
        items: list[tuple[int, float, int]] = _NONE  # the step's prompts: (count, arrival, prompt tokens done after it)
        back: list[tuple[int, float, int, int]] = _NONE  # resumed requests whose recompute the step holds
        p = 0  # its prompt tokens (none: a decode-only step)
        if has_prompts and resumed and slots > 0 and not stop:
            items, p, back, ready, free = self._with_resumed(ready, d, slots, free)
        elif has_prompts:
            items, p, ready = self._prompts(ready, d, slots, free)
        if by_kv >= 0 and (ready or self.resumed):  # a request refused for room (not for the token budget) marks
            unserved = sum(w[0] for w in ready) + sum(r[0] for r in self.resumed)  # the batch full
            if asked - unserved >= by_kv:
                self.full, self.refused = True, self.refused + 1
        self.waiting = ready + later if later else ready[:]
        if p == 0:
            self._decode_jump(d, later, free)
        else:
            self._run(d, p, items)
        firsts = self._firsts(items) if items else 0  # no items: nothing prefilled, the prefilling unchanged
        if back:
            self._recomputed(back)
        decoding, dsteps = self.decoding, self.dsteps
        n = self._ends() if decoding and decoding[0][2] + self.last <= dsteps else 0
        self.full = self.full and not n  # a request that ends frees the batch
        if firsts:
            if self.osl <= 1:
                self.tpot_n += firsts if self.ended >= self.warmup else 0
                self.ended += firsts
                n += firsts
            else:
                if self.spread:
                    join(decoding, firsts, self.host, dsteps, last=self.last, steps=self.spread, seen=self.seen)
                    self.seen += firsts
                else:
                    decoding.append([firsts, self.host, dsteps])
                self.n_dec += firsts
                self.start_sum += firsts * dsteps
        if n or self.pending:
            self._send(n)

    def quick(self) -> None:
        """`step` where the loop is `plain`, nothing is being prefilled and the ready requests the free
        slots take fit whole in the step's budget: the same step in one place (the loop's commonest, a
        full batch taking one request for each that ends); any other step is left to `step`."""
        waiting, steps, slots = self.waiting, self.steps, self.cap - self.n_dec - self.n_pre
        if self.prefilling or self.pending or slots <= 0:
            return self.step()
        items: list[tuple[int, float]] = []  # (count, arrival) of the prompts taken, in arrival order
        took, left, whole, rest = 0, slots, 0, 0  # taken, slots left, cohorts taken whole, what stays of the next
        for count, arrival, joins in waiting:
            if joins > steps or not left:
                break
            take = min(int(count), left)
            items.append((take, arrival))
            took, left = took + take, left - take
            if take < count:
                rest = int(count) - take
                break
            whole += 1
        d, isl = self.n_dec, self.isl
        if not took or took * isl > max(0, self.sched.budget - d):
            return self.step()
        if rest:
            head = waiting[whole]
            waiting[whole] = [rest, head[1], head[2]]
        del waiting[:whole]
        c = self.cost(d, took * isl)
        self.host = t = self.t + c
        self.t, self.steps = t, steps + 1
        self.dsteps = dsteps = self.dsteps + (1 if d else 0)
        warmup = self.warmup
        for count, arrival in items:  # every prompt of the step gives its first token
            if self.firsts_all >= warmup:
                self.ttft_sum += count * (t - arrival)
                self.late_sum += count * (t - t)
                self.ttft_n += count
            self.firsts_all += count
        self.n_pre = 0
        decoding = self.decoding
        n = self._ends() if decoding and decoding[0][2] + self.last <= dsteps else 0
        self.full = self.full and not n
        decoding.append([took, t, dsteps])
        self.n_dec += took
        self.start_sum += took * dsteps
        if n or self.pending:
            self._send(n)
        return None

    def _ready(self) -> tuple[list[list[float]], list[list[float]]]:
        """The waiting cohorts that may join this step, and the others. Waiting is in arrival order, and
        so in order of the step each cohort may join: the ready ones lead."""
        waiting, steps = self.waiting, self.steps
        if not waiting or waiting[-1][2] <= steps:  # the usual cases: none waits, or all may join
            ready, later = waiting[:], []
        else:
            cut = bisect_right(waiting, float(steps), key=_JOINS)
            ready, later = waiting[:cut], waiting[cut:]
        if not ready and not self.decoding and not self.prefilling and not self.resumed:  # an idle engine takes them as they come
            pending = self.pending
            if not later and pending:  # it waits for the first one the process sends
                self.t = t = max(self.t, pending[0][1])
                while pending and pending[0][1] <= t:
                    later.append([pending[0][0], pending.popleft()[1], steps])
            ready, later = [[count, arrival, steps] for count, arrival, _ in later], []  # all have reached it
            self.ratio = self.sched.ratio_init
        return ready, later

    def _room(self, ready: list[list[float]], later: list[list[float]]) -> tuple[list[list[float]], list[list[float]], bool, int]:
        """A tracked pool: preempt where this step's decode tokens have no room; returns the queue (vLLM
        schedules no waiting request in a step that preempted: `stop`) and the KV tokens left free."""
        sched, stop = self.sched, False
        held = _held(
            self.decoding, self.resumed, n_dec=self.n_dec, n_pre=self.n_pre, isl=self.isl, dsteps=self.dsteps, start_sum=self.start_sum
        )
        if self.decoding and held + self.n_dec > sched.kv_tokens:  # this step's decode tokens have no room
            moved, self.n_dec, self.start_sum, held = _preempt(
                sched, self.decoding, self.resumed, n_dec=self.n_dec, isl=self.isl, dsteps=self.dsteps, start_sum=self.start_sum, held=held
            )
            self.preempted += moved
            if self.by_room and moved:  # SGLang re-estimates the ratio from the requests it keeps
                self.ratio = _ratio_after_retract(sched, self.decoding, n_dec=self.n_dec, osl=self.osl, dsteps=self.dsteps)
            if not self.by_room:
                ready, later, stop = [], ready + later, True
        return ready, later, stop, max(0, int(sched.kv_tokens - held) - self.n_dec)

    def _slots(self, ready: list[list[float]]) -> tuple[int, int]:
        """Requests the step may start, and those the KV room admits where fewer than the slots (-1: not short)."""
        slots, by_kv = self.cap - self.n_dec - self.n_pre, -1
        if self.by_room and (ready or self.resumed):
            room = (
                0
                if self.full
                else admissible(
                    self.sched,
                    self.decoding,
                    n_dec=self.n_dec,
                    n_pre=self.n_pre,
                    isl=self.isl,
                    osl=self.osl,
                    ratio=self.ratio,
                    dsteps=self.dsteps,
                    start_sum=self.start_sum,
                )
            )
            by_kv = room if room < slots else -1
            slots = min(slots, room)
        return slots, by_kv

    def _prompts(
        self, ready: list[list[float]], d: int, slots: int, free: int
    ) -> tuple[list[tuple[int, float, int]], int, list[list[float]]]:
        """The step's prompt tokens: prompts being prefilled, then waiting ones; returns its items, its
        prompt tokens and the waiting left."""
        sched = self.sched
        inputs = sched.prefill_tokens - d if sched.prefill_tokens > 0 else None
        if self.tracked and not self.by_room:  # vLLM: a waiting prompt needs its blocks free now
            slots = min(slots, free // max(1, self.isl))
            self.refused += 1 if ready and slots <= 0 else 0
        items, p, self.prefilling, ready = _plan(
            sched, self.prefilling, ready, isl=self.isl, room=max(0, sched.budget - d), slots=slots, inputs=inputs
        )
        return items, p, ready

    def _with_resumed(
        self, ready: list[list[float]], d: int, slots: int, free: int
    ) -> tuple[list[tuple[int, float, int]], int, list[tuple[int, float, int, int]], list[list[float]], int]:
        """As `_prompts` with preempted requests leading the waiting queue (vLLM prepends them): also
        returns the recomputes the step holds and the KV tokens left free."""
        sched, isl, by_room = self.sched, self.isl, self.by_room
        inputs = sched.prefill_tokens - d if sched.prefill_tokens > 0 else None
        items, p, self.prefilling, _ = _plan(sched, self.prefilling, [], isl=isl, room=max(0, sched.budget - d), slots=0)
        room = max(0, sched.budget - d - p)
        back, q, self.resumed, room, slots, left = _resume(self.resumed, isl=isl, room=room, slots=slots, kv=free if not by_room else None)
        free, p = (left if not by_room else free), p + q
        if self.tracked and not by_room:  # vLLM's waiting queue is FCFS: a preempted request left unscheduled
            slots = 0 if self.resumed else min(slots, free // max(1, isl))  # stops it (Scheduler.schedule breaks)
        more, q, _, ready = _plan(
            sched, [], ready, isl=isl, room=room, slots=slots, inputs=inputs - p if inputs is not None else None, started=p > 0
        )
        return items + more, p + q, back, ready, free

    def _decode_jump(self, d: int, later: list[list[float]], free: int) -> None:
        """Only decodes until the oldest cohort ends (or a request becomes ready): one jump."""
        decoding, steps = self.decoding, self.steps
        if not decoding:
            raise RuntimeError("closed loop stalled: no request can run")
        k = max(1, int(decoding[0][2]) + self.last - self.dsteps)
        k = min(k, max(1, int(later[0][2] if later else steps + k) - steps))
        if self.tracked and self.n_dec:  # stop where the pool runs out of room for the decodes' next tokens
            k = min(k, max(1, free // self.n_dec + 1))
        c = self.cost(d, 0)
        if self.pending and c > 0:  # stop at the step during which the next one is sent
            k = min(k, max(1, int((self.pending[0][1] - self.t) / c) + 1))
        self.host = _sent(self.sched, self.host, self.t, c, d, k)
        self.t, self.steps, self.dsteps = self.t + k * c, steps + k, self.dsteps + k
        self.ratio = _decayed(self.sched, self.ratio, k) if self.by_room else self.ratio

    def _run(self, d: int, p: int, items: list[tuple[int, float, int]]) -> None:
        """A step with prompt tokens."""
        c, t = self.cost(d, p), self.t
        if self.paced:  # the step's tokens: its decodes and its first tokens
            tokens = d + sum(count for count, _, done in items if done >= self.isl)
            self.host = _sent(self.sched, self.host, t, c, tokens, 1)
        else:
            self.host = t + c
        self.t, self.steps = t + c, self.steps + 1
        self.dsteps += 1 if d else 0
        self.recv_base = self.dsteps  # a step with prompts is followed by a receive
        self.ratio = _decayed(self.sched, self.ratio, 1) if d and self.by_room else self.ratio
