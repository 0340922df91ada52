"""Output lengths spread over a range, as the benchmark clients draw them.

`sglang.bench_serving --random-range-ratio R` (and InferenceX's client, RANDOM_RANGE_RATIO 0.8)
draws each request's output length uniformly from [R x osl, osl] (R = 1: every request at osl).
The closed loop (cost/serve_sim.py) gives the requests that get their first token together one of
CLASSES lengths each, the class means of that range, in a fixed order that spreads consecutive
requests over it, so that a cohort ends in steps of its own and the clients' returning requests
arrive in groups rather than as one wave.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from operator import itemgetter

CLASSES = 16  # length classes: the means of sixteen equal parts of the range (its resolution: docs/calibration.md)
_ORDER = (0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15)  # bit-reversed: requests in a row take lengths far apart
_START = itemgetter(2)


def class_steps(osl: int, ratio: float) -> tuple[int, ...]:
    """Decode steps after the first token (output length - 1) of each class, in `_ORDER`.

    Class j's length is the mean of the j-th of CLASSES equal parts of [ratio x osl, osl]:
    ratio x osl + (j + 0.5) (1 - ratio) osl / CLASSES, rounded, at least 2 tokens."""
    low = ratio * osl
    return tuple(max(1, round(low + (j + 0.5) * (osl - low) / CLASSES) - 1) for j in _ORDER)


def join(decoding: deque[list[float]], count: int, first: float, dsteps: int, *, last: int, steps: tuple[int, ...], seen: int) -> None:
    """Put `count` requests that got their first token at `first` among the decoding cohorts, the
    request numbered `seen` + i taking class (seen + i) mod CLASSES. A cohort is [count, first-token
    time, start, decode steps]: its start is moved back by `last` less its steps, so that every
    cohort ends when start + last decode steps have run and the cohorts stay in order of their end."""
    per = [0] * CLASSES
    for i in range(min(count, CLASSES)):
        per[(seen + i) % CLASSES] += count // CLASSES + (1 if i < count % CLASSES else 0)
    for j, n in enumerate(per):
        if n:
            cohort = [n, first, dsteps - (last - steps[j]), steps[j]]
            decoding.insert(bisect_right(decoding, cohort[2], key=_START), cohort)
