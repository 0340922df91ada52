"""Time of one layer (and of the loss layer) for one micro-batch on one rank.

A layer is made of sub-layers (families.KIND_PARTS): attention (GQA or MLA), a
dense MLP, an MoE, or a Mamba-2 mixer. Each sub-layer's GEMMs take
FLOPs / (peak * eff(FLOPs) * sustained) with the profile's measured curve;
attention takes the flash-attention efficiency; memory-bound work takes
bytes / (HBM bandwidth * streaming efficiency). Communication inside the layer
(TP, CP, EP) is charged here too, exposed or hidden as the plan allows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from autopar.cost import calibration as cal
from autopar.cost.comm import collective_time
from autopar.cost.flops import (
    FLASH_BWD_OVER_FWD,
    attention_fwd_flops,
    expert_gemms,
    logits_gemm,
    part_gemms,
    ssd_scan_flops,
)
from autopar.cost.kernels import (
    elementwise_time,
    fp8_cast_time,
    gemm_time,
    gemm_time_floor,
    gemms_time,
    hopper_or_later,
    memory_time,
    op_sac,
)
from autopar.cost.shape import Dims, Shape
from autopar.spec.families import KIND_PARTS, MoESpec
from autopar.spec.hardware import HardwareProfile, fit_for
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import NEUTRAL, StackProfile
from autopar.spec.topology import RankGrid


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockTime:
    """Seconds one layer spends on one micro-batch (forward + backward) on one rank."""

    fwd: float  # forward compute: GEMMs, attention, memory-bound ops
    bwd: float  # backward compute
    recompute: float  # extra forward work of activation recomputation
    tp_exposed: float  # TP collectives left on the critical path
    cp_exposed: float  # CP exchange not hidden behind attention
    ep_exposed: float  # MoE all-to-all dispatch and combine
    overlap_penalty: float  # compute slowed down by the communication it hides

    @property
    def compute(self) -> float:
        return self.fwd + self.bwd + self.recompute

    @property
    def total(self) -> float:
        return self.compute + self.tp_exposed + self.cp_exposed + self.ep_exposed + self.overlap_penalty

    def scaled(self, n: float) -> BlockTime:
        """n layers of this kind."""
        return BlockTime(fwd=n * self.fwd, bwd=n * self.bwd, recompute=n * self.recompute, tp_exposed=n * self.tp_exposed,
                         cp_exposed=n * self.cp_exposed, ep_exposed=n * self.ep_exposed, overlap_penalty=n * self.overlap_penalty)

    def __add__(self, other: BlockTime) -> BlockTime:
        return BlockTime(
            fwd=self.fwd + other.fwd, bwd=self.bwd + other.bwd, recompute=self.recompute + other.recompute,
            tp_exposed=self.tp_exposed + other.tp_exposed, cp_exposed=self.cp_exposed + other.cp_exposed,
            ep_exposed=self.ep_exposed + other.ep_exposed, overlap_penalty=self.overlap_penalty + other.overlap_penalty,
        )


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


def combine_parts(hw: HardwareProfile, parts: list[BlockTime], *, pipelined: bool,
                  stack: StackProfile = NEUTRAL, moe: bool = False) -> BlockTime:
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
        total = replace(total, ep_exposed=total.ep_exposed - hidden,
                        overlap_penalty=total.overlap_penalty + (hw.compute_slowdown - 1) * hidden)
    host_us = stack.layer_overhead_us + (stack.moe_host_us if moe else 0.0)  # host time, no GPU work to hide behind
    if host_us:
        total = replace(total, fwd=total.fwd + host_us * 1e-6 / 3, bwd=total.bwd + host_us * 2e-6 / 3)
    return total


def block_time(model: ModelSpec, hw: HardwareProfile, *, dtype: str, seq_len: int, mbs: int, tp: int, cp: int, sp: bool,
               recompute: str) -> BlockTime:
    """A dense block (attention + MLP): the common case, kept as a direct entry point."""
    lp = LayerPlan.of(Plan(dp=1, tp=tp, pp=1, cp=cp, mbs=mbs, recompute=recompute, sp=sp))
    return layer_time(model, hw, Shape(dtype=dtype, seq_len=seq_len, mbs=mbs), lp, "dense")


# --- shared pieces -------------------------------------------------------------


def _outside_tokens(plan: Dims, tokens: float) -> float:
    """Tokens the norm/residual work runs on: split by tp under SP, replicated otherwise."""
    return tokens / plan.tp if plan.sp else tokens


def _tp_collectives(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, tokens: float) -> tuple[float, float]:
    """(exposed, hidden) seconds of one sub-layer's TP collectives.

    One collective forward (all-reduce, or all-gather + reduce-scatter under SP:
    Korthikanti et al. 2022 sec. 4.2.2, same bytes), one backward, one more when
    the forward is recomputed. Under SP a share is hidden by TP comm overlap.
    """
    if plan.tp == 1:
        return 0.0, 0.0
    group = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp).group("tp")
    nbytes = cal.ACT_BYTES * tokens * model.hidden_size
    if plan.sp:
        one = collective_time(hw, "all_gather", nbytes, group) + collective_time(hw, "reduce_scatter", nbytes, group)
    else:
        one = collective_time(hw, "all_reduce", nbytes, group)
    total = (3 if plan.recompute == "full" else 2) * one
    hidden = shape.stack.tp_overlap * total if plan.sp else 0.0
    return total - hidden, hidden


def _assemble(hw: HardwareProfile, plan: Dims, *, fwd: float, bwd: float, selective: float, tp: tuple[float, float],
              cp: tuple[float, float] = (0.0, 0.0), ep: float = 0.0, op_sac: float | None = None,
              modules: dict[str, float] | None = None) -> BlockTime:
    """`selective` is what Megatron's selective recompute redoes; `op_sac` what a per-op SAC policy redoes;
    `modules` the forward seconds of each module a module-level recompute (plan.modules) redoes."""
    if plan.recompute == "selective" and op_sac is not None:
        selective = op_sac
    if plan.recompute == "selective" and plan.modules:
        selective = sum((modules or {}).get(m, 0.0) for m in plan.modules)
    recompute = {"none": 0.0, "selective": selective, "full": fwd}[plan.recompute]
    hidden = tp[1] + cp[1]
    return BlockTime(fwd=fwd, bwd=bwd, recompute=recompute, tp_exposed=tp[0], cp_exposed=cp[0], ep_exposed=ep,
                     overlap_penalty=(hw.compute_slowdown - 1) * hidden)


def _norm_time(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, tokens: float) -> float:
    """One norm's forward (read h, write h): what recomputing a "layernorm" module redoes per sub-layer."""
    return elementwise_time(hw, shape, cal.ACT_BYTES * 2 * model.hidden_size * _outside_tokens(plan, tokens))


