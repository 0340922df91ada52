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
running sum (numpy's cumsum adds in order, unlike its sum), then each mean's terms in order. The
results are the loop's bit for bit (tests/unit/cost/test_serve_sim_frozen.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from autopar.cost.serve_admit import Scheduler
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


@dataclass(frozen=True, slots=True)
class Plan:
    """A recorded run: each step's (d, p, k), each sum's terms (count, a, b, divisor: count x (t[a] -
    t[b]) / divisor), and what does not depend on the cost."""

    steps: Any  # int64 arrays d, p, k
    sums: tuple[Any, ...]  # ttft, late, tpot: (count float64, a int64, b int64, divisor or 0)
    ends: tuple[int, int]  # the indices of the run's last t and host
    counts: tuple[int, int, int, int, int]  # steps, ttft_n, tpot_n, preempted, refused
    size: int  # steps and terms held

    def replay(self, cost: StepCost) -> LoopResult:
        """The LoopResult of the recorded run under `cost`."""
        import numpy as np  # here: a serve command that replays no loop starts without numpy

        d, p, k = self.steps
        t = np.cumsum(np.concatenate(([0.0], k * cost.many(d, p))))  # from 0.0, as the loop starts
        sums = []
        for count, a, b, div in self.sums:
            terms = count * (t[a] - t[b])
            if div:
                terms /= div
            sums.append(float(np.cumsum(np.concatenate(([0.0], terms)))[-1]))
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


def record(loop: Any, ticks: Ticks) -> Plan:
    """The plan of a loop run to its end with `ticks` for its cost and its sums watched."""
    import numpy as np

    n = len(ticks.steps)
    dp = np.array(ticks.steps, dtype=np.int64).reshape(n, 2)
    k = np.fromiter((tick.k for tick in ticks.ticks), dtype=np.int64, count=n)
    sums = []
    for log in (loop.ttft_sum, loop.late_sum, loop.tpot_sum):
        terms = log.terms
        divs = {g.div for g in terms}
        if len(divs) > 1:
            raise AssertionError(f"a sum divided by several step counts: {sorted(divs)}")
        count = np.fromiter((g.count for g in terms), dtype=np.float64, count=len(terms))
        a = np.fromiter((g.a for g in terms), dtype=np.int64, count=len(terms))
        b = np.fromiter((g.b for g in terms), dtype=np.int64, count=len(terms))
        sums.append((count, a, b, divs.pop() if divs else 0))
    ends = (_index(loop.t), _index(loop.host))
    counts = (loop.steps, loop.ttft_n, loop.tpot_n, loop.preempted, loop.refused)
    size = n + sum(len(s[0]) for s in sums)
    return Plan(steps=(dp[:, 0], dp[:, 1], k), sums=tuple(sums), ends=ends, counts=counts, size=size)


class _Plans:
    """The plans recorded so far, by (Scheduler, simulate's keywords); emptied when they hold more than
    LIMIT steps and terms (about 30 bytes each)."""

    LIMIT = 1 << 22

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
    (SGLang), or a pool the requests in flight could outgrow (admission by blocks, preemption: vLLM).
    Where none does, the plan is the same for every pool, and its key names none."""
    conc = max(1, kw["concurrency"])
    reads = sched.kv_tokens > 0 and (sched.admission == "room" or sched.kv_tokens < conc * (kw["isl"] + kw["osl"]))
    if not reads and sched.kv_tokens:
        hit = _POOLLESS.get(sched)
        if hit is None:
            if len(_POOLLESS) >= 1024:
                _POOLLESS.clear()
            hit = _POOLLESS[sched] = replace(sched, kv_tokens=0)
        sched = hit
    return (sched, kw["concurrency"], kw["isl"], kw["osl"], kw["prompts"], kw["staggered"], kw["warmup"]), reads


_POOLLESS: dict[Scheduler, Scheduler] = {}  # a Scheduler -> the same without its pool
