"""Pipelines with more chunks than decoder layers: the embedding and the loss as pipeline slots.

Megatron-Core counts them as layers in the pipeline split (TransformerConfig
account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split at core_v0.16.1):
num_layers + 2 slots are split evenly over pp * vpp chunks, and get_num_layers_to_build builds one
decoder layer fewer in the first chunk of rank 0 and in the last chunk of rank pp - 1. The Megatron
MoE model zoo runs Qwen3-235B-A22B (94 layers) on PP32 x VPP3 = 96 chunks this way
(best_practice/qwen3/readme.md at e865051, heldout_runs.yaml mz_h100_qwen3_235b_a2a_ep8_pp32_bf16).
"""

from __future__ import annotations

import shlex
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopar.cost.memo import Memo
from autopar.cost.memory import end_kinds, memory_breakdown
from autopar.cost.pipeline import in_flight_microbatches
from autopar.cost.states import ParamPlan, end_params, rank_params
from autopar.cost.step import estimate
from autopar.emit import megatron
from autopar.errors import SpecError
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.search.space import enumerate_skeletons, virtual_stages
from autopar.spec.job import Job
from autopar.spec.layout import chunk_sizes, end_slots, peak_rank, rank_groups, rank_kinds, stage_layers
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, plan_errors, validate

QWEN_JOB = Job(gpus=256, gpus_per_node=8, global_batch=2048, seq_len=4096)
QWEN_PLAN = Plan(dp=4, tp=2, pp=32, vpp=3, ep=8, mbs=1, recompute="selective", recompute_modules=("moe_act", "layernorm"))


def dense(layers: int) -> ModelSpec:
    return ModelSpec(
        name="dense",
        layers=layers,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=16,
        head_dim=64,
        ffn_hidden_size=4096,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=2048,
        max_seq_len=2048,
        tie_embeddings=False,
    )


def test_chunks_beyond_the_layers_hold_the_loss_then_the_embedding_alone() -> None:
    # 94 layers + embedding + loss = 96 slots in 96 chunks: one each, the end chunks without a decoder layer
    assert chunk_sizes(94, 96) == [0] + [1] * 94 + [0]
    assert chunk_sizes(94, 95) == [1] * 94 + [0]  # the loss alone counted (account_for_loss only)
    assert chunk_sizes(94, 94) == [1] * 94 and end_slots(94, 94) == 0
    assert end_slots(94, 96) == 2
    with pytest.raises(ValueError, match="at most 2 more"):
        chunk_sizes(94, 97)
    # rank r holds chunks r, r + 32, r + 64: rank 0 (embedding, 1, 1), rank 31 (1, 1, loss)
    ranks = stage_layers(94, 32, 3)
    assert ranks[0] == (0, 1, 1) and ranks[31] == (1, 1, 0) and set(ranks[1:31]) == {(1, 1, 1)}


def test_the_cost_model_sees_the_end_ranks_lighter() -> None:
    """rank_groups (the step cost's stages): 2 layers on rank 0, 3 on ranks 1-30, 2 and the loss on rank 31."""
    groups = rank_groups(["moe"] * 94, 32, 3)
    assert groups == ((Counter(moe=2), 1), (Counter(moe=3), 30), (Counter(moe=2), 1))


def test_megatron_accepts_pp_times_vpp_up_to_the_layers_plus_two() -> None:
    model, mg = load_model("qwen3-235b-a22b"), load_stack("megatron")
    validate(QWEN_PLAN, model, QWEN_JOB, stack=mg)
    with pytest.raises(SpecError, match=r"pp\*vpp \(32\*3\) exceeds the number of layers \(94\)$"):
        validate(QWEN_PLAN, model, QWEN_JOB)  # a stack that does not count them (NEUTRAL)
    job = Job(gpus=256, gpus_per_node=8, global_batch=2048, seq_len=4096)
    errors = plan_errors(Plan(dp=2, tp=4, pp=32, vpp=4, ep=8), model, job, load_stack("megatron"))
    assert errors == ["pp*vpp (32*4) exceeds the number of layers (94) plus the embedding and the loss"]
    # vpp 1: pp up to layers + 2 (3 layers, 5 stages: embedding | t | t | t | loss)
    small = dense(3)
    validate(Plan(dp=1, tp=1, pp=5), small, Job(gpus=5, gpus_per_node=8, global_batch=8, seq_len=2048), stack=mg)
    assert plan_errors(Plan(dp=1, tp=1, pp=6), small, Job(gpus=6, gpus_per_node=8, global_batch=8, seq_len=2048), mg)
    # torchtitan does not count them (torchtitan-2025.06.yaml plan_rules.pipeline_counts_embedding false)
    tt_errors = plan_errors(
        Plan(dp=1, tp=1, pp=5), small, Job(gpus=5, gpus_per_node=8, global_batch=8, seq_len=2048), load_stack("torchtitan")
    )
    assert "pp (5) exceeds the number of layers (3)" in tt_errors


