"""Inference cost: weights and KV memory per GPU, one prefill, one decode step.

The same profile, GEMM curve, HBM bandwidth and collective fits as training
(cost/compute.py gemm_time and memory_time, cost/comm.py collective_time):

- Prefill is compute-bound: every projection at its real shape after the TP
  split, causal attention with its FLOPs halved by the mask, TP all-reduce of
  the activations (two per layer), chunked into the framework's prefill budget.
- A decode step is memory-bound: each GPU streams its share of the weights once
  per step, the KV cache of every request in the batch, and for MoE layers only
  the experts that the step's tokens touch (E(1 - (1 - top_k/E)^tokens) of
  E experts are hit at least once under uniform routing, each token taking top_k
  distinct experts; every local expert
  where Framework.moe_decode_reads is "local", vLLM 0.12, whose fused-MoE
  kernels stream them at 1 / Framework.moe_decode_slowdown of the profile's
  memory rate). Each sub-layer takes
  the larger of that memory time and its tensor-core time (roofline), so large
  batches become compute-bound. TP all-reduce per layer is latency-bound at
  decode (a few KB); with attention-DP, EP adds an all-to-all dispatch and
  combine, scaled by the expert imbalance (without it every rank already holds
  all tokens and the TP all-reduce combines the experts).
- KV bytes per token and GPU: GQA keeps ceil(kv_heads / tp) heads (a head is
  replicated when tp exceeds the KV heads), MLA one latent of kv_lora_rank +
  rope_dim replicated on every TP rank, Mamba layers a fixed state per request.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from types import MappingProxyType

from autopar.cost import calibration as cal
from autopar.cost.comm import collective_line, collective_time
from autopar.cost.flops import Gemm, attention_head_width, logits_gemm, part_gemms
from autopar.cost.kernels import gemm_time, gemms_time, memory_time, sustained
from autopar.cost.serve_experts import ExpertLayer, experts_time
from autopar.cost.serve_memo import remembered
from autopar.spec.families import KIND_PARTS
from autopar.spec.framework import Framework
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Engine
from autopar.spec.topology import pair, span

# Bytes per weight. fp8: one byte, per-block scales negligible. fp4 (NVFP4): 4 bits
# plus one fp8 scale per 16 values = 4.5 bits (NVIDIA, "Introducing NVFP4", 2025).
# int4 weight-only (AWQ/GPTQ, group 128): 4 bits plus an fp16 scale and zero per
# group = 4.25 bits. Embeddings and the output layer stay bf16 in these recipes.
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625, "int4": 0.53125}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """Seconds of one engine step on the busiest GPU, by cause."""

    weights: float  # streaming the GPU's weights (dense, and the experts touched)
    kv: float  # reading the KV cache (and Mamba state) of the batch
    compute: float  # tensor-core time beyond the memory time (roofline excess)
    tp_comm: float  # TP all-reduce (and attention-DP gather) per layer
    ep_comm: float  # EP all-to-all dispatch and combine
    overhead: float  # host work per step (framework constant)

    @property
    def total(self) -> float:
        return self.weights + self.kv + self.compute + self.tp_comm + self.ep_comm + self.overhead


def gemm_dtype(hw: HardwareProfile, weights: str) -> str:
    """Tensor-core dtype: fp4 (NVFP4) weights run fp4 GEMMs where the profile has an fp4 peak (Blackwell),
    else fp8 like fp8 weights; int4 is weight-only (bf16)."""
    if weights == "fp4" and "fp4" in hw.peak_flops:
        return "fp4"
    if weights in ("fp8", "fp4") and "fp8" in hw.peak_flops:
        return "fp8"
    return "bf16"


def dense_weights(model: ModelSpec, weights: str) -> str:
    """The dtype of the weights other than the routed experts. 4-bit MoE checkpoints quantise the experts only:
    NVIDIA's NVFP4 ones leave self_attn in bf16 (nvidia/MiniMax-M2.5-NVFP4, Qwen3.5-397B-A17B-NVFP4, GLM-5-NVFP4
    hf_quant_config.json exclude_modules), gpt-oss's MXFP4 is on the experts only (openai/gpt-oss-120b config.json
    quantization_config modules_to_not_convert: self_attn, router, embed_tokens, lm_head) and Kimi-K2.5's int4 ignores
    self_attn, the shared experts and the dense MLPs (config.json quantization_config ignore). A dense model's 4-bit
    checkpoint quantises every linear layer."""
    return "bf16" if weights in ("fp4", "int4") and model.moe is not None else weights


@functools.cache
def _part_counts(model: ModelSpec) -> MappingProxyType[str, int]:
    """How many sub-layers of each part (attn, mlp, moe, mamba) the model has (read-only: it is cached)."""
    return MappingProxyType(Counter(part for kind in model.layer_kinds() for part in KIND_PARTS[kind]))


@functools.cache
def _attention_layers(model: ModelSpec) -> int:
    return sum(1 for k in model.layer_kinds() if "attn" in KIND_PARTS[k])


def kv_bytes_per_token(model: ModelSpec, engine: Engine, kv_bytes: float) -> float:
    """KV-cache bytes one token takes on one GPU (its pipeline stage's attention layers)."""
    layers = _attention_layers(model) / engine.pp
    if model.mla is not None:
        latent = (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_bytes
        return layers * (latent + model.mla.index_bytes_per_token)
    heads = math.ceil(model.num_kv_heads / engine.tp)
    return layers * 2 * heads * model.head_dim * kv_bytes


# bytes per element of a Mamba SSM state (MambaSpec.ssm_state_dtype); the conv state is bf16 (SGLang
# mamba2_state_dtype: conv bfloat16, temporal from config mamba_ssm_dtype, float32 by default)
SSM_STATE_BYTES = {"bf16": 2.0, "fp32": 4.0}


def state_bytes_per_request(model: ModelSpec, engine: Engine) -> float:
    """Mamba-2 conv state (bf16) and SSM state (MambaSpec.ssm_state_dtype) one request keeps on one GPU."""
    m = model.mamba
    if m is None:
        return 0.0
    layers = sum(1 for k in model.layer_kinds() if k == "mamba") / engine.pp
    di, gn = m.inner(model.hidden_size), m.num_groups * m.state_size
    conv = cal.ACT_BYTES * (di + 2 * gn) * (m.conv_kernel - 1)
    ssm = SSM_STATE_BYTES[m.ssm_state_dtype] * m.heads(model.hidden_size) * m.head_dim * m.state_size
    return layers * (conv + ssm) / engine.tp


def _part_weight_params(model: ModelSpec, part: str, engine: Engine) -> tuple[float, float]:
    """(dense params, one routed expert's params) of a sub-layer on one GPU."""
    if part != "moe" or model.moe is None:
        return model.part_params(part) / engine.tp, 0.0
    moe, h = model.moe, model.hidden_size
    shared = model.mlp_matrices * h * moe.shared_width / engine.tp
    return h * moe.num_experts + shared, model.mlp_matrices * h * moe.expert_ffn_hidden_size / engine.etp


@functools.cache
def weight_bytes_per_gpu(model: ModelSpec, engine: Engine, weights: str) -> float:
    """Weights on one GPU: its stage's layers split by TP (experts by EP x expert-TP), bf16 embeddings."""
    wb, eb, total = WEIGHT_BYTES[dense_weights(model, weights)], WEIGHT_BYTES[weights], 0.0
    for part, count in _part_counts(model).items():
        dense, expert = _part_weight_params(model, part, engine)
        local = model.moe.num_experts / engine.ep if (part == "moe" and model.moe) else 0
        total += count * (dense * wb + local * expert * eb)
    ends = (model.embedding_params() + model.output_params()) / (2 if engine.pp > 1 else 1)
    return total / engine.pp + cal.ACT_BYTES * ends / engine.tp


def activation_bytes(model: ModelSpec, engine: Engine, chunk_tokens: int) -> float:
    """Peak activations of one prefill chunk: residual stream, QKV, the widest MLP input, fp32 logits of a batch."""
    h = model.hidden_size
    inner = model.ffn_hidden_size / engine.tp
    if model.moe is not None:
        inner = max(inner, model.moe.top_k * model.moe.expert_ffn_hidden_size / engine.etp)
    per_token = cal.ACT_BYTES * (4 * h + (model.q_width + 2 * model.kv_width) / engine.tp + 3 * inner)
    return chunk_tokens * per_token + 4.0 * 256 * model.vocab_size / engine.tp


@remembered
def kv_pool_bytes(model: ModelSpec, hw: HardwareProfile, engine: Engine, *, weights: str, fw: Framework) -> float:
    """Bytes each GPU gives to the KV cache under the framework's memory rule (may be negative)."""
    used = weight_bytes_per_gpu(model, engine, weights) + activation_bytes(model, engine, fw.chunk_tokens)
    used += fw.graph_reserve_bytes
    if fw.memory_rule == "free":
        return fw.memory_fraction * (hw.memory_bytes - used)
    return fw.memory_fraction * hw.memory_bytes - used


def _roofline(hw: HardwareProfile, dtype: str, gemms: tuple[Gemm, ...], *, weight_bytes: float, kv: float) -> tuple[float, float, float]:
    """(weights, kv, compute excess) seconds of one sub-layer: max(memory, tensor cores)."""
    w_t, kv_t = memory_time(hw, weight_bytes), memory_time(hw, kv)
    comp = gemms_time(hw, dtype, gemms, serving=True)
    return w_t, kv_t, max(0.0, comp - w_t - kv_t)


@remembered
def decode_step(
    model: ModelSpec, hw: HardwareProfile, engine: Engine, *, weights: str, kv_bytes: float, batch: float, context: float, fw: Framework
) -> StepTime:
    """One decode step: `batch` requests per attention rank, each with `context` tokens cached.

    With pipeline stages the batch is split into pp groups in flight (one per
    stage), so a token's step is the whole model at batch/pp plus the stage hand-offs.
    """
    return _decode(model, hw, engine, weights, fw).step(kv_bytes=kv_bytes, batch=batch, context=context)


# The decode terms of a deployment, kept per (model, profile, framework) object and (engine, weights): a sweep
# prices ~10^4 steps of ~10^2 engines. An entry holds its objects, so their ids name it while cached.
_DECODES: dict[tuple[int, int, int, Engine, str], tuple[ModelSpec, HardwareProfile, Framework, _Decode]] = {}


def _decode(model: ModelSpec, hw: HardwareProfile, engine: Engine, weights: str, fw: Framework) -> _Decode:
    key = (id(model), id(hw), id(fw), engine, weights)
    hit = _DECODES.get(key)
    if hit is not None and hit[0] is model and hit[1] is hw and hit[2] is fw:
        return hit[3]
    value = _Decode(model, hw, engine, weights, fw)
    if len(_DECODES) >= 1 << 12:
        _DECODES.clear()
    _DECODES[key] = (model, hw, fw, value)
    return value


class _Decode:
    """What a decode step reads of its deployment whatever the batch and context: each sub-layer's weight
    read, the collectives' lines, the expert layer, and the GEMM terms of its TP split (_Dense). `step`
    makes the float operations of the whole step formula in its order (each GEMM's FLOPs as Gemm.flops at
    m = the step's tokens), so a step is the same number however it is reached."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine, weights: str, fw: Framework) -> None:
        dense_w = dense_weights(model, weights)
        wb, eb = WEIGHT_BYTES[dense_w], WEIGHT_BYTES[weights]
        self.model, self.hw, self.engine, self.overhead = model, hw, engine, fw.step_overhead_s
        self.kv_slowdown = fw.kv_decode_slowdown
        self.dtype = gemm_dtype(hw, dense_w)
        self.kv_tok: dict[float, float] = {}
        self.no_kv = memory_time(hw, 0.0)
        self.tp_line = collective_line(hw, "all_reduce", span(size=engine.tp, stride=1, gpus_per_node=hw.gpus_per_node, ranks=engine.gpus))
        hop = pair(stride=engine.tp * engine.dp, gpus_per_node=hw.gpus_per_node) if engine.pp > 1 else None
        self.hop_line = collective_line(hw, "send_recv", hop) if hop is not None else None
        self.attn_scale = (model.num_attention_heads, engine.tp, attention_head_width(model))
        # (part, count, weight read, mamba state bytes, expert layer)
        self.parts: list[tuple[str, int, float, float, ExpertLayer | None]] = []
        for part, count in _part_counts(model).items():
            dense, expert = _part_weight_params(model, part, engine)
            state = state_bytes_per_request(model, engine) if part == "mamba" else 0.0
            experts = None
            if part == "moe" and model.moe is not None:
                experts = ExpertLayer(
                    model,
                    hw,
                    engine,
                    dtype=gemm_dtype(hw, weights),
                    expert_bytes=expert * eb,
                    all_local=fw.moe_decode_reads == "local",
                    read_slowdown=fw.moe_decode_slowdown,
                    exchange=fw.moe_exchange,
                )
            self.parts.append((part, count, memory_time(hw, dense * wb), state, experts))
        self.dense = _dense(model, hw, engine.tp, self.dtype, tuple(w_t for _, _, w_t, _, _ in self.parts))

    def _kv_per_token(self, kv_bytes: float) -> float:
        kv_tok = self.kv_tok.get(kv_bytes)
        if kv_tok is None:
            model, engine = self.model, self.engine
            kv_tok = kv_bytes_per_token(model, engine, kv_bytes) * engine.pp / max(1, _attention_layers(model))
            self.kv_tok[kv_bytes] = kv_tok
        return kv_tok

    def step(self, *, kv_bytes: float, batch: float, context: float) -> StepTime:
        model, hw, engine = self.model, self.hw, self.engine
        b = max(batch / engine.pp, 1e-9)
        kv_tok = self._kv_per_token(kv_bytes)
        w_sum = kv_sum = comp_sum = tp_sum = ep_sum = 0.0
        ar = self.tp_line.time(cal.ACT_BYTES * b * model.hidden_size)
        dense, (lm_w, lm_c) = self.dense.at(b)
        for (part, count, w_t, state, experts), gemms in zip(self.parts, dense, strict=True):
            if isinstance(gemms, float):  # no KV read: the roofline's excess is the TP split's
                w, k, c = w_t, self.no_kv, gemms
            else:
                terms = list(gemms)
                if part == "attn":
                    seen = context * model.kv_share(context)  # tokens a layer reads on average: windowed layers their window
                    kv = b * seen * kv_tok
                    heads, tp, width = self.attn_scale
                    attn_flops = 2.0 * b * seen * heads / tp * width
                    # QK^T and AV over the cached context, counted as one GEMM of the same FLOPs (m = attn_flops / 2, n = k = 1)
                    terms.append(gemm_time(hw, self.dtype, 2.0 * (attn_flops / 2) * 1 * 1, serving=True) * 1)
                    kv_t = memory_time(hw, kv) * self.kv_slowdown  # the decode-attention kernel's rate (Framework)
                else:  # mamba
                    kv = 2 * b * state * engine.pp / count  # read + write one layer's state
                    kv_t = memory_time(hw, kv)
                w, k, c = w_t, kv_t, max(0.0, sum(terms) - w_t - kv_t)  # _roofline
            if experts is not None:
                w2, c2, e = experts(b * engine.dp)
                w, c, ep_sum = w + w2, c + c2, ep_sum + count * e
            w_sum, kv_sum, comp_sum = w_sum + count * w, kv_sum + count * k, comp_sum + count * c
            tp_sum += count * ar if engine.tp > 1 else 0.0
        p2p = 0.0
        if self.hop_line is not None:
            p2p = (engine.pp - 1) * self.hop_line.time(cal.ACT_BYTES * b * model.hidden_size)
        return StepTime(
            weights=w_sum + lm_w, kv=kv_sum, compute=comp_sum + lm_c, tp_comm=tp_sum + p2p, ep_comm=ep_sum, overhead=self.overhead
        )


# GEMM terms by TP split, kept per (model, profile) object, dtype and sub-layer weight reads: the engines of
# one TP size share them (a sweep's steps ask for ~1/3 as many (tp, batch) pairs as steps).
_DENSES: dict[tuple[int, int, int, str, tuple[float, ...]], tuple[ModelSpec, HardwareProfile, _Dense]] = {}


def _dense(model: ModelSpec, hw: HardwareProfile, tp: int, dtype: str, reads: tuple[float, ...]) -> _Dense:
    key = (id(model), id(hw), tp, dtype, reads)
    hit = _DENSES.get(key)
    if hit is not None and hit[0] is model and hit[1] is hw:
        return hit[2]
    value = _Dense(model, hw, tp, dtype, reads)
    if len(_DENSES) >= 1 << 12:
        _DENSES.clear()
    _DENSES[key] = (model, hw, value)
    return value


class _Dense:
    """The terms of a decode step that read its tokens and TP split alone, per tokens: each sub-layer's GEMM
    times (part_gemms at m = tokens, each x its count, in order), summed into the roofline's excess over the
    weight read where the sub-layer reads no KV (mlp, moe's router and shared experts), and the logits' weight
    read and excess."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, tp: int, dtype: str, reads: tuple[float, ...]) -> None:
        self.hw, self.dtype, self.no_kv = hw, dtype, memory_time(hw, 0.0)
        # (weight read, GEMM shapes (n, k, count), whether the sub-layer reads KV or state)
        self.parts = [
            (w_t, tuple((g.n, g.k, g.count) for g in part_gemms(model, part, tokens=1.0, tp=tp)), part in ("attn", "mamba"))
            for part, w_t in zip(_part_counts(model), reads, strict=True)
        ]
        lm = logits_gemm(model, tokens=1.0, tp=tp)
        self.logits = (lm.n, lm.k, memory_time(hw, cal.ACT_BYTES * lm.n * lm.k))
        self.by_tokens: dict[float, tuple[tuple[tuple[float, ...] | float, ...], tuple[float, float]]] = {}

    def at(self, b: float) -> tuple[tuple[tuple[float, ...] | float, ...], tuple[float, float]]:
        """Per sub-layer its GEMM terms (a sub-layer that reads KV) or its excess, and the logits' (read, excess)."""
        hit = self.by_tokens.get(b)
        if hit is not None:
            return hit
        hw, dtype, no_kv = self.hw, self.dtype, self.no_kv
        per: list[tuple[float, ...] | float] = []
        for w_t, shapes, reads_kv in self.parts:
            terms = [gemm_time(hw, dtype, 2.0 * b * n * k, serving=True) * c for n, k, c in shapes]
            per.append(tuple(terms) if reads_kv else max(0.0, sum(terms) - w_t - no_kv))
        n, k, w = self.logits
        c = max(0.0, sum([gemm_time(hw, "bf16", 2.0 * b * n * k, serving=True) * 1]) - w - no_kv)
        if len(self.by_tokens) >= 1 << 14:
            self.by_tokens.clear()
        hit = self.by_tokens[b] = (tuple(per), (w, c))
        return hit


@remembered
def prefill_time(
    model: ModelSpec,
    hw: HardwareProfile,
    engine: Engine,
    *,
    weights: str,
    tokens: int,
    seq_len: int,
    fw: Framework,
    all_ranks: bool = False,
) -> StepTime:
    """Prefill `tokens` prompt tokens (sequences of `seq_len`) on one attention rank, in the framework's chunks.

    With attention-DP and Framework.dp_padding the other ranks run the step at the same token count
    (their own tokens or padding), so the MoE layer gathers dp x chunk tokens and computes them all;
    `all_ranks` prices the same step where every rank holds a prompt of its own (a busy prefill pool)."""
    dense_w = dense_weights(model, weights)
    dtype, wb, eb = gemm_dtype(hw, dense_w), WEIGHT_BYTES[dense_w], WEIGHT_BYTES[weights]
    chunk = min(tokens, fw.chunk_tokens)
    chunks = tokens / chunk
    tp_group = span(size=engine.tp, stride=1, gpus_per_node=hw.gpus_per_node, ranks=engine.gpus)
    ar = collective_time(hw, "all_reduce", cal.ACT_BYTES * chunk * model.hidden_size, tp_group) if engine.tp > 1 else 0.0
    attn_rate = hw.peak("bf16") * hw.attention_efficiency("bf16", seq_len) * sustained(hw, serving=True)
    attn_flops = 2.0 * chunk * seq_len * model.num_attention_heads / engine.tp * attention_head_width(model) / 2
    attn_flops *= model.causal_attention_share(seq_len)  # windowed layers attend to their window only
    w_sum = comp_sum = tp_sum = ep_sum = 0.0
    for part, count in _part_counts(model).items():
        dense, expert = _part_weight_params(model, part, engine)
        w, _, c = _roofline(hw, dtype, part_gemms(model, part, tokens=chunk, tp=engine.tp), weight_bytes=dense * wb, kv=0.0)
        if part == "attn":
            c += attn_flops / attn_rate
        if part == "moe" and model.moe is not None:
            # attention-DP ranks padded to this rank's chunk (Framework.dp_padding) all send it to the MoE layer
            gathered = chunk * engine.dp if fw.dp_padding or all_ranks else chunk
            w2, c2, e = experts_time(
                model, hw, engine, dtype=gemm_dtype(hw, weights), tokens=gathered, expert_bytes=expert * eb, exchange=fw.moe_exchange
            )
            w, c, ep_sum = w + w2, c + c2, ep_sum + count * e
        w_sum, comp_sum, tp_sum = w_sum + count * w, comp_sum + count * c, tp_sum + count * ar
    lm = logits_gemm(model, tokens=max(1.0, chunk / seq_len), tp=engine.tp)
    w, _, c = _roofline(hw, "bf16", (lm,), weight_bytes=cal.ACT_BYTES * lm.n * lm.k, kv=0.0)
    return StepTime(
        weights=chunks * (w_sum + w),
        kv=0.0,
        compute=chunks * (comp_sum + c),
        tp_comm=chunks * tp_sum,
        ep_comm=chunks * ep_sum,
        overhead=0.0,
    )


def prefill_in_step(prefill: StepTime, step: StepTime, *, chunks: float) -> float:
    """What one prompt's prefill adds to the decode steps it rides in (chunked prefill).

    A mixed step streams each layer's weights once for its decode tokens and
    prefill tokens together, so the prompt's own weight read (`prefill.weights`,
    one per chunk) is already paid by the decode step it joins, up to that
    step's weight read (`step.weights`) per chunk. What is left is its tensor-core
    time beyond the shared read, the experts only it touches, and its
    collectives. A long prompt is compute-bound and loses little; a short one
    (128 tokens) is weight-bound and costs the decode steps far less than a
    prefill on its own."""
    return prefill.total - min(prefill.weights, chunks * step.weights)
