"""torchtitan launch: torchrun + ``torchtitan.train`` through its config system.

Pinned to torchtitan 0.3.0 (the package). Its model comes from a Python config function
(``--module llama3 --config llama3_8b``); the command line overrides that config's fields
(``--parallelism.*``, ``--training.*``) and picks the activation-checkpointing policy with a tyro
subcommand. The tests hand every emitted word to torchtitan's own ``ConfigManager.parse_args``,
validate the plan with its ``ParallelDims`` and build the config's model on the meta device.

What torchtitan 0.3.0 cannot run, ``unsupported`` says in one line; the launch picks the closest
plan it can run (``autopar.advise.launch``), so a launch is never refused without a way out.
"""

from __future__ import annotations

from collections.abc import Sequence

from autopar.emit.common import check_launch, extra_items, opt, render, torchrun_items
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.layout import chunk_sizes
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import StackProfile

TORCHTITAN_PIN = "torchtitan 0.3.0"

# autopar preset -> torchtitan (module, config function) whose model is the same network; the
# tests build each on the meta device and compare parameter counts.
PRESET_CONFIGS = {
    "llama3-8b": ("llama3", "llama3_8b"),
    "llama3.1-8b": ("llama3", "llama3_8b"),
    "llama3-70b": ("llama3", "llama3_70b"),
    "llama3.1-70b": ("llama3", "llama3_70b"),
    "llama3.1-405b": ("llama3", "llama3_405b"),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b"),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b"),
    "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b"),
}

# torchtitan 0.3.0's config functions of the modules above (models/<module>/config_registry.py, debug
# models left out) -> (layers, hidden, vocabulary, parameters) of the model each builds (model_registry
# flavor, built on the meta device; tests/unit/emit/test_framework_torchtitan.py checks every entry against it).
# --torchtitan-config must name one of these of the model's shape: torchtitan builds its own model from
# the name, whatever config.json autopar costed.
TITAN_SHAPES: dict[tuple[str, str], tuple[int, int, int, int]] = {
    ("llama3", "llama3_8b"): (32, 4096, 128256, 8_030_261_248),
    ("llama3", "llama3_8b_mxfp8"): (32, 4096, 128256, 8_030_261_248),
    ("llama3", "llama3_8b_first_85_pct_layers_nvfp4"): (32, 4096, 128256, 8_030_261_248),
    ("llama3", "llama3_70b"): (80, 8192, 128256, 70_553_706_496),
    ("llama3", "llama3_405b"): (126, 16384, 128256, 405_853_388_800),
    ("qwen3", "qwen3_0_6b"): (28, 1024, 151936, 596_049_920),
    ("qwen3", "qwen3_1_7b"): (28, 2048, 151936, 1_720_574_976),
    ("qwen3", "qwen3_8b_first_85_pct_layers_nvfp4"): (36, 4096, 151936, 8_190_735_360),
    ("qwen3", "sft_qwen3_8b_math"): (36, 4096, 151936, 8_190_735_360),
    ("qwen3", "qwen3_14b"): (40, 5120, 151936, 14_768_307_200),
    ("qwen3", "qwen3_30b_a3b"): (48, 2048, 151936, 30_532_122_624),
    ("qwen3", "qwen3_32b"): (64, 5120, 151936, 32_762_123_264),
    ("deepseek_v3", "deepseek_v3_16b"): (27, 2048, 102400, 15_706_484_224),
    ("deepseek_v3", "deepseek_v3_16b_hybridep"): (27, 2048, 102400, 15_706_484_224),
    ("deepseek_v3", "deepseek_v3_16b_minimal_async_ep"): (27, 2048, 102400, 15_706_484_224),
    ("deepseek_v3", "deepseek_v3_671b"): (61, 7168, 129280, 671_026_404_352),
    ("deepseek_v3", "deepseek_v3_671b_float8"): (61, 7168, 129280, 671_026_404_352),
    ("gpt_oss", "gpt_oss_20b"): (24, 2880, 201088, 20_914_757_184),
    ("gpt_oss", "gpt_oss_120b"): (36, 2880, 201088, 116_829_156_672),
}
PARAMS_TOLERANCE = 0.01  # autopar's count and torchtitan's built model agree within 0.5% for the presets

AC_SUBCOMMANDS = {mode: f"activation-checkpoint:{mode}" for mode in ("none", "selective", "full")}


