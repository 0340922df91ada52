"""What one serving engine step costs (StepCost), what a closed-loop run measures (LoopResult), and
when the serving process has sent a step's tokens (_sent). The loop that uses them is
cost/serve_sim.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autopar.cost.serve_admit import Scheduler


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """Seconds of a step with `d` decode requests and `p` prompt tokens: fixed + d x per_decode + p x per_token,
    at least d x host_per_decode (the host's walk over the running requests, which the overlap
    scheduler runs beside the GPU's step: SGLang), or that walk added to it when `host_serial` (no
    overlap scheduler: SGLang's event_loop_normal runs the batch, then processes its result).

    With `eager_s` set, a step that cannot replay a captured CUDA graph (one holding a prompt, or a
    decode batch whose size is not in `graph_sizes`) takes at least `eager_s`: the host launching
    every kernel of the step one by one, which the GPU's own time hides only when it is longer."""

    fixed: float  # weight read, per-layer collectives' latency, host overhead: paid by every step
    per_decode: float  # one decode request's KV read and compute
    per_token: float  # one prompt token (its compute beyond the shared weight read)
    eager_s: float = 0.0  # host time of a step run without a CUDA graph (0: every step is as fast as its GPU work)
    graph_sizes: frozenset[int] = frozenset()  # decode-only batch sizes with a captured graph
    host_per_decode: float = 0.0  # host seconds per running request a step that the GPU hides up to its own time
    host_serial: bool = False  # no overlap scheduler: the host's walk follows the GPU's step instead of running beside it

    def __call__(self, d: int, p: int) -> float:
        gpu = self.fixed + d * self.per_decode + p * self.per_token
        if self.host_per_decode > 0:
            gpu = gpu + d * self.host_per_decode if self.host_serial else max(gpu, d * self.host_per_decode)
        if self.eager_s > 0 and (p > 0 or d not in self.graph_sizes):
            return max(gpu, self.eager_s)
        return gpu

    def many(self, d: Any, p: Any) -> Any:
        """The cost of each step of numpy integer arrays `d` and `p`: the same float operations as
        `__call__`, in the same order, so each equals its call bit for bit (cost/serve_replay.py)."""
        import numpy as np  # here, as in cost/serve_replay.py

        gpu = self.fixed + d * self.per_decode + p * self.per_token
        if self.host_per_decode > 0:
            gpu = gpu + d * self.host_per_decode if self.host_serial else np.maximum(gpu, d * self.host_per_decode)
        if self.eager_s > 0:
            eager = (p > 0) | ~np.isin(d, sorted(self.graph_sizes))
            gpu = np.where(eager, np.maximum(gpu, self.eager_s), gpu)
        return gpu


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopResult:
    """Means over the run's requests."""

    ttft_s: float  # arrival to the end of the step with the first token
    tpot_s: float  # (last token - first token) / (osl - 1)
    seconds: float  # the run's length (first arrival to last token)
    steps: int  # engine steps run
    late_s: float = 0.0  # part of ttft_s: the first token's wait in the serving process (Scheduler.host_token_s)
    preempted: int = 0  # requests preempted (their KV freed, recomputed later) over the run
    refused: int = 0  # steps whose waiting requests the KV pool refused (admission by room or blocks)


def _sent(sched: Scheduler, host: float, t: float, c: float, tokens: int, k: int) -> float:
    """When the serving process has sent the tokens of `k` more steps, each `c` seconds from `t` and
    giving `tokens` tokens, taking them in step order at `host_token_s` each from `host` on: a
    first-come first-served queue (each step's tokens wait for the step and for those before them)."""
    a = sched.host_token_s * tokens
    if a <= 0:
        return t + k * c
    if c >= a:
        return max(host + k * a, t + k * c + a)
    return max(host, t + c) + k * a
