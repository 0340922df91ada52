"""Time of one layer (and of the loss layer) for one micro-batch on one rank.

A layer is made of sub-layers (families.KIND_PARTS): attention (GQA or MLA), a
dense MLP, an MoE, or a Mamba-2 mixer. Each sub-layer's GEMMs take
FLOPs / (peak * eff(FLOPs) * sustained) with the profile's measured curve;
attention takes the flash-attention efficiency; memory-bound work takes
bytes / (HBM bandwidth * streaming efficiency). Communication inside the layer
(TP, CP, EP) is charged here too, exposed or hidden as the plan allows. The
shared pieces are cost/sublayer.py's, the MoE sub-layer cost/experts.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from autopar.cost import calibration as cal
from autopar.cost.comm import collective_time
from autopar.cost.experts import moe_time
from autopar.cost.flops import FLASH_BWD_OVER_FWD, attention_fwd_flops, logits_gemm, part_gemms, ssd_scan_flops
from autopar.cost.kernels import (
    elementwise_time,
    fp8_cast_time,
    gemm_time,
    gemms_time,
    hopper_or_later,
    memory_time,
    op_sac,
    sustained,
)
from autopar.cost.shape import Dims, Shape
from autopar.cost.sublayer import BlockTime, act_elems, assemble, norm_residual_bytes, norm_time, tp_collectives
from autopar.spec.families import KIND_PARTS
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import NEUTRAL, StackProfile
from autopar.spec.topology import RankGrid

__all__ = [
    "LayerPlan",
    "block_time",
    "combine_parts",
    "cp_backward_bytes_per_token",
    "cp_kv_bytes_per_token",
    "kv_bytes_per_token",
    "layer_time",
    "loss_time",
    "part_args",
    "part_time",
]


class LayerPlan(NamedTuple):
    """Everything a layer's time reads of a plan, and nothing else: the cost model's cache key.

    Build it with ``LayerPlan.of(plan)``; a layer function that is handed this
    value cannot depend on a plan field it does not hold, so a cached layer time
    cannot be reused for a plan it does not describe.
    """

    dims: Dims  # what every sub-layer reads
    cp_comm: str  # CP K/V exchange (attention)
    ep: int  # expert-parallel degree (MoE)
    etp: int  # expert tensor-parallel degree (MoE)
    pipelined: bool  # pp > 1: a paired micro-batch hides the EP all-to-all

    @classmethod
    def of(cls, plan: Plan) -> LayerPlan:
        modules = plan.recompute_modules if plan.recompute == "selective" else ()
        dims = Dims(tp=plan.tp, cp=plan.cp, sp=plan.sp and plan.tp > 1, recompute=plan.recompute, modules=modules)
        return cls(dims=dims, cp_comm=plan.cp_comm, ep=plan.ep, etp=plan.etp, pipelined=plan.pp > 1)


def part_args(part: str, lp: LayerPlan) -> tuple:
    """The arguments of sub-layer `part`'s time function beyond (model, hw, shape): its cache key."""
    if part == "attn":
        return (lp.dims, lp.cp_comm)
    if part == "moe":
        return (lp.dims, lp.ep, lp.etp)
    return (lp.dims,)


def part_time(model: ModelSpec, hw: HardwareProfile, shape: Shape, part: str, args: tuple) -> BlockTime:
    """Time of one sub-layer (attn, mlp, moe, mamba) with the arguments part_args() gives."""
    return _PARTS[part](model, hw, shape, *args)


def layer_time(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Plan | LayerPlan, kind: str) -> BlockTime:
    """Forward, backward, recompute and in-layer communication of one layer of `kind`."""
    lp = LayerPlan.of(plan) if isinstance(plan, Plan) else plan
    parts = [part_time(model, hw, shape, p, part_args(p, lp)) for p in KIND_PARTS[kind]]
    return combine_parts(hw, parts, pipelined=lp.pipelined, stack=shape.stack, moe="moe" in KIND_PARTS[kind])