def _norm_residual_bytes(model: ModelSpec, plan: Dims, tokens: float) -> float:
    """One norm (read h, write h) and one residual add (read 2h, write h) per sub-layer."""
    return cal.ACT_BYTES * cal.ELEMS_OUTSIDE_TP_PER_PART * model.hidden_size * _outside_tokens(plan, tokens)


# --- sub-layers ----------------------------------------------------------------


def _attention(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, cp_comm: str) -> BlockTime:
    tokens = shape.tokens(plan)
    gemms = part_gemms(model, "attn", tokens=tokens, tp=plan.tp)
    gemm = gemms_time(hw, shape.dtype, gemms)
    flops = attention_fwd_flops(model, seq_len=shape.seq_len, batch=shape.mbs, tp=plan.tp, cp=plan.cp)
    chunk = shape.seq_len / plan.cp
    eff = hw.attention_efficiency("bf16", chunk) * shape.stack.attention_factor(chunk, hopper=hopper_or_later(hw))
    attn_fwd = flops / (hw.peak("bf16") * eff * cal.SUSTAINED_TENSOR_EFFICIENCY)
    attn_bwd = FLASH_BWD_OVER_FWD * attn_fwd
    rope = cal.ACT_BYTES * 2 * (_q_width(model) + _k_width(model)) / plan.tp * tokens
    mem = elementwise_time(hw, shape, _norm_residual_bytes(model, plan, tokens) + rope)
    cast = fp8_cast_time(hw, shape, gemms)
    fwd = gemm + attn_fwd + mem + cast / 3
    bwd = 2 * gemm + attn_bwd + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + 2 * cast / 3
    cp = _cp_exchange(model, hw, plan, cp_comm, tokens, attn_fwd, attn_bwd, overlap=shape.stack.cp_overlap)
    up = gemms_time(hw, shape.dtype, tuple(g for g in gemms if g.name in ("q_up", "kv_up")))
    modules = {"core_attn": attn_fwd, "layernorm": _norm_time(model, hw, shape, plan, tokens),
               "mla_up_proj": up + elementwise_time(hw, shape, rope)}  # MLA's up-projections and rope
    return _assemble(hw, plan, fwd=fwd, bwd=bwd, selective=attn_fwd, tp=_tp_collectives(model, hw, shape, plan, tokens),
                     cp=cp, op_sac=op_sac(shape, gemm, mem), modules=modules)


