"""The Megatron-Bridge launch (``--emit megatron-bridge``), checked against Bridge's own names.

Megatron-Bridge v0.3.1 does not install on a CPU machine (it needs TransformerEngine, mamba-ssm and
CUDA kernels), so its field names are recorded below from its source at the pin,
NVIDIA-NeMo/Megatron-Bridge 9c9dd848966322fc3ed7706747ec13219ef49dda: ``ConfigContainer``,
``TrainingConfig``, ``DistributedInitConfig`` and ``CheckpointConfig`` in
src/megatron/bridge/training/config.py, ``GPTModelProvider.seq_length`` in models/gpt_provider.py,
the recipe functions exported by megatron.bridge.recipes and the mixed-precision recipes of
training/mixed_precision.py. Everything else is checked by installed code: Hydra 1.3.2's
``OverridesParser`` (what ``run_recipe.py`` applies the words with) and megatron-core 0.16.1's own
dataclasses for ``model.*`` (TransformerConfig, whose ``__post_init__`` then validates the degrees),
``ddp.*``, ``optimizer.*`` and ``dataset.*``.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

import pytest

from autopar.emit import megatron_bridge as mb
from autopar.errors import SpecError
from autopar.io.models import load_model
from autopar.spec.job import Job
from autopar.spec.plan import Plan

CONTAINER = {
    "checkpoint",
    "comm_overlap",
    "dataset",
    "ddp",
    "dist",
    "ft",
    "inprocess_restart",
    "logger",
    "mixed_precision",
    "model",
    "nvrx_straggler",
    "optimizer",
    "optimizer_config_override_provider",
    "peft",
    "profiling",
    "rerun_state_machine",
    "rng",
    "scheduler",
    "straggler",
    "tensor_inspect",
    "tokenizer",
    "train",
}
TRAIN = {
    "check_weight_hash_across_dp_replicas_interval",
    "decrease_batch_size_if_needed",
    "empty_unused_memory_level",
    "eval_interval",
    "eval_iters",
    "exit_duration_in_mins",
    "exit_interval",
    "exit_signal",
    "exit_signal_handler",
    "exit_signal_handler_for_dataloader",
    "global_batch_size",
    "iterations_to_skip",
    "manual_gc",
    "manual_gc_eval",
    "manual_gc_interval",
    "micro_batch_size",
    "rampup_batch_size",
    "skip_train",
    "train_iters",
    "train_samples",
    "train_sync_interval",
}
DIST = {
    "align_grad_reduce",
    "disable_jit_fuser",
    "distributed_backend",
    "distributed_timeout_minutes",
    "distributed_timeout_seconds_after_init",
    "enable_megatron_core_experimental",
    "external_gpu_device_mapping",
    "high_priority_stream_groups",
    "lazy_init",
    "local_rank",
    "nccl_communicator_config_path",
    "sharp_enabled_group",
    "use_decentralized_pg",
    "use_gloo_process_groups",
    "use_megatron_fsdp",
    "use_sharp",
    "use_torch_fsdp2",
    "use_tp_pp_dp_mapping",
}
CHECKPOINT = {"async_save", "ckpt_format", "load", "save", "save_interval", "pretrained_checkpoint"}  # of 37
GPT_PROVIDER = {"seq_length"}  # GPTModelProvider's own fields beyond TransformerConfig that the launch sets
RECIPES = {
    "llama3_8b_pretrain_config",
    "llama3_70b_pretrain_config",
    "llama31_8b_pretrain_config",
    "llama31_70b_pretrain_config",
    "llama31_405b_pretrain_config",
    "qwen3_30b_a3b_pretrain_config",
    "deepseek_v3_pretrain_config",
    "gpt_oss_120b_pretrain_config",
}
PRECISIONS = {
    "bf16_mixed",
    "fp16_mixed",
    "bf16_with_fp8_delayed_scaling_mixed",
    "bf16_with_fp8_current_scaling_mixed",
    "bf16_with_mxfp8_mixed",
    "bf16_with_fp8_subchannel_scaling_mixed",
    "bf16_with_nvfp4_mixed",
}

CASES = {
    "llama3-70b vpp cp": (
        "llama3-70b",
        Plan(dp=2, tp=4, pp=4, vpp=5, cp=2, zero=1),
        Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192),
    ),
    "llama3-8b fsdp selective": (
        "llama3-8b",
        Plan(dp=8, tp=1, pp=1, zero=3, recompute="selective", recompute_modules=("core_attn", "mlp")),
        Job(gpus=8, gpus_per_node=8, global_batch=256, seq_len=8192),
    ),
    "llama3.1-405b uneven full": (
        "llama3.1-405b",
        Plan(dp=1, tp=8, pp=16, recompute="full", mbs=1),
        Job(gpus=128, gpus_per_node=8, global_batch=64, seq_len=8192),
    ),
    "llama3-8b uneven vpp": (
        "llama3-8b",
        Plan(dp=1, tp=2, pp=3, vpp=2, zero=1),
        Job(gpus=6, gpus_per_node=8, global_batch=12, seq_len=8192),
    ),
    "deepseek-v3 ep": (
        "deepseek-v3",
        Plan(dp=32, tp=2, pp=8, ep=32, etp=1, recompute="full"),
        Job(gpus=512, gpus_per_node=8, global_batch=1024, seq_len=4096),
    ),
    "qwen3 moe ep": ("qwen3-30b-a3b", Plan(dp=8, tp=1, pp=2, ep=8, zero=1), Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096)),
}


def emitted(case: str) -> tuple[Any, Plan, Job, list[str]]:
    name, plan, job = CASES[case]
    model = load_model(name)
    nproc = min(job.gpus, job.gpus_per_node)
    line = mb.bridge_command(model, plan, job, nnodes=job.gpus // nproc, nproc_per_node=nproc)
    words = shlex.split(line)
    script = words.index(mb.SCRIPT)
    assert words[script + 1] == "--recipe"
    assert words[script + 2] in RECIPES
    return model, plan, job, words[script + 3 :]


def parsed(overrides: list[str]) -> dict[str, Any]:
    """Hydra's reading of the overrides: dotted key -> value."""
    parser = pytest.importorskip(
        "hydra.core.override_parser.overrides_parser", reason="hydra-core is not installed (pip install -e '.[frameworks]')"
    )
    return {o.key_or_group: o.value() for o in parser.OverridesParser.create().parse_overrides(overrides)}


