"""What torch.distributed.pipelining under FSDP2 holds per pipeline chunk (issue 27).

torchtitan applies fully_shard to each model chunk; PipelineStage.backward_maybe_with_nosync keeps FSDP's gradient
sync off until a chunk's last backward, so FSDP2 accumulates that chunk's unsharded fp32 gradient from its first
backward to its last and then reduce-scatters and frees it. Interleaved1F1B runs a rank's backwards round its chunks
in groups of pp micro-batches, the last chunk first: with m <= pp micro-batches, one chunk's gradient at a time
(autopar/cost/states.py last_chunk_params).
"""

from __future__ import annotations

import pytest

from autopar.cost.memo import Memo
from autopar.cost.memory import block_peaks, memory_breakdown
from autopar.io.models import load_model
from autopar.io.stacks import load_stack
from autopar.spec.job import Job
from autopar.spec.plan import Plan

# Llama 3.1 405B at TP 8, one decoder layer a rank: attention 2 x 16384^2 + 2 x 16384 x 1024, SwiGLU 3 x 16384 x 53248,
# over 8, and its two norms whole
LAYER = (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248) // 8 + 2 * 16384


def _grads(vpp: int, global_batch: int) -> float:
    m, titan = load_model("llama3.1-405b"), load_stack("torchtitan@2024.12")
    job = Job(gpus=512, gpus_per_node=8, global_batch=global_batch, seq_len=8192, dtype="fp8")
    plan = Plan(dp=8, tp=8, pp=8, vpp=vpp, mbs=4, recompute="full", zero=3, sp=True, cp_comm="allgather")
    return memory_breakdown(m, job, plan, stack=titan).grads


def test_one_round_interleaved_holds_one_chunks_gradient_by_hand() -> None:
    # torchtitan 9dec370's split: 1F1B stages 15, 16 x 6, 15; interleaved 7, 8 x 14, 7. The first rank's states are
    # rank 1's (16 layers, more than rank 0's 15). 1F1B: all 16 layers' fp32 gradient. Interleaved with 8
    # micro-batches on pp 8 (global batch 256 over dp 8 x mbs 4): only rank 1's last chunk, stage 9, 8 layers.
    # With 16 micro-batches the rounds overlap and the whole rank's gradient is counted again.
    assert _grads(1, 256) == pytest.approx(16 * LAYER * 4)
    assert _grads(2, 256) == pytest.approx(8 * LAYER * 4)
    assert _grads(2, 512) == pytest.approx(16 * LAYER * 4)


def test_block_peaks_read_the_rounds_as_a_fresh_estimate_does() -> None:
    m, titan = load_model("llama3.1-405b"), load_stack("torchtitan@2024.12")
    for batch in (256, 512):
        job = Job(gpus=512, gpus_per_node=8, global_batch=batch, seq_len=8192, dtype="fp8")
        memo = Memo(m, None, job, titan)
        plan = Plan(dp=8, tp=8, pp=8, vpp=2, mbs=4, recompute="full", zero=3, sp=True, cp_comm="allgather")
        (peak,) = block_peaks(memo, plan, [(1, 1)], ["full"], [3])
        assert peak == memory_breakdown(m, job, plan, memo=memo, stack=titan).total
