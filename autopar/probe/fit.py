"""Fits from raw timings: alpha-beta for collectives, efficiency curves for compute.

Collectives follow the nccl-tests conventions (``doc/PERFORMANCE.md`` in
NVIDIA/nccl-tests): for ``n`` ranks and a message of ``S`` bytes, the *bus
bandwidth* ``B`` is the algorithm bandwidth ``S / t`` times a factor that makes
it comparable with the link speed:

- all-reduce: ``2 (n - 1) / n``
- all-gather, reduce-scatter, all-to-all: ``(n - 1) / n``
- send/recv: ``1``

so the model is ``t = alpha + factor * S / B``, and fitting it is a straight
line in ``x = factor * S``. Small messages have times of microseconds and
large ones of milliseconds, so an ordinary least-squares fit would ignore the
small ones; we minimise the *relative* error instead (weights ``1 / t^2``).
No torch here: this module is tested on synthetic points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autopar.errors import ProfileError


def bus_factor(collective: str, n: int) -> float:
    """The nccl-tests bus-bandwidth factor of ``collective`` on ``n`` ranks."""
    if n < 2:
        raise ProfileError(f"{collective}: a collective needs a group of at least 2 ranks, got {n}")
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective == "send_recv":
        return 1.0
    raise ProfileError(f"unknown collective {collective!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AlphaBeta:
    """A fitted ``t = latency_s + factor * bytes / bw_bytes_per_s``."""

    latency_s: float  # alpha, seconds
    bw_bytes_per_s: float  # bus bandwidth, bytes/s
    max_rel_err: float  # worst |fit - measured| / measured over the points
    note: str  # empty, or what was clamped and why

    def time_s(self, nbytes: float, factor: float) -> float:
        return self.latency_s + factor * nbytes / self.bw_bytes_per_s


def fit_alpha_beta(points: Sequence[tuple[float, float]], *, factor: float) -> AlphaBeta:
    """Fit alpha and bus bandwidth to ``(bytes, seconds)`` points.

    Weighted least squares on ``t = a + c x`` with ``x = factor * bytes`` and
    weights ``1 / t^2``. When the fit is unphysical, it is clamped and says so:
    a latency <= 0 is set to half the smallest time and the slope refitted; a
    slope <= 0 (times that do not grow with size) gives the best bus bandwidth
    seen, a lower bound.
    """
    pts = [(factor * b, t) for b, t in points if b > 0 and t > 0 and math.isfinite(t)]
    if len({x for x, _ in pts}) < 2:
        raise ProfileError(f"cannot fit latency and bandwidth: need 2 or more distinct message sizes, got {len(pts)} points")
    w = [1.0 / (t * t) for _, t in pts]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, pts, strict=True))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, pts, strict=True))
    st = sum(wi * t for wi, (_, t) in zip(w, pts, strict=True))
    sxt = sum(wi * x * t for wi, (x, t) in zip(w, pts, strict=True))
    det = sw * sxx - sx * sx
    slope = (sw * sxt - sx * st) / det if det > 0 else 0.0
    alpha = (st - slope * sx) / sw
    note = ""
    if slope <= 0:
        slope = min(t / x for x, t in pts)
        alpha = min(t for _, t in pts) / 2
        note = "times did not grow with message size: bandwidth is the best seen (a lower bound)"
    elif alpha <= 0:
        alpha = min(t for _, t in pts) / 2
        slope = sum(wi * x * (t - alpha) for wi, (x, t) in zip(w, pts, strict=True)) / sxx
        slope = max(slope, min(t / x for x, t in pts) * 1e-3)
        note = "fitted latency was <= 0: set to half the smallest time"
    err = max(abs(alpha + slope * x - t) / t for x, t in pts)
    return AlphaBeta(latency_s=alpha, bw_bytes_per_s=1.0 / slope, max_rel_err=err, note=note)


def sig(value: float, digits: int = 4) -> float:
    """``value`` rounded to ``digits`` significant digits (for readable YAML)."""
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{digits}g}")


def efficiency_curve(points: Sequence[tuple[float, float]], *, peak: float) -> tuple[list[list[float]], bool]:
    """``(size, achieved FLOP/s)`` points -> sorted ``[size, achieved/peak]`` pairs.

    Sizes are rounded to 4 significant digits and duplicates keep the best
    rate. Efficiencies above 1 (a datasheet peak beaten, e.g. by boost clocks)
    are clamped to 1; the second value says whether that happened.
    """
    if peak <= 0:
        raise ProfileError(f"peak FLOP/s must be positive, got {peak}")
    best: dict[float, float] = {}
    for size, rate in points:
        if size <= 0 or rate <= 0:
            continue
        key = sig(size)
        best[key] = max(best.get(key, 0.0), rate)
    clamped = False
    curve = []
    for size in sorted(best):
        eff = best[size] / peak
        if eff > 1:
            clamped, eff = True, 1.0
        curve.append([size, max(sig(eff), 1e-4)])
    return curve, clamped
