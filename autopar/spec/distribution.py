"""A distribution of sequence lengths, sampled with numpy (read from a file by io/distributions.py).

Empirical lengths are resampled with replacement; a histogram draws a bin, then a length uniform
over the integers of the bin; a lognormal is clipped to its [min, max]; a mixture draws a
component by weight.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from autopar.errors import SpecError

SMALL_TABLE = 32  # histograms with at most this many bins are sampled by counting edges
SAMPLE_BLOCK = 1 << 16  # large histogram draws run in blocks of this many numbers (they stay in the caches)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Component:
    """One sampler: empirical values, a histogram, or a clipped lognormal."""

    kind: str  # "empirical" | "histogram" | "lognormal"
    values: np.ndarray  # empirical: the lengths; histogram: bin lower edges
    upper: np.ndarray  # histogram: bin upper edges (exclusive); otherwise empty
    probs: np.ndarray  # histogram: bin probabilities; otherwise empty
    mu: float = 0.0  # lognormal: log of the median
    sigma: float = 0.0  # lognormal: standard deviation of log(length)
    lo: int = 1  # smallest length
    hi: int = 1  # largest length

    def sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        if self.kind == "empirical":
            return self.values[rng.integers(0, self.values.size, size=shape)]
        if self.kind == "histogram":
            return self._histogram(shape, rng)
        z = rng.standard_normal(shape, dtype=np.float32)
        raw = np.exp(np.float32(self.mu) + np.float32(self.sigma) * z)
        return np.clip(np.rint(raw), self.lo, self.hi).astype(np.int64)

    def _histogram(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """A bin by inverse CDF (n uniforms), then a uniform offset inside it (the next n uniforms).

        Large draws from a PCG64 generator run block by block, reading the two
        streams side by side (a copy of the generator advanced by n reads the
        second): the same numbers, without arrays of the whole draw.
        """
        n = math.prod(shape)
        bg = rng.bit_generator
        if n <= SAMPLE_BLOCK or self.probs.size > SMALL_TABLE or not isinstance(bg, np.random.PCG64 | np.random.PCG64DXSM):
            bins = _categorical(self.probs, shape, rng)
            low = np.take(self.values, bins)
            frac = rng.random(shape)
            frac *= np.take(self.upper - self.values, bins)  # the bin's width
            low += frac.astype(np.int64)
            return low
        before = bg.state
        offsets = copy.deepcopy(bg)
        offsets.advance(n)
        second = np.random.Generator(offsets)
        width = self.upper - self.values
        cdf = np.cumsum(self.probs)
        out = np.empty(n, dtype=np.int64)
        for first in range(0, n, SAMPLE_BLOCK):
            size = min(SAMPLE_BLOCK, n - first)
            bins = _bins(cdf, rng.random(size))
            low = np.take(self.values, bins)
            frac = second.random(size)
            frac *= np.take(width, bins)
            low += frac.astype(np.int64)
            out[first : first + size] = low
        after = offsets.state  # both streams read: where one draw of 2n numbers would have left the generator
        after["has_uint32"], after["uinteger"] = before["has_uint32"], before["uinteger"]
        bg.state = after
        return out.reshape(shape)

    def mean(self) -> float:
        if self.kind == "empirical":
            return float(self.values.mean())
        if self.kind == "histogram":
            return float(np.dot(self.probs, (self.values + self.upper - 1) / 2.0))
        return _clipped_lognormal_mean(self.mu, self.sigma, self.lo, self.hi)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LengthDist:
    """A distribution of sequence lengths in tokens; ``sample`` draws int64 arrays."""

    source: str  # the file it was read from (named in every message about it)
    components: tuple[Component, ...]  # mixed with ``weights``
    weights: np.ndarray  # component probabilities, summing to 1
    name: str = ""  # optional display name from the file

    @property
    def max_len(self) -> int:
        """The longest length the distribution can produce, tokens."""
        return max(c.hi for c in self.components)

    @property
    def min_len(self) -> int:
        """The shortest length the distribution can produce, tokens."""
        return min(c.lo for c in self.components)

    @property
    def mean_len(self) -> float:
        """Expected length, tokens (lognormal: of the clipped continuous form, within half a token)."""
        return float(sum(w * c.mean() for w, c in zip(self.weights, self.components, strict=True)))

    def sample(self, n: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Draw lengths of shape ``n`` (an int or a shape) as int64."""
        shape = (n,) if isinstance(n, int) else tuple(n)
        if len(self.components) == 1:
            return self.components[0].sample(shape, rng)
        which = _categorical(self.weights, shape, rng)
        out = np.empty(shape, dtype=np.int64)
        for k, comp in enumerate(self.components):
            mask = which == k
            out[mask] = comp.sample((int(mask.sum()),), rng)
        return out


def _categorical(probs: np.ndarray, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Indices drawn with probabilities ``probs`` (inverse CDF on the cumulative table)."""
    return _bins(np.cumsum(probs), rng.random(shape))


def _bins(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Bin of each uniform ``u`` in [0, 1) for the cumulative table ``cdf`` (scaled by its last entry)."""
    u *= cdf[-1]
    if cdf.size > SMALL_TABLE:
        return np.minimum(np.searchsorted(cdf, u, side="right"), cdf.size - 1)
    # few bins: count the edges at or below u (what searchsorted returns), in one byte per draw; 3x faster
    idx = np.zeros(u.shape, dtype=np.uint8)
    below = np.empty(u.shape, dtype=bool)
    for edge in cdf[:-1]:
        np.greater_equal(u, edge, out=below)
        idx += below
    return idx


def _clipped_lognormal_mean(mu: float, sigma: float, lo: int, hi: int) -> float:
    """E[clip(X, lo, hi)] for log X ~ N(mu, sigma^2), in closed form."""

    def phi(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    a, b = (math.log(lo) - mu) / sigma, (math.log(hi) - mu) / sigma
    inner = math.exp(mu + sigma**2 / 2) * (phi(b - sigma) - phi(a - sigma))
    return inner + lo * phi(a) + hi * (1.0 - phi(b))


def check_max(dist: LengthDist, max_seq_len: int, model_name: str) -> None:
    """Refuse a distribution whose longest sequence is beyond the model's position range."""
    if dist.max_len > max_seq_len:
        raise SpecError(
            f"{dist.source}: longest sequence ({dist.max_len} tokens) exceeds {model_name}'s max_seq_len "
            f"({max_seq_len}); lower the distribution's max or pick a model with a longer context"
        )
