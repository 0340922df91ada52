"""Timing discipline shared by every probe: warm up, loop, synchronise, median.

One call of a small op lasts microseconds, less than the cost of reading the
clock and synchronising, so each repetition runs the op ``inner`` times in a
row and divides. ``inner`` is picked from one probe call so that a repetition
lasts about ``target_s``; for collectives every rank must loop the same number
of times, so the caller passes ``agree`` (a max over the ranks).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from autopar.probe.settings import Settings


@dataclass(frozen=True, slots=True, kw_only=True)
class Timer:
    """How to time on one device: its synchronise call and the sweep's discipline."""

    sync: Callable[[], None]  # waits for all queued device work (no-op on CPU)
    warmup: int  # untimed calls first
    reps: int  # timed repetitions, median kept
    target_s: float  # a repetition lasts about this long
    max_inner: int  # cap on calls per repetition

    @classmethod
    def of(cls, settings: Settings, sync: Callable[[], None]) -> Timer:
        return cls(sync=sync, warmup=settings.warmup, reps=settings.reps, target_s=settings.target_s, max_inner=settings.max_inner)

    def inner_for(self, one_call_s: float) -> int:
        if one_call_s <= 0:
            return self.max_inner
        return max(1, min(self.max_inner, math.ceil(self.target_s / one_call_s)))

    def median_s(self, fn: Callable[[], object], *, agree: Callable[[int], int] | None = None) -> float:
        """Median seconds of one call of ``fn``."""
        for _ in range(self.warmup):
            fn()
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        inner = self.inner_for(time.perf_counter() - start)
        if agree is not None:
            inner = agree(inner)
        samples = []
        for _ in range(self.reps):
            self.sync()
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            self.sync()
            samples.append((time.perf_counter() - start) / inner)
        return statistics.median(samples)


def loop_s(fn: Callable[[], object], count: int, sync: Callable[[], None]) -> float:
    """Wall seconds of ``count`` back-to-back calls, synchronised at both ends."""
    sync()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    sync()
    return time.perf_counter() - start
