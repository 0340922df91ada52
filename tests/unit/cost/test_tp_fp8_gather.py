"""torchtitan's Float8 tensor parallelism gathers FP8 (issue 27).

torchtitan's apply_tp at 9dec370 (torchtitan/parallelisms/parallelize_llama.py) uses torchao's Float8ColwiseParallel,
Float8RowwiseParallel and PrepareFloat8ModuleInput when Float8 is on; torchao/float8/float8_tensor_parallel.py at
eab345c casts the block input to float8 before its Shard(1) -> Replicate all-gather, and casts the row-parallel
output's gradient to float8 before the backward all-gather of it; the reduce-scatters stay bf16
(autopar/data/stacks/torchtitan-2025.06.yaml collectives.tp_fp8_gather).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar.cost.comm import collective_time
from autopar.cost.shape import Dims, Shape
from autopar.cost.sublayer import tp_collectives
from autopar.io.stacks import load_stack
from autopar.spec.hardware import HardwareProfile
from autopar.spec.topology import RankGrid
from tests.conftest import gpt_like


def test_fp8_tp_gathers_one_byte_an_element_by_hand(toy_hw: HardwareProfile) -> None:
    # One sub-layer at TP 8 under SP with full AC: a forward, a recomputed forward and a backward, each one
    # all-gather and one reduce-scatter of the micro-batch's tokens x hidden. bf16: 2 B each way; FP8 on torchtitan:
    # the all-gathers 1 B (e4m3 forward and recompute, e5m2 gradient), the reduce-scatters 2 B.
    m = gpt_like(layers=4)
    titan = replace(load_stack("torchtitan@2024.12"), tp_overlap=0.0)
    tokens = 2048.0
    plan = Dims(tp=8, cp=1, sp=True, recompute="full")
    group = RankGrid(gpus_per_node=toy_hw.gpus_per_node, tp=8).group("tp")
    elems = tokens * m.hidden_size
    ag2, ag1 = collective_time(toy_hw, "all_gather", 2 * elems, group), collective_time(toy_hw, "all_gather", elems, group)
    rs = collective_time(toy_hw, "reduce_scatter", 2 * elems, group)
    fp8 = Shape(dtype="fp8", seq_len=2048, mbs=1, stack=titan)
    bf16 = Shape(dtype="bf16", seq_len=2048, mbs=1, stack=titan)
    assert tp_collectives(m, toy_hw, fp8, plan, tokens) == pytest.approx((3 * (ag1 + rs), 0.0))
    assert tp_collectives(m, toy_hw, bf16, plan, tokens) == pytest.approx((3 * (ag2 + rs), 0.0))
    # a stack without it (Megatron's default) gathers bf16 under FP8 too
    mega = replace(load_stack("megatron"), tp_overlap=0.0)
    assert tp_collectives(m, toy_hw, replace(fp8, stack=mega), plan, tokens) == pytest.approx((3 * (ag2 + rs), 0.0))