def combine_parts(
    hw: HardwareProfile, parts: list[BlockTime], *, pipelined: bool, stack: StackProfile = NEUTRAL, moe: bool = False
) -> BlockTime:
    """A layer from its sub-layers' times, with the stack's per-layer launch overhead.

    `moe`: the layer has an MoE sub-layer. Where the stack runs its router and token
    dispatch eagerly, the host time the dispatch leaves exposed (stack.moe_host_us: the
    dispatch reads the token counts on the host, so the GPU drains and then waits on the
    launches of the small kernels that follow) is added like the launch overhead.
    """
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    if pipelined and total.ep_exposed > 0 and stack.ep_overlap:
        # A pipelined schedule has another micro-batch's forward or backward at hand; pairing
        # them hides one's all-to-all behind the other's compute (DualPipe, DeepSeek-V3 sec.
        # 3.2.1; Megatron-Core's 1F1B all-to-all overlap), at the overlap slowdown; only on
        # stacks whose recipe enables it (Megatron: --overlap-moe-expert-parallel-comm).
        hidden = min(total.ep_exposed, total.fwd + total.bwd)
        total = replace(
            total, ep_exposed=total.ep_exposed - hidden, overlap_penalty=total.overlap_penalty + (hw.compute_slowdown - 1) * hidden
        )
    host_us = stack.layer_overhead_us + (stack.moe_host_us if moe else 0.0)  # host time, no GPU work to hide behind
    if host_us:
        total = replace(total, fwd=total.fwd + host_us * 1e-6 / 3, bwd=total.bwd + host_us * 2e-6 / 3)
    return total


def block_time(
    model: ModelSpec, hw: HardwareProfile, *, dtype: str, seq_len: int, mbs: int, tp: int, cp: int, sp: bool, recompute: str
) -> BlockTime:
    """A dense block (attention + MLP): the common case, kept as a direct entry point."""
    lp = LayerPlan.of(Plan(dp=1, tp=tp, pp=1, cp=cp, mbs=mbs, recompute=recompute, sp=sp))
    return layer_time(model, hw, Shape(dtype=dtype, seq_len=seq_len, mbs=mbs), lp, "dense")


# --- sub-layers ----------------------------------------------------------------


def _attention(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, cp_comm: str) -> BlockTime:
    tokens = shape.tokens(plan)
    gemms = part_gemms(model, "attn", tokens=tokens, tp=plan.tp)
    gemm = gemms_time(hw, shape.dtype, gemms)
    flops = attention_fwd_flops(model, seq_len=shape.seq_len, batch=shape.mbs, tp=plan.tp, cp=plan.cp)
    chunk = shape.seq_len / plan.cp
    eff = hw.attention_efficiency("bf16", chunk) * shape.stack.attention_factor(chunk, hopper=hopper_or_later(hw))
    attn_fwd = flops / (hw.peak("bf16") * eff * sustained(hw))
    attn_bwd = FLASH_BWD_OVER_FWD * attn_fwd
    if shape.stack.attention_kernel == "unfused":
        score_fwd, score_bwd = _score_passes(model, hw, shape, plan, chunk)
        attn_fwd, attn_bwd = attn_fwd + score_fwd, attn_bwd + score_bwd
    rope = cal.ACT_BYTES * 2 * (_q_width(model) + _k_width(model)) / plan.tp * tokens
    mem = elementwise_time(hw, shape, norm_residual_bytes(model, plan, tokens) + rope)
    cast = fp8_cast_time(hw, shape, gemms)
    fwd = gemm + attn_fwd + mem + cast / 3
    bwd = 2 * gemm + attn_bwd + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + 2 * cast / 3
    cp = _cp_exchange(model, hw, plan, cp_comm, tokens, attn_fwd, attn_bwd, overlap=shape.stack.cp_overlap, stack=shape.stack)
    up = gemms_time(hw, shape.dtype, tuple(g for g in gemms if g.name in ("q_up", "kv_up")))
    modules = {
        "core_attn": attn_fwd,
        "layernorm": norm_time(model, hw, shape, plan, tokens),
        "mla_up_proj": up + elementwise_time(hw, shape, rope),
    }  # MLA's up-projections and rope
    return assemble(
        hw,
        plan,
        fwd=fwd,
        bwd=bwd,
        selective=attn_fwd,
        tp=tp_collectives(model, hw, shape, plan, tokens),
        cp=cp,
        op_sac=op_sac(shape, gemm, mem),
        modules=modules,
    )


