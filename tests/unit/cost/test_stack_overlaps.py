"""How the stacks overlap communication with compute, each case derived by hand.

The toy profile (conftest) has round numbers: 1000 TFLOP/s bf16, GEMM and attention
efficiency 0.5, effective HBM 1e12 B/s, intra collectives 10 us + 100 GB/s.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar.cost.comm import Group, collective_time
from autopar.cost.compute import layer_time
from autopar.cost.shape import Shape
from autopar.cost.step import estimate
from autopar.io.stacks import load_stack
from autopar.spec.families import MoESpec
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import NEUTRAL
from tests.conftest import gpt_like


def test_fsdp_backward_collectives_overlap_the_recomputed_forward(toy_hw: HardwareProfile) -> None:
    # ZeRO-3 with full recompute: each block's backward first re-runs its forward, then its
    # backward; the backward all-gather and the gradient reduce-scatter run on their own stream
    # behind both (Megatron custom FSDP re-gathers in _pre_backward and the recompute reuses the
    # gathered weights; PyTorch FSDP's backward prefetch likewise), so the window is B + R.
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)  # one micro-batch per step
    plan = Plan(dp=8, tp=1, pp=1, zero=3, sp=False, recompute="full")
    ov = 0.1
    stack = replace(NEUTRAL, dp_overlap=ov)
    block = layer_time(m, toy_hw, Shape(dtype="bf16", seq_len=2048, mbs=1, stack=stack), plan, "dense")
    f, b, r = 4 * block.fwd, 4 * block.bwd, 4 * block.recompute
    assert r == pytest.approx(f)  # full recompute redoes the forward
    p, group = m.total_params(), Group(size=8, per_node=8)
    rs = collective_time(toy_hw, "reduce_scatter", 4 * p, group)  # fp32 gradients
    ag = collective_time(toy_hw, "all_gather", 2 * p, group)  # bf16 weights
    expected = max(0.0, ag - ov * f) + max(0.0, ag + rs - ov * (b + r))
    assert ag + rs - ov * (b + r) > 0  # the case is not trivially hidden
    assert estimate(m, toy_hw, job, plan, stack=stack).time.dp_comm == pytest.approx(expected)
    # the backward window without the recompute would expose ov * r more
    assert max(0.0, ag + rs - ov * b) - max(0.0, ag + rs - ov * (b + r)) == pytest.approx(ov * r)


def _moe_toy() -> ModelSpec:
    return ModelSpec(
        name="moe-toy",
        layers=4,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=4,
        head_dim=64,
        ffn_hidden_size=2048,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=4096,
        max_seq_len=4096,
        tie_embeddings=False,
        moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=2048),
    )


def test_eager_moe_dispatch_host_time_is_added_per_moe_layer_and_micro_batch(toy_hw: HardwareProfile) -> None:
    # The dispatch reads token counts on the host, so the host time of the eager router/dispatch
    # kernels is exposed once per MoE layer per micro-batch: forward 1/3, backward 2/3 of it.
    m = _moe_toy()
    assert set(m.layer_kinds()) == {"moe"}
    plan = Plan(dp=1, tp=1, pp=1, sp=False)
    eager = replace(NEUTRAL, moe_host_us=4000.0)
    shape = Shape(dtype="bf16", seq_len=4096, mbs=1)
    graphed_layer = layer_time(m, toy_hw, shape, plan, "moe")
    eager_layer = layer_time(m, toy_hw, replace(shape, stack=eager), plan, "moe")
    assert eager_layer.fwd - graphed_layer.fwd == pytest.approx(4e-3 / 3)
    assert eager_layer.bwd - graphed_layer.bwd == pytest.approx(8e-3 / 3)
    # whole step: 2 micro-batches x 4 MoE layers x 4 ms
    job = Job(gpus=1, gpus_per_node=8, global_batch=2, seq_len=4096)
    slow, fast = (estimate(m, toy_hw, job, plan, stack=s).step_time_s for s in (eager, NEUTRAL))
    assert slow - fast == pytest.approx(2 * 4 * 4e-3)
    # a dense model has no dispatch: unchanged
    dense = gpt_like(layers=4)
    dense_job = Job(gpus=1, gpus_per_node=8, global_batch=2, seq_len=2048)
    assert estimate(dense, toy_hw, dense_job, plan, stack=eager).step_time_s == pytest.approx(
        estimate(dense, toy_hw, dense_job, plan, stack=NEUTRAL).step_time_s
    )


def test_megatron_profile_runs_moe_dispatch_eagerly_by_default() -> None:
    # Megatron-Bridge recipes default to cuda_graph_impl "none": 4 ms per MoE layer per micro-batch
    # (megatron-0.16.yaml kernels.moe_host_us, with the rows it was set on); the other stacks have no EP.
    assert load_stack("megatron").moe_host_us == 4000.0
    assert dict(load_stack("megatron").citations)["kernels.moe_host_us"]
    assert all(load_stack(s).moe_host_us == 0.0 for s in ("torchtitan", "llm-foundry", "deepspeed"))


def test_fsdp_gathers_weights_in_the_stacks_param_dtype(toy_hw: HardwareProfile) -> None:
    # Composer's DEFAULT mixed precision keeps FSDP1's flat parameter in fp32: the all-gathers carry 4 B per
    # parameter (llm-foundry-0.3.yaml memory.gather_bytes), twice what a bf16 param_dtype moves.
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)
    plan = Plan(dp=8, tp=1, pp=1, zero=3, sp=False)
    p, group = m.total_params(), Group(size=8, per_node=8)
    fp32 = replace(NEUTRAL, dp_overlap=0.0, gather_bytes=4.0)
    rs = collective_time(toy_hw, "reduce_scatter", 4 * p, group)
    ag = collective_time(toy_hw, "all_gather", 4 * p, group)
    assert estimate(m, toy_hw, job, plan, stack=fp32).time.dp_comm == pytest.approx(rs + 2 * ag)


def test_llm_foundry_runs_triton_flash_attention() -> None:
    # The benchmark tables ran attn_impl triton (submit_benchmarks.py default): 0.8 of FA2's throughput on
    # Hopper at every length (set on the 64K row), FA2 being torchtitan's SDPA curve.
    foundry, titan = load_stack("llm-foundry"), load_stack("torchtitan")
    assert foundry.attention_kernel == "triton"
    for seq in (512, 2048, 8192, 65536):
        assert foundry.attention_factor(seq, hopper=True) == pytest.approx(0.8 * titan.attention_factor(seq, hopper=True), abs=1e-3)
    assert foundry.attention_factor(8192, hopper=False) == 1.0  # A100: the profile's own FA2-class curve
    # fp32 residual stream under amp_bf16: 56h bytes of norms/residuals/GELU per block against the model's 44h
    assert foundry.elementwise_passes == pytest.approx(56 / 44, abs=0.005)
