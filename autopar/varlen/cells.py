"""The state the placement works on: the knobs of greedy LPT and the cells of a batch of steps.

A *cell* is one row (a rank, or a CP group of identical ranks) in one
micro-batch of one step; it holds a load in seconds and a number of tokens,
bounded by a token capacity (activation memory). Every array has the steps on
axis 0, so one call places the items of many steps (``place.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class Greedy:
    """How exactly to run LPT: (0, 0) is exact; ``FAST`` trades well under 1% of step time for 25-50x speed."""

    light_frac: float = 0.0  # pour items costing below this fraction of the mean cell load as a fluid
    round_frac: float = 0.0  # fraction of row blocks that get an item per round (0: one item per round)

    def __post_init__(self) -> None:
        if not 0.0 <= self.light_frac < 1.0 or not 0.0 <= self.round_frac <= 1.0:
            raise SpecError(f"Greedy: light_frac must be in [0, 1) and round_frac in [0, 1], got {self}")


EXACT = Greedy()
FAST = Greedy(light_frac=0.25, round_frac=1.0)


class Cells:
    """Working state of one batch of steps: load (s), tokens, per step x row x micro-batch.

    Columns at or past ``open_cols[s]`` (a quarter more, at least one) are
    *reserve* micro-batches: they are used only when no open micro-batch has
    room, and then they are real micro-batches like the others. The columns
    past a step's own reserve (there to give every step of the batch one
    shape) are closed to it, so a step is placed as it would be alone.
    """

    def __init__(
        self, *, steps: int, rows: int, open_cols: np.ndarray, cap_tokens: float, hard_cap_tokens: float, big_s: np.ndarray, pp: int
    ) -> None:
        usable = open_cols + np.maximum(1, open_cols // 4)
        cols = int(usable.max())
        self.load = np.zeros((steps, rows, cols))
        self.tokens = np.zeros((steps, rows, cols))
        self.big = np.asarray(big_s, dtype=np.float64)  # (S,) larger than any load of its step
        at = np.arange(cols)[None, :]
        self.open = (at < open_cols[:, None])[:, None, :]  # (S, 1, cols)
        self.spare = ~self.open & (at < usable[:, None])[:, None, :]  # the step's reserve micro-batches
        # reserve cells look full (+ big), closed ones fuller than any usable cell without room (+ 4 big: rounds.py)
        self.penalty = np.where(self.open, 0.0, np.where(self.spare, 1.0, 16.0) * self.big[:, None, None])
        self.cap = float(cap_tokens)  # tokens a shared cell may hold
        self.hard_cap = float(hard_cap_tokens)  # tokens one sequence may bring to an empty cell
        self.pp = pp  # pipeline stages: a row's time is sum + (pp - 1) * max over its cells
        self.overflow_tokens = np.zeros(steps)  # tokens placed beyond the memory limit
        # kept up to date by place(), so a round touches few (S, rows, cols) arrays
        self.eff = self.load + self.penalty  # load as the chooser sees it: reserve cells look full
        self.room = np.full(self.load.shape, self.hard_cap)  # tokens the cell can still take
        self.work = np.zeros((steps, rows))  # sum of a row's cells
        self.peak = np.zeros((steps, rows))  # largest cell of a row

    def room_after(self, tokens: np.ndarray) -> np.ndarray:
        """Tokens a cell holding ``tokens`` can still take: the shared cap, or the hard cap while empty."""
        return self.cap - tokens + (self.hard_cap - self.cap) * (tokens <= 0)


def items_range(cost: np.ndarray, tokens: np.ndarray, start: np.ndarray | None, stop: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each step's first item and the end of its items (default: all up to the first padding item)."""
    total = ((cost > 0) | (tokens > 0)).sum(axis=1) if stop is None else np.asarray(stop)
    ptr = np.zeros(cost.shape[0], dtype=np.int64) if start is None else start.astype(np.int64)
    return ptr, total


def lanes(op: np.ufunc, x: np.ndarray) -> np.ndarray:
    """Reduce the last (short) axis with ``op`` by halving: far faster than ``op.reduce`` over a short axis."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        head = op(x[..., :half], x[..., half : 2 * half])
        if x.shape[-1] % 2:
            head[..., :1] = op(head[..., :1], x[..., -1:])
        x = head
    return x[..., 0]


def flat(a: np.ndarray) -> np.ndarray:
    """A 1-D view of a C-contiguous array (writes through it update ``a``)."""
    if not a.flags.c_contiguous:
        raise ValueError("expected a C-contiguous array")
    return a.reshape(-1)
