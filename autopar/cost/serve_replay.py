"""The step simulation's plan, recorded once and replayed for each step cost (cost/serve_sim.py).

Where the serving process keeps up (Scheduler.host_token_s 0), what the closed loop does at each
step (what it takes, holds, ends and sends) reads only counts and step numbers, never a time: the
serving process sends a step's tokens at its end, so nothing is ever pending and no rule compares
two times. The plan is then the same for every StepCost, and a sweep asks for few plans (Qwen3-235B
on 64 H200, vLLM: 1,282 loops of 32 plans). `record` runs the loop once with `Ticks` for the cost:
each step's cost is a `_Tick`, the times it makes are `_At`s (a float, the steps run so far, and
the index of the step that ends there), and the loop's sums of times log their terms instead of
adding them. `Plan.replay` then redoes, for a real StepCost, every float operation the loop would
have made, in the same order: the run's times t[i + 1] = t[i] + k[i] x cost(d[i], p[i]) as a
running sum, then each mean's terms in order; in Python, or for a long run in numpy (whose cumsum
adds in order, unlike its sum). The results are the loop's bit for bit
(tests/unit/cost/test_serve_replay.py, against the frozen golden of test_serve_sim_frozen.py).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from autopar.cost.serve_admit import Scheduler, pool_rules
from autopar.cost.serve_step import LoopResult, StepCost


class _Tick:
    """The cost of the recorded step `i`, taken `k` times (a decode jump)."""

    __slots__ = ("i", "k")

    def __init__(self, i: int, k: int = 1) -> None:
        self.i, self.k = i, k

    def __rmul__(self, k: int) -> _Tick:
        self.k = k  # a jump multiplies its step's cost by the same k at each use
        return self

    def __radd__(self, t: float) -> _At:
        at = t.i if isinstance(t, _At) else 0
        if at != self.i or (at == 0 and t != 0.0):
            raise AssertionError(f"step {self.i} starts from the time after step {at - 1}")
        return _At(float(t) + self.k, self.i + 1)


class _At(float):
    """A time of the recorded run: as a float the steps run so far (so that the loop's comparisons of
    times hold), `i` the index of the time in the run (0: the start, i + 1: after step i)."""

    i: int

    def __new__(cls, steps: float, i: int) -> _At:
        at = super().__new__(cls, steps)
        at.i = i
        return at

    def __sub__(self, other: object) -> _Gap:  # type: ignore[override]
        return _Gap(self.i, _index(other))


def _index(t: object) -> int:
    if isinstance(t, _At):
        return t.i
    if t == 0.0:  # the start: the clients' first wave arrives at 0
        return 0
    raise AssertionError(f"not a time of the recorded run: {t!r}")


class _Gap:
    """t[a] - t[b], and once multiplied by a count (and divided by a number of steps) a term of a sum."""

    __slots__ = ("a", "b", "count", "div")

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b, self.count, self.div = a, b, 0, 0

    def __rmul__(self, count: int) -> _Gap:
        self.count = count
        return self

    def __truediv__(self, div: int) -> _Gap:
        self.div = div
        return self


class _Log:
    """A sum of the loop's (ttft_sum, late_sum, tpot_sum): the terms added to it, in order."""

    __slots__ = ("terms",)

    def __init__(self) -> None:
        self.terms: list[_Gap] = []

    def __iadd__(self, term: _Gap) -> _Log:
        self.terms.append(term)
        return self


class Ticks:
    """The step cost of a recorded run: logs each step's (decode requests, prompt tokens)."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, int]] = []
        self.ticks: list[_Tick] = []

    def __call__(self, d: int, p: int) -> float:
        tick = _Tick(len(self.steps))
        self.steps.append((d, p))
        self.ticks.append(tick)
        return tick  # type: ignore[return-value]


def watch(loop: Any) -> None:
    """Make the loop's sums of times log their terms."""
    loop.ttft_sum, loop.late_sum, loop.tpot_sum = _Log(), _Log(), _Log()


SMALL = 4096  # steps and terms of a plan replayed in Python: below, numpy's start-up and calls cost more
# steps and terms of longer plans a process replays in Python before they move to numpy, unless numpy is
# loaded already: a command that replays them only a few times (a dense SGLang sweep: 11 plans, about six
# replays each) costs less so than numpy's import (~0.1 s) and the arrays; past it, a plan replayed
# often moves at once. About 0.1 s of replays in Python at most.
PYTHON_TERMS = 1 << 16
_python_terms = 0  # replayed in Python so far by plans longer than SMALL


