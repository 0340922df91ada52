"""The closed loop of a disaggregated deployment: which pool sets the rate.

A closed-loop client keeps C requests in flight (`vllm bench serve
--max-concurrency`, genai-perf, aiperf). Each request passes through

- the prefill pool: S servers (prefill engines x their attention-DP ranks);
  a prompt takes s seconds on one and waits when all are busy;
- a fixed time a: the per-request overhead and the KV-cache transfer;
- the decode pool: R attention ranks, each running b requests in one batch; a
  request stays for osl steps of t(b) seconds (the step that takes it in,
  then osl - 1 inter-token steps).

In steady state the decode pool completes X = R b / (osl t(b)) requests per
second (Little's law on the decode pool), the prefill pool is busy
rho = X s / S, and the loop holds N(b) = X (a + s + W) + R b requests (Little's
law on the whole loop), where W is the mean prefill queue, the M/D/1 wait
rho s / (2 (1 - rho)) (prompts of one length, DistServe, Zhong et al. 2024,
sec. 4.1). N grows with b (a bigger decode batch completes more requests per
second and sends more to the prefill queue), so exactly one b gives N(b) = C.
Which pool sets the rate follows:

- decode-paced: the prefill pool keeps up (rho small), nearly every request is
  decoding and b is close to C / R;
- prefill-paced: X nears S / s; the decode batch is only what that rate fills,
  b = X osl t(b) / R, and the rest of the C requests wait in the prefill queue
  (TTFT grows and TPOT falls as C grows);
- decode KV cache full: b would pass what the cache holds, so b stops at that
  and the surplus waits for a slot (the caller adds that wait).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from autopar.cost.serve import StepTime

RHO_SATURATED = 0.99  # prefill pool this busy: the queue, not the model, sets TTFT
# The decode batch is searched between most x 2^-20 and most by halving its range on a log scale:
# 16 halvings of a range of 2^20 leave b within 20 ln 2 / 2^16 = 0.02% of itself.
SPAN, BISECTIONS = 2.0**-20, 16


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggLoop:
    """The pools of one disaggregated deployment under a closed loop."""

    service_s: float  # s: one prompt's prefill on one prefill server
    servers: int  # S: prefill engines x their attention-DP ranks
    ahead_s: float  # a: per-request overhead plus the KV-cache transfer
    ranks: int  # R: decode engines x their attention-DP ranks
    osl: int  # decode steps a request spends in its decode batch

    def rate(self, b: float, t: float) -> float:
        """X: requests per second the decode pool completes at b requests per rank and steps of t seconds."""
        return self.ranks * b / (self.osl * t)

    def rho(self, b: float, t: float) -> float:
        """How busy the prefill pool is at that rate."""
        return self.rate(b, t) * self.service_s / self.servers

    def wait(self, b: float, t: float) -> float:
        """Mean prefill queue, M/D/1; unbounded at rho >= 1."""
        rho = self.rho(b, t)
        return math.inf if rho >= 1 else rho * self.service_s / (2 * (1 - rho))

    def population(self, b: float, t: float) -> float:
        """N: requests the loop holds, at the prefill pool (queued and in service), ahead and decoding."""
        return self.rate(b, t) * (self.ahead_s + self.service_s + self.wait(b, t)) + self.ranks * b

    def solve(self, step_at: Callable[[float], StepTime], *, concurrency: float,
              most: float) -> tuple[float, StepTime]:
        """The decode batch per rank b (at most `most`, what the KV cache holds or C / R) with N(b) = C,
        from below, and the decode step at b. N(most) <= C only when the KV cache stops b: then b = most.
        The requests N(b) leaves out wait before their decode: C / X - (a + s + osl t) (Little's law),
        which is the M/D/1 wait at the root and adds the wait for a KV slot when the cache is full."""
        top = step_at(most)
        if self.population(most, top.total) <= concurrency:
            return most, top
        lo, hi = most * SPAN, most
        for _ in range(BISECTIONS):
            mid = math.sqrt(lo * hi)
            if self.population(mid, step_at(mid).total) > concurrency:
                hi = mid
            else:
                lo = mid
        return lo, step_at(lo)  # N(lo) <= C: the caller's queue takes the last of the surplus
