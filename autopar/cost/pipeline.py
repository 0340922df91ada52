"""The pipeline model: how long a schedule takes, over the stage layout of spec/layout.py.

One model, used by the fixed-length cost (cost/step.py) and the variable-length
simulation (varlen/pipeline.py). Which layers each rank holds is spec/layout.py's,
shared with the schedule picture and the launch commands (emit/).

Schedule time. Let t[i, j] be the forward + backward seconds of micro-batch j
on pipeline rank i (all of its chunks), m micro-batches, v chunks per rank.
1F1B and interleaved 1F1B take

    T = sum_j max_i t[i, j] + (sum_i max_j t[i, j] - max_ij t[i, j]) / v

the steady state paced by the slowest rank, plus the fill and drain, which
visits every other rank once per chunk (Narayanan et al. 2021, SC'21, sec.
2.2: with equal stages and micro-batches, T = (m + (p - 1) / v) * t, the
bubble (p - 1) / (v * m) of the busy time). Two special cases are used:

- fixed length, stages differ (extra layers, the loss): t[i, j] = t_i, so
  T = m * max(t) + (sum(t) - max(t)) / v   (``schedule_time``);
- variable length, stages equal: t[i, j] = s_j, so
  T = sum(s) + (p - 1) * max(s) / v        (``varlen_time``), a conservative
  bound when micro-batches differ: one long micro-batch stalls every stage,
  the imbalance WLB-LLM (OSDI'25) measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autopar.cost.comm import collective_time
from autopar.spec.hardware import HardwareProfile
from autopar.spec.topology import Group

if TYPE_CHECKING:  # the two variable-length helpers take arrays; the fixed-length path never imports numpy
    import numpy as np


def in_flight_microbatches(*, pp: int, vpp: int, microbatches: int, rank: int = 0) -> float:
    """Micro-batches whose activations pipeline rank `rank` (the first by default) holds at the peak.

    1F1B: min(m, p - r). Interleaved: times (1 + (p-1)/(p*v)) on rank 0 (Korthikanti et al. 2022, sec.
    4.2.3), but never more than the m micro-batches there are: rank r's warm-up runs min(m*v, (v-1)p +
    2(p-r-1)) chunk forwards (Megatron-Core's interleaved schedule; torch.distributed.pipelining
    Interleaved1F1B), so with m = p every chunk of every micro-batch is forwarded before the first
    backward; rank r > 0 holds (p - 2r - 1)/v micro-batches more than p (fewer where negative).
    """
    if rank:
        if vpp == 1:
            return float(min(microbatches, pp - rank))
        return min(min(microbatches, pp) + (pp - 2 * rank - 1) / vpp, float(microbatches))
    held = float(min(microbatches, pp))
    if vpp > 1:
        held = min(held * (1 + (pp - 1) / (pp * vpp)), float(microbatches))
    return held


# --- schedule time --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleTime:
    """A pipeline schedule's time, split into steady state and fill/drain."""

    steady_s: float  # m * the slowest rank's time per micro-batch
    bubble_s: float  # fill and drain: (sum - max) / v over the ranks

    @property
    def total_s(self) -> float:
        return self.steady_s + self.bubble_s


def schedule_time(stage_s: Sequence[float], *, microbatches: int, vpp: int = 1, p2p_s: float = 0.0) -> ScheduleTime:
    """Fixed length: rank i takes stage_s[i] + p2p_s per micro-batch. T = m * max + (sum - max) / v."""
    return schedule_time_of(max(stage_s), sum(stage_s), stages=len(stage_s), microbatches=microbatches, vpp=vpp, p2p_s=p2p_s)


def schedule_time_of(worst_s: float, total_s: float, *, stages: int, microbatches: int, vpp: int = 1, p2p_s: float = 0.0) -> ScheduleTime:
    """schedule_time from the slowest stage's and all stages' seconds (p2p_s added to every stage)."""
    worst = worst_s + p2p_s
    return ScheduleTime(steady_s=microbatches * worst, bubble_s=(total_s + stages * p2p_s - worst) / vpp)


def varlen_time(cell_s: np.ndarray, *, pp: int, vpp: int = 1) -> np.ndarray:
    """Variable length, equal stages: s_j per stage along the last axis. T = sum(s) + (p - 1) * max(s) / v."""
    return cell_s.sum(axis=-1) + (pp - 1) * cell_s.max(axis=-1) / vpp


def pipeline_time(t: np.ndarray, *, vpp: int = 1) -> float:
    """The general form over t[rank, micro-batch] seconds (the two functions above are its cases)."""
    return float(t.max(axis=0).sum() + (t.max(axis=1).sum() - t.max()) / vpp)


def bubble_fraction(*, pp: int, microbatches: int, vpp: int = 1) -> float:
    """Idle share of a rank's time with equal stages and micro-batches: (p-1) / (v*m + p-1)."""
    return (pp - 1) / (vpp * microbatches + pp - 1)


# --- point-to-point transfers ---------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class P2PTime:
    """Exposed pipeline send/recv seconds."""

    per_microbatch_s: float  # added to every rank's time per micro-batch
    fill_s: float  # on the fill/drain path, once per step


def p2p_time(hw: HardwareProfile, *, nbytes: float, pp: int, vpp: int, pair: Group) -> P2PTime:
    """Exposed send/recv of `nbytes` activations (and as many gradient bytes) per stage boundary.

    Plain 1F1B sends and receives blockingly between steps (Megatron's
    forward_backward_pipelining_without_interleaving), so both transfers add to
    every stage's time. The interleaved schedule overlaps them with compute
    (--overlap-p2p-comm) except for their latency, at v boundaries per
    micro-batch; the overlapped part slows the compute by the profile's overlap
    factor, and the fill/drain path still waits for 2(p-1) full transfers.
    """
    if pp == 1:
        return P2PTime(per_microbatch_s=0.0, fill_s=0.0)
    transfer = collective_time(hw, "send_recv", nbytes, pair)
    if vpp == 1:
        return P2PTime(per_microbatch_s=2 * transfer, fill_s=0.0)
    latency = collective_time(hw, "send_recv", 1.0, pair)
    hidden = transfer - latency  # still slows the compute it overlaps
    per_mb = 2 * vpp * (latency + (hw.compute_slowdown - 1) * hidden)
    return P2PTime(per_microbatch_s=per_mb, fill_s=2 * (pp - 1) * transfer)