def layers_per_stage(layers: int, chunks: int) -> int | None:
    """torchtitan's --parallelism.pipeline_parallel_layers_per_stage giving exactly ``chunks`` stages.

    torchtitan makes ceil(layers / n) stages of n layers, then splits the layers over them with the
    extra layers on the first stages: ``chunk_sizes``, the estimate's split. None when no n gives
    ``chunks`` stages.
    """
    for n in range(1, layers + 1):
        if -(-layers // n) == chunks:
            return n
    return None


def unsupported(model: ModelSpec, plan: Plan, job: Job) -> str | None:
    """Why torchtitan 0.3.0 cannot run ``plan`` as costed, or None when it can."""
    if model.mamba is not None:
        return "torchtitan has no Mamba or hybrid models"
    if job.dtype != "bf16":
        return f"its command line sets bf16 mixed precision only, not {job.dtype}"
    if plan.cp > 1 and plan.cp_comm != "allgather":
        # SDPA under PyTorch's context_parallel, rotate method ALL_GATHER by default; Flex gathers K/V by hand
        return "its context parallelism all-gathers K/V (no overlapped ring)"
    if model.moe is not None and plan.etp != (plan.tp if plan.ep == 1 else 1):
        return (
            "its experts are split like the MLP (etp = tp) without EP and kept whole (etp = 1) with EP; "
            f"this plan has ep {plan.ep}, etp {plan.etp}"
        )
    shard = plan.dp if plan.zero >= 1 else 1
    if plan.ep > 1 and (shard * plan.cp * plan.tp) % plan.ep:
        return f"its EP group lies within dp_shard x cp x tp ({shard} x {plan.cp} x {plan.tp}), which ep ({plan.ep}) must divide"
    if plan.vpp > 1 and layers_per_stage(model.layers, plan.pp * plan.vpp) is None:
        return f"no layers-per-stage value cuts {model.layers} layers into pp x vpp = {plan.pp * plan.vpp} stages"
    divisor = (plan.tp if plan.sp else 1) * (2 * plan.cp if plan.cp > 1 else 1)
    if job.seq_len % divisor:
        return f"the sequence ({job.seq_len}) must divide by tp x 2cp ({divisor})"
    return None


def config_for(model: ModelSpec, config: str | None) -> tuple[str, str]:
    """(module, config function): the user's ``MODULE:NAME`` or ``NAME`` (module llama3), else the preset's."""
    if config is not None:
        module, _, name = config.rpartition(":")
        return module or "llama3", name
    if model.name in PRESET_CONFIGS:
        return PRESET_CONFIGS[model.name]
    raise SpecError(
        f"torchtitan has no known config for {model.name}: give `torchtitan_config` NAME or MODULE:NAME "
        f"(known: {', '.join(sorted(PRESET_CONFIGS))})"
    )


def check_config(model: ModelSpec, module: str, name: str) -> None:
    """Refuse a config function of a known module that torchtitan 0.3.0 lacks or that builds another shape."""
    known = sorted(n for m, n in TITAN_SHAPES if m == module)
    if not known:
        return  # a module autopar has no table for: torchtitan itself checks the name
    flag = f"`torchtitan_config` {module}:{name}"
    ours = (model.layers, model.hidden_size, model.vocab_size)
    same = [n for n in known if TITAN_SHAPES[module, n][:3] == ours]
    hint = f"; {module}:{same[0]} has {model.name}'s shape" if same else ""
    if (module, name) not in TITAN_SHAPES:
        raise SpecError(f"{flag}: {TORCHTITAN_PIN} has no config {name} in {module} (it has {', '.join(known)}){hint}")
    layers, hidden, vocab, params = TITAN_SHAPES[module, name]
    if (layers, hidden, vocab) != ours or abs(model.total_params() - params) > PARAMS_TOLERANCE * params:
        raise SpecError(
            f"{flag} builds torchtitan's {layers} layers, hidden {hidden}, vocabulary {vocab:,}, "
            f"{params / 1e9:.1f}B parameters; {model.name} has {model.layers} layers, hidden {model.hidden_size}, "
            f"vocabulary {model.vocab_size:,}, {model.total_params() / 1e9:.1f}B"
            f"{hint or ' (torchtitan has no config of its shape)'}"
        )


def torchtitan_items(model: ModelSpec, plan: Plan, job: Job) -> list[str]:
    """Dotted overrides of torchtitan's ``Trainer.Config`` for ``plan``.

    Data parallelism is FSDP2. ZeRO-0 is pure replication (shard degree 1); ZeRO-3 shards over dp
    and reshards after forward; ZeRO-1 and ZeRO-2 keep the gathered parameters from forward to
    backward (``never``): torchtitan has no optimizer-only sharding. Pipeline chunks are cut as the
    estimate cuts them (``chunk_sizes``: the embedding and the loss weigh nothing, the first chunks
    take the extra layers). Batches: with PP each DP rank's share of the global batch goes through
    in micro-batches of ``mbs``; without, torchtitan accumulates gradients over micro-batches of
    ``mbs`` up to the global batch.
    """
    reason = unsupported(model, plan, job)
    if reason is not None:
        raise SpecError(f"{TORCHTITAN_PIN} cannot run this plan: {reason}")
    shard = plan.dp if plan.zero >= 1 else 1
    items = [opt("--parallelism.data_parallel_replicate_degree", plan.dp // shard), opt("--parallelism.data_parallel_shard_degree", shard)]
    if plan.zero in (1, 2):
        items.append(opt("--parallelism.fsdp_reshard_after_forward", "never"))
    elif plan.zero == 3:
        items.append(opt("--parallelism.fsdp_reshard_after_forward", "always"))
    items.append(opt("--parallelism.tensor_parallel_degree", plan.tp))
    items.append("--parallelism.enable_sequence_parallel" if plan.sp else "--parallelism.no_enable_sequence_parallel")
    items.append(opt("--parallelism.pipeline_parallel_degree", plan.pp))
    local = job.global_batch // plan.dp
    if plan.pp > 1:
        items.append(opt("--parallelism.pipeline_parallel_schedule", "Interleaved1F1B" if plan.vpp > 1 else "1F1B"))
        if plan.vpp > 1:
            items.append(opt("--parallelism.pipeline_parallel_layers_per_stage", layers_per_stage(model.layers, plan.pp * plan.vpp)))
        items += [
            opt("--parallelism.pipeline_parallel_first_stage_less_layers", 0),
            opt("--parallelism.pipeline_parallel_last_stage_less_layers", 0),
            opt("--parallelism.pipeline_parallel_microbatch_size", plan.mbs),
        ]
    else:
        local = plan.mbs
    items.append(opt("--parallelism.context_parallel_degree", plan.cp))
    if plan.ep > 1:
        items.append(opt("--parallelism.expert_parallel_degree", plan.ep))
    items += [
        opt("--training.local_batch_size", local),
        opt("--training.global_batch_size", job.global_batch),
        opt("--training.seq_len", job.seq_len),
        opt("--training.mixed_precision_param", "bfloat16"),
    ]
    if plan.pp > 1 or plan.ep > 1:  # torchtitan refuses CUDA graphs with PP, and with its all-to-all EP dispatcher
        items.append("--training.disable_cuda_graphs")
    return items


def stage_counts(model: ModelSpec, plan: Plan) -> list[int]:
    """Layers per pipeline chunk as the launch cuts them (the estimate's ``chunk_sizes``)."""
    return chunk_sizes(model.layers, plan.pp * plan.vpp)


def torchtitan_command(
    model: ModelSpec,
    plan: Plan,
    job: Job,
    *,
    config: str | None = None,
    nnodes: int,
    nproc_per_node: int,
    rdzv_endpoint: str = "$MASTER_ADDR:29500",
    rdzv_id: str | None = None,
    extra_args: Sequence[str] = (),
    multiline: bool = False,
    stack: StackProfile | None = None,
) -> str:
    """One torchrun line for ``python -m torchtitan.train`` with ``plan`` as config overrides.

    ``config`` is torchtitan's config function for the model (``NAME`` in module llama3, or
    ``MODULE:NAME``); presets autopar knows find theirs. ``extra_args`` (--emit-extra) go before
    the activation-checkpoint subcommand, which tyro wants last.
    """
    check_launch(plan, model, job, nnodes, nproc_per_node, stack=stack)
    module, name = config_for(model, config)
    items = [
        *torchrun_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint, rdzv_id=rdzv_id),
        "-m torchtitan.train",
        opt("--module", module),
        opt("--config", name),
    ]
    items += torchtitan_items(model, plan, job)
    items += extra_items(extra_args)
    items.append(AC_SUBCOMMANDS[plan.recompute])
    return render(items, multiline)
