"""What one serving engine step may hold and take: the scheduler's limits (Scheduler), admission by
KV room (SGLang) or by blocks (vLLM V1), preemption and resumption, and the plan of a step's prompt
tokens. The loop that runs them, and the mechanisms and sources of each rule, are in
cost/serve_sim.py."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass


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
    host_prompt_token_s: float = 0.0  # ... and per prompt token of a request it takes in (tokenization), in the same queue
    # admission with kv_tokens > 0: "room" (SGLang: whole request at new_token_ratio, retract when out) |
    # "blocks" (vLLM V1: the prompt's blocks now, preempt the newest running request when a step has none)
    admission: str = "room"
    recv_interval: int = 1  # decode steps between two takes of new requests (SGLang --scheduler-recv-interval)
    retract_steps: int = 1  # decode steps of room a preemption frees for the rest (SGLANG_RETRACT_DECODE_STEPS 20)


def pool_rules(sched: Scheduler, *, concurrency: int, isl: int, osl: int) -> tuple[bool, bool]:
    """(tracked, by_room): whether the requests in flight could outgrow the KV pool (blocks, preemption
    and retraction are then followed), and whether SGLang's admission by room could bind.

    None of the C requests in flight holds and reserves more than isl + osl tokens (the clip only lowers
    a reservation; new_token_ratio stays at or below its start without a retraction, and none happens in
    a pool they cannot outgrow). So with a ratio of at most 1 and a pool of (C + 1)(isl + osl) tokens,
    `admissible` admits every waiting request with room for one more: no request is refused and the
    batch is never marked full, and the loop runs as one without a pool (its plan is the same for every
    such pool: cost/serve_replay.py plan_key)."""
    whole = max(1, concurrency) * (isl + osl)
    kv = sched.kv_tokens
    tracked = 0 < kv < whole
    ample = kv >= whole + isl + osl and sched.ratio_init <= 1.0 and sched.ratio_min <= 1.0
    return tracked, kv > 0 and sched.admission == "room" and not ample


def admissible(
    sched: Scheduler,
    decoding: deque[list[float]],
    *,
    n_dec: int,
    n_pre: int,
    isl: int,
    osl: int,
    ratio: float,
    dsteps: int,
    start_sum: float | None = None,
) -> int:
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


def _held(
    decoding: deque[list[float]], resumed: list[list[float]], *, n_dec: int, n_pre: int, isl: int, dsteps: int, start_sum: float
) -> float:
    """KV tokens the running requests hold: a decoding one its prompt and the tokens it has written, a
    prompt being prefilled its prompt, a preempted one being recomputed what is recomputed so far."""
    return n_dec * (isl + 1 + dsteps) - start_sum + n_pre * isl + sum(r[0] * r[3] for r in resumed)


def _preempt(
    sched: Scheduler,
    decoding: deque[list[float]],
    resumed: list[list[float]],
    *,
    n_dec: int,
    isl: int,
    dsteps: int,
    start_sum: float,
    held: float,
) -> tuple[int, int, float, float]:
    """Free KV room by preempting the newest decoding requests, until the rest have room for
    `retract_steps` more tokens each; one request is always kept. vLLM V1 pops the last of its running
    list (vllm/v1/core/sched/scheduler.py Scheduler.schedule, FCFS: self.running.pop(); _preempt_request
    frees its blocks, sets num_computed_tokens 0 and prepends it to the waiting queue); SGLang retracts
    the requests with the fewest output tokens (managers/schedule_batch.py retract_decode). Each joins
    the front of `resumed` with its tokens written and nothing computed. Returns (requests moved, n_dec,
    start_sum, held) after it."""
    moved, keep = 0, max(1, sched.retract_steps)
    while decoding and n_dec > 1 and held + n_dec * keep > sched.kv_tokens:
        count, first, start = decoding[-1][:3]
        written = int(1 + dsteps - start)
        frees = isl + written + keep  # its KV and the room it no longer needs
        x = min(int(count), n_dec - 1, math.ceil((held + n_dec * keep - sched.kv_tokens) / frees))
        if x >= count:
            decoding.pop()
        else:
            decoding[-1][0] = count - x
        resumed.insert(0, [x, first, written, 0])
        n_dec, start_sum, held, moved = n_dec - x, start_sum - x * start, held - x * (isl + written), moved + x
    return moved, n_dec, start_sum, held


def _ratio_after_retract(sched: Scheduler, decoding: deque[list[float]], *, n_dec: int, osl: int, dsteps: int) -> float:
    """SGLang's new_token_ratio after a retraction, from the requests kept: (tokens they have written +
    SGLANG_RETRACT_DECODE_STEPS x their count) / (their max_new_tokens + 1), at most 1
    (0.5.6 schedule_batch.py retract_decode)."""
    written = sum(c[0] * (1 + dsteps - c[2]) for c in decoding)
    return min(1.0, (written + sched.retract_steps * n_dec) / (n_dec * osl + 1))


def _resume(
    resumed: list[list[float]], *, isl: int, room: int, slots: int, kv: int | None
) -> tuple[list[tuple[int, float, int, int]], int, list[list[float]], int, int, int]:
    """The recompute of preempted requests a step holds, first in the waiting queue: each recomputes its
    prompt and the tokens it had written (vLLM V1 recompute; prefix-cache hits are not counted), cut at
    the step's token budget `room`. With `kv` (vLLM) a request is taken only while its KV fits in it.
    Returns (items [count, first-token time, written, computed after the step], tokens, the resumed
    left, room, slots, kv left)."""
    items: list[tuple[int, float, int, int]] = []
    tokens, free = 0, kv if kv is not None else 0
    left: list[list[float]] = []
    for i, (count, first, written, computed) in enumerate(resumed):
        need, total = int(isl + written - computed), int(isl + written)
        can = min(int(count), slots)
        if kv is not None:
            can = min(can, free // total) if computed == 0 else can
        whole = min(can, room // need) if need > 0 else can
        if whole:
            items.append((whole, first, int(written), total))
        room -= whole * need
        cut = 1 if whole < can and room > 0 else 0
        if cut:
            items.append((1, first, int(written), int(computed) + room))
            tokens, room = tokens + room, 0
        tokens += whole * need
        taken = whole + cut
        slots -= taken
        if kv is not None and computed == 0:
            free -= taken * total
        if taken < count:
            left += [[count - taken, first, written, computed], *resumed[i + 1 :]]
            break
    return items, tokens, left, room, slots, free


def _rejoin(decoding: deque[list[float]], cohort: list[float]) -> None:
    """Put a recomputed cohort back among the decoding ones, which stay in order of their start."""
    starts = [c[2] for c in decoding]
    decoding.insert(bisect_right(starts, cohort[2]), cohort)


def _decayed(sched: Scheduler, ratio: float, steps: int) -> float:
    """new_token_ratio after `steps` more decode steps: a fixed fall per step, from init to the floor."""
    return max(sched.ratio_min, ratio - steps * (sched.ratio_init - sched.ratio_min) / sched.ratio_decay_steps)


def _plan(
    sched: Scheduler,
    prefilling: list[list[float]],
    waiting: list[list[float]],
    *,
    isl: int,
    room: int,
    slots: int,
    inputs: int | None = None,
    started: bool = False,
) -> tuple[list[tuple[int, float, int]], int, list[list[float]], list[list[float]]]:
    """The prompt tokens of one step: prompts being prefilled first, then waiting ones in arrival order.

    `inputs` (SGLang's rem_input_tokens, None: no such cap) is what the step may still admit of new
    prompts: a waiting prompt joins a step that holds others only while its length is below it.
    `started`: the step already holds prompt tokens (a waiting prompt is not its first).
    Returns the step's items (count, arrival, prompt tokens done after the step), its prompt tokens, and
    what is left prefilling (not in this step) and waiting."""
    items: list[tuple[int, float, int]] = []
    tokens = 0
    left_pre: list[list[float]] = []
    for i, (count, arrival, done) in enumerate(prefilling):
        full, part, room = _take(sched, int(count), isl - int(done), room, first=not items and not started)
        if full:
            items.append((full, arrival, isl))
        if part:
            items.append((1, arrival, int(done) + part))
        tokens += full * (isl - int(done)) + part
        rest = int(count) - full - (1 if part else 0)
        if rest:  # the budget is spent: the others wait their turn
            left_pre += [[rest, arrival, done], *prefilling[i + 1 :]]
            return items, tokens, left_pre, waiting
    if inputs is not None:
        inputs -= tokens
    left_wait: list[list[float]] = []
    for i, (count, arrival, ready) in enumerate(waiting):
        can = min(int(count), max(0, slots))
        first = not items and not started
        if inputs is None:
            full, part, room = _take(sched, can, isl, room, first=first)
        else:
            full, part, room = _take_capped(sched, can, isl, room, inputs=inputs, first=first)
            inputs -= full * isl + part
        if full:
            items.append((full, arrival, isl))
        if part:
            items.append((1, arrival, part))
        tokens += full * isl + part
        taken = full + (1 if part else 0)
        slots -= taken
        if int(count) > taken:  # budget or slots spent: the later arrivals wait behind this one
            left_wait += [[int(count) - taken, arrival, ready], *waiting[i + 1 :]]
            break
    return items, tokens, left_pre, left_wait


def _take_capped(sched: Scheduler, count: int, need: int, room: int, *, inputs: int, first: bool) -> tuple[int, int, int]:
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
