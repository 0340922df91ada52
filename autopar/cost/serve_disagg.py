"""The closed loop of a disaggregated deployment: which pool sets the rate.

A closed-loop client keeps C requests in flight (`vllm bench serve
--max-concurrency`, genai-perf, aiperf). Each request passes through

- the prefill pool: S servers (prefill engines x their attention-DP ranks);
  a prompt takes s seconds on one alone and waits when all are busy. A server
  batches: one step takes the waiting prompts up to its token budget, B =
  budget // isl of them (at least 1) in s_B seconds (the engine's
  max_num_batched_tokens / chunked prefill size: vLLM V1 schedules waiting
  prompts into a step until --max-num-batched-tokens, SGLang's PrefillAdder
  until --chunked-prefill-size, TensorRT-LLM's micro-batch scheduler until
  max_num_tokens), so a busy pool serves a prompt every s_B / B seconds;
- a fixed time a: the per-request overhead and the KV-cache transfer;
- the decode pool: R attention ranks, each running b requests in one batch; a
  request stays for osl steps of t(b) seconds (the step that takes it in,
  then osl - 1 inter-token steps).

In steady state the decode pool completes X = R b / (osl t(b)) requests per
second (Little's law on the decode pool), the prefill pool is busy
rho = X s_e / S with s_e = s_B / B the prefill time a prompt costs a busy
server, and the loop holds N(b) = X (a + s + W) + R b requests (Little's law on
the whole loop), where W is the mean prefill queue, the M/D/1 wait
rho s_e / (2 (1 - rho)) (prompts of one length, DistServe, Zhong et al. 2024,
sec. 4.1, at the batched cost a prompt: a batch step's time is linear in its
prompts, so the work ahead of a prompt is what it would be one prompt a step at
s_e; prompts that are compute-bound cost s_e = s and do not move). N grows with b (a bigger decode batch completes more requests per
second and sends more to the prefill queue), so exactly one b gives N(b) = C.
Which pool sets the rate follows:

- decode-paced: the prefill pool keeps up (rho small), nearly every request is
  decoding and b is close to C / R;
- prefill-paced: X nears S / s; the decode batch is only what that rate fills,
  b = X osl t(b) / R, and the rest of the C requests wait in the prefill queue
  (TTFT grows and TPOT falls as C grows);
- decode KV cache full: b would pass what the cache holds, so b stops at that
  and the surplus waits for a slot (the caller adds that wait); likewise at the
  decode engine's max batch per rank (--max-num-seqs, --max-running-requests).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from autopar.cost.serve import StepTime

# The prefill pool this busy sets the loop's rate: its M/D/1 wait, rho s / (2 (1 - rho)), is 9.5
# prompts' prefill at 0.95, so the queue, not the engines, makes TTFT (queue-saturated).
RHO_SATURATED = 0.95
# Solving the loop. A decode step costs about 0.1 ms to price and a serving sweep prices
# thousands of deployments, so the step is priced at a few batch sizes only. Within a regime the
# step time is linear in the batch, t(b) = t0 + k b (the weights once, the KV per request); on
# such a line the decode pool at rate X holds b(X) = X osl t0 / (R - X osl k) (Little's law with
# t(b) in it, solved for b), and N(X) = X (a + s + W(X)) + R b(X) grows with X, so C = N(X) is
# solved by bisection on X (HALVINGS, in arithmetic only). X rather than b is the unknown because
# near rho = 1 the queue W(X) is steep in X but needs no step at all. The line first runs through
# the step at a near-empty batch (EMPTY requests per rank) and at the largest one; the step is priced at the solution, and
# while that is off the line by more than TOLERANCE (MoE layers touch more experts as b grows;
# past the roofline the compute grows faster), the line is redrawn through the two priced points
# nearest the solution (a secant), at most ROUNDS times.
EMPTY, HALVINGS, TOLERANCE, ROUNDS = 1e-6, 40, 1e-3, 4


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggLoop:
    """The pools of one disaggregated deployment under a closed loop."""

    service_s: float  # s: one prompt's prefill on one prefill server
    servers: int  # S: prefill engines x their attention-DP ranks
    ahead_s: float  # a: per-request overhead plus the KV-cache transfer
    ranks: int  # R: decode engines x their attention-DP ranks
    osl: int  # decode steps a request spends in its decode batch
    batch: int = 1  # B: prompts one prefill step takes at most (token budget // isl, at least 1)
    batch_s: float = 0.0  # s_B: seconds of a prefill step of B prompts (0: B x service_s)

    @property
    def step_s(self) -> float:
        """s_B, the prefill step of a full batch."""
        return self.batch_s if self.batch_s > 0 else self.batch * self.service_s

    def _rho_at(self, x: float) -> float:
        """How busy the prefill pool is at x requests per second, batching B prompts a step."""
        return x * self.step_s / (self.batch * self.servers)

    def _wait_at(self, x: float) -> float:
        """Mean prefill queue at x requests per second, M/D/1 at s_B / B a prompt; unbounded at rho >= 1."""
        rho = self._rho_at(x)
        return math.inf if rho >= 1 else rho * self.step_s / self.batch / (2 * (1 - rho))

    def rate(self, b: float, t: float) -> float:
        """X: requests per second the decode pool completes at b requests per rank and steps of t seconds."""
        return self.ranks * b / (self.osl * t)

    def rho(self, b: float, t: float) -> float:
        """How busy the prefill pool is at that rate."""
        return self._rho_at(self.rate(b, t))

    def wait(self, b: float, t: float) -> float:
        """Mean prefill queue, M/D/1 at the batched cost a prompt; unbounded at rho >= 1."""
        return self._wait_at(self.rate(b, t))

    def population(self, b: float, t: float) -> float:
        """N: requests the loop holds, at the prefill pool (queued and in service), ahead and decoding."""
        return self.rate(b, t) * (self.ahead_s + self.service_s + self.wait(b, t)) + self.ranks * b

    def solve(self, step_at: Callable[[float], StepTime], *, concurrency: float, most: float, empty: StepTime) -> tuple[float, StepTime]:
        """The decode batch per rank b (at most `most`, what the KV cache holds or C / R) with N(b) = C,
        and the decode step at b. When the KV cache stops b, b = most and the rest wait for a slot:
        the caller's queue is C / X - (a + s + osl t) (Little's law), the M/D/1 wait at the root plus
        the wait for a KV slot. `empty`: the step at EMPTY requests per rank (the caller may reuse it)."""
        top = (most, step_at(most))
        if self.population(most, top[1].total) <= concurrency:
            return top
        priced = [(min(EMPTY, most / 2), empty), top]
        p, q = priced
        for _ in range(ROUNDS):
            b = self._on_line(p, q, concurrency=concurrency, most=most)
            new = (b, step_at(b))
            line = p[1].total + (q[1].total - p[1].total) * (b - p[0]) / (q[0] - p[0])
            if abs(new[1].total - line) <= TOLERANCE * new[1].total or b in (p[0], q[0]):
                break
            priced.append(new)
            p, q = sorted(priced, key=lambda pt: abs(math.log(pt[0] / b)))[:2]
            if p[0] == q[0]:
                break
        return new

    def _on_line(self, p: tuple[float, StepTime], q: tuple[float, StepTime], *, concurrency: float, most: float) -> float:
        """b at N = C with the step time on the line through the priced points p and q."""
        (b1, s1), (b2, s2) = p, q
        k = (s2.total - s1.total) / (b2 - b1) if b2 != b1 else 0.0
        t0 = max(s1.total - k * b1, 1e-12)
        per = self.osl / self.ranks  # b(X) = X per t(b)

        def batch(x: float) -> float:
            return x * per * t0 / (1 - x * per * k) if x * per * k < 1 else math.inf

        top = self.batch * self.servers / self.step_s  # the prefill pool's rate (rho = 1)
        if k > 0:
            top = min(top, 1 / (per * k))
        lo, hi = 0.0, top
        for _ in range(HALVINGS):
            x = (lo + hi) / 2
            b = batch(x)
            wait = self._wait_at(x)
            if b > most or x * (self.ahead_s + self.service_s + wait) + self.ranks * b > concurrency:
                hi = x
            else:
                lo = x
        return min(batch(lo), most)