def mcore_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("case", CASES)
def test_every_field_is_one_bridge_has(case: str) -> None:
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install -e '.[frameworks]')")
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer.transformer_config import TransformerConfig

    known = {
        "model": mcore_fields(TransformerConfig) | GPT_PROVIDER,
        "ddp": mcore_fields(DistributedDataParallelConfig),
        "optimizer": mcore_fields(OptimizerConfig),
        "dataset": mcore_fields(GPTDatasetConfig),
        "train": TRAIN,
        "dist": DIST,
        "checkpoint": CHECKPOINT,
    }
    *_, words = emitted(case)
    values = parsed(words)
    for key, value in values.items():
        group, _, name = key.partition(".")
        assert group in CONTAINER, key
        if group == "mixed_precision":
            assert value in PRECISIONS
        else:
            assert name in known[group], key


@pytest.mark.parametrize("case", CASES)
def test_megatron_core_accepts_the_model_fields(case: str) -> None:
    """TransformerConfig(__post_init__) on the recipe's shape with the plan's fields: divisibility,
    interleaving, recompute and pipeline-layout rules are megatron-core's, not ours."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install -e '.[frameworks]')")
    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig

    model, plan, job, words = emitted(case)
    values = parsed(words)
    kw = {k.removeprefix("model."): v for k, v in values.items() if k.startswith("model.") and k != "model.seq_length"}
    if model.moe is not None:
        kw |= {
            "num_moe_experts": model.moe.num_experts,
            "moe_router_topk": model.moe.top_k,
            "moe_ffn_hidden_size": model.moe.expert_ffn_hidden_size,
            "moe_grouped_gemm": True,
        }
    config = TransformerConfig(
        num_layers=model.layers,
        hidden_size=model.hidden_size,
        num_attention_heads=model.num_attention_heads,
        num_query_groups=model.num_kv_heads,
        ffn_hidden_size=model.ffn_hidden_size,
        **kw,
        bf16=True,
        pipeline_dtype=torch.bfloat16,
    )  # what mixed_precision=bf16_mixed sets
    assert (config.tensor_model_parallel_size, config.pipeline_model_parallel_size, config.context_parallel_size) == (
        plan.tp,
        plan.pp,
        plan.cp,
    )
    assert config.sequence_parallel == (plan.sp and plan.tp > 1)
    assert values["train.global_batch_size"] == job.global_batch
    assert values["train.micro_batch_size"] == plan.mbs


def test_the_overrides_follow_the_plan() -> None:
    *_, words = emitted("llama3-70b vpp cp")
    values = parsed(words)
    assert values["model.virtual_pipeline_model_parallel_size"] == 5
    assert values["model.cp_comm_type"] == "p2p"
    assert values["model.recompute_granularity"] is None
    assert values["mixed_precision"] == "bf16_mixed"
    *_, words = emitted("llama3-8b fsdp selective")
    values = parsed(words)
    assert values["model.recompute_modules"] == ["core_attn", "mlp"]
    assert (values["dist.use_megatron_fsdp"], values["ddp.data_parallel_sharding_strategy"]) == (True, "optim_grads_params")
    assert values["checkpoint.ckpt_format"] == "fsdp_dtensor"
    *_, words = emitted("llama3.1-405b uneven full")
    values = parsed(words)
    # 126 layers on 16 stages: 126 + 2 = 16 x 8, the embedding and the loss take a slot of the end stages (7
    # layers there, 8 on the others), as Megatron-Bridge's own llama31_405b recipe splits them
    assert values["model.pipeline_model_parallel_layout"] is None
    assert (values["model.account_for_embedding_in_pipeline_split"], values["model.account_for_loss_in_pipeline_split"]) == (
        True,
        True,
    )
    assert (values["model.recompute_method"], values["model.recompute_num_layers"]) == ("uniform", 1)
    assert values["model.mtp_num_layers"] is None
    *_, words = emitted("llama3-8b uneven vpp")
    values = parsed(words)
    # 32 layers in 6 chunks: 6, 6, 5, 5, 5, 5; interleaved chunk c on rank c % 3
    assert values["model.pipeline_model_parallel_layout"] == "Et*6|t*6|t*5|t*5|t*5|t*5L"
    # a recipe's own split (llama3 recipes account for embedding and loss) is overridden, not combined
    assert (values["model.account_for_embedding_in_pipeline_split"], values["model.account_for_loss_in_pipeline_split"]) == (
        False,
        False,
    )
    assert values["model.virtual_pipeline_model_parallel_size"] == 2


def test_a_model_without_a_recipe_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError, match="Megatron-Bridge has no known recipe for mixtral-8x7b"):
        mb.recipe_for(load_model("mixtral-8x7b"))
    reason = mb.unsupported(
        load_model("llama3-8b"), Plan(dp=2, tp=1, pp=1, cp=4), Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=8188)
    )
    assert reason == "the sequence (8188) must divide by 2 x cp (8)"


def test_suggest_emit_megatron_bridge_is_costed_as_megatron() -> None:
    import json

    from typer.testing import CliRunner

    from autopar.cli import app

    res = CliRunner().invoke(app, ["suggest", "llama3-8b", "--gpus", "8", "--emit", "megatron-bridge", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["stack"] == "megatron" and doc["launch_kind"] == "megatron-bridge"
    words = shlex.split(doc["launch"])
    assert words[words.index("--recipe") + 1] == "llama3_8b_pretrain_config"
    assert f"model.tensor_model_parallel_size={doc['tp']}" in words
    assert doc["launch_notes"] == []
