"""Memory per GPU: weights, gradients, optimizer states, activations, buffers.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", sec. 4), re-derived for GQA, gated MLPs and flash
attention. Per block and micro-batch, with t = tp, tokens T = b*s/cp, bf16:

  attention: norm input 2Th, QKV input 2Th, Q/K/V 2T(a+2g)d/t, output 2T*a*d/t,
             dropout mask Th
  MLP:       norm input 2Th, input 2Th, activation saved tensors, mask Th
             (SwiGLU: gate and up outputs 4Tf/t plus their product 2Tf/t;
              GELU/ReLU^2: input and output of the activation 4Tf/t)

With GPT's shapes (a*d = h, g = a, f = 4h) this is T*h*(10 + 24/t), their eq. (2)
with flash attention removing the 5as/h term; sequence parallelism divides the
10 by t as well (their eq. (4)).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from autopar.cost import calibration as cal
from autopar.cost.memo import Memo, memo
from autopar.job import Job
from autopar.model import ModelSpec
from autopar.plan import Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Bytes on the most loaded GPU."""

    weights: float  # bf16 parameters (sharded under ZeRO-3)
    grads: float  # fp32 gradient buffers
    optimizer: float  # fp32 master weights, Adam m and v
    activations: float  # saved activations of the in-flight micro-batches
    logits: float  # loss-layer logits on the last stage
    buffers: float  # CUDA context, NCCL and library workspaces, ZeRO-3 gather buffers
    fragmentation: float  # allocator slack

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.logits + self.buffers + self.fragmentation

    def as_gib(self) -> dict[str, float]:
        out = {f.name: getattr(self, f.name) / 2**30 for f in fields(self)}
        out["total"] = self.total / 2**30
        return out


def block_activation_bytes(model: ModelSpec, *, tokens: float, tp: int, sp: bool, recompute: str) -> float:
    """Bytes one block keeps for backward for `tokens` tokens on one rank (before CP split)."""
    h, f, t = model.hidden_size, model.ffn_hidden_size, tp
    b = cal.ACT_BYTES
    outside = tokens * h * (b * 4 + 2)  # two norm inputs, QKV and MLP inputs (bf16), two masks (1 B)
    qkv = b * tokens * (model.q_width + 2 * model.kv_width)
    attn_out = b * tokens * model.q_width
    act = b * tokens * f * (3 if model.ffn_activation == "swiglu" else 2)
    inside = qkv + attn_out + act
    if recompute == "full":
        # only the block input survives (split by t under SP); the block's own working
        # set is counted once per stage by the caller
        return b * tokens * h / (t if sp else 1)
    if recompute == "selective":
        # recompute core attention and the MLP activation: the activation's output
        # (input of the down projection) is not kept
        inside -= b * tokens * f
    return outside / (t if sp else 1) + inside / t


def stage_params(model: ModelSpec, plan: Plan) -> tuple[float, float]:
    """Parameters per rank on the first and on the last pipeline stage."""
    per_block = model.layer_params()
    layers = plan.stage_layers(model.layers)
    embed = model.embedding_params() / plan.tp
    out = model.output_params() / plan.tp
    if model.tie_embeddings and plan.pp > 1:
        out += embed  # the last stage keeps its own copy of the tied matrix
    blocks = layers * per_block / plan.tp
    if plan.pp == 1:
        return blocks + embed + out, blocks + embed + out
    return blocks + embed, blocks + out


def state_bytes(params: float, *, zero: int, shards: int) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes for `params` under a ZeRO stage over `shards` ranks."""
    w = params * cal.WEIGHT_BYTES
    g = params * cal.GRAD_BYTES
    o = params * cal.OPTIMIZER_BYTES
    if zero >= 1:
        o /= shards
    if zero >= 2:
        g /= shards
    if zero >= 3:
        w /= shards
    return w, g, o


def in_flight_microbatches(plan: Plan, microbatches: int) -> float:
    """Micro-batches whose activations the first stage holds at the peak.

    1F1B: min(m, p). Interleaved: times (1 + (p-1)/(p*v)) (Korthikanti et al. 2022, sec. 4.2.3).
    """
    held = float(min(microbatches, plan.pp))
    if plan.vpp > 1:
        held *= 1 + (plan.pp - 1) / (plan.pp * plan.vpp)
    return held


def memory_breakdown(model: ModelSpec, job: Job, plan: Plan, *, cache: Memo | None = None) -> MemoryBreakdown:
    """Peak memory of the worse of the first stage (most activations) and the last (logits).

    `cache` (any dict) shares per-block and per-stage sizes across plans.
    """
    cache = {} if cache is None else cache
    m = plan.microbatches(job)
    tokens = plan.mbs * job.seq_len / plan.cp

    def per_block(recompute: str) -> float:
        return block_activation_bytes(model, tokens=tokens, tp=plan.tp, sp=plan.sp, recompute=recompute)

    acts, working = memo(cache, ("act", plan.tp, plan.cp, plan.mbs, plan.sp, plan.recompute),
                         lambda: (per_block(plan.recompute), per_block("none") if plan.recompute == "full" else 0.0))
    # `working`: under full recompute, one block's whole set while it is recomputed
    stage_acts = acts * plan.stage_layers(model.layers)
    logits = cal.LOGIT_BYTES * tokens * model.vocab_size / plan.tp
    first_params, last_params = memo(cache, ("params", plan.tp, plan.pp), lambda: stage_params(model, plan))
    first_acts = stage_acts * in_flight_microbatches(plan, m) + working
    if plan.pp == 1:
        return _stage(model, plan, first_params, first_acts, logits)
    first = _stage(model, plan, first_params, first_acts, 0.0)
    last = _stage(model, plan, last_params, stage_acts + working, logits)  # the last stage holds one micro-batch
    return max(first, last, key=lambda c: c.total)


def _stage(model: ModelSpec, plan: Plan, params: float, acts: float, logits: float) -> MemoryBreakdown:
    w, g, o = state_bytes(params, zero=plan.zero, shards=plan.dp * plan.cp)  # Megatron shards over DP x CP
    buffers = cal.FIXED_OVERHEAD_BYTES
    if plan.zero >= 3:
        buffers += 2 * model.layer_params() / plan.tp * cal.WEIGHT_BYTES  # gathered block + prefetch
    held = w + g + o + acts + logits
    return MemoryBreakdown(
        weights=w, grads=g, optimizer=o, activations=acts, logits=logits, buffers=buffers,
        fragmentation=cal.ALLOCATOR_FRAGMENTATION * held,
    )
