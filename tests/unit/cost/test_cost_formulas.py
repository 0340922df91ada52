"""Each formula of the cost model against a hand-derived case.

The toy profile (conftest.py) has round numbers: 1e15 FLOP/s bf16 peak, GEMM and
attention efficiency 0.5, HBM 2e12 B/s at efficiency 0.5, intra-node collectives
10 us + 100 GB/s, inter-node 20 us + 10 GB/s per rank.
"""

from __future__ import annotations

import pytest

from autopar.cost.calibration import SUSTAINED_TENSOR_EFFICIENCY
from autopar.cost.comm import collective_time
from autopar.cost.compute import block_time, loss_time
from autopar.cost.flops import (
    attention_fwd_flops,
    block_gemms,
    megatron_flops_per_iteration,
    model_flops_per_token,
)
from autopar.cost.kernels import gemm_time, gemm_time_floor, sustained
from autopar.cost.memory import block_activation_bytes
from autopar.cost.pipeline import in_flight_microbatches
from autopar.cost.states import state_bytes
from autopar.errors import ProfileError
from autopar.io.profiles import parse_profile
from autopar.spec.hardware import HardwareProfile
from autopar.spec.topology import Group, span
from tests.conftest import gpt_like, llama70b, toy_profile_dict

# --- FLOPs -----------------------------------------------------------------------


def test_block_gemm_flops_are_24_t_h2_for_gpt() -> None:
    # Narayanan et al. 2021 sec. 5.1: a GPT block's forward GEMMs cost 24*B*s*h^2.
    m = gpt_like()
    total = sum(g.flops for g in block_gemms(m, tokens=2048, tp=1))
    assert total == 24 * 2048 * 1024**2
    # tp splits every GEMM evenly
    assert sum(g.flops for g in block_gemms(m, tokens=2048, tp=4)) == total / 4


def test_block_gemm_flops_gqa_swiglu() -> None:
    # Llama 3 70B: q 8192x8192, k and v 8192x1024 each, o 8192x8192, MLP 3 x 8192x28672.
    m = llama70b()
    per_token = sum(g.flops for g in block_gemms(m, tokens=1, tp=1)) / 2
    assert per_token == 8192 * 8192 * 2 + 2 * 8192 * 1024 + 3 * 8192 * 28672


def test_attention_flops_causal_halved_and_split() -> None:
    # 4*b*s^2*a*d/2 = 4*2048^2*16*64/2 = 8,589,934,592
    m = gpt_like()
    assert attention_fwd_flops(m, seq_len=2048, batch=1, tp=1, cp=1) == 8_589_934_592
    assert attention_fwd_flops(m, seq_len=2048, batch=1, tp=2, cp=4) == 8_589_934_592 / 8


def test_megatron_eq3_gpt3() -> None:
    # GPT-3 175B, B=1536, s=2048, l=96, h=12288, V=51200:
    # 96*1536*2048*96*12288^2 = 4.3774988e18; 1 + 2048/73728 + 51200/18874368 = 1.0304905
    f = megatron_flops_per_iteration(batch=1536, seq_len=2048, layers=96, hidden=12288, vocab=51200)
    assert f == pytest.approx(4.3774988e18 * 1.0304905, rel=1e-6)


def test_palm_model_flops_per_token() -> None:
    # 6N + 12*L*a*d*s; N = 4 blocks x 12,582,912 matmul weights + 32000*1024 logits
    m = gpt_like()
    n = 4 * (4 * 1024**2 + 8 * 1024**2) + 32000 * 1024
    assert model_flops_per_token(m, 2048) == 6 * n + 12 * 4 * 1024 * 2048


# --- collectives -----------------------------------------------------------------


def test_collective_alpha_beta(toy_hw: HardwareProfile) -> None:
    intra8 = Group(size=8, per_node=8)
    # all-reduce: 10 us + 2*7/8 * 4e6 B / 100e9 B/s = 10 + 70 us
    assert collective_time(toy_hw, "all_reduce", 4e6, intra8) == pytest.approx(80e-6)
    # all-gather: 10 us + 7/8 * 4e6 / 100e9 = 45 us
    assert collective_time(toy_hw, "all_gather", 4e6, intra8) == pytest.approx(45e-6)
    # send/recv: 10 us + 4e6 / 100e9 = 50 us
    assert collective_time(toy_hw, "send_recv", 4e6, Group(size=2, per_node=2)) == pytest.approx(50e-6)
    assert collective_time(toy_hw, "all_reduce", 4e6, Group(size=1, per_node=1)) == 0.0