def _q_width(model: ModelSpec) -> int:
    return model.num_attention_heads * model.mla.qk_head_dim if model.mla else model.q_width


def _k_width(model: ModelSpec) -> int:
    return model.num_attention_heads * model.mla.qk_head_dim if model.mla else model.kv_width


def kv_bytes_per_token(model: ModelSpec, tp: int) -> float:
    """Bytes of K and V one token holds on one TP rank (MLA expands the latent per head)."""
    width = model.num_attention_heads * (model.mla.qk_head_dim + model.mla.v_head_dim) if model.mla else 2 * model.kv_width
    return cal.ACT_BYTES * width / tp


def _cp_exchange(model: ModelSpec, hw: HardwareProfile, plan: Dims, cp_comm: str, tokens: float, attn_fwd: float,
                 attn_bwd: float, *, overlap: bool = True) -> tuple[float, float]:
    """(exposed, hidden) seconds of CP's K/V exchange for one attention sub-layer.

    ring (Liu et al. 2023; Megatron CP): cp-1 p2p steps of the local K/V chunk in
    forward, K/V plus their gradients in backward, each step hidden behind the
    attention of the chunk in hand, on stacks that overlap it (`overlap`). allgather (Llama 3, Dubey et al. 2024 sec.
    3.3.2): gather the whole K/V before attending and reduce-scatter their
    gradients after; simpler, not overlapped.
    """
    if plan.cp == 1:
        return 0.0, 0.0
    grid = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp)
    group = grid.group("cp")
    chunk = kv_bytes_per_token(model, plan.tp) * tokens
    if cp_comm == "allgather":
        full = chunk * plan.cp
        exposed = collective_time(hw, "all_gather", full, group) + collective_time(hw, "reduce_scatter", full, group)
        return exposed, 0.0
    pair = grid.neighbours("cp")
    ring_fwd = (plan.cp - 1) * collective_time(hw, "send_recv", chunk, pair)
    ring_bwd = 2 * ring_fwd
    if not overlap:
        return ring_fwd + ring_bwd, 0.0
    exposed = max(0.0, ring_fwd - attn_fwd) + max(0.0, ring_bwd - attn_bwd)
    return exposed, ring_fwd + ring_bwd - exposed


def _act_elems(model: ModelSpec, width: float) -> float:
    """Elements the MLP activation reads and writes per token: SwiGLU 2f in, f out; else f in, f out."""
    return (3 if model.ffn_activation == "swiglu" else 2) * width


def _mlp(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims) -> BlockTime:
    tokens = shape.tokens(plan)
    gemms = part_gemms(model, "mlp", tokens=tokens, tp=plan.tp)
    gemm = gemms_time(hw, shape.dtype, gemms)
    act = elementwise_time(hw, shape, cal.ACT_BYTES * _act_elems(model, model.ffn_hidden_size) / plan.tp * tokens)
    mem = elementwise_time(hw, shape, _norm_residual_bytes(model, plan, tokens)) + act
    cast = fp8_cast_time(hw, shape, gemms)
    fwd = gemm + mem + cast / 3
    modules = {"mlp": fwd, "layernorm": _norm_time(model, hw, shape, plan, tokens)}
    return _assemble(hw, plan, fwd=fwd, bwd=2 * gemm + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + 2 * cast / 3, selective=act,
                     tp=_tp_collectives(model, hw, shape, plan, tokens), op_sac=op_sac(shape, gemm, mem), modules=modules)


