"""The pipeline model: which layers each stage holds, and how long a schedule takes.

One model, used by the fixed-length cost (cost/step.py), the variable-length
simulation (varlen/pipeline.py), the schedule picture (render/schedule.py) and
the launch commands (emit/), so that what is launched is what was estimated.

Stage layout. The layers are cut into pp * vpp chunks in model order, as evenly
as possible, the earlier chunks taking the extra layer (so the last stage,
which also holds the loss, is never the heavier one); rank r holds chunks r,
r + pp, r + 2pp, ... (Megatron-LM's interleaved assignment; one contiguous
stage per rank when vpp = 1). Megatron expresses any such layout with
--pipeline-model-parallel-layout. Where there are more chunks than layers (one
or two more: stacks that count the embedding and the loss as pipeline layers,
StackProfile.pipeline_counts_embedding), every chunk holds one slot: the last
chunk the loss alone, and with two more the first the embedding alone
(Megatron-Core's --account-for-loss-in-pipeline-split and
--account-for-embedding-in-pipeline-split: the split counts L + 1 or L + 2
layers, and get_num_layers_to_build gives the end chunks one decoder layer
fewer; megatron/core/transformer/transformer_block.py at core_v0.16.1).

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

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autopar.cost.comm import collective_time
from autopar.spec.hardware import HardwareProfile
from autopar.spec.plan import END_SLOTS
from autopar.spec.topology import Group

if TYPE_CHECKING:  # the two variable-length helpers take arrays; the fixed-length path never imports numpy
    import numpy as np

# --- stage layout ---------------------------------------------------------------------


def end_slots(layers: int, chunks: int) -> int:
    """Slots the embedding and the loss take in the split: 0 while every chunk can hold a decoder layer,
    else one per chunk too many (the loss first, then the embedding)."""
    return max(0, chunks - layers)


def chunk_sizes(layers: int, chunks: int) -> list[int]:
    """Decoder layers per chunk, in model order: as even as possible, the earlier chunks take the extra
    layer. With one or two chunks more than layers, the last chunk holds the loss alone and (two more)
    the first the embedding alone; more than that no stack can lay out (ValueError)."""
    ends = end_slots(layers, chunks)
    if ends > END_SLOTS:
        raise ValueError(f"{chunks} pipeline chunks for {layers} layers: at most {END_SLOTS} more "
                         "(the embedding and the loss)")
    if ends:
        return [0] * (ends - 1) + [1] * layers + [0]
    q, r = divmod(layers, chunks)
    return [q + 1] * r + [q] * (chunks - r)


def peak_rank(layers: int, pp: int, vpp: int = 1) -> int:
    """The first pipeline rank the memory peak can sit on: rank 0, the one with the most micro-batches in
    flight, unless the embedding takes its first chunk alone (two end slots): then rank 1, which holds a
    decoder layer in every chunk and only two chunk forwards fewer in flight (Megatron-Core's interleaved
    warm-up, 2(p - r - 1) + (v - 1)p forwards on rank r), while rank 0's first-chunk forwards keep no
    layer's activations. With pp 2, rank 1 is the last rank, which the memory model counts on its own."""
    return 1 if pp > 2 and end_slots(layers, pp * vpp) == 2 else 0


def chunk_rank(chunk: int, pp: int) -> int:
    """Pipeline rank that holds model chunk `chunk` (0-based, in model order)."""
    return chunk % pp


def virtual_stage(*, rank: int, chunk: int, pp: int) -> int:
    """Position in model order of a rank's `chunk`-th chunk (0-based): chunk * pp + rank."""
    return chunk * pp + rank


def stage_layers(layers: int, pp: int, vpp: int = 1) -> tuple[tuple[int, ...], ...]:
    """Per pipeline rank, the layer counts of its chunks (in its own order)."""
    sizes = chunk_sizes(layers, pp * vpp)
    return tuple(tuple(sizes[virtual_stage(rank=r, chunk=c, pp=pp)] for c in range(vpp)) for r in range(pp))


def rank_kinds(kinds: Sequence[str], pp: int, vpp: int = 1) -> tuple[Counter[str], ...]:
    """Per pipeline rank: how many layers of each kind it holds, for layer kinds `kinds` in model order."""
    ranks: list[Counter[str]] = [Counter() for _ in range(pp)]
    start = 0
    for chunk, size in enumerate(chunk_sizes(len(kinds), pp * vpp)):
        ranks[chunk_rank(chunk, pp)].update(kinds[start:start + size])
        start += size
    return tuple(ranks)


def rank_groups(kinds: Sequence[str], pp: int, vpp: int = 1) -> tuple[tuple[Counter[str], int], ...]:
    """rank_kinds with equal ranks merged: (kinds, how many ranks), in order of first rank; the last
    rank (which also holds the loss) is always its own group, the last one."""
    ranks = rank_kinds(kinds, pp, vpp)
    groups: list[tuple[Counter[str], int]] = []
    for r in ranks[:-1]:
        for i, (c, n) in enumerate(groups):
            if c == r:
                groups[i] = (c, n + 1)
                break
        else:
            groups.append((r, 1))
    return (*groups, (ranks[-1], 1))


def in_flight_microbatches(*, pp: int, vpp: int, microbatches: int) -> float:
    """Micro-batches whose activations the first rank holds at the peak.

    1F1B: min(m, p). Interleaved: times (1 + (p-1)/(p*v)) (Korthikanti et al. 2022, sec. 4.2.3), but never
    more than the m micro-batches there are: the first rank's warm-up runs min(m*v, (v-1)p + 2(p-1))
    chunk forwards (Megatron-Core's interleaved schedule; torch.distributed.pipelining Interleaved1F1B),
    so with m = p every chunk of every micro-batch is forwarded before the first backward.
    """
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
    return schedule_time_of(max(stage_s), sum(stage_s), stages=len(stage_s), microbatches=microbatches, vpp=vpp,
                            p2p_s=p2p_s)


def schedule_time_of(worst_s: float, total_s: float, *, stages: int, microbatches: int, vpp: int = 1,
                     p2p_s: float = 0.0) -> ScheduleTime:
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