def _score_passes(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, chunk: float) -> tuple[float, float]:
    """HBM time (forward, backward) of an unfused attention's score matrix on one rank: every query of its
    chunk against every key, per local head and sequence, at the stack's bytes per score element (the scores,
    softmax and dropout each written to and read from HBM; no causal skip, the kernels compute the whole square)."""
    elems = shape.mbs * model.num_attention_heads / plan.tp * chunk * shape.seq_len
    fwd_bytes, bwd_bytes = shape.stack.score_bytes
    return memory_time(hw, fwd_bytes * elems), memory_time(hw, bwd_bytes * elems)


def _q_width(model: ModelSpec) -> int:
    return model.num_attention_heads * model.mla.qk_head_dim if model.mla else model.q_width


def _k_width(model: ModelSpec) -> int:
    return model.num_attention_heads * model.mla.qk_head_dim if model.mla else model.kv_width


def kv_bytes_per_token(model: ModelSpec, tp: int) -> float:
    """Bytes of K and V one token holds on one TP rank (MLA expands the latent per head)."""
    width = model.num_attention_heads * (model.mla.qk_head_dim + model.mla.v_head_dim) if model.mla else 2 * model.kv_width
    return cal.ACT_BYTES * width / tp


def cp_kv_bytes_per_token(model: ModelSpec, tp: int, stack: StackProfile) -> float:
    """Bytes of K and V one token holds on one TP rank as the stack's attention op takes them: repeated to the
    query heads where the model code repeats them before the op (StackProfile.attention_kv_repeated)."""
    if stack.attention_kv_repeated and model.mla is None:
        return cal.ACT_BYTES * 2 * model.q_width / tp
    return kv_bytes_per_token(model, tp)


def cp_backward_bytes_per_token(model: ModelSpec, tp: int, stack: StackProfile) -> float:
    """Bytes per token the CP attention backward holds beside the gathered K/V, under PyTorch's
    context_parallel (StackProfile.cp_fp32_grads; torch/distributed/tensor/experimental/_attention.py,
    _templated_ring_attention_backward with convert_to_f32): the fp32 dQ accumulator, and three fp32 dK/dV
    buffers of the ring: the one in hand, torch.cat of it for the next rank, and the all-to-all's received
    copy. 0 on other stacks."""
    if not stack.cp_fp32_grads:
        return 0.0
    q = 4 * (model.num_attention_heads * model.mla.qk_head_dim if model.mla else model.q_width) / tp
    return q + 3 * 2 * cp_kv_bytes_per_token(model, tp, stack)


def _cp_exchange(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Dims,
    cp_comm: str,
    tokens: float,
    attn_fwd: float,
    attn_bwd: float,
    *,
    overlap: bool = True,
    stack: StackProfile = NEUTRAL,
) -> tuple[float, float]:
    """(exposed, hidden) seconds of CP's K/V exchange for one attention sub-layer.

    ring (Liu et al. 2023; Megatron CP): cp-1 p2p steps of the local K/V chunk in
    forward, K/V plus their gradients in backward, each step hidden behind the
    attention of the chunk in hand, on stacks that overlap it (`overlap`). allgather (Llama 3, Dubey et al. 2024 sec.
    3.3.2): gather the whole K/V before attending and reduce-scatter their
    gradients after; simpler, not overlapped. Under PyTorch's context_parallel (stack.cp_fp32_grads) the
    backward all-gathers K/V again and passes the fp32 dK/dV around the ring, cp all-to-all steps
    (_templated_ring_attention_backward: dkv_rotater ALL_TO_ALL), in place of the reduce-scatter.
    """
    if plan.cp == 1:
        return 0.0, 0.0
    grid = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp)
    group = grid.group("cp")
    chunk = cp_kv_bytes_per_token(model, plan.tp, stack) * tokens
    pair = grid.neighbours("cp")
    if cp_comm == "allgather":
        full = chunk * plan.cp
        if stack.cp_fp32_grads:  # fp32 dK/dV: twice the bf16 chunk's bytes per step
            back = collective_time(hw, "all_gather", full, group) + plan.cp * collective_time(hw, "send_recv", 2 * chunk, pair)
        else:
            back = collective_time(hw, "reduce_scatter", full, group)
        forwards = 2 if plan.recompute == "full" else 1  # full recompute gathers K/V again in the recomputed forward
        return forwards * collective_time(hw, "all_gather", full, group) + back, 0.0
    ring_fwd = (plan.cp - 1) * collective_time(hw, "send_recv", chunk, pair)
    ring_bwd = 2 * ring_fwd
    if not overlap:
        return ring_fwd + ring_bwd, 0.0
    exposed = max(0.0, ring_fwd - attn_fwd) + max(0.0, ring_bwd - attn_bwd)
    return exposed, ring_fwd + ring_bwd - exposed