def _moe(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, ep: int, etp: int) -> BlockTime:
    """Router, routed experts (grouped GEMMs at the per-expert size), shared experts, EP all-to-all.

    Tokens reach the experts SP-split when etp = 1 (no TP collective around the
    experts) or gathered across TP when etp = tp (experts split like an MLP).
    Each routed copy of a token goes to its expert's rank and back (dispatch and
    combine), forward and backward (_ep_exchange); exposed here, hidden by the
    paired micro-batch in pipelined plans (layer_time).
    """
    moe = _moe_spec(model)
    tokens = shape.tokens(plan)
    expert_tokens = tokens * etp / plan.tp  # tokens one rank sees in expert space
    gemms = expert_gemms(model, tokens=expert_tokens, ep=ep, etp=etp)
    gemms += part_gemms(model, "moe", tokens=tokens, tp=plan.tp)  # router, shared experts
    gemm = gemms_time(hw, shape.dtype, gemms)
    copies = expert_tokens * moe.top_k * moe.capacity_factor
    act, mem = _moe_memory(model, hw, shape, plan, tokens, expert_tokens, etp)
    cast = fp8_cast_time(hw, shape, gemms)
    fwd = gemm + mem + cast / 3
    a2a = 0.0
    if ep > 1:
        dispatch = 1 if shape.dtype == "fp8" else cal.ACT_BYTES  # DeepEP/TE dispatch FP8 tokens under an FP8 recipe
        over_tp = shape.stack.ep_over_tp and etp == 1
        bf16 = _ep_exchange(model, hw, plan, ep, expert_tokens, 2, over_tp=over_tp)
        fwd_pair = _ep_exchange(model, hw, plan, ep, expert_tokens, dispatch, over_tp=over_tp) + bf16
        redo = plan.recompute == "full" or (plan.recompute == "selective" and "moe" in plan.modules)
        a2a = (2 if redo else 1) * fwd_pair + 2 * bf16
    tp = _tp_collectives(model, hw, shape, plan, tokens) if etp > 1 else (0.0, 0.0)
    bwd = 2 * gemm + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + 2 * cast / 3
    shared = part_gemms(model, "moe", tokens=tokens, tp=plan.tp)[1:]
    modules = {"moe": fwd, "layernorm": _norm_time(model, hw, shape, plan, tokens),
               "moe_act": elementwise_time(hw, shape, cal.ACT_BYTES * _act_elems(model, 1) * copies
                                           * moe.expert_ffn_hidden_size / etp),
               "shared_experts": gemms_time(hw, shape.dtype, shared) + elementwise_time(
                   hw, shape, cal.ACT_BYTES * _act_elems(model, 1) * tokens * moe.shared_width / plan.tp)}
    return _assemble(hw, plan, fwd=fwd, bwd=bwd, selective=act, tp=tp, ep=a2a, op_sac=op_sac(shape, gemm, mem),
                     modules=modules)


def _moe_memory(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, tokens: float, expert_tokens: float,
                etp: int) -> tuple[float, float]:
    """(activation, all memory-bound) forward seconds of the MoE sub-layer: norm and residual, the
    experts' activation, and the permute and unpermute of every routed copy (read + write)."""
    moe = _moe_spec(model)
    copies = expert_tokens * moe.top_k * moe.capacity_factor
    act_width = copies * moe.expert_ffn_hidden_size / etp + tokens * moe.shared_width / plan.tp
    act = elementwise_time(hw, shape, cal.ACT_BYTES * _act_elems(model, 1) * act_width)
    permute = memory_time(hw, cal.ACT_BYTES * 4 * copies * model.hidden_size)
    return act, elementwise_time(hw, shape, _norm_residual_bytes(model, plan, tokens)) + act + permute


def moe_floor(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims) -> float:
    """A lower bound of _moe(...).total less its ep_exposed, at any ep and etp the rules allow.

    The routed experts' FLOPs per rank do not depend on ep or etp (E/ep experts of
    ep/E of the routed copies, each split etp ways over etp times the tokens); they
    are bounded at the GEMM curve's best efficiency (kernels.gemm_time_floor). The
    memory-bound work is least at etp = 1 (each copy permuted once); FP8 casts, TP
    collectives and overlap slowdowns are at least 0, and full recompute redoes the
    forward. The search prices this once per layer class instead of once per (ep, etp).
    """
    tokens = shape.tokens(plan)
    expert_tokens = tokens / plan.tp
    routed = sum(g.flops * g.count for g in expert_gemms(model, tokens=expert_tokens, ep=1, etp=1))
    gemm = gemm_time_floor(hw, shape.dtype, routed) + gemms_time(hw, shape.dtype, part_gemms(model, "moe", tokens=tokens,
                                                                                              tp=plan.tp))
    mem = _moe_memory(model, hw, shape, plan, tokens, expert_tokens, 1)[1]
    fwd = gemm + mem
    return fwd + 2 * gemm + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + (fwd if plan.recompute == "full" else 0.0)


