"""How far off a prediction may be: per-class bands of measured / predicted, set out of sample.

An error model holds, for each metric autopar predicts (training tokens/s and
memory, serving TTFT and TPOT), classes of predictions (``megatron bf16
dense``) with the 10th and 90th percentiles of the ratio measured / predicted
over the benchmark rows of that class that no constant was set on. The file
is written by benchmarks/error_model.py (autopar/data/error_model.yaml).

A prediction's class is looked up from the most specific to the coarsest
(``megatron bf16 dense gpus<=8``, ``megatron bf16 dense``, ``megatron bf16``,
``megatron``, ``all``); the first class with at least ``min_rows`` rows, of at
least ``min_sources`` sources, gives the band, and when none has, there is no
band ("too few rows").

The percentiles are prediction quantiles (Hyndman and Fan 1996, definition 6,
the order statistic at rank q x (n + 1)): for rows that are exchangeable, a new
row falls in [p10, p90] with probability 0.8, where the usual definition 7 gives
0.8 x (n - 1) / (n + 1) (60% at n = 8).

Rows of one source (a measurement file, a benchmark table) are not
exchangeable with a new user's deployment, which is one draw of a *source*: a
source counts as at most ``min_rows`` rows (each of its n rows weighs
min(1, min_rows / n)), so a large file does not set the band alone, and n in
the rank is the sum of the weights. Past the rows a band needs, more rows of a
file say more about that file, not about the next deployment. For the same
reason a class whose rows all come from one source has no band of its own: its
spread is that source's, and a prediction takes the next coarser class, whose
rows span sources (the coverage with each source left out, with and without
this rule: docs/error-bars.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# metric -> the key parts of its classes, most significant first
LEVELS: Mapping[str, tuple[str, ...]] = {
    "tokens_per_s": ("stack", "dtype", "family", "scale"),  # training tokens/s per GPU
    "memory": ("stack",),  # training peak memory per GPU
    "ttft": ("engine", "mode", "load"),  # serving time to first token
    "tpot": ("engine", "mode", "load"),  # serving time per output token
}
METRICS = tuple(LEVELS)
COARSEST = "all"  # the class of every row of a metric
MIN_ROWS = 8  # fewer rows than this give no band
MIN_SOURCES = 2  # nor do the rows of fewer sources than this (module docstring)


def prediction_quantile(values: Sequence[float], q: float, weights: Sequence[float] | None = None) -> float:
    """The q-quantile of `values` by Hyndman and Fan's definition 6: rank q x (n + 1), linear between
    order statistics, clamped to the smallest and largest value outside their ranks.

    With `weights` (each in (0, 1], a row's share of a row), n is their sum and the i-th smallest value's
    rank is its cumulative weight less half its own plus one half: with every weight 1 that is i, the
    unweighted rule; the ranks stay symmetric, a heavy value sits mid-way in its span of weight."""
    if not values:
        raise ValueError("no values")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")
    ws = [1.0] * len(values) if weights is None else list(weights)
    if len(ws) != len(values) or not all(0.0 < w <= 1.0 for w in ws):
        raise ValueError("weights must be one in (0, 1] per value")
    pairs = sorted(zip(values, ws, strict=True))
    ranks, total = [], 0.0
    for _, w in pairs:
        ranks.append(total + w / 2 + 0.5)
        total += w
    h = q * (total + 1)
    if h <= ranks[0]:
        return pairs[0][0]
    if h >= ranks[-1]:
        return pairs[-1][0]
    hi = next(i for i, r in enumerate(ranks) if r > h)
    (x0, _), (x1, _) = pairs[hi - 1], pairs[hi]
    return x0 + (h - ranks[hi - 1]) / (ranks[hi] - ranks[hi - 1]) * (x1 - x0)


def candidates(keys: Sequence[str]) -> tuple[str, ...]:
    """Class names from the most specific to the coarsest: 'a b c', 'a b', 'a', 'all'."""
    return (*(" ".join(keys[:k]) for k in range(len(keys), 0, -1)), COARSEST)


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """One class of one metric: how many rows set it and, with enough rows, its band."""

    name: str  # the class, e.g. "megatron bf16 dense"
    rows: int  # benchmark rows in the class
    sources: int  # the sources (files, benchmark tables) they come from
    p10: float | None  # 10th percentile of measured / predicted; None: under min_rows rows or min_sources sources
    p90: float | None  # 90th percentile of measured / predicted


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A prediction's band: where the measurement is expected, [lo, hi], in the prediction's unit."""

    value: float  # the prediction
    lo: float  # lower end; lo <= value
    hi: float  # upper end; hi >= value
    name: str  # the class whose rows set it
    rows: int  # how many

    @property
    def spread(self) -> float:
        """Half the band's width over the prediction: 0.06 prints as ±6%."""
        return (self.hi - self.lo) / 2 / self.value if self.value > 0 else 0.0

    def inverse(self) -> Interval:
        """The band of 1 / value (tokens/s -> step time)."""
        return Interval(value=1 / self.value, lo=1 / self.hi, hi=1 / self.lo, name=self.name, rows=self.rows)

    def scaled(self, factor: float) -> Interval:
        return Interval(value=self.value * factor, lo=self.lo * factor, hi=self.hi * factor, name=self.name, rows=self.rows)

    def shifted(self, offset: float) -> Interval:
        """The band of value + offset, an exactly known amount added to the prediction."""
        return Interval(value=self.value + offset, lo=self.lo + offset, hi=self.hi + offset, name=self.name, rows=self.rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup:
    """The band a prediction gets, or why it gets none."""

    band: Band | None  # the class used; None: no class has min_rows rows
    wanted: str  # the most specific class of the prediction
    rows: int  # rows of the most specific class (0: none)
    all_rows: int = 0  # rows of the coarsest class

    def interval(self, value: float) -> Interval | None:
        """[p10, p90] x value, widened to hold the value itself (a biased class's band may not)."""
        b = self.band
        if b is None or b.p10 is None or b.p90 is None or not math.isfinite(value) or value <= 0:
            return None
        return Interval(value=value, lo=min(value, value * b.p10), hi=max(value, value * b.p90), name=b.name, rows=b.rows)

    def note(self) -> str:
        """'megatron bf16 dense, 12 rows', or 'too few rows (megatron fp8 moe: 3)'."""
        if self.band is None:
            return f"too few rows ({self.wanted}: {self.rows}, {COARSEST}: {self.all_rows})"
        return f"{self.band.name}, {self.band.rows} rows"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorModel:
    """Every metric's classes, as read from the file."""

    min_rows: int  # a class needs this many rows for a band
    min_sources: int = 1  # and the rows of this many sources
    classes: Mapping[str, Mapping[str, Band]]  # metric -> class name -> band
    where: str = ""  # the file it was read from

    def lookup(self, metric: str, keys: Sequence[str]) -> Lookup:
        """The first class of `keys` (candidates) with a band."""
        mine = self.classes.get(metric, {})
        names = candidates(keys)
        found = next((mine[n] for n in names if n in mine and mine[n].p10 is not None), None)
        return Lookup(band=found, wanted=names[0], rows=_rows(mine, names[0]), all_rows=_rows(mine, COARSEST))


def _rows(classes: Mapping[str, Band], name: str) -> int:
    band = classes.get(name)
    return 0 if band is None else band.rows


def source_weights(sources: Sequence[str], cap: int) -> list[float]:
    """Each row's weight: its source's n rows count as min(n, cap) rows (module docstring)."""
    counts = Counter(sources)
    return [min(1.0, cap / counts[s]) for s in sources]


def build(
    rows: Sequence[tuple[Sequence[str], float]],
    *,
    min_rows: int = MIN_ROWS,
    min_sources: int = MIN_SOURCES,
    sources: Sequence[str] | None = None,
) -> dict[str, Band]:
    """Every class of a metric from its rows (keys, measured / predicted): each prefix of the keys and 'all'.
    `sources[i]` names row i's source, which counts as at most min_rows rows of each class; None: every row
    its own source (all weigh 1). A class has a band with min_rows rows of min_sources sources."""
    if sources is not None and len(sources) != len(rows):
        raise ValueError("one source per row")
    members: dict[str, list[tuple[float, str]]] = {}
    for i, (keys, ratio) in enumerate(rows):
        for name in candidates(keys):
            members.setdefault(name, []).append((ratio, str(i) if sources is None else sources[i]))
    out = {}
    for name in sorted(members):
        xs = [x for x, _ in members[name]]
        names = [s for _, s in members[name]]
        ws = source_weights(names, max(min_rows, 1))
        n_sources = len(set(names))
        enough = len(xs) >= min_rows and n_sources >= min_sources
        out[name] = Band(
            name=name,
            rows=len(xs),
            sources=n_sources,
            p10=prediction_quantile(xs, 0.1, ws) if enough else None,
            p90=prediction_quantile(xs, 0.9, ws) if enough else None,
        )
    return out