def test_the_search_tries_stages_beyond_the_layers_but_not_such_depths() -> None:
    """pp up to layers + 2 where the stack counts the embedding and the loss (3 layers on 5 GPUs: a
    5-stage pipeline on Megatron, none on torchtitan); interleaving depths stay within the layers
    (search/space.py virtual_stages: the search's time budget)."""
    small, job = dense(3), Job(gpus=5, gpus_per_node=8, global_batch=10, seq_len=2048)
    assert {p.pp for p in enumerate_skeletons(small, job, {}, stack=load_stack("megatron"))} == {1, 5}
    assert {p.pp for p in enumerate_skeletons(small, job, {}, stack=load_stack("torchtitan"))} == {1}
    assert virtual_stages(94, 32) == [2]
    model = load_model("qwen3-235b-a22b")
    fixed = {"tp": 2, "pp": 32, "mbs": 1, "ep": 8, "etp": 1, "sp": True}
    assert {p.vpp for p in enumerate_skeletons(model, QWEN_JOB, fixed, stack=load_stack("megatron"))} == {1, 2}


def test_the_estimate_costs_the_zoo_layout() -> None:
    model, hw, mg = load_model("qwen3-235b-a22b"), load_hardware("h100-sxm"), load_stack("megatron")
    est = estimate(model, hw, QWEN_JOB, QWEN_PLAN, stack=mg)
    assert est.tokens_per_s > 0 and est.fits


@pytest.mark.parametrize(
    ("layers", "pp", "vpp", "ends"),
    [(94, 32, 3, 2), (6, 4, 2, 2), (7, 4, 2, 1), (3, 5, 1, 2), (126, 8, 8, 2), (126, 8, 1, 2), (70, 12, 1, 2)],
)
def test_megatron_core_builds_the_estimated_chunks(layers: int, pp: int, vpp: int, ends: int) -> None:
    """The emitted flags, read by megatron-core 0.16.1's TransformerConfig, build per (rank, chunk) the
    decoder layers stage_layers gives (megatron.core.transformer.transformer_block.get_num_layers_to_build)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install -e '.[frameworks]')")
    import torch
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_config import TransformerConfig

    words = [w for item in megatron.pipeline_items(dense(layers), Plan(dp=1, tp=1, pp=pp, vpp=vpp)) for w in shlex.split(item)]
    assert ("--account-for-embedding-in-pipeline-split" in words) == (ends == 2)
    assert "--account-for-loss-in-pipeline-split" in words
    config = TransformerConfig(
        num_layers=layers,
        hidden_size=64,
        num_attention_heads=4,
        pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
        pipeline_dtype=torch.bfloat16,
        account_for_embedding_in_pipeline_split="--account-for-embedding-in-pipeline-split" in words,
        account_for_loss_in_pipeline_split=True,
        use_cpu_initialization=True,
    )
    built = tuple(tuple(get_num_layers_to_build(config, vp_stage=c if vpp > 1 else None, pp_rank=r) for c in range(vpp)) for r in range(pp))
    assert built == stage_layers(layers, pp, vpp, ends=True)


def test_where_layers_plus_two_split_evenly_the_end_chunks_take_a_layer_fewer() -> None:
    """Llama 3.1 405B (126 layers) on pp 8: 126 % 8 != 0, so Megatron-Core accepts no even split; with the
    embedding and the loss counted, 128 = 8 x 16 = 64 x 2 (the recipe's vpp 8). BLOOM (70 layers, pp 12):
    72 = 12 x 6. Stacks that do not count them keep the earlier chunks' extra layer."""
    assert chunk_sizes(126, 64, ends=True) == [1] + [2] * 62 + [1]
    assert chunk_sizes(126, 64) == [2] * 62 + [1, 1]
    assert chunk_sizes(70, 12, ends=True) == [5] + [6] * 10 + [5]
    assert chunk_sizes(61, 32, ends=True) == chunk_sizes(61, 32)  # 63 does not split over 32
    assert chunk_sizes(127, 8, ends=True) == chunk_sizes(127, 8)  # L + 1: the same counts either way


def test_the_405b_recipe_peaks_on_rank_1_with_its_own_in_flight_count() -> None:
    """pp 8 x vpp 8, m = 64: at its first backward rank r has run 2(p - r - 1) + (v - 1)p + 1 chunk forwards,
    71 on rank 0 and 69 on rank 1, the surplus over p = 8 per chunk all of its first chunk. Rank 0's first
    chunk holds one layer: 15 x 1 + 7 x 8 x 2 = 127 layer-micro-batches; rank 1's all hold two: 69 x 2 = 138.
    Per layer (T = 8192 / cp 2 = 4096 tokens, tp 8 with SP, bf16): norm and QKV inputs 4h/8, Q, K, V and the
    attention output (2 x (16384 + 2 x 1024) + 2 x 16384)/8, norm and fc1 inputs 4h/8, SwiGLU's gate and up
    and fc2's input 6 x 53248/8: 65,024 B a token."""
    assert peak_rank(126, 8, 8, ends=True) == 1 and peak_rank(126, 8, 8) == 0
    assert peak_rank(126, 8, 1, ends=True) == 0  # 1F1B: rank 0's 8 x 15 = 120 over rank 1's 7 x 16 = 112
    assert in_flight_microbatches(pp=8, vpp=8, microbatches=64, rank=1) == 69 / 8
    assert in_flight_microbatches(pp=8, vpp=8, microbatches=64) == 71 / 8
    assert in_flight_microbatches(pp=8, vpp=1, microbatches=64, rank=1) == 7
    job = Job(gpus=1024, gpus_per_node=8, global_batch=512, seq_len=8192)
    plan = Plan(dp=8, tp=8, pp=8, cp=2, vpp=8, zero=1)
    mem = memory_breakdown(load_model("llama3.1-405b"), job, plan, stack=load_stack("megatron"))
    assert mem.activations == pytest.approx(138 * 4096 * 65024)


def test_the_memory_peak_sits_on_rank_1_when_the_embedding_is_alone() -> None:
    """PP32 x VPP3 on 94 layers: rank 0 holds (embedding, 1, 1) and the most micro-batches in flight, but its
    first chunk keeps no layer's activations; rank 1 holds 3 layers and two chunk forwards fewer in flight
    (Megatron-Core's interleaved warm-up, 2(p - r - 1) + (v - 1)p: 126 on rank 0, 124 on rank 1). The memory
    model's first rank is then rank 1's layers at its own in-flight count, with the larger of the two
    ranks' parameters."""
    assert peak_rank(94, 32, 3) == 1 and peak_rank(94, 32, 2) == 0 and peak_rank(94, 2, 48) == 0
    assert peak_rank(94, 31, 3) == 0  # 93 chunks: no end slot
    model = load_model("qwen3-235b-a22b")
    memo = Memo(model, None, QWEN_JOB, load_stack("megatron"))
    first, last = end_kinds(memo, (32, 3))
    assert first == (("moe", 3),) and last == (("moe", 2),)
    key = ParamPlan(tp=2, ep=8, etp=1, pp=32, vpp=3)
    ranks = rank_kinds(model.layer_kinds(), 32, 3)
    rank0 = rank_params(model, key, ranks[0], first=True, last=False)
    rank1 = rank_params(model, key, ranks[1], first=False, last=False)
    # rank 1's third layer (~0.34B on this rank: 128 experts x 3 x 4096 x 1536 / ep 8 and the attention / tp 2)
    # outweighs rank 0's embedding (151,936 x 4096 / tp 2 = 0.31B)
    assert sum(rank1) > sum(rank0)
    assert end_params(memo, key)[0] == rank1


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.integers(2, 32), st.sampled_from([1, 2, 3, 4]), st.sampled_from([1, 2]))
def test_megatron_core_builds_every_end_slot_layout_as_estimated(pp: int, vpp: int, ends: int) -> None:
    """Any pp x vpp = layers + 1 or + 2: megatron-core 0.16.1 builds, per (rank, chunk), the decoder
    layers stage_layers gives from the emitted --account-for-* flags."""
    layers = pp * vpp - ends
    if layers < 2:
        return
    test_megatron_core_builds_the_estimated_chunks(layers, pp, vpp, ends)


