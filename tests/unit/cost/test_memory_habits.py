"""How FSDP stacks and the caching allocator hold memory: each number derived by hand, with its source.

- FSDP mixed precision keeps the sharded parameter as the fp32 master (torchtitan apply_fsdp at 9dec370;
  PyTorch FSDP1 MixedPrecision): 4 B weight + 8 B Adam moments per parameter over the group.
- FSDP's root unit (embedding, final norm, output) is not resharded after forward (FSDP2 lazy_init clears the
  root's post-forward mesh info; FSDP1 _post_forward_reshard skips the root).
- The caching allocator's slack grows on what is allocated and freed every step: the activations.
- A recomputed layer's rebuilt activations are carved from the blocks the loss's logits freed.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar.cost.memory import memory_breakdown
from autopar.cost.states import state_bytes
from autopar.io.models import load_model
from autopar.io.stacks import load_stack
from autopar.spec.job import Job
from autopar.spec.plan import Plan

GIB = 2**30
LAYER_8B = 218_112_000  # llama3.1-8b: 2*4096^2 + 2*4096*1024 + 3*4096*14336 + 2*4096
VOCAB_8B = 128_256 * 4096


def test_fsdp_master_shard_state_bytes() -> None:
    # one parameter over 8 ranks, fp32 gradients: ZeRO-3 4/8 + 4/8 + 8/8; ZeRO-2 keeps the gathered bf16 copy
    # from forward to backward (2 B) beside the 4 B master shard; NO_SHARD (0) holds 4 + 4 + 8 whole
    assert state_bytes(1.0, zero=3, shards=8, grad_bytes=4, fsdp_master=True) == (0.5, 0.5, 1.0)
    assert state_bytes(1.0, zero=2, shards=8, grad_bytes=4, fsdp_master=True, gather_bytes=2) == (2.5, 0.5, 1.0)
    assert state_bytes(1.0, zero=0, shards=8, grad_bytes=4, fsdp_master=True) == (4.0, 4.0, 8.0)
    # Megatron's distributed optimizer: bf16 weight, fp32 grad, fp32 master + Adam sharded (2 + 4 + 12/8)
    assert state_bytes(1.0, zero=1, shards=8) == (2.0, 4.0, 1.5)


def test_fsdp_root_unit_and_gathered_layers() -> None:
    # torchtitan, llama3.1-8b FSDP 8, bf16: 2 GiB fixed + the gathered block and the prefetched next one
    # (2 x 218,112,000 x 2 B) + the root unit: embedding, output and final norm in bf16
    m = load_model("llama3.1-8b")
    job = Job(gpus=8, gpus_per_node=8, global_batch=16, seq_len=8192)
    plan = Plan(dp=8, tp=1, pp=1, mbs=2, recompute="selective", zero=3)
    titan = load_stack("torchtitan@2024.12")
    root = (2 * VOCAB_8B + 4096) * 2
    assert memory_breakdown(m, job, plan, stack=titan).buffers == pytest.approx(2 * GIB + 2 * LAYER_8B * 2 + root)
    # llm-foundry's DEFAULT mixed precision gathers fp32 (4 B); MPT ties its output to the embedding
    foundry = load_stack("llm-foundry")
    assert memory_breakdown(m, job, plan, stack=foundry).buffers == pytest.approx(2 * GIB + 2 * LAYER_8B * 4 + (2 * VOCAB_8B + 4096) * 4)
    tied = replace(m, tie_embeddings=True)
    assert memory_breakdown(tied, job, plan, stack=foundry).buffers == pytest.approx(2 * GIB + 2 * LAYER_8B * 4 + (VOCAB_8B + 4096) * 4)


def test_slack_on_activations_and_recompute_inside_the_freed_logits() -> None:
    # torchtitan, llama3.1-8b at 32K tokens, FSDP 8, full AC (the benchmark's Table 2 row): each of the 32
    # blocks keeps its input, 32 x 32768 x 4096 x 2 B = 8 GiB. A block's recompute rebuilds far less than
    # the loss's 14 B x 32768 x 128256 = 54.8 GiB the allocator then holds cached, so it adds nothing;
    # the slack is 7% of the 8 GiB of activations only.
    m = load_model("llama3.1-8b")
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=32768, dtype="fp8")
    plan = Plan(dp=8, tp=1, pp=1, mbs=1, recompute="full", zero=3)
    b = memory_breakdown(m, job, plan, stack=load_stack("torchtitan@2024.12"))
    assert b.activations == pytest.approx(32 * 32768 * 4096 * 2)
    assert b.logits == pytest.approx(14 * 32768 * 128_256 + 32768 * 4096 * 2)
    assert b.fragmentation == pytest.approx(0.07 * b.activations)
    assert b.weights == pytest.approx(4 * m.total_params() / 8) and b.optimizer == pytest.approx(8 * m.total_params() / 8)


def test_llm_foundry_fused_cross_entropy_holds_4_bytes_per_logit() -> None:
    # ComposerMPTCausalLM's default loss_fn fused_crossentropy (llm-foundry 8c8dd48): flash-attn's Triton cross
    # entropy keeps the bf16 logits and writes a bf16 gradient, 2 + 2 B per vocabulary entry per token (the fp32
    # logsumexp is per token), plus the output projection's saved bf16 input. MPT-3B at 8192 x mbs 3.
    m = replace(load_model("llama3.1-8b"), vocab_size=50_368, hidden_size=2560)
    job = Job(gpus=8, gpus_per_node=8, global_batch=144, seq_len=8192)
    plan = Plan(dp=8, tp=1, pp=1, mbs=3, recompute="none", zero=3)
    tokens = 3 * 8192
    logits = memory_breakdown(m, job, plan, stack=load_stack("llm-foundry")).logits
    assert logits == pytest.approx(4 * tokens * 50_368 + 2 * tokens * 2560)
