"""Selective recompute policies: what a layer still keeps when parts of it are recomputed.

Two policies differ from Korthikanti et al.'s accounting in memory.py:

- torchtitan's per-op SAC (op_sac_bytes): save every other matmul's output.
- Megatron-Core's module-level recompute (``--recompute-granularity selective
  --recompute-modules ...``, TransformerConfig.recompute_modules in
  megatron/core/transformer/transformer_config.py at core_v0.16.1): each named
  module's forward is redone in backward, so what it alone saves is dropped.
  "core_attn", "mlp", "moe" and "shared_experts" are checkpointed (only their
  inputs stay); "layernorm", "moe_act" and "mla_up_proj" use output-discarding
  checkpointing (their output's storage is freed once the next op has consumed
  it and rebuilt before that op's backward). "mlp" applies to dense MLPs only
  (TransformerLayer sets recompute_mlp only when the MLP is not an MoELayer).
"""

from __future__ import annotations

from autopar.cost import calibration as cal
from autopar.cost.activations import ActPlan
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan


def op_sac_bytes(model: ModelSpec, parts: tuple[str, ...], *, tokens: float, plan: Plan | ActPlan) -> float | None:
    """Bytes a per-op selective AC policy keeps for one block of attention and/or MLP sub-layers; None
    for other layers (MLA, MoE, Mamba: their per-part accounting stands).

    torchtitan's "op" policy (torchtitan/parallelisms/parallelize_llama.py, _save_list and
    _get_custom_policy at 9dec370) counts the aten.mm calls of one block's forward and saves the
    output of the odd-numbered ones (1st, 3rd, ...), every SDPA output and, under TP, every
    reduce-scatter output; all else (norms, rope, SwiGLU, residual adds) is recomputed from the
    block's input, which the checkpoint keeps. The block runs wq, wk, wv, wo, then w1, w3, w2
    (SwiGLU: w2(silu(w1 x) * w3 x)) or fc1, fc2; per rank a column-parallel output is width/tp and a
    row-parallel one is the whole h (a partial sum, before its reduce-scatter to h/tp under SP).
    """
    if "mamba" in parts or "moe" in parts or ("attn" in parts and model.mla is not None):
        return None
    h, t, b = model.hidden_size, plan.tp, cal.ACT_BYTES
    sp = t if plan.sp and t > 1 else 1
    widths: list[float] = []
    kept = h / sp  # the block input
    if "attn" in parts:
        widths += [model.q_width / t, model.kv_width / t, model.kv_width / t, h]
        kept += model.q_width / t  # the SDPA output (its fp32 logsumexp is a/t floats: left out)
    if "mlp" in parts:
        f = model.ffn_hidden_size / t
        widths += [f, f, h] if model.ffn_activation == "swiglu" else [f, h]
    kept += sum(widths[0::2])  # the odd-numbered matmuls
    if sp > 1:
        kept += len([p for p in parts if p in ("attn", "mlp")]) * h / sp  # the reduce-scatter outputs
    return tokens * b * kept


def module_dropped_bytes(
    model: ModelSpec, part: str, *, tokens: float, plan: Plan | ActPlan, fp8: bool, modules: tuple[str, ...], expert_output: bool = True
) -> float:
    """Bytes of sub-layer `part` (as part_activation_bytes counts it without recompute) that the
    recomputed `modules` no longer keep.

    layernorm      the norm's output, the sub-layer's GEMM input: g*h per token (split by SP)
    mla_up_proj    MLA's up-projected Q, K (qk_head_dim) and V (v_head_dim) per head, bf16
    mlp            a dense MLP's activation inputs and fc2's input (only the MLP's input stays)
    moe            the whole MoE layer but its input: dispatched copies, expert activations,
                   shared experts, routing probabilities
    moe_act        the routed experts' activation output (fc2's input), g per copy and width
    shared_experts the shared experts' activation inputs and output
    core_attn      nothing: flash attention keeps only its inputs (Q, K, V: the checkpoint's
                   inputs) and its output (the projection's input)

    g is the bytes of a saved GEMM input: 1 under FP8 (Transformer Engine), else 2; `expert_output` as
    part_activation_bytes has it.
    """
    h, t, b = model.hidden_size, plan.tp, cal.ACT_BYTES
    g = 1 if fp8 else b
    sp = t if plan.sp and t > 1 else 1
    inputs = 2 if model.ffn_activation == "swiglu" else 1
    dropped = 0.0
    if "layernorm" in modules and part in ("attn", "mlp", "moe"):
        dropped += tokens * h * g / sp
    if part == "attn" and "mla_up_proj" in modules and model.mla is not None:
        mla = model.mla
        dropped += b * tokens * model.num_attention_heads * (2 * mla.qk_head_dim + mla.v_head_dim) / t
    if part == "mlp" and "mlp" in modules:
        dropped += tokens * model.ffn_hidden_size * (b * inputs + g) / t
    moe = model.moe
    if part == "moe" and moe is not None:
        copies = tokens * plan.etp / t * moe.top_k * moe.capacity_factor
        routed = copies * (g * h + (b * h if expert_output else 0.0) + moe.expert_ffn_hidden_size * (b * inputs + g) / plan.etp)
        shared = tokens * moe.shared_width * (b * inputs + g) / t
        if "moe" in modules:
            return dropped + routed + shared + 4 * tokens * moe.num_experts / sp
        if "moe_act" in modules:
            dropped += copies * moe.expert_ffn_hidden_size * g / plan.etp
        if "shared_experts" in modules:
            dropped += shared
    return dropped