def _mlp(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims) -> BlockTime:
    tokens = shape.tokens(plan)
    gemms = part_gemms(model, "mlp", tokens=tokens, tp=plan.tp)
    gemm = gemms_time(hw, shape.dtype, gemms)
    act = elementwise_time(hw, shape, cal.ACT_BYTES * act_elems(model, model.ffn_hidden_size) / plan.tp * tokens)
    mem = elementwise_time(hw, shape, norm_residual_bytes(model, plan, tokens)) + act
    cast = fp8_cast_time(hw, shape, gemms)
    fwd = gemm + mem + cast / 3
    modules = {"mlp": fwd, "layernorm": norm_time(model, hw, shape, plan, tokens)}
    return assemble(
        hw,
        plan,
        fwd=fwd,
        bwd=2 * gemm + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + 2 * cast / 3,
        selective=act,
        tp=tp_collectives(model, hw, shape, plan, tokens),
        op_sac=op_sac(shape, gemm, mem),
        modules=modules,
    )


def _mamba(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims) -> BlockTime:
    """Mamba-2 mixer: in/out projections, causal conv, chunked SSD scan.

    CP for an SSM layer: the state runs along the whole sequence, so the scan
    cannot be split by position. Like Megatron's CP for Mamba, an all-to-all
    swaps the sequence split for a head split around the conv and scan (each rank
    scans the full sequence for heads/cp heads) and a second swaps it back;
    forward and backward, not overlapped.
    """
    mamba = model.mamba
    if mamba is None:
        raise ValueError("Mamba sub-layer on a model without mamba")
    tokens = shape.tokens(plan)
    h = model.hidden_size
    di, groups_n = mamba.inner(h), mamba.num_groups * mamba.state_size
    gemm = gemms_time(hw, shape.dtype, part_gemms(model, "mamba", tokens=tokens, tp=plan.tp))
    scan_flops = ssd_scan_flops(model, tokens=tokens, tp=plan.tp)
    scan = gemm_time(hw, "bf16", scan_flops)  # SSD runs as batched chunk matmuls of the same total size
    elems = (2 * (di + 2 * groups_n) + 5 * di) / plan.tp  # conv in/out, gate, gated norm
    mem = memory_time(hw, norm_residual_bytes(model, plan, tokens) + cal.ACT_BYTES * elems * tokens)
    fwd = gemm + scan + mem
    bwd = 2 * (gemm + scan) + cal.BACKWARD_OVER_FORWARD_MEMORY * mem
    cp_exposed = 0.0
    if plan.cp > 1:
        group = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp).group("cp")
        there = cal.ACT_BYTES * tokens * (di + 2 * groups_n) / plan.tp
        back = cal.ACT_BYTES * tokens * di / plan.tp
        one_way = collective_time(hw, "all_to_all", there, group) + collective_time(hw, "all_to_all", back, group)
        cp_exposed = (3 if plan.recompute == "full" else 2) * one_way
    return assemble(hw, plan, fwd=fwd, bwd=bwd, selective=scan, tp=tp_collectives(model, hw, shape, plan, tokens), cp=(cp_exposed, 0.0))


_PARTS: dict[str, Callable[..., BlockTime]] = {"attn": _attention, "mlp": _mlp, "moe": moe_time, "mamba": _mamba}


def loss_time(
    model: ModelSpec, hw: HardwareProfile, *, dtype: str, seq_len: int, mbs: int, tp: int, cp: int, logit_bytes: float = cal.LOGIT_BYTES
) -> float:
    """Logits GEMM (forward + backward) and the vocabulary-parallel cross-entropy, per micro-batch.

    The cross-entropy writes and reads back what it keeps per vocabulary entry
    (`logit_bytes`, the stack's: 10 unfused, fewer fused or chunked) in forward and backward.
    """
    tokens = mbs * seq_len // cp
    g = logits_gemm(model, tokens=tokens, tp=tp)
    gemm = 3 * gemm_time(hw, "fp16" if dtype == "fp16" else "bf16", g.flops)  # the output layer stays in 16 bits under fp8
    softmax = memory_time(hw, logit_bytes * 2 * tokens * g.n)  # write/read in forward and backward
    return gemm + softmax
