"""Context parallelism as PyTorch's context_parallel runs it under torchtitan (issue 27).

torchtitan's Llama repeats K/V to the query heads before SDPA (repeat_kv, torchtitan/models/llama/model.py at
9dec370), so the K/V that CP all-gathers are n_heads wide; torch's ring backward
(torch/distributed/tensor/experimental/_attention.py, _templated_ring_attention_backward, convert_to_f32)
accumulates dQ/dK/dV in fp32 and passes fp32 dK/dV around the ring (autopar/data/stacks/torchtitan-2025.06.yaml
kernels.kv_repeated, collectives.cp_fp32_grads).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar.cost.compute import cp_backward_bytes_per_token, cp_kv_bytes_per_token, kv_bytes_per_token
from autopar.cost.memory import memory_breakdown
from autopar.io.models import load_model
from autopar.io.stacks import load_stack
from autopar.spec.job import Job
from autopar.spec.plan import Plan

GIB = 2**30


def test_repeated_kv_and_fp32_ring_buffers_by_hand() -> None:
    # Llama 3.1 405B: 128 query heads, 8 KV heads, head dim 128; TP 8 leaves 16 query heads and 1 KV head a rank.
    m = load_model("llama3.1-405b")
    titan, mega = load_stack("torchtitan@2024.12"), load_stack("megatron")
    assert kv_bytes_per_token(m, 8) == pytest.approx(2 * 1 * 128 * 2)  # K and V, 1 head, bf16: 512 B
    assert cp_kv_bytes_per_token(m, 8, mega) == pytest.approx(512)  # TE attention takes the KV heads as they are
    assert cp_kv_bytes_per_token(m, 8, titan) == pytest.approx(2 * 16 * 128 * 2)  # repeated: 16 heads, 8 KiB
    # fp32 dQ (16 x 128 x 4 = 8 KiB) and three fp32 dK/dV buffers (2 x 16 x 128 x 4 = 16 KiB each): 56 KiB
    assert cp_backward_bytes_per_token(m, 8, titan) == pytest.approx(8192 + 3 * 16384)
    assert cp_backward_bytes_per_token(m, 8, mega) == 0.0


def test_torchtitan_cp_memory_grows_with_cp_by_the_gathered_kv() -> None:
    # torchtitan's 405B CP table (benchmarks/llama3_h100_202412_torchtitan.md, Table 6): TP 8, PP 8, FSDP x CP = 8,
    # 32K tokens a rank at every CP degree. Going from CP 2 to CP 8 adds 6 more local chunks of gathered K/V:
    # 6 x 32768 tokens x 8 KiB = 1.5 GiB, and 7% allocator slack on it (activation bytes).
    m = replace(load_model("llama3.1-405b"), max_seq_len=262144)
    titan = load_stack("torchtitan@2024.12")
    peaks = {}
    for cp in (2, 8):
        job = Job(gpus=512, gpus_per_node=8, global_batch=64 // cp, seq_len=32768 * cp, dtype="fp8")
        plan = Plan(dp=8 // cp, tp=8, pp=8, cp=cp, zero=3, recompute="full", cp_comm="allgather", sp=True)
        peaks[cp] = memory_breakdown(m, job, plan, stack=titan).total
    assert (peaks[8] - peaks[2]) / GIB == pytest.approx(6 * 32768 * 8192 * 1.07 / GIB, rel=0.01)


def test_torch_cp_traffic_by_hand() -> None:
    # One attention sub-layer's CP exchange, Llama 3.1 405B at TP 8, CP 8 (across nodes), 32K tokens a rank.
    # Forward: one all-gather of the whole sequence's repeated K/V (8 x 32768 x 8 KiB = 2 GiB), again in the
    # recomputed forward under full AC; backward: the all-gather once more, and 8 steps of fp32 dK/dV
    # (2 x the 256 MiB bf16 chunk) to the next rank, no reduce-scatter.
    from autopar.cost.comm import collective_time
    from autopar.cost.compute import _cp_exchange
    from autopar.cost.shape import Dims
    from autopar.io.profiles import load_hardware
    from autopar.spec.topology import RankGrid

    m, hw, titan = load_model("llama3.1-405b"), load_hardware("h100-sxm"), load_stack("torchtitan@2024.12")
    chunk = 32768 * 8192
    grid = RankGrid(gpus_per_node=8, tp=8, cp=8)
    gather = collective_time(hw, "all_gather", 8 * chunk, grid.group("cp"))
    step = collective_time(hw, "send_recv", 2 * chunk, grid.neighbours("cp"))
    for recompute, forwards in (("full", 2), ("none", 1)):
        plan = Dims(tp=8, cp=8, sp=True, recompute=recompute)
        exposed, hidden = _cp_exchange(m, hw, plan, "allgather", 32768, 1.0, 2.5, overlap=False, stack=titan)
        assert hidden == 0.0
        assert exposed == pytest.approx(forwards * gather + gather + 8 * step)


def test_cp_buffers_share_the_freed_logits() -> None:
    # torchtitan's 8B CP table (Table 2): FSDP x CP = 8 on 8 GPUs, 32K tokens a rank, published 83.9 / 84.5 GiB at
    # CP 1 / 8: flat. The eager loss holds 14 B x 32768 x 128256 = 54.8 GiB of logits before the first backward,
    # and what a layer holds while it attends (CP 8: gathered K/V 8 x 32768 x 16 KiB = 4 GiB, the fp32 ring
    # buffers 32768 x 112 KiB = 3.5 GiB) comes after they are freed, carved from their blocks: the peak does not move.
    m = replace(load_model("llama3.1-8b"), max_seq_len=262144)
    titan = load_stack("torchtitan@2024.12")
    peaks = []
    for cp in (1, 8):
        job = Job(gpus=8, gpus_per_node=8, global_batch=8 // cp, seq_len=32768 * cp, dtype="fp8")
        plan = Plan(dp=8 // cp, tp=1, pp=1, cp=cp, zero=3, recompute="full", cp_comm="allgather", sp=False)
        peaks.append(memory_breakdown(m, job, plan, stack=titan).total)
    assert peaks[1] == pytest.approx(peaks[0])
    assert pytest.approx(54.8, abs=0.05) == 14 * 32768 * 128256 / GIB
