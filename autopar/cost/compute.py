"""Time of one block (and of the loss layer) for one micro-batch on one rank.

GEMMs take FLOPs / (peak * eff(FLOPs)) with the profile's measured efficiency
curve; attention takes the flash-attention probe's efficiency; memory-bound ops
take bytes / (HBM bandwidth * streaming efficiency). Communication inside the
block (TP, CP) is charged here too, exposed or hidden as the plan allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.cost import calibration as cal
from autopar.cost.comm import Group, collective_time, group_of
from autopar.cost.flops import FLASH_BWD_OVER_FWD, attention_fwd_flops, block_gemms, logits_gemm
from autopar.hardware import HardwareProfile
from autopar.model import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockTime:
    """Seconds one block spends on one micro-batch (forward + backward) on one rank."""

    fwd: float  # forward compute: GEMMs, attention, memory-bound ops
    bwd: float  # backward compute
    recompute: float  # extra forward work of activation recomputation
    tp_exposed: float  # TP collectives left on the critical path
    cp_exposed: float  # CP ring exchange not hidden behind attention
    overlap_penalty: float  # compute slowed down by the communication it hides

    @property
    def compute(self) -> float:
        return self.fwd + self.bwd + self.recompute

    @property
    def total(self) -> float:
        return self.compute + self.tp_exposed + self.cp_exposed + self.overlap_penalty


def gemm_time(hw: HardwareProfile, dtype: str, flops: float) -> float:
    return flops / (hw.peak(dtype) * hw.gemm_efficiency(dtype, flops) * cal.SUSTAINED_TENSOR_EFFICIENCY)


def memory_time(hw: HardwareProfile, nbytes: float) -> float:
    return nbytes / (hw.hbm_bytes_per_s * hw.memory_efficiency)


def block_time(
    model: ModelSpec, hw: HardwareProfile, *, dtype: str, seq_len: int, mbs: int, tp: int, cp: int, sp: bool, recompute: str
) -> BlockTime:
    """Forward, backward, recompute and in-block communication of one dense block."""
    tokens = mbs * seq_len // cp
    h = model.hidden_size
    gemm_fwd = sum(gemm_time(hw, dtype, g.flops) for g in block_gemms(model, tokens=tokens, tp=tp))

    attn_flops = attention_fwd_flops(model, seq_len=seq_len, batch=mbs, tp=tp, cp=cp)
    attn_rate = hw.peak("bf16") * hw.attention_efficiency("bf16", seq_len / cp) * cal.SUSTAINED_TENSOR_EFFICIENCY
    attn_total = (1 + FLASH_BWD_OVER_FWD) * attn_flops / attn_rate
    attn_fwd = attn_total / (1 + FLASH_BWD_OVER_FWD)
    attn_bwd = attn_total - attn_fwd

    act_elems = (3 if model.ffn_activation == "swiglu" else 2) * model.ffn_hidden_size / tp
    rope_elems = 2 * (model.q_width + model.kv_width) / tp
    outside_tokens = tokens / tp if (sp and tp > 1) else tokens
    mem_fwd = memory_time(hw, cal.ACT_BYTES * (cal.ELEMS_OUTSIDE_TP_PER_TOKEN * h * outside_tokens + (act_elems + rope_elems) * tokens))
    act_fwd = memory_time(hw, cal.ACT_BYTES * act_elems * tokens)

    fwd = gemm_fwd + attn_fwd + mem_fwd
    bwd = 2 * gemm_fwd + attn_bwd + cal.BACKWARD_OVER_FORWARD_MEMORY * mem_fwd
    extra = {"none": 0.0, "selective": attn_fwd + act_fwd, "full": fwd}[recompute]

    # TP: two collectives forward (after attention and MLP), two backward, two more
    # when the forward is recomputed. Without SP each is an all-reduce of the block's
    # activations; with SP an all-gather plus a reduce-scatter of the same bytes
    # (Korthikanti et al. 2022, sec. 4.2.2: same volume, split in two).
    tp_exposed = tp_hidden = 0.0
    if tp > 1:
        group = Group(size=tp, per_node=min(tp, hw.gpus_per_node))
        nbytes = cal.ACT_BYTES * tokens * h
        if sp:
            one = collective_time(hw, "all_gather", nbytes, group) + collective_time(hw, "reduce_scatter", nbytes, group)
        else:
            one = collective_time(hw, "all_reduce", nbytes, group)
        count = 6 if recompute == "full" else 4
        tp_total = count * one
        tp_hidden = cal.TP_OVERLAP_FRACTION * tp_total if sp else 0.0
        tp_exposed = tp_total - tp_hidden

    # CP: ring attention passes K and V around the cp ranks (cp-1 steps) in forward,
    # and K, V plus their gradients in backward, hidden behind the attention compute.
    cp_exposed = cp_hidden = 0.0
    if cp > 1:
        group = group_of(size=cp, stride=tp, gpus_per_node=hw.gpus_per_node)
        kv_bytes = cal.ACT_BYTES * 2 * tokens * model.kv_width / tp
        pair = Group(size=2, per_node=2 if group.intra else 1)
        ring_fwd = (cp - 1) * collective_time(hw, "send_recv", kv_bytes, pair)
        ring_bwd = 2 * ring_fwd
        cp_exposed = max(0.0, ring_fwd - attn_fwd) + max(0.0, ring_bwd - attn_bwd)
        cp_hidden = ring_fwd + ring_bwd - cp_exposed

    penalty = (hw.compute_slowdown - 1) * (tp_hidden + cp_hidden)
    return BlockTime(fwd=fwd, bwd=bwd, recompute=extra, tp_exposed=tp_exposed, cp_exposed=cp_exposed, overlap_penalty=penalty)


def loss_time(model: ModelSpec, hw: HardwareProfile, *, dtype: str, seq_len: int, mbs: int, tp: int, cp: int) -> float:
    """Logits GEMM (forward + backward) and the vocabulary-parallel cross-entropy, per micro-batch."""
    tokens = mbs * seq_len // cp
    g = logits_gemm(model, tokens=tokens, tp=tp)
    gemm = 3 * gemm_time(hw, dtype, g.flops)
    softmax = memory_time(hw, cal.LOGIT_BYTES * 2 * tokens * g.n)  # write/read in forward and backward
    return gemm + softmax