def test_inter_node_bandwidth_scales_with_ranks_per_node(toy_hw: HardwareProfile) -> None:
    # 16 ranks, 1 per node: 20 us + 2*15/16 * 1e9 / 10e9 = 0.1875 s + 20 us
    one = collective_time(toy_hw, "all_reduce", 1e9, Group(size=16, per_node=1))
    assert one == pytest.approx(20e-6 + 0.1875)
    # 16 ranks, 8 per node: 8 rails -> 80 GB/s (below the 100 GB/s NVLink cap)
    eight = collective_time(toy_hw, "all_reduce", 1e9, Group(size=16, per_node=8))
    assert eight == pytest.approx(20e-6 + 2 * 15 / 16 * 1e9 / 80e9)


def test_group_placement_in_megatron_rank_order() -> None:
    assert span(size=8, stride=1, gpus_per_node=8) == Group(size=8, per_node=8)  # tp8
    assert span(size=64, stride=8, gpus_per_node=8) == Group(size=64, per_node=1)  # dp over tp8
    assert span(size=32, stride=2, gpus_per_node=8) == Group(size=32, per_node=4)  # dp over tp2
    assert span(size=2, stride=2, gpus_per_node=8).intra


# --- block compute ---------------------------------------------------------------


def test_block_time_hand_derived(toy_hw: HardwareProfile) -> None:
    # Tensor-core rates: 1e15 * 0.5 efficiency * 0.75 sustained = 0.375e15 FLOP/s.
    # gpt_like, s=2048, b=1, tp=1: GEMMs 24*2048*1024^2 = 51.54e9 FLOPs -> 137.44 us fwd.
    # Attention 8.59e9 FLOPs fwd; fwd+bwd 3.5x -> 80.17 us (22.91 fwd, 57.27 bwd).
    # Memory-bound fwd: (10*1024 + 2*4096 + 2*2048) elements/token * 2048 tokens * 2 B = 92.27 MB
    # at 1e12 B/s -> 92.27 us; backward 2x.
    assert toy_hw.sustained_tensor_efficiency == 0.75  # the toy profile's own (tests/conftest.py)
    b = block_time(gpt_like(), toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=1, sp=False, recompute="none")
    gemm, attn_f, attn_b, mem = 137.439e-6, 22.906e-6, 57.266e-6, 92.275e-6
    assert b.fwd == pytest.approx(gemm + attn_f + mem, rel=1e-4)
    assert b.bwd == pytest.approx(2 * gemm + attn_b + 2 * mem, rel=1e-4)
    assert (b.recompute, b.tp_exposed, b.cp_exposed) == (0.0, 0.0, 0.0)
    full = block_time(gpt_like(), toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=1, sp=False, recompute="full")
    assert full.recompute == pytest.approx(b.fwd)


def test_tp_comm_with_and_without_sp(toy_hw: HardwareProfile) -> None:
    # tp=8: message 2048*1024*2 B = 4.194 MB. All-reduce 10 us + 1.75*4.194e6/1e11 = 83.4 us, x4 per block.
    no_sp = block_time(gpt_like(), toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=8, cp=1, sp=False, recompute="none")
    assert no_sp.tp_exposed == pytest.approx(4 * (10e-6 + 1.75 * 4194304 / 1e11), rel=1e-6)
    # SP: all-gather + reduce-scatter (2*10 us latency, same bytes), 75% hidden by TP overlap.
    sp = block_time(gpt_like(), toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=8, cp=1, sp=True, recompute="none")
    assert sp.tp_exposed == pytest.approx(0.25 * 4 * (20e-6 + 1.75 * 4194304 / 1e11), rel=1e-6)
    # SP also splits the norms/residual work by tp, so memory-bound forward time drops
    assert sp.fwd < no_sp.fwd


