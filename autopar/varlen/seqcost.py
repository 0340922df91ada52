"""Per-sequence cost: how long one rank works on one sequence, and on a packed micro-batch.

The cost model (``autopar/cost``) knows the real numbers: the attention
kernel's efficiency, the GEMM efficiency curve, the context-parallel ring
exchange fitted from the profile. The variable-length code asks it four
vectorized questions, for one rank of a CP group of size ``c`` in one pipeline
stage, forward + backward:

    linear(tokens, c)        everything linear in tokens (projections, MLP,
                             norms, TP collectives): exactly proportional to
                             tokens, at a full micro-batch's GEMM efficiency
    attention(lengths, c)    causal attention of one document of each length
    exposed(tokens, c, attn) the CP exchange of one micro-batch of ``tokens``
                             tokens that its attention (``attn`` seconds)
                             does not hide
    time(lengths, c)         one sequence alone in its group:
                             linear + attention + exposed
    p2p(tokens per rank)     pipeline send/recv per micro-batch and on the
                             fill/drain path

Sequences packed into one micro-batch do not attend to each other (document
masks, as in Llama 3: Dubey et al. 2024, sec. 3.2), so attention adds up per
document; but the ring exchange moves the K/V of the whole micro-batch, once
per micro-batch (Megatron's CP on a packed THD batch exchanges the packed
sequence's K/V chunks, whatever the documents inside). So a micro-batch of
documents L_1..L_k on a fixed CP group costs

    sum_i (linear(L_i) + attention(L_i)) + exposed(sum_i L_i, c, sum_i attention(L_i))

and a short document in a big CP group costs its share of one exchange, not a
whole exchange of its own.

:class:`QuadraticSeqCost` is the textbook form, used by the tests:

    linear = beta L / c,  attention = alpha L^2 / c,
    ring(T, c) = [c > 1] (latency (c - 1) + comm T (c - 1) / c),
    exposed = max(0, ring - attention)

- ``alpha L^2``: causal attention, about 6 L^2 d FLOPs per layer forward +
  backward; divided by ``c`` since load-balanced per-document sharding gives
  every CP rank 1/c of it (WLB-LLM, OSDI'25, sec. 5).
- ``beta L``: everything linear in tokens, about 6 N_params FLOPs per token.
- ring: c - 1 exchange steps, each paying a latency and moving 1/c of the
  micro-batch's K/V; the attention computed meanwhile hides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from autopar.errors import SpecError

Arr = np.ndarray


@runtime_checkable
class SeqCost(Protocol):
    """Seconds one rank of a CP group spends on sequences in one pipeline stage."""

    def linear(self, tokens: Arr, cp: Arr | int) -> Arr:
        """Work linear in tokens of ``tokens`` tokens of a micro-batch sharded over ``cp`` ranks."""
        ...

    def attention(self, lengths: Arr, cp: Arr | int) -> Arr:
        """Causal attention of one document of each length, per rank of its group."""
        ...

    def exposed(self, tokens: Arr, cp: Arr | int, attention: Arr) -> Arr:
        """CP exchange of a micro-batch of ``tokens`` tokens not hidden behind ``attention`` seconds."""
        ...

    def time(self, lengths: Arr, cp: Arr | int) -> Arr:
        """One sequence alone in its group: linear + attention + exposed exchange."""
        ...

    def p2p(self, tokens_per_rank: Arr) -> tuple[Arr, Arr]:
        """Pipeline send/recv of a micro-batch: (seconds per micro-batch, seconds on the fill/drain path)."""
        ...


TABLE_SPAN = 4  # a per-length table may run to this many times the lengths asked for (it is read ~5 times a plan)
_TABLES: dict[int, tuple[SeqCost, Arr]] = {}  # per cost object (the last few): attention of every length 0..n


def attention_one(cost: SeqCost, lengths: Arr) -> Arr:
    """``cost.attention(lengths, 1)``, for integer lengths read from a table of every length up to the longest.

    The table is kept per cost object: the strategies of one plan ask for the
    same lengths several times (naive, balanced, wlb, the pool ones), and each
    entry is the number ``attention`` gives for that length (elementwise).
    """
    raw = np.asarray(lengths)
    if raw.dtype.kind not in "iu" or raw.size == 0:
        return cost.attention(raw, 1)
    top = int(raw.max())
    hit = _TABLES.get(id(cost))
    if hit is None or hit[0] is not cost or hit[1].size <= top:
        if top >= TABLE_SPAN * max(raw.size, 1024):
            return cost.attention(raw, 1)
        if len(_TABLES) >= 4:
            _TABLES.pop(next(iter(_TABLES)))
        hit = _TABLES[id(cost)] = (cost, cost.attention(np.arange(top + 1, dtype=np.float64), 1))
    return hit[1][raw]


def compute(cost: SeqCost, lengths: Arr, cp: Arr | int) -> Arr:
    """linear + attention: a document's share of a packed micro-batch, before the exchange."""
    return cost.linear(lengths, cp) + cost.attention(lengths, cp)


@dataclass(frozen=True, slots=True, kw_only=True)
class QuadraticSeqCost:
    """linear = beta L / c, attention = alpha L^2 / c, exposed = max(0, ring(T, c) - attention)."""

    alpha_s_per_tok2: float  # attention seconds per token squared (forward + backward, one stage)
    beta_s_per_tok: float  # seconds per token of everything linear in length
    comm_s_per_tok: float = 0.0  # CP ring traffic, seconds per token of the micro-batch
    comm_latency_s: float = 0.0  # latency of one ring step, seconds

    def __post_init__(self) -> None:
        for name in ("alpha_s_per_tok2", "beta_s_per_tok", "comm_s_per_tok", "comm_latency_s"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise SpecError(f"QuadraticSeqCost.{name} must be a finite number >= 0, got {value}")
        if self.alpha_s_per_tok2 == 0 and self.beta_s_per_tok == 0:
            raise SpecError("QuadraticSeqCost: alpha_s_per_tok2 and beta_s_per_tok cannot both be 0")

    def linear(self, tokens: Arr, cp: Arr | int) -> Arr:
        return np.asarray(self.beta_s_per_tok * np.asarray(tokens, dtype=np.float64) / np.asarray(cp), dtype=np.float64)

    def attention(self, lengths: Arr, cp: Arr | int) -> Arr:
        length = np.asarray(lengths, dtype=np.float64)
        return np.asarray(self.alpha_s_per_tok2 * length * length / np.asarray(cp), dtype=np.float64)

    def exposed(self, tokens: Arr, cp: Arr | int, attention: Arr) -> Arr:
        c = np.asarray(cp, dtype=np.float64)
        steps = np.maximum(c - 1.0, 0.0)
        ring = self.comm_latency_s * steps + self.comm_s_per_tok * np.asarray(tokens, dtype=np.float64) * steps / c
        return np.asarray(np.maximum(ring - attention, 0.0), dtype=np.float64)

    def time(self, lengths: Arr, cp: Arr | int) -> Arr:
        attn = self.attention(lengths, cp)
        return self.linear(lengths, cp) + attn + self.exposed(lengths, cp, attn)

    def p2p(self, tokens_per_rank: Arr) -> tuple[Arr, Arr]:
        """No pipeline traffic in the textbook form."""
        zero = np.zeros(np.shape(tokens_per_rank))
        return zero, zero