class Plan:
    """A recorded run: each step's (d, p, k), each sum's terms (count, a, b: count x (t[a] - t[b]), over
    the sum's divisor, 0: none), the indices of its last t and host, and what does not depend on the
    cost (steps, ttft_n, tpot_n, preempted, refused)."""

    __slots__ = ("arrays", "counts", "ends", "size", "steps", "sums")

    def __init__(
        self,
        steps: list[tuple[int, int, int]],
        sums: list[tuple[list[tuple[int, int, int]], int]],
        ends: tuple[int, int],
        counts: tuple[int, int, int, int, int],
    ) -> None:
        self.steps, self.sums, self.ends, self.counts = steps, sums, ends, counts
        self.size = len(steps) + sum(len(terms) for terms, _ in sums)
        self.arrays: tuple[Any, ...] = ()  # the same in numpy arrays (a long plan in numpy holds only these)

    def replay(self, cost: StepCost) -> LoopResult:
        """The LoopResult of the recorded run under `cost`: in Python, or in numpy for a long run once
        PYTHON_TERMS are spent or numpy is loaded (the same bits either way: tests/unit/cost/test_serve_replay.py)."""
        global _python_terms
        if not self.arrays and self.size > SMALL:
            if _python_terms + self.size > PYTHON_TERMS or _numpy_loaded():
                self._arrays()
                self.steps, self.sums = [], []
            else:
                _python_terms += self.size
        t, sums = self._numpy(cost) if self.arrays else self._python(cost)
        steps, ttft_n, tpot_n, preempted, refused = self.counts
        return LoopResult(
            ttft_s=sums[0] / max(1, ttft_n),
            tpot_s=sums[2] / max(1, tpot_n),
            seconds=max(float(t[self.ends[0]]), float(t[self.ends[1]])),
            steps=steps,
            late_s=sums[1] / max(1, ttft_n),
            preempted=preempted,
            refused=refused,
        )

    def _python(self, cost: StepCost) -> tuple[list[float], list[float]]:
        t, now = [0.0], 0.0
        for d, p, k in self.steps:
            now = now + k * cost(d, p)  # the loop's t + c (1 x c is c) or, in a decode jump, t + k x c
            t.append(now)
        sums = []
        for terms, div in self.sums:
            total = 0.0
            for count, a, b in terms:
                total += count * (t[a] - t[b]) / div if div else count * (t[a] - t[b])
            sums.append(total)
        return t, sums

    def _numpy(self, cost: StepCost) -> tuple[Any, list[float]]:
        import numpy as np  # here: a serve command that replays no long loop starts without numpy

        d, p, k, terms = self.arrays or self._arrays()
        t = np.cumsum(np.concatenate(([0.0], k * cost.many(d, p))))  # from 0.0, as the loop starts
        out = []
        for count, a, b, div in terms:
            x = count * (t[a] - t[b])
            if div:
                x /= div
            out.append(float(np.cumsum(np.concatenate(([0.0], x)))[-1]))  # in order (numpy's sum is pairwise)
        return t, out

    def _arrays(self) -> tuple[Any, ...]:
        import numpy as np

        d, p, k = (np.array(x, dtype=np.int64) for x in zip(*self.steps, strict=True))
        sums = []
        for terms, div in self.sums:
            count, a, b = zip(*terms, strict=True) if terms else ((), (), ())
            sums.append((np.array(count, dtype=np.float64), np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), div))
        self.arrays = (d, p, k, sums)
        return self.arrays


def _numpy_loaded() -> bool:
    return "numpy" in sys.modules


def record(loop: Any, ticks: Ticks) -> Plan:
    """The plan of a loop run to its end with `ticks` for its cost and its sums watched."""
    steps = [(d, p, tick.k) for (d, p), tick in zip(ticks.steps, ticks.ticks, strict=True)]
    sums = []
    for log in (loop.ttft_sum, loop.late_sum, loop.tpot_sum):
        divs = {g.div for g in log.terms}
        if len(divs) > 1:
            raise AssertionError(f"a sum divided by several step counts: {sorted(divs)}")
        sums.append(([(g.count, g.a, g.b) for g in log.terms], divs.pop() if divs else 0))
    return Plan(steps, sums, (_index(loop.t), _index(loop.host)), (loop.steps, loop.ttft_n, loop.tpot_n, loop.preempted, loop.refused))


class _Plans:
    """The plans recorded so far, by (Scheduler, simulate's keywords); emptied when they hold more than
    LIMIT steps and terms (about 40 bytes each in numpy, 100 in Python)."""

    LIMIT = 1 << 21

    def __init__(self) -> None:
        self.plans: dict[tuple[Any, ...], Plan] = {}
        self.size = 0
        self.seen: set[tuple[Any, ...]] = set()  # keys asked for once, not recorded

    def first(self, key: tuple[Any, ...]) -> bool:
        """Whether `key` was not asked for before (and remember that it was now)."""
        if key in self.seen or key in self.plans:
            return False
        if len(self.seen) >= 1 << 16:
            self.seen.clear()
        self.seen.add(key)
        return True

    def get(self, key: tuple[Any, ...]) -> Plan | None:
        return self.plans.get(key)

    def add(self, key: tuple[Any, ...], plan: Plan) -> Plan:
        if self.size + plan.size > self.LIMIT:
            self.plans.clear()
            self.size = 0
        self.plans[key] = plan
        self.size += plan.size
        return plan


PLANS = _Plans()


def plan_key(sched: Scheduler, **kw: Any) -> tuple[tuple[Any, ...], bool]:
    """The key of a loop's plan, and whether some rule reads the KV pool's size: admission by room
    (SGLang) that could refuse a request, or a pool the requests in flight could outgrow (admission by
    blocks, preemption: vLLM; serve_admit.pool_rules). Where none does, the plan is the same for every
    pool, and its key names none."""
    tracked, by_room = pool_rules(sched, concurrency=kw["concurrency"], isl=kw["isl"], osl=kw["osl"])
    reads = tracked or by_room
    if not reads and sched.kv_tokens:
        hit = _POOLLESS.get(sched)
        if hit is None:
            if len(_POOLLESS) >= 1024:
                _POOLLESS.clear()
            hit = _POOLLESS[sched] = replace(sched, kv_tokens=0)
        sched = hit
    return (sched, kw["concurrency"], kw["isl"], kw["osl"], kw["prompts"], kw["staggered"], kw["warmup"], kw.get("spread", 1.0)), reads


_POOLLESS: dict[Scheduler, Scheduler] = {}  # a Scheduler -> the same without its pool