def test_cp_ring_hidden_behind_attention(toy_hw: HardwareProfile) -> None:
    # cp=2 at s=2048: K,V chunk 2*1024 tokens*1024*2 B = 4.19 MB per step, 51.9 us < attention fwd 8.6 us? no:
    # attention per rank halves (8.59 us fwd) so the ring (1 step: 10 us + 41.9 us) is partly exposed.
    b = block_time(gpt_like(), toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=2, sp=False, recompute="none")
    ring = 10e-6 + 2 * 1024 * 1024 * 2 / 1e11
    attn_f = 3.5 * 8_589_934_592 / 2 / (0.5e15 * 0.75) / 3.5
    attn_b = 2.5 * attn_f
    assert b.cp_exposed == pytest.approx(max(0, ring - attn_f) + max(0, 2 * ring - attn_b), rel=1e-6)


def test_loss_time(toy_hw: HardwareProfile) -> None:
    # logits GEMM 2*2048*32000*1024 = 134.2e9 FLOPs, x3 at 0.375e15 = 1073.7 us;
    # softmax 10 B * 2 * 2048 * 32000 = 1.31 GB at 1e12 -> 1310.7 us
    t = loss_time(gpt_like(), toy_hw, dtype="bf16", seq_len=2048, mbs=1, tp=1, cp=1)
    assert t == pytest.approx(3 * 134_217_728_000 / 0.375e15 + 10 * 2 * 2048 * 32000 / 1e12)


# --- memory ----------------------------------------------------------------------


def test_activations_match_korthikanti_34sbh() -> None:
    # Korthikanti et al. 2022 eq. (2) without the attention matrix (flash): s*b*h*34 bytes,
    # eq. (3) TP without SP: s*b*h*(10 + 24/t); eq. (4) with SP: s*b*h*34/t.
    m, t = gpt_like(), 2048
    sbh = t * 1024
    assert block_activation_bytes(m, tokens=t, tp=1, sp=False, recompute="none") == 34 * sbh
    assert block_activation_bytes(m, tokens=t, tp=8, sp=False, recompute="none") == pytest.approx(sbh * (10 + 24 / 8))
    assert block_activation_bytes(m, tokens=t, tp=8, sp=True, recompute="none") == pytest.approx(34 * sbh / 8)
    # full recompute keeps the block input only: 2*s*b*h / t under SP
    assert block_activation_bytes(m, tokens=t, tp=8, sp=True, recompute="full") == pytest.approx(2 * sbh / 8)
    # selective drops the GELU output (2*s*b*4h)
    assert block_activation_bytes(m, tokens=t, tp=1, sp=False, recompute="selective") == 26 * sbh


def test_zero_state_bytes() -> None:
    # 18 B/param plain; ZeRO-1 6 + 12/d; ZeRO-2 2 + 16/d; ZeRO-3 18/d (Rajbhandari et al. 2020)
    assert sum(state_bytes(1.0, zero=0, shards=8)) == 18
    assert sum(state_bytes(1.0, zero=1, shards=8)) == 6 + 12 / 8
    assert sum(state_bytes(1.0, zero=2, shards=8)) == 2 + 16 / 8
    assert sum(state_bytes(1.0, zero=3, shards=8)) == 18 / 8


def test_in_flight_microbatches() -> None:
    assert in_flight_microbatches(pp=4, vpp=1, microbatches=16) == 4
    assert in_flight_microbatches(pp=4, vpp=1, microbatches=2) == 2
    # interleaved: p * (1 + (p-1)/(p*v)) = 4 * (1 + 3/8) = 5.5
    assert in_flight_microbatches(pp=4, vpp=2, microbatches=16) == 5.5
    # with m = p (torchtitan's default micro-batch count) the first rank's warm-up, min(m*v, (v-1)p + 2(p-1))
    # = min(16, 8 + 14) chunk forwards, is every chunk of the 8 micro-batches: 8 held, not 8 * (1 + 7/16)
    assert in_flight_microbatches(pp=8, vpp=2, microbatches=8) == 8


def test_palm_convention_equals_megatron_core_r08() -> None:
    # Megatron-Core r0.8 num_floating_point_operations per sequence:
    # 12*s*l*h^2*((1 + g/n + s/h)*(a*d/h) + (f/h)*(3/2 if swiglu) + V/(2*l*h))
    m = llama70b()
    s, n_layers, h = 8192, 80, 8192
    megatron = 12 * s * n_layers * h * h * ((1 + 8 / 64 + s / h) * 1 + (28672 / h) * 1.5 + 128256 / (2 * n_layers * h))
    assert model_flops_per_token(m, s) * s == pytest.approx(megatron, rel=1e-12)