def test_torchtitan_2024_split_gives_the_middle_stages_the_extra_layers() -> None:
    # torchtitan 9dec370 generate_split_points (torchtitan/parallelisms/pipelining_utils.py): base_interval =
    # n_layers // stages to the first stage, one more to each next stage while the remainder lasts, the rest to
    # the last. Llama 3.1 405B (126 layers): 126 // 8 = 15 remainder 6 -> 15, 16 x 6, 15; interleaved, 16 stages:
    # 126 // 16 = 7 remainder 14 -> 7, 8 x 14, 7, so PP rank 0 holds stages 0 and 8: 7 + 8 layers.
    from autopar.io.stacks import load_stack
    from autopar.spec.layout import chunk_sizes, first_smaller, peak_rank, stage_layers

    assert load_stack("torchtitan@2024.12").pipeline_split == "middle"
    assert load_stack("torchtitan@2025.06").pipeline_split == "front"
    assert chunk_sizes(126, 8, split="middle") == [15, 16, 16, 16, 16, 16, 16, 15]
    assert chunk_sizes(126, 16, split="middle") == [7] + [8] * 14 + [7]
    assert chunk_sizes(126, 8) == [16] * 6 + [15, 15]  # front: the earlier chunks take the extra layers
    assert chunk_sizes(10, 4, split="middle") == [2, 3, 3, 2]
    assert chunk_sizes(11, 4, split="middle") == [2, 3, 3, 3]  # remainder 3 > 2 middle stages: the last takes it
    assert stage_layers(126, 8, 2, split="middle")[0] == (7, 8)
    assert first_smaller(126, 8, 1, split="middle") and not first_smaller(126, 8, 1)
    # rank 0 still holds more layer-micro-batches at the first backward: 8 x 15 = 120 > 7 x 16 = 112 (1F1B)
    assert peak_rank(126, 8, 1, split="middle") == 0
