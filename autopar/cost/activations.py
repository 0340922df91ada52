"""Activation bytes one sub-layer keeps for backward: the formula of cost/memory.py's docstring.

Korthikanti et al. 2022 sec. 4, re-derived for GQA, gated MLPs, flash attention, MLA, MoE and
Mamba. It sits below memory.py, habits.py and recompute.py, which all count from it.
"""

from __future__ import annotations

from typing import NamedTuple

from autopar.cost import calibration as cal
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan


class ActPlan(NamedTuple):
    """What activation sizes read of a plan (with the micro-batch and CP split that set the tokens)."""

    tp: int  # tensor-parallel degree
    sp: bool  # sequence parallelism asked for (in effect when tp > 1)
    recompute: str  # none | selective | full
    etp: int  # expert tensor-parallel degree
    mbs: int  # sequences per micro-batch
    cp: int  # context-parallel degree
    recompute_modules: tuple[str, ...] = ()  # under selective: Megatron's recomputed modules

    @classmethod
    def of(cls, plan: Plan) -> ActPlan:
        return cls(
            tp=plan.tp,
            sp=plan.sp and plan.tp > 1,
            recompute=plan.recompute,
            etp=plan.etp,
            mbs=plan.mbs,
            cp=plan.cp,
            recompute_modules=plan.recompute_modules,
        )


def part_activation_bytes(
    model: ModelSpec, part: str, *, tokens: float, plan: Plan | ActPlan, fp8: bool = False, expert_output: bool = True
) -> float:
    """Bytes one sub-layer keeps for backward for `tokens` tokens on one rank (no recompute, or selective).

    Under FP8 (Transformer Engine) the tensors a GEMM saves for its weight
    gradient are kept in FP8, 1 byte: the sub-layer input, the attention output,
    the MLP activation output, the dispatched tokens of an MoE.

    `expert_output`: an MoE keeps each routed copy's expert output (h wide), which the routing weights'
    gradient reads where the combine multiplies it by them; False where the weights scale the expert
    activation before fc2 instead, which then keeps only its input and the weights
    (StackProfile.moe_saves_expert_output).
    """
    h, t, b = model.hidden_size, plan.tp, cal.ACT_BYTES
    g = 1 if fp8 else b  # bytes of a saved GEMM input
    sp = plan.sp and t > 1
    mask = 1 if model.dropout else 0  # the dropout mask after the sub-layer, 1 byte
    outside = tokens * h * (b + g + mask) / (t if sp else 1)  # norm input, sub-layer input, dropout mask
    selective = plan.recompute == "selective"
    if part == "attn":
        if model.mla is not None:
            mla, a = model.mla, model.num_attention_heads
            latent = b * tokens * (mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim)  # replicated across TP
            heads = tokens * a * (b * (2 * mla.qk_head_dim + mla.v_head_dim) + g * mla.v_head_dim) / t  # Q, K, V, output
            return outside + latent + heads
        return outside + tokens * (b * (model.q_width + 2 * model.kv_width) + g * model.q_width) / t  # Q, K, V, output
    if part == "mlp":
        f = model.ffn_hidden_size
        inputs = 2 if model.ffn_activation == "swiglu" else 1  # what the activation function reads back
        act = tokens * f * (b * inputs + (0 if selective else g)) / t
        return outside + act
    if part == "moe" and model.moe is not None:
        moe = model.moe
        copies = tokens * plan.etp / t * moe.top_k * moe.capacity_factor
        inputs = 2 if model.ffn_activation == "swiglu" else 1
        per_width = b * inputs + (0 if selective else g)
        out = b * h if expert_output else 0.0
        experts = copies * (g * h + out + moe.expert_ffn_hidden_size * per_width / plan.etp)  # dispatched in, expert out
        shared = tokens * moe.shared_width * per_width / t
        router = 4 * tokens * moe.num_experts / (t if sp else 1)  # fp32 routing probabilities
        return outside + experts + shared + router
    if part == "mamba" and model.mamba is not None:
        mamba = model.mamba
        di, gn = mamba.inner(h), mamba.num_groups * mamba.state_size
        saved = b * tokens * (mamba.in_proj_width(h) + di + 2 * gn + (3 - selective) * di) / t
        states = 4 * tokens / mamba.chunk_size * mamba.heads(h) / t * mamba.head_dim * mamba.state_size  # fp32
        return outside + saved + states
    raise ValueError(f"{model.name} has no {part} sub-layer")