def test_all_to_all_across_nodes_is_off_node_share_on_one_rail(toy_hw: HardwareProfile) -> None:
    # 16 ranks, 4 per node: 12/16 of the buffer leaves the node through the rank's own 10 GB/s rail,
    # 3/16 stays on NVLink at 100 GB/s in parallel: 20 us + 0.75 * 1e9 / 1e10
    t = collective_time(toy_hw, "all_to_all", 1e9, Group(size=16, per_node=4))
    assert t == pytest.approx(20e-6 + 0.75 * 1e9 / 1e10)


def test_no_dropout_no_masks() -> None:
    # without dropout the two 1-byte masks go: 34 -> 32 s*b*h
    t = 2048
    assert block_activation_bytes(gpt_like(dropout=False), tokens=t, tp=1, sp=False, recompute="none") == 32 * t * 1024


def test_gemm_time_floor_is_the_best_efficiency(toy_hw: HardwareProfile) -> None:
    """kernels.gemm_time_floor: FLOPs / (peak x best efficiency x sustained); 1 TFLOP on the toy
    profile (1000 TFLOP/s, flat 0.5, sustained 0.75) takes 1e12 / (1e15 * 0.5 * 0.75) = 2.67 ms, and
    no split of those FLOPs into GEMMs runs faster (below 1 GFLOP efficiency falls with the size)."""
    assert gemm_time_floor(toy_hw, "bf16", 1e12) == pytest.approx(1e12 / (1e15 * 0.5 * 0.75))
    for pieces in (1, 10, 1000, 10**5):
        assert pieces * gemm_time(toy_hw, "bf16", 1e12 / pieces) >= gemm_time_floor(toy_hw, "bf16", 1e12)


def test_gemm_time_is_kept_per_profile_and_equals_the_curve(toy_hw: HardwareProfile) -> None:
    """kernels.gemm_time keeps its values per (profile, dtype, FLOPs): a kept value is the curve's, and a
    profile with another peak gets its own (the toy: 1 PFLOP/s bf16, curve 0.5 at its top)."""
    from dataclasses import replace

    from autopar.cost import kernels

    fresh = toy_hw.gemm_flops_per_efficiency("bf16", 1e12) / (1e15 * sustained(toy_hw))
    assert gemm_time(toy_hw, "bf16", 1e12) == gemm_time(toy_hw, "bf16", 1e12) == fresh
    faster = replace(toy_hw, peak_flops={**toy_hw.peak_flops, "bf16": 2e15})
    assert gemm_time(faster, "bf16", 1e12) == fresh / 2
    assert kernels._GEMMS[(id(faster), "bf16", 1e12, False)] == (faster, fresh / 2)
    kernels._GEMMS.clear()
    assert gemm_time(toy_hw, "bf16", 1e12) == fresh


def test_a_profiles_own_sustained_share_sets_its_tensor_rate_else_the_fallback(toy_hw: HardwareProfile) -> None:
    """cost/kernels.py sustained: the profile's gpu.sustained_tensor_efficiency (the toy's 0.75), else
    cost/calibration.py's SUSTAINED_TENSOR_EFFICIENCY. 1 TFLOP on the toy (1000 TFLOP/s, flat 0.5):
    1e12 / (1e15 x 0.5 x 0.75) = 2.67 ms; without its own value 1e12 / (1e15 x 0.5 x 0.726) = 2.75 ms."""
    gpu = {k: v for k, v in toy_profile_dict()["gpu"].items() if k != "sustained_tensor_efficiency"}
    bare = parse_profile(toy_profile_dict(gpu=gpu), where="bare.yaml")
    assert (sustained(toy_hw), sustained(bare)) == (0.75, SUSTAINED_TENSOR_EFFICIENCY)
    assert gemm_time(toy_hw, "bf16", 1e12) == pytest.approx(1e12 / (1e15 * 0.5 * 0.75))
    assert gemm_time(bare, "bf16", 1e12) == pytest.approx(1e12 / (1e15 * 0.5 * SUSTAINED_TENSOR_EFFICIENCY))
    with pytest.raises(ProfileError, match=r"gpu\.sustained_tensor_efficiency"):
        parse_profile(toy_profile_dict(gpu={**gpu, "sustained_tensor_efficiency": 1.5}), where="bad.yaml")