def _moe_spec(model: ModelSpec) -> MoESpec:
    if model.moe is None:
        raise ValueError("MoE sub-layer on a model without moe")
    return model.moe


def _ep_exchange(model: ModelSpec, hw: HardwareProfile, plan: Dims, ep: int, tokens: float, nbytes: int, *,
                 over_tp: bool = False) -> float:
    """Seconds of one EP dispatch (or combine) of `tokens` tokens per rank, `nbytes` per element.

    Inside a node it is an all-to-all of every routed copy. Across nodes we model
    the node-aware dispatcher (DeepEP, Megatron's flex dispatcher): a token
    crosses the network once per destination node, then NVLink fans it out to
    its experts there. With uniform routing over g nodes a token's top_k experts
    sit on g(1 - (1 - 1/g)^k) distinct nodes, at most max_nodes_per_token; the
    remote ones are (g - 1)/g of them, sent on the rank's own NIC rail.
    """
    moe = model.moe
    if moe is None:
        return 0.0
    grid = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp, ep=ep, ep_over_tp=over_tp)
    group = grid.group("ep")
    copies = tokens * moe.top_k * moe.capacity_factor
    if group.intra:
        return collective_time(hw, "all_to_all", nbytes * copies * model.hidden_size, group)
    nodes = group.size / group.per_node
    reached = nodes * (1 - (1 - 1 / nodes) ** moe.top_k)
    if moe.max_nodes_per_token:
        reached = min(reached, moe.max_nodes_per_token)
    remote = reached * (nodes - 1) / nodes
    inter = fit_for(hw.inter["all_to_all"], int(nodes))
    intra = fit_for(hw.intra["all_to_all"], min(group.per_node, hw.gpus_per_node))
    network = nbytes * tokens * moe.capacity_factor * remote * model.hidden_size / inter.bw_bytes_per_s
    fan_out = nbytes * copies * model.hidden_size * (group.per_node - 1) / group.per_node / intra.bw_bytes_per_s
    return inter.latency_s + max(network, fan_out)


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
    mem = memory_time(hw, _norm_residual_bytes(model, plan, tokens) + cal.ACT_BYTES * elems * tokens)
    fwd = gemm + scan + mem
    bwd = 2 * (gemm + scan) + cal.BACKWARD_OVER_FORWARD_MEMORY * mem
    cp_exposed = 0.0
    if plan.cp > 1:
        group = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp).group("cp")
        there = cal.ACT_BYTES * tokens * (di + 2 * groups_n) / plan.tp
        back = cal.ACT_BYTES * tokens * di / plan.tp
        one_way = collective_time(hw, "all_to_all", there, group) + collective_time(hw, "all_to_all", back, group)
        cp_exposed = (3 if plan.recompute == "full" else 2) * one_way
    return _assemble(hw, plan, fwd=fwd, bwd=bwd, selective=scan, tp=_tp_collectives(model, hw, shape, plan, tokens),
                     cp=(cp_exposed, 0.0))


_PARTS: dict[str, Callable[..., BlockTime]] = {"attn": _attention, "mlp": _mlp, "moe": _moe, "mamba": _mamba}


def loss_time(model: ModelSpec, hw: HardwareProfile, *, dtype: str, seq_len: int, mbs: int, tp: int, cp: int,
              logit_bytes: float = cal.LOGIT_BYTES) -> float:
    """Logits GEMM (forward + backward) and the vocabulary-parallel cross-entropy, per micro-batch.

    The cross-entropy writes and reads back what it keeps per vocabulary entry
    (`logit_bytes`, the stack's: 10 unfused, fewer fused or chunked) in forward and backward.
    """
    tokens = mbs * seq_len // cp
    g = logits_gemm(model, tokens=tokens, tp=tp)
    gemm = 3 * gemm_time(hw, "fp16" if dtype == "fp16" else "bf16", g.flops)  # the output layer stays in 16 bits under fp8
    softmax = memory_time(hw, logit_bytes * 2 * tokens * g.n)  # write/read in forward and backward
    return gemm + softmax
