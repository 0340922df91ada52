"""Per-sequence cost: how long one rank works on one sequence.

The cost model (``autopar/cost``) knows the real numbers: the attention probe,
the GEMM efficiency curve, the context-parallel ring exchange fitted from the
profile. The variable-length code only needs one question answered, many
million times per simulation, so it asks it through a tiny interface:

    time(lengths, cp) -> seconds

``lengths`` is an integer array of any shape, ``cp`` an integer or an array of
the same shape (each sequence's context-parallel group size). The answer is the
forward + backward seconds that *one* rank of that CP group spends on the
sequence in *one* pipeline stage, compute plus the part of the CP communication
that is not hidden behind attention. Sequences packed into one micro-batch do
not attend to each other (document masking, as in Llama 3: Dubey et al. 2024,
sec. 3.2), so costs add.

:class:`QuadraticSeqCost` is the textbook form, used by the tests and as a
default until the cost model passes its own:

    w(L, c) = (alpha * L^2 + beta * L) / c
              + [c > 1] * (comm_latency * (c - 1) + comm_per_token * L * (c - 1) / c)

- ``alpha * L^2``: causal attention, whose FLOPs grow with the square of the
  length (about 6 * L^2 * d per layer forward + backward with a causal mask).
- ``beta * L``: everything linear in tokens (QKV/output projections, MLP,
  norms), about 6 * N_params FLOPs per token (Kaplan et al. 2020).
- divided by ``c``: context parallelism splits both evenly when the sequence is
  sharded in load-balanced chunks (zig-zag / per-document sharding, as in
  WLB-LLM, OSDI'25), so every CP rank does 1/c of the work.
- ``comm_latency * (c - 1)``: a ring of c ranks takes c - 1 exchange steps, each
  paying a fixed latency (per layer, forward and backward, summed into one
  number).
- ``comm_per_token * L * (c - 1) / c``: the K/V blocks that each rank receives
  (it sees the other ranks' (c - 1)/c of the sequence), counting only the
  exposed part (what attention on short chunks cannot hide).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from autopar.errors import SpecError


@runtime_checkable
class SeqCost(Protocol):
    """Seconds one rank of a CP group spends on a sequence in one pipeline stage."""

    def time(self, lengths: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        """Vectorized: ``lengths`` (int, any shape) and ``cp`` (int or same shape) -> float64 seconds."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class QuadraticSeqCost:
    """w(L, c) = (alpha L^2 + beta L) / c + [c > 1] (latency (c - 1) + comm L (c - 1) / c)."""

    alpha_s_per_tok2: float  # attention seconds per token squared (forward + backward, one stage)
    beta_s_per_tok: float  # seconds per token of everything linear in length
    comm_s_per_tok: float = 0.0  # exposed CP ring traffic, seconds per token of the sequence
    comm_latency_s: float = 0.0  # exposed latency of one ring step, seconds

    def __post_init__(self) -> None:
        for name in ("alpha_s_per_tok2", "beta_s_per_tok", "comm_s_per_tok", "comm_latency_s"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise SpecError(f"QuadraticSeqCost.{name} must be a finite number >= 0, got {value}")
        if self.alpha_s_per_tok2 == 0 and self.beta_s_per_tok == 0:
            raise SpecError("QuadraticSeqCost: alpha_s_per_tok2 and beta_s_per_tok cannot both be 0")

    def time(self, lengths: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        length = np.asarray(lengths, dtype=np.float64)
        c = np.asarray(cp, dtype=np.float64)
        compute = (self.alpha_s_per_tok2 * length + self.beta_s_per_tok) * length / c
        if not np.any(c > 1):
            return np.asarray(compute, dtype=np.float64)
        steps = c - 1.0
        comm = self.comm_latency_s * steps + self.comm_s_per_tok * length * (steps / c)
        return np.asarray(compute + comm, dtype=np.float64)
