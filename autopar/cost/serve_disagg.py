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
# How the halvings skip their float test of N(X) > C (DisaggLoop._on_line): Newton steps at most to
# find its root, and the relative distance from it at which the test is checked on either side.
NEWTON, CERTIFIED = 60, 2e-12


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
        """b at N = C with the step time on the line through the priced points p and q: HALVINGS halvings
        of X, each deciding whether N(X) > C (or b(X) > most) by the float operations of batch(x) (b(X) on
        the line), _wait_at(x) and population's sum, in their order (`over`), as written out before
        (tests/unit/cost/test_serve_disagg.py holds it to them). `over` is non-decreasing in x (each of its
        operations is, correctly rounded, with k >= 0 and the times >= 0), so a halving at or below an x
        where it is False, or at or above one where it is True, is decided without it: the two are found
        next to the root (`_root`, Newton's method on the same N), and only the halvings between them,
        the last few, run it. Where either is not where the root says, its side runs `over` as before."""
        (b1, s1), (b2, s2) = p, q
        k = (s2.total - s1.total) / (b2 - b1) if b2 != b1 else 0.0
        t0 = max(s1.total - k * b1, 1e-12)
        per = self.osl / self.ranks  # b(X) = X per t(b)

        def batch(x: float) -> float:
            return x * per * t0 / (1 - x * per * k) if x * per * k < 1 else math.inf

        step_s, prompts, ranks = self.step_s, self.batch, self.ranks
        busy = prompts * self.servers  # rho = x s_B / (B S), as _rho_at
        fixed = self.ahead_s + self.service_s  # population's a + s, added first

        def over(x: float) -> bool:
            xp = x * per
            if not xp * k < 1:  # batch(x) unbounded
                return True
            b = xp * t0 / (1 - xp * k)
            rho = x * step_s / busy
            return b > most or rho >= 1 or x * (fixed + rho * step_s / prompts / (2 * (1 - rho))) + ranks * b > concurrency

        top = busy / step_s  # the prefill pool's rate (rho = 1)
        if k > 0:
            top = min(top, 1 / (per * k))
        under, past = -1.0, math.inf  # over(under) is False, over(past) True
        if k >= 0 and fixed >= 0 and step_s > 0 and concurrency > 0:
            root = self._root(k=k, t0=t0, fixed=fixed, concurrency=concurrency, most=most, top=top)
            gap = root * CERTIFIED
            if not over(root - gap):
                under = root - gap
            if over(root + gap):
                past = root + gap
        lo, hi = 0.0, top
        for _ in range(HALVINGS):
            x = (lo + hi) / 2
            if x <= under:
                lo = x
            elif x >= past or over(x):
                hi = x
            else:
                lo = x
        return min(batch(lo), most)

    def _root(self, *, k: float, t0: float, fixed: float, concurrency: float, most: float, top: float) -> float:
        """About where N(X) passes C on the line t(b) = t0 + k b, or b(X) passes `most`, below `top`:
        N(X) - C is convex and rising on [0, top) (each term is), so Newton's method, held inside the
        bracket it narrows (halving where a step leaves it), converges on its root."""
        per, rate_per = self.osl / self.ranks, self.step_s / (self.batch * self.servers)
        each = self.step_s / self.batch
        ranks = self.ranks

        def slope_at(x: float) -> tuple[float, float]:
            """(N(X) - C, its slope) at x; (inf, 1) at or past a pole."""
            xp, rho = x * per, x * rate_per
            rest, idle = 1 - xp * k, 1 - rho
            if rest <= 0 or idle <= 0:
                return math.inf, 1.0
            wait = rho * each / (2 * idle)
            gx = x * (fixed + wait) + ranks * xp * t0 / rest - concurrency
            return gx, fixed + wait + x * each * rate_per / (2 * idle * idle) + ranks * per * t0 / (rest * rest)

        end = min(top, most / (per * (t0 + most * k)))  # b(X) = most there
        if end < top and slope_at(end)[0] <= 0:
            return end  # the batch reaches `most` first
        lo, hi, x = 0.0, end, 0.0  # the first step is the tangent at 0, past the root (convex)
        for _ in range(NEWTON):
            gx, slope = slope_at(x)
            if gx > 0:
                hi = x
            else:
                lo = x
            nx = x - gx / slope
            if not lo < nx < hi:
                nx = (lo + hi) / 2
            if abs(nx - x) <= 1e-8 * x or hi - lo <= 1e-13 * hi:
                return nx
            x = nx
        return x
