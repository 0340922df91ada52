"""Step-level simulation of a closed-loop benchmark on one attention rank.

The benchmark client (`vllm bench serve --max-concurrency C`, `sglang.bench_serving`,
genai-perf, aiperf) sends C requests at once and sends a new one each time one
ends, until it has sent `prompts` requests. Every request has `isl` prompt tokens
and `osl` output tokens. The engine runs in steps; what a step holds is the
framework's scheduler policy, what it costs is `StepCost` (linear in the step's
decode requests and prompt tokens, its terms taken from cost/serve.py).

Policies (facts read from the frameworks' sources; no code copied):

- decode_first, vLLM V1 (vllm 0.12.0, vllm/v1/core/sched/scheduler.py
  Scheduler.schedule): the running requests are scheduled first, one token
  each for those decoding and the next chunk for a prompt being prefilled;
  the rest of --max-num-batched-tokens goes to waiting requests in arrival
  order, a prompt cut to what is left (chunked prefill is on by default in
  V1), up to --max-num-seqs running requests.
- decode_first without chunking, TensorRT-LLM (1.0, PyTorch backend:
  tensorrt_llm/_torch/pyexecutor/scheduler.py, the capacity scheduler's
  default GUARANTEED_NO_EVICT admits requests up to max_batch_size, the
  micro-batch scheduler fills max_num_tokens with the generation requests
  and whole context requests; chunked context is off unless
  enable_chunked_prefill is set, llmapi/llm_args.py).
- prefill_first, SGLang (0.5.x, python/sglang/srt/managers/scheduler.py
  get_next_batch_to_run: a new prefill batch runs whenever requests wait and
  fit, before any decode step; server_args.py enable_mixed_chunk is False, so
  a prefill step holds no decode tokens; --chunked-prefill-size caps the
  prompt tokens of a step and cuts the last prompt).
- prefill_first with Scheduler.mixed, SGLang --enable-mixed-chunk (0.5.6.post2
  scheduler.py get_new_batch_prefill: with is_mixed_chunk the running batch is
  merged into the prefill batch, mix_with_running): the prefill step also gives
  every running request its token, and its decode tokens count against the
  step's budgets (PrefillAdder mixed_with_decode_tokens = running requests).
  Nothing then holds a wave together: it runs like decode_first.
- Scheduler.prefill_tokens, SGLang --max-prefill-tokens (default 16384,
  server_args.py; PrefillAdder rem_input_tokens, schedule_policy.py
  add_one_req): a waiting prompt joins a step that already holds one only
  while its length is below the cap less the step's decode tokens and the
  prompt tokens already in it; the first prompt of a step is taken whatever
  its length (cut at --chunked-prefill-size as before).

Admission by KV room (Scheduler.kv_tokens > 0), SGLang's PrefillAdder (0.5.x,
python/sglang/srt/managers/schedule_policy.py; constants in
python/sglang/srt/environ.py): a waiting request is admitted only while its
prompt plus its whole output (clipped at SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION,
4096) is below what the pool has left after the tokens the admitted requests
hold and new_token_ratio x the output each of them has still to write (clipped
likewise). The ratio starts at SGLANG_INIT_NEW_TOKEN_RATIO 0.7, falls by
(0.7 - 0.7 x SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600
per decode step down to 0.098, and is back at 0.7 when the engine idles. A
request refused for room marks the running batch full (scheduler.py
get_new_batch_prefill, AddReqResult.NO_TOKEN): no prompt is admitted until a
running request ends. A prompt already being prefilled in chunks goes on. The
retraction SGLang makes when decodes run the pool out (update_running_batch,
retract_decode) is not simulated.

CUDA graphs (TensorRT-LLM 1.0, PyTorch backend): a step replays a captured
graph only when it holds no context request (pyexecutor/scheduler.py
ScheduledRequests.can_run_cuda_graph) and its decode batch is one of the
captured sizes (without padding, the default, another size runs eagerly;
llmapi/llm_args.py CudaGraphConfig). An eager step costs the larger of its
GPU time and the host's time to launch its kernels one by one (StepCost.eager_s).

Overlap scheduler (TensorRT-LLM 1.0, on unless disable_overlap_scheduler,
llmapi/llm_args.py; pyexecutor/py_executor.py _executor_loop_overlap): the
host schedules and launches step n + 1 before it reads step n's tokens and
sends them, so a request sent when its predecessor's last token comes back
joins one step later than without it (Scheduler.overlap). SGLang's does the
same (0.5.x scheduler.py event_loop_overlap, on unless --disable-overlap-schedule:
step n's results are processed after step n + 1 is launched). TPOT is unchanged:
every step still gives each running request a token. An idle engine has no
step to launch: it takes the requests at once, and those that do not fit in
its first step are in its queue for the next.

Serving process (Scheduler.host_token_s > 0, TensorRT-LLM 1.0, data/frameworks/trtllm-1.0.yaml):
each token passes one process on its way to the client, host_token_s each, first come first
served. The client sees its first token and its request's end when that process sends them, and
sends its next request then. A process slower than the engine holds the loop at 1 / host_token_s
tokens/s: the engine holds fewer requests and their wait shows in TTFT (LoopResult.late_s).

A request's first token comes with the step that holds its last prompt token;
each later step that holds it gives one more token. TTFT here is arrival to
the end of that step (the client's own time is added by the caller); TPOT is
(last token - first token) / (osl - 1), averaged over the requests like the
benchmark clients do. Identical requests move together: the state is a few
cohorts (requests that arrived, or got their first token, in the same step),
and runs of steps that only decode are taken in one jump to the next end.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass

from autopar.spec.framework import POLICIES


@dataclass(frozen=True, slots=True, kw_only=True)
class Scheduler:
    """What one engine step may hold."""

    policy: str  # decode_first | prefill_first
    budget: int  # tokens one step takes at most (decode tokens count one each under decode_first)
    chunked: bool  # a prompt may be cut across steps
    max_seqs: int  # requests running (decoding or prefilling) at once
    kv_tokens: int = 0  # KV pool tokens for admission by room (SGLang); 0: no such admission
    ratio_init: float = 0.7  # new_token_ratio at the start and after idling (SGLANG_INIT_NEW_TOKEN_RATIO)
    ratio_min: float = 0.098  # its floor: 0.7 x SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14
    ratio_decay_steps: int = 600  # decode steps from init to floor (SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS)
    clip_new_tokens: int = 4096  # output tokens a reservation counts at most (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION)
    overlap: bool = False  # the host schedules step n + 1 before step n's tokens are out (overlap scheduler)
    mixed: bool = False  # prefill_first: a prefill step also holds every running decode (SGLang --enable-mixed-chunk)
    prefill_tokens: int = 0  # prompt tokens a step admits beyond its first prompt (SGLang --max-prefill-tokens); 0: budget only
    host_token_s: float = 0.0  # serving process seconds per streamed token, in step order (0: it keeps up)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """Seconds of a step with `d` decode requests and `p` prompt tokens: fixed + d x per_decode + p x per_token,
    at least d x host_per_decode (the host's walk over the running requests, which the overlap
    scheduler runs beside the GPU's step: SGLang).

    With `eager_s` set, a step that cannot replay a captured CUDA graph (one holding a prompt, or a
    decode batch whose size is not in `graph_sizes`) takes at least `eager_s`: the host launching
    every kernel of the step one by one, which the GPU's own time hides only when it is longer."""

    fixed: float  # weight read, per-layer collectives' latency, host overhead: paid by every step
    per_decode: float  # one decode request's KV read and compute
    per_token: float  # one prompt token (its compute beyond the shared weight read)
    eager_s: float = 0.0  # host time of a step run without a CUDA graph (0: every step is as fast as its GPU work)
    graph_sizes: frozenset[int] = frozenset()  # decode-only batch sizes with a captured graph
    host_per_decode: float = 0.0  # host seconds per running request a step that the GPU hides up to its own time

    def __call__(self, d: int, p: int) -> float:
        gpu = self.fixed + d * self.per_decode + p * self.per_token
        if self.host_per_decode > 0:
            gpu = max(gpu, d * self.host_per_decode)
        if self.eager_s > 0 and (p > 0 or d not in self.graph_sizes):
            return max(gpu, self.eager_s)
        return gpu


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopResult:
    """Means over the run's requests."""

    ttft_s: float  # arrival to the end of the step with the first token
    tpot_s: float  # (last token - first token) / (osl - 1)
    seconds: float  # the run's length (first arrival to last token)
    steps: int  # engine steps run
    late_s: float = 0.0  # part of ttft_s: the first token's wait in the serving process (Scheduler.host_token_s)


def simulate(cost: StepCost, sched: Scheduler, *, concurrency: int, isl: int, osl: int, prompts: int,
             staggered: bool = False, warmup: int = 0) -> LoopResult:
    """Run the closed loop until `prompts` requests have ended; means over those requests.

    The run starts as the clients start it, all `concurrency` requests arriving
    together, or with `staggered` as a loop already in its steady state: the
    requests in flight are decoding, their progress spread evenly over the
    output length, and only the requests sent after the start are counted."""
    if sched.policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {sched.policy!r}")
    conc, cap, last = max(1, concurrency), max(1, sched.max_seqs), max(1, osl - 1)
    waiting: list[list[float]] = []  # [count, arrival, first step it may join]
    prefilling: list[list[float]] = []  # [count, arrival, prompt tokens done]
    # decoding, oldest first: [count, first-token time, decode steps run before its first token]; a request
    # gives a token in every step that holds decodes (all running ones are in it), so the oldest ends first
    decoding: deque[list[float]] = deque()
    if staggered:
        for i in range(min(conc, last)):  # request i ends after (i + 1) (osl - 1) / conc more decode steps
            here = (conc * (i + 1)) // last - (conc * i) // last if conc >= last else 1
            ahead = (i + 1) * last // min(conc, last)
            decoding.append([here, math.nan, ahead - last])
        sent = 0
    else:
        waiting.append([conc, 0.0, 0])
        sent = conc
    n_dec = int(sum(c[0] for c in decoding))
    start_sum = sum(c[0] * c[2] for c in decoding)
    n_pre = 0
    ended, t, steps, dsteps = 0, 0.0, 0, 0
    ttft_sum = tpot_sum = late_sum = 0.0
    firsts_all = ttft_n = tpot_n = 0
    # admission by room: the ratio (a loop already in its steady state has decayed it to the floor) and
    # whether a refusal holds the batch full until a request ends
    ratio, full = (sched.ratio_min if staggered else sched.ratio_init), False
    host = 0.0  # when the serving process has sent every token of the steps run so far
    paced = sched.host_token_s > 0  # the serving process may fall behind (else it sends a step's tokens at its end)
    by_room = sched.kv_tokens > 0  # admission by KV room, which alone reads the ratio
    waves = sched.policy == "prefill_first" and not sched.mixed  # a step with prompt tokens holds no decodes
    lag = 1 if sched.overlap else 0  # steps between a request reaching the scheduler and the step it joins
    pending: deque[list[float]] = deque()  # sent after `t` (the process was behind): [count, arrival]
    while ended < prompts:
        # waiting is in arrival order, and so in order of the step each cohort may join: the ready ones lead
        cut = bisect_right(waiting, float(steps), key=_joins) if waiting else 0
        ready, later = waiting[:cut], waiting[cut:]
        if not ready and not decoding and not prefilling:  # an idle engine takes them as they come
            if not later and pending:  # it waits for the first one the process sends
                t = max(t, pending[0][1])
                while pending and pending[0][1] <= t:
                    later.append([pending[0][0], pending.popleft()[1], steps])
            ready, later = [[count, arrival, steps] for count, arrival, _ in later], []  # all have reached it
            ratio = sched.ratio_init
        slots = cap - n_dec - n_pre
        if by_room and ready:
            room = 0 if full else admissible(sched, decoding, n_dec=n_dec, n_pre=n_pre, isl=isl, osl=osl,
                                             ratio=ratio, dsteps=dsteps, start_sum=start_sum)
            if room < slots and room < sum(w[0] for w in ready):  # the sum only when room is short
                full = True
            slots = min(slots, room)
        has_prompts = prefilling or (ready and slots > 0)  # the step may hold prompt tokens
        d = 0 if waves and has_prompts else n_dec
        if has_prompts:
            inputs = sched.prefill_tokens - d if sched.prefill_tokens > 0 else None
            items, p, prefilling, ready = _plan(sched, prefilling, ready, isl=isl, room=max(0, sched.budget - d),
                                                slots=slots, inputs=inputs)
        else:  # no prompt to run: a decode-only step (what _plan returns then)
            items, p = [], 0
        waiting = ready + later
        if p == 0:  # only decodes until the oldest cohort ends (or a request becomes ready): one jump
            if not decoding:
                raise RuntimeError("closed loop stalled: no request can run")
            k = max(1, int(decoding[0][2]) + last - dsteps)
            k = min(k, max(1, int(later[0][2] if later else steps + k) - steps))
            c = cost(d, 0)
            if pending and c > 0:  # stop at the step during which the next one is sent
                k = min(k, max(1, int((pending[0][1] - t) / c) + 1))
            host = _sent(sched, host, t, c, d, k)
            t, steps, dsteps = t + k * c, steps + k, dsteps + k
            ratio = _decayed(sched, ratio, k) if by_room else ratio
        else:
            c = cost(d, p)
            # the step's tokens: its decodes and its first tokens (counted only for a process that may lag)
            tokens = d + sum(count for count, _, done in items if done >= isl) if paced else d
            host = _sent(sched, host, t, c, tokens, 1)
            t, steps = t + c, steps + 1
            dsteps += 1 if d else 0
            ratio = _decayed(sched, ratio, 1) if d and by_room else ratio
        firsts = 0
        for count, arrival, done in items:
            if done >= isl:
                firsts += count
                if firsts_all >= warmup:
                    ttft_sum += count * (host - arrival)
                    late_sum += count * (host - t)
                    ttft_n += count
                firsts_all += count
            else:
                prefilling.append([count, arrival, done])
        n_pre = int(sum(c[0] for c in prefilling)) if prefilling else 0
        n = 0
        while decoding and decoding[0][2] + last <= dsteps:  # its osl - 1 decode steps are done
            size, first, start = decoding.popleft()
            start_sum -= size * start
            if not math.isnan(first):
                if ended >= warmup:
                    tpot_sum += size * (host - first) / last
                    tpot_n += int(size)
                ended += int(size)
            n += int(size)
        n_dec -= n
        full = full and not n  # a request that ends frees the batch
        if firsts:
            if osl <= 1:
                tpot_n += firsts if ended >= warmup else 0
                ended += firsts
                n += firsts
            else:
                decoding.append([firsts, host, dsteps])
                n_dec += firsts
                start_sum += firsts * dsteps
        while pending and pending[0][1] < t:  # sent during the step just run: joins the next but `lag`
            waiting.append([pending[0][0], pending.popleft()[1], steps + lag])
        new = min(n, prompts - sent) if not staggered else n
        if new:  # the client's new request reaches the scheduler during the next step and joins the one after
            if host > t:  # the client sees the end when the process sends it
                pending.append([new, host])
            else:
                waiting.append([new, t, steps + 1 + lag])
            sent += new
    return LoopResult(ttft_s=ttft_sum / max(1, ttft_n), tpot_s=tpot_sum / max(1, tpot_n), seconds=max(t, host),
                      steps=steps, late_s=late_sum / max(1, ttft_n))


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


def admissible(sched: Scheduler, decoding: deque[list[float]], *, n_dec: int, n_pre: int, isl: int, osl: int,
               ratio: float, dsteps: int, start_sum: float | None = None) -> int:
    """Waiting requests the KV pool admits now (SGLang PrefillAdder.add_one_req): the j-th (from 0) is
    admitted while (j + 1) x (isl + clipped osl) < pool - held - ratio x the clipped output still to come.

    A decoding cohort [count, first-token time, start] joined the decodes at decode step `start`: each
    of its requests has written 1 + dsteps - start tokens, holds its prompt and those, and has the rest
    of osl to come. A prompt being prefilled holds its whole prompt and has all its output to come.
    `n_dec` requests decode; `start_sum` (count x start summed over the cohorts) saves the walk over
    them when no reservation is clipped. An engine with nothing running admits one, whatever its size (SGLang checks a request's
    length against the pool when it arrives)."""
    clip = sched.clip_new_tokens
    if start_sum is not None and osl <= clip:
        written = n_dec * (1 + dsteps) - start_sum
        held, reserve = n_dec * isl + written, n_dec * osl - written
    else:
        held = reserve = 0.0
        for count, _, start in decoding:
            done = 1 + dsteps - start
            held += count * (isl + done)
            reserve += count * min(osl - done, clip)
    held += n_pre * isl
    reserve += n_pre * min(osl, clip)
    rem = sched.kv_tokens - held - ratio * reserve
    need = isl + min(osl, clip)
    if not decoding and not n_pre:
        return max(1, math.ceil(rem / need) - 1)
    return max(0, math.ceil(rem / need) - 1) if rem > 0 else 0


def _decayed(sched: Scheduler, ratio: float, steps: int) -> float:
    """new_token_ratio after `steps` more decode steps: a fixed fall per step, from init to the floor."""
    return max(sched.ratio_min, ratio - steps * (sched.ratio_init - sched.ratio_min) / sched.ratio_decay_steps)


def _joins(cohort: list[float]) -> float:
    """The step a waiting cohort [count, arrival, step it may join] may join."""
    return cohort[2]


def _plan(sched: Scheduler, prefilling: list[list[float]], waiting: list[list[float]], *, isl: int, room: int,
          slots: int, inputs: int | None = None) -> tuple[list[tuple[int, float, int]], int, list[list[float]],
                                                          list[list[float]]]:
    """The prompt tokens of one step: prompts being prefilled first, then waiting ones in arrival order.

    `inputs` (SGLang's rem_input_tokens, None: no such cap) is what the step may still admit of new
    prompts: a waiting prompt joins a step that holds others only while its length is below it.
    Returns the step's items (count, arrival, prompt tokens done after the step), its prompt tokens, and
    what is left prefilling (not in this step) and waiting."""
    items: list[tuple[int, float, int]] = []
    tokens = 0
    left_pre: list[list[float]] = []
    for i, (count, arrival, done) in enumerate(prefilling):
        full, part, room = _take(sched, int(count), isl - int(done), room, first=not items)
        if full:
            items.append((full, arrival, isl))
        if part:
            items.append((1, arrival, int(done) + part))
        tokens += full * (isl - int(done)) + part
        rest = int(count) - full - (1 if part else 0)
        if rest:  # the budget is spent: the others wait their turn
            left_pre += [[rest, arrival, done], *prefilling[i + 1:]]
            return items, tokens, left_pre, waiting
    if inputs is not None:
        inputs -= tokens
    left_wait: list[list[float]] = []
    for i, (count, arrival, ready) in enumerate(waiting):
        can = min(int(count), max(0, slots))
        if inputs is None:
            full, part, room = _take(sched, can, isl, room, first=not items)
        else:
            full, part, room = _take_capped(sched, can, isl, room, inputs=inputs, first=not items)
            inputs -= full * isl + part
        if full:
            items.append((full, arrival, isl))
        if part:
            items.append((1, arrival, part))
        tokens += full * isl + part
        taken = full + (1 if part else 0)
        slots -= taken
        if int(count) > taken:  # budget or slots spent: the later arrivals wait behind this one
            left_wait += [[int(count) - taken, arrival, ready], *waiting[i + 1:]]
            break
    return items, tokens, left_pre, left_wait


def _take_capped(sched: Scheduler, count: int, need: int, room: int, *, inputs: int,
                 first: bool) -> tuple[int, int, int]:
    """As `_take`, under SGLang's PrefillAdder.add_one_req input cap: a prompt joins a step that holds
    others only while `need` is below the input tokens left (`inputs`), the first prompt of a step
    whatever its length. Of the j-th prompt (from 0) the test is (j + 1) x need < inputs, so
    ceil(inputs / need) - 1 of them pass, at least the first one."""
    passing = max(0, math.ceil(inputs / need) - 1) if inputs > 0 else 0
    if first:
        passing = max(1, passing)
    full, part, room = _take(sched, min(count, passing), need, room, first=first)
    return full, part, room


def _take(sched: Scheduler, count: int, need: int, room: int, *, first: bool) -> tuple[int, int, int]:
    """(whole prompts, tokens of one cut prompt, room left) of `count` prompts needing `need` tokens each."""
    if count <= 0 or room <= 0:
        return 0, 0, room
    full = min(count, room // need)
    room -= full * need
    if full < count and room > 0 and sched.chunked:
        return full, room, 0
    if full == 0 and first and not sched.chunked:  # a prompt over the whole budget runs alone in its step
        return 1, 0, 0
    return full, 0, room
