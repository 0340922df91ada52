"""Per-layer and per-stage times of one micro-batch: the memoised pieces step time is built from.

A layer's time is the sum of its parts (attention, MLP, MoE, ...: cost/compute.py part_time)
combined as the stack overlaps them; a stage's is the sum of its layers (spec/layout.py
rank_groups), plus the loss layer on the last one. Each function is `fn(memo, key)` with a key
holding exactly the plan values it reads (cost/memo.py). cost/step.py assembles a step from
these, cost/floors.py bounds it from below.
"""

from __future__ import annotations

from typing import NamedTuple

from autopar.cost.compute import LayerPlan, combine_parts, loss_time, part_args, part_time
from autopar.cost.memo import Memo
from autopar.cost.shape import Shape
from autopar.cost.sublayer import BlockTime
from autopar.spec.families import KIND_PARTS
from autopar.spec.layout import rank_groups


def part_seconds(memo: Memo, key: tuple[str, Shape, tuple]) -> BlockTime:
    part, shape, args = key
    return part_time(memo.model, memo.profile, shape, part, args)


def kind_set(memo: Memo, _: None) -> tuple[str, ...]:
    """The model's layer kinds, each once."""
    return tuple(sorted(set(memo.model.layer_kinds())))


def layer_times(memo: Memo, key: tuple[LayerPlan, int]) -> dict[str, BlockTime]:
    """Per layer kind, one micro-batch's time on one rank, for key (layer plan, mbs)."""
    lp, mbs = key
    shape = Shape(dtype=memo.job.dtype, seq_len=memo.job.seq_len, mbs=mbs, stack=memo.stack)
    out = {}
    for kind in memo.get(kind_set, None):
        parts = [memo.get(part_seconds, (p, shape, part_args(p, lp))) for p in KIND_PARTS[kind]]
        out[kind] = combine_parts(memo.profile, parts, pipelined=lp.pipelined, stack=memo.stack, moe="moe" in KIND_PARTS[kind])
    return out


def loss_seconds(memo: Memo, key: tuple[int, int, int]) -> float:
    """The loss layer per micro-batch, for key (tp, cp, mbs)."""
    tp, cp, mbs = key
    job = memo.job
    return loss_time(
        memo.model, memo.profile, dtype=job.dtype, seq_len=job.seq_len, mbs=mbs, tp=tp, cp=cp, logit_bytes=memo.stack.logit_bytes
    )


class Stages(NamedTuple):
    """Per-micro-batch stage times of one layout, before pipeline p2p."""

    worst_s: float  # the slowest stage, seconds
    total_s: float  # all stages together
    loss_s: float  # the loss layer, when the slowest stage is the last one (else 0)
    fwd: float  # the slowest stage's layers: BlockTime's fields, summed
    bwd: float
    recompute: float
    tp_exposed: float
    cp_exposed: float
    ep_exposed: float
    overlap_penalty: float


def rank_layer_groups(memo: Memo, key: tuple[int, int]) -> tuple[tuple[tuple[tuple[str, int], ...], int], ...]:
    """Distinct pipeline ranks for key (pp, vpp): ((kind, layers) pairs, count), the last rank last."""
    ends, split = memo.stack.pipeline_counts_embedding, memo.stack.pipeline_split
    groups = rank_groups(memo.model.layer_kinds(), key[0], key[1], ends=ends, split=split)
    return tuple((tuple(kinds.items()), n) for kinds, n in groups)


def layer_vectors(memo: Memo, key: tuple[LayerPlan, int]) -> dict[str, tuple[float, ...]]:
    """Per layer kind: (total, then BlockTime's fields in order), for key (layer plan, mbs)."""
    return {
        k: (t.total, t.fwd, t.bwd, t.recompute, t.tp_exposed, t.cp_exposed, t.ep_exposed, t.overlap_penalty)
        for k, t in memo.get(layer_times, key).items()
    }


def stage_times(memo: Memo, key: tuple[LayerPlan, int, int, int]) -> Stages:
    """For key (layer plan, mbs, pp, vpp). The slowest stage is the first rank with the largest time."""
    lp, mbs, pp, vpp = key
    vec = memo.get(layer_vectors, (lp, mbs))
    loss = memo.get(loss_seconds, (lp.dims.tp, lp.dims.cp, mbs))
    groups = memo.get(rank_layer_groups, (pp, vpp))
    last = len(groups) - 1
    total = 0.0
    worst_s, worst = -1.0, 0
    for g, (items, count) in enumerate(groups):
        t = 0.0
        for k, n in items:
            t += n * vec[k][0]
        if g == last:
            t += loss
        total += t * count
        if t > worst_s:
            worst_s, worst = t, g
    # each field summed over the slowest rank's kinds in their order: the same sums as one
    # generator per field, the products formed once per kind
    rows = [[n * x for x in vec[k][1:]] for k, n in groups[worst][0]]
    fields = [sum(c) for c in zip(*rows, strict=True)] if rows else [0] * 7
    return Stages(worst_s, total, loss if worst == last else 0.0, *fields)


def kind_counts(memo: Memo, _: None) -> tuple[tuple[str, int], ...]:
    """(kind, layers of that kind in the whole model) pairs."""
    kinds = memo.model.layer_kinds()
    return tuple((k, kinds.count(k)) for k in memo.get(kind_set, None))


def all_stages(memo: Memo, key: tuple[LayerPlan, int]) -> float:
    """All stages' seconds per micro-batch, loss included, for key (layer plan, mbs): Stages.total_s
    summed by kind instead of by rank (the same value up to rounding, for any pp and vpp)."""
    lp, mbs = key
    vec = memo.get(layer_vectors, key)
    return sum(n * vec[k][0] for k, n in memo.get(kind_counts, None)) + memo.get(loss_seconds, (lp.dims.tp, lp.dims.cp, mbs))
