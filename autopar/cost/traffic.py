"""Bytes each collective moves per step on one rank, for the torch-native stack.

The stack is the one `autopar calibrate` runs: FSDP2 ``fully_shard`` per block
and on each pipeline chunk's root, DTensor tensor parallelism in torchtitan's
layout (column-parallel Q/K/V and w1/w3, row-parallel wo and w2, a
row-parallel embedding and a column-parallel output gathered to full logits),
and ``torch.distributed.pipelining``. A collective's size is its larger buffer
(the gathered output, the reduced input), as nccl-tests counts it; a send and
a receive count once each on the rank that does them. T = mbs * seq_len tokens
per micro-batch, bf16 activations (2 bytes).

Tensor parallel, per micro-batch (Korthikanti et al. 2022, sec. 4.2.2):
- with SP, each block all-gathers its attention and MLP inputs and
  reduce-scatters their outputs in forward, and the reverse in backward:
  4 all-gathers and 4 reduce-scatters of 2Th; the embedding reduce-scatters
  its output (forward) and all-gathers the gradient (backward); the output
  layer all-gathers its input and the logits (2TV) and reduce-scatters the
  input gradient; each replicated norm weight's gradient is all-reduced in the
  parameter dtype (bf16 under FSDP2 mixed precision: 2h), once per micro-batch;
- without SP, 4 all-reduces of 2Th per block (wo and w2 forward, the Q/K/V and
  w1/w3 input gradients backward), one for the embedding output, one for the
  output layer's input gradient, and the logits all-gather.
FSDP2 over dp ranks, per micro-batch and FSDP unit (a block, or a chunk's
root with the embedding, final norm and output): an all-gather of the bf16
parameters before forward and, when the unit reshards after forward (ZeRO-3)
and is not the root, again before backward; a reduce-scatter of the fp32
gradients (torch.distributed.fsdp, FSDP2 design notes: the root keeps its
parameters from forward to backward).
Context parallel (all-gather form), per micro-batch and block: K and V
all-gathered over the cp ranks (2 T cp kv/t each, the gathered size), their
gradients reduce-scattered back; FSDP then shards over dp x cp, and T is this
rank's share, mbs * seq_len / cp.
Pipeline, per micro-batch and chunk boundary that touches this rank: the
activation forward and its gradient back, 2Th (2Th/tp under SP).
"""

from __future__ import annotations

from autopar.spec.layout import chunk_sizes
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

ACT = 2  # bf16 activations and gathered weights
GRAD = 4  # fp32 gradient reduce-scatter (reduce_dtype)


def _block_params(model: ModelSpec, tp: int) -> float:
    """One dense block's parameters on a TP rank: matrices split by tp, the two norms whole."""
    h = model.hidden_size
    return (model.attention_params() + model.mlp_params()) / tp + 2 * h


def _root_params(model: ModelSpec, tp: int, *, first: bool, last: bool) -> float:
    out = model.embedding_params() / tp if first else 0.0
    if last:
        out += model.hidden_size + (0 if model.tie_embeddings else model.embedding_params()) / tp
    return out


def rank_chunks(plan: Plan, pp_rank: int) -> list[int]:
    """The chunks (virtual stages) pipeline rank `pp_rank` holds: r, r + pp, ..."""
    return list(range(pp_rank, plan.pp * plan.vpp, plan.pp))


def step_traffic(model: ModelSpec, plan: Plan, *, seq_len: int, microbatches: int, pp_rank: int = 0) -> dict[str, float]:
    """Bytes per collective kind (all_gather, reduce_scatter, all_reduce, send_recv) one rank moves per step."""
    t, d, m = plan.tp, plan.dp * plan.cp, microbatches
    h, v = model.hidden_size, model.vocab_size
    tokens = plan.mbs * seq_len // plan.cp
    x = ACT * tokens * h
    sizes = chunk_sizes(model.layers, plan.pp * plan.vpp)
    last_chunk = plan.pp * plan.vpp - 1
    out: dict[str, float] = {"all_gather": 0.0, "reduce_scatter": 0.0, "all_reduce": 0.0, "send_recv": 0.0}
    for c in rank_chunks(plan, pp_rank):
        first, last, blocks = c == 0, c == last_chunk, sizes[c]
        if t > 1:
            if plan.sp:
                out["all_gather"] += m * 4 * blocks * x
                out["reduce_scatter"] += m * 4 * blocks * x
                norms = 2 * blocks + (1 if last else 0)
                out["all_reduce"] += m * norms * ACT * h
                if first:
                    out["reduce_scatter"] += m * x
                    out["all_gather"] += m * x
                if last:
                    out["all_gather"] += m * (x + ACT * tokens * v)
                    out["reduce_scatter"] += m * x
            else:
                out["all_reduce"] += m * (4 * blocks + int(first) + int(last)) * x
                if last:
                    out["all_gather"] += m * ACT * tokens * v
        if plan.cp > 1:  # K and V gathered in forward, their gradients reduce-scattered in backward
            kv = ACT * tokens * plan.cp * model.kv_width / t
            out["all_gather"] += m * 2 * blocks * kv
            out["reduce_scatter"] += m * 2 * blocks * kv
        if d > 1:
            block, root = _block_params(model, t), _root_params(model, t, first=first, last=last)
            gathers = 2 if plan.zero >= 3 else 1
            out["all_gather"] += m * ACT * (gathers * blocks * block + root)
            out["reduce_scatter"] += m * GRAD * (blocks * block + root)
        if plan.pp > 1:
            ends = int(not first) + int(not last)
            out["send_recv"] += m * 2 * ends * x / (t if plan.sp and t > 1 else 1)
    return {k: float(b) for k, b in sorted(out.items()) if b}
