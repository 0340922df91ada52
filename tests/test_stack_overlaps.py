"""How the stacks overlap communication with compute, each case derived by hand.

The toy profile (conftest) has round numbers: 1000 TFLOP/s bf16, GEMM and attention
efficiency 0.5, effective HBM 1e12 B/s, intra collectives 10 us + 100 GB/s.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import gpt_like

from autopar.cost.comm import Group, collective_time
from autopar.cost.compute import Shape, layer_time
from autopar.cost.step import estimate
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.plan import Plan
from autopar.spec.stack import NEUTRAL


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
