"""Launch commands for a plan: torchrun lines for Megatron-LM and torchtitan, and a SLURM script.

Pure functions from (model, plan, job) to text; nothing is run and torch is not imported. A
command is a list of *items*, each one flag with its value already quoted, rendered on one line
(the default: what ``shlex.split`` and torchrun's parser read back) or one flag per line with
``\\`` continuations (``multiline=True``) for a human.

Quoting: every value from the user or the spec goes through ``shlex.quote``, so a path holding a
space or a ``;`` stays one word and runs nothing. The one exception is a value that is exactly one
environment variable with an optional ``:port`` (``$MASTER_ADDR:29500``): it is double-quoted so
the shell on each node expands it.

Flag names are pinned in ``MEGATRON_FLAGS`` and ``TORCHTITAN_FLAGS``. Every emitted command was run
through the frameworks' own parsers: Megatron-LM's argparse (``add_megatron_arguments``), its
``validate_args`` and ``TransformerConfig``; torchtitan's tyro CLI (``ConfigManager.parse_args``,
cross-checked with its ``tests/unit_tests/test_no_new_cli_options.py`` freeze). Commits:

- Megatron-LM  d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22)
- torchtitan   b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from autopar.cost.pipeline import chunk_sizes
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate

# Every flag megatron_command can write. A test freezes this set; change it on purpose only,
# after checking the new name against megatron/training/arguments.py at a pinned commit.
MEGATRON_FLAGS = frozenset({
    # parallel layout and batch
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--num-virtual-stages-per-pipeline-rank",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--sequence-parallel", "--micro-batch-size", "--global-batch-size",
    # activation recompute
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    # data-parallel sharding (ZeRO stages) and its overlap
    "--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
    "--ckpt-format", "--overlap-grad-reduce", "--overlap-param-gather",
    # model shape
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
    "--group-query-attention", "--num-query-groups", "--kv-channels", "--seq-length",
    "--max-position-embeddings", "--swiglu", "--squared-relu", "--no-bias-gelu-fusion",
    "--untie-embeddings-and-output-weights", "--padded-vocab-size",
    # numerics
    "--bf16", "--fp16", "--fp8-format",
    # data, tokenizer, run length
    "--mock-data", "--data-path", "--tokenizer-type", "--tokenizer-model", "--vocab-size", "--train-iters", "--lr",
})

# Megatron-LM's hybrid (dynamic) context parallelism, for --seq-len-dist plans under megatron_dynamic_cp
# (varlen/strategies.py). At the pinned commit: ModelParallelConfig.hybrid_context_parallel and
# max_seqlen_per_dp_cp_rank (megatron/core/model_parallel_config.py); validate_args requires
# --calculate-per-token-loss and --dataloader-type single and refuses pp > 1 and Megatron-FSDP
# (megatron/training/arguments.py).
MEGATRON_HYBRID_CP_FLAGS = frozenset({"--hybrid-context-parallel", "--max-seqlen-per-dp-cp-rank",
                                      "--calculate-per-token-loss", "--dataloader-type"})


def megatron_hybrid_cp_args(plan: Plan, max_seqlen_per_rank: int) -> list[str]:
    """Words to add to a Megatron-LM command for hybrid CP, or SpecError where the pin refuses the plan."""
    if plan.pp > 1:
        raise SpecError(f"Megatron-LM's --hybrid-context-parallel does not run with pipeline parallelism "
                        f"(pp = {plan.pp})")
    if plan.zero >= 2:
        raise SpecError("Megatron-LM's --hybrid-context-parallel does not run with Megatron-FSDP (zero >= 2)")
    return ["--hybrid-context-parallel", "--max-seqlen-per-dp-cp-rank", str(int(max_seqlen_per_rank)),
            "--calculate-per-token-loss", "--dataloader-type", "single"]


# Every dotted override torchtitan_command can write, plus its entry-point selectors.
TORCHTITAN_FLAGS = frozenset({
    "--module", "--config",
    "--parallelism.data_parallel_replicate_degree", "--parallelism.data_parallel_shard_degree",
    "--parallelism.fsdp_reshard_after_forward", "--parallelism.tensor_parallel_degree",
    "--parallelism.enable_sequence_parallel", "--parallelism.no_enable_sequence_parallel",
    "--parallelism.pipeline_parallel_degree", "--parallelism.pipeline_parallel_schedule",
    "--parallelism.pipeline_parallel_layers_per_stage",
    "--parallelism.pipeline_parallel_first_stage_less_layers",
    "--parallelism.pipeline_parallel_last_stage_less_layers", "--parallelism.num_pp_microbatches",
    "--parallelism.context_parallel_degree", "--parallelism.expert_parallel_degree",
    "--training.num_tokens_per_microbatch_per_dp_rank", "--training.num_tokens_per_train_step",
    "--training.max_context_length", "--training.mixed_precision_param", "--training.disable_cuda_graphs",
})

# torchtitan selects the activation-checkpointing policy with a tyro subcommand, not a flag.
TORCHTITAN_AC_SUBCOMMANDS = {mode: f"activation-checkpoint:{mode}" for mode in ("none", "selective", "full")}

# Megatron-LM numerics flags per job dtype (fp8 is TransformerEngine's E4M3 fwd / E5M2 bwd recipe).
_MEGATRON_DTYPE = {"bf16": ("--bf16",), "fp16": ("--fp16",), "fp8": ("--bf16", "--fp8-format hybrid")}

# Megatron-FSDP sharding strategy for ZeRO-2 and ZeRO-3 (docs/user-guide/features/megatron_fsdp.md).
_MEGATRON_FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}

_ENV_REF = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)(:[0-9]+)?")
_SBATCH_VALUE = re.compile(r"[A-Za-z0-9_.:,@+/=-]+")


# --- quoting and layout ------------------------------------------------------------


def quote(value: object) -> str:
    """One shell word for ``value``: shlex-quoted, except a lone ``$VAR`` or ``$VAR:port``.

    >>> quote("my data; rm -rf /")
    "'my data; rm -rf /'"
    >>> quote("$MASTER_ADDR:29500")
    '"$MASTER_ADDR:29500"'
    """
    text = str(value)
    if _ENV_REF.fullmatch(text):
        return f'"{text}"'
    return shlex.quote(text)


def _opt(flag: str, value: object = None) -> str:
    """One item: a flag alone (a switch) or a flag and its quoted value."""
    return flag if value is None else f"{flag} {quote(value)}"


def _render(items: Sequence[str], multiline: bool) -> str:
    return (" \\\n    " if multiline else " ").join(items)


def torchrun_items(*, nnodes: int, nproc_per_node: int, rdzv_endpoint: str, rdzv_id: str | None) -> list[str]:
    """The launcher part: one torchrun per node, all meeting at a c10d rendezvous.

    c10d rendezvous needs no --node-rank: the agents agree on ranks among themselves, so the very
    same line runs on every node (which is what the SLURM script relies on).
    """
    items = ["torchrun", _opt("--nnodes", nnodes), _opt("--nproc-per-node", nproc_per_node),
             _opt("--rdzv-backend", "c10d"), _opt("--rdzv-endpoint", rdzv_endpoint)]
    if rdzv_id is not None:
        items.append(_opt("--rdzv-id", rdzv_id))
    return items


def _check_launch(plan: Plan, model: ModelSpec, job: Job, nnodes: int, nproc_per_node: int) -> None:
    validate(plan, model, job)
    if nnodes < 1 or nproc_per_node < 1:
        raise SpecError(f"nnodes ({nnodes}) and nproc_per_node ({nproc_per_node}) must be >= 1")
    if nnodes * nproc_per_node != plan.gpus:
        raise SpecError(
            f"nnodes*nproc_per_node = {nnodes}*{nproc_per_node} = {nnodes * nproc_per_node} "
            f"must equal the plan's GPUs ({plan.gpus})"
        )


# --- Megatron-LM ----------------------------------------------------------------------


def uneven_pipeline_split(layers: int, pp: int) -> tuple[int, int] | None:
    """Layers on the first and last stage for Megatron's first/last flags, or None.

    The stages are the cost model's (cost/pipeline.py stage_layers: the earlier
    stages take the extra layer). Megatron's first/last flags give every middle
    stage the same count, so they express that layout only when the middle
    stages are equal; None when pp divides layers (nothing to do) or they are not.
    """
    if layers % pp == 0:
        return None
    counts = chunk_sizes(layers, pp)
    if len(set(counts[1:-1])) > 1:
        return None
    return counts[0], counts[-1]


def pipeline_layout(layers: int, pp: int, vpp: int = 1) -> str:
    """Megatron's explicit layout string: E embedding, t*n decoder layers, L loss, | between chunks.

    The pp*vpp chunks in model order, as the cost model lays them out (cost/pipeline.py: the
    earlier chunks take the extra layer; chunk c runs on rank c % pp). ``pipeline_layout(10, 4)``
    is ``Et*3|t*3|t*2|t*2L``.
    """
    return "E" + "|".join(f"t*{n}" for n in chunk_sizes(layers, pp * vpp)) + "L"


def megatron_pipeline_items(layers: int, pp: int, vpp: int = 1) -> list[str]:
    """Virtual-stage and uneven-pipeline flags that build the cost model's stage layout.

    Interleaving over an even split is --num-virtual-stages-per-pipeline-rank; over an uneven one,
    an explicit layout of pp*vpp chunks, which implies vpp. Without interleaving: first/last counts
    when they express the layout, else a layout.
    """
    if vpp > 1:
        if layers % (pp * vpp) == 0:
            return [_opt("--num-virtual-stages-per-pipeline-rank", vpp)]
        return [_opt("--pipeline-model-parallel-layout", pipeline_layout(layers, pp, vpp))]
    if layers % pp == 0:
        return []
    split = uneven_pipeline_split(layers, pp)
    if split is not None:
        return [_opt("--decoder-first-pipeline-num-layers", split[0]),
                _opt("--decoder-last-pipeline-num-layers", split[1])]
    return [_opt("--pipeline-model-parallel-layout", pipeline_layout(layers, pp))]


def megatron_parallel_items(model: ModelSpec, plan: Plan, job: Job) -> list[str]:
    """Parallel layout, batch, recompute and ZeRO flags for Megatron-LM.

    ZeRO stages: 0 is plain DDP; 1 is Megatron's distributed optimizer (optimizer state sharded,
    gradients reduce-scattered, parameters all-gathered); 2 and 3 are Megatron-FSDP with sharding
    strategy ``optim_grads`` / ``optim_grads_params``, which Megatron requires to save checkpoints in
    the ``fsdp_dtensor`` format.
    """
    items = [_opt("--tensor-model-parallel-size", plan.tp), _opt("--pipeline-model-parallel-size", plan.pp),
             _opt("--context-parallel-size", plan.cp)]
    if plan.ep > 1:
        items.append(_opt("--expert-model-parallel-size", plan.ep))
    items += megatron_pipeline_items(model.layers, plan.pp, plan.vpp)
    if plan.sp and plan.tp > 1:
        items.append("--sequence-parallel")
    items += [_opt("--micro-batch-size", plan.mbs), _opt("--global-batch-size", job.global_batch)]
    if plan.recompute == "selective":
        items.append(_opt("--recompute-granularity", "selective"))
    elif plan.recompute == "full":
        items += [_opt("--recompute-granularity", "full"), _opt("--recompute-method", "uniform"),
                  _opt("--recompute-num-layers", 1)]
    if plan.zero >= 1:
        items.append("--use-distributed-optimizer")
    if plan.zero >= 2:
        items += ["--use-megatron-fsdp", _opt("--data-parallel-sharding-strategy", _MEGATRON_FSDP_STRATEGY[plan.zero]),
                  _opt("--ckpt-format", "fsdp_dtensor")]
    items.append("--overlap-grad-reduce")
    if plan.zero >= 1:
        items.append("--overlap-param-gather")
    return items


def megatron_model_items(model: ModelSpec, plan: Plan, job: Job) -> list[str]:
    """Model-shape and numerics flags. The vocabulary is padded only up to a multiple of tp.

    ModelSpec does not record normalization, position embedding or biases; pass Megatron's own
    flags for those (``--normalization RMSNorm --position-embedding-type rope ...``) in extra_args.
    """
    items = [_opt("--num-layers", model.layers), _opt("--hidden-size", model.hidden_size),
             _opt("--ffn-hidden-size", model.ffn_hidden_size), _opt("--num-attention-heads", model.num_attention_heads)]
    if model.num_kv_heads != model.num_attention_heads:
        items += ["--group-query-attention", _opt("--num-query-groups", model.num_kv_heads)]
    if model.head_dim * model.num_attention_heads != model.hidden_size:
        items.append(_opt("--kv-channels", model.head_dim))
    items += [_opt("--seq-length", job.seq_len), _opt("--max-position-embeddings", max(model.max_seq_len, job.seq_len))]
    if model.ffn_activation == "swiglu":
        items.append("--swiglu")
    elif model.ffn_activation == "relu2":
        items += ["--squared-relu", "--no-bias-gelu-fusion"]  # Megatron's fused bias-activation is gelu/swiglu only
    if not model.tie_embeddings:
        items.append("--untie-embeddings-and-output-weights")
    items.append(_opt("--padded-vocab-size", -(-model.vocab_size // plan.tp) * plan.tp))
    if job.dtype not in _MEGATRON_DTYPE:
        raise SpecError(f"Megatron-LM has no flags for dtype {job.dtype!r}")
    return items + list(_MEGATRON_DTYPE[job.dtype])


def megatron_env(plan: Plan) -> dict[str, str]:
    """Environment Megatron-LM asserts in validate_args (GPUs before Blackwell).

    With TP or CP it wants CUDA_DEVICE_MAX_CONNECTIONS=1, so that communication kernels launch in
    order; Megatron-FSDP (ZeRO-2/3) asserts it is not 1, so there we set CUDA's default, 8, in case
    the container exported 1.
    """
    if plan.zero >= 2:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if plan.tp > 1 or plan.cp > 1 else {}


def megatron_command(
    model: ModelSpec, plan: Plan, job: Job, *, nnodes: int, nproc_per_node: int,
    rdzv_endpoint: str = "$MASTER_ADDR:29500", rdzv_id: str | None = None, script: str = "pretrain_gpt.py",
    data_path: str | None = None, tokenizer_model: str | None = None, train_iters: int = 100, lr: float = 3e-4,
    extra_args: Sequence[str] = (), multiline: bool = False,
) -> str:
    """A complete torchrun line for Megatron-LM's ``pretrain_gpt.py`` running ``plan``.

    Without ``data_path`` it trains on Megatron's mock data with the null tokenizer, enough to
    measure throughput; with it, on that indexed dataset with the Hugging Face tokenizer at
    ``tokenizer_model``. ``train_iters`` and ``lr`` are placeholders that Megatron needs to start:
    autopar plans the layout, not the hyperparameters. ``extra_args`` are appended as single words,
    each quoted. Needed environment (``megatron_env``) leads the line as ``NAME=value`` words.
    """
    _check_launch(plan, model, job, nnodes, nproc_per_node)
    items = torchrun_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint, rdzv_id=rdzv_id)
    env = [f"{name}={quote(value)}" for name, value in megatron_env(plan).items()]
    items[0] = " ".join([*env, items[0]])
    items.append(quote(script))
    items += megatron_parallel_items(model, plan, job) + megatron_model_items(model, plan, job)
    items.append("--mock-data" if data_path is None else _opt("--data-path", data_path))
    if tokenizer_model is None:
        items += [_opt("--tokenizer-type", "NullTokenizer"), _opt("--vocab-size", model.vocab_size)]
    else:
        items += [_opt("--tokenizer-type", "HuggingFaceTokenizer"), _opt("--tokenizer-model", tokenizer_model)]
    items += [_opt("--train-iters", train_iters), _opt("--lr", lr)]
    items += [quote(arg) for arg in extra_args]
    return _render(items, multiline)


# --- torchtitan -------------------------------------------------------------------------


def torchtitan_items(model: ModelSpec, plan: Plan, job: Job) -> list[str]:
    """Dotted overrides of torchtitan's ``Trainer.Config`` for ``plan``, AC subcommand last.

    Data parallelism is always FSDP2 in torchtitan. ZeRO-0 is pure replication (shard degree 1);
    ZeRO-3 shards over dp and reshards after forward (``always`` under PP, where torchtitan's default
    would not); ZeRO-1 and ZeRO-2 keep gathered parameters from forward to backward (``never``):
    torchtitan has no optimizer-only sharding, and this has ZeRO-1's traffic with less memory.
    Pipeline stages get ceil(layers/pp) layers, as the cost model assumes (no discount for the
    embedding and logits). ``selective`` is torchtitan's per-op policy (saves matmul outputs), not
    Megatron's attention-only recompute.
    """
    if job.dtype != "bf16":
        raise SpecError(f"torchtitan's command line sets bf16 mixed precision only, not {job.dtype!r}")
    shard = plan.dp if plan.zero >= 1 else 1
    items = [_opt("--parallelism.data_parallel_replicate_degree", plan.dp // shard),
             _opt("--parallelism.data_parallel_shard_degree", shard)]
    if plan.zero in (1, 2):
        items.append(_opt("--parallelism.fsdp_reshard_after_forward", "never"))
    elif plan.zero == 3 and plan.pp > 1:  # torchtitan's default keeps parameters gathered under PP
        items.append(_opt("--parallelism.fsdp_reshard_after_forward", "always"))
    items.append(_opt("--parallelism.tensor_parallel_degree", plan.tp))
    items.append("--parallelism.enable_sequence_parallel" if plan.sp else "--parallelism.no_enable_sequence_parallel")
    items.append(_opt("--parallelism.pipeline_parallel_degree", plan.pp))
    if plan.pp > 1:
        items.append(_opt("--parallelism.pipeline_parallel_schedule", "Interleaved1F1B" if plan.vpp > 1 else "1F1B"))
        if plan.vpp > 1:
            if model.layers % (plan.pp * plan.vpp):
                raise SpecError(f"torchtitan interleaves equal stages only: layers ({model.layers}) must be divisible "
                                f"by pp*vpp ({plan.pp}*{plan.vpp})")
            items.append(_opt("--parallelism.pipeline_parallel_layers_per_stage", model.layers // (plan.pp * plan.vpp)))
        items += [_opt("--parallelism.pipeline_parallel_first_stage_less_layers", 0),
                  _opt("--parallelism.pipeline_parallel_last_stage_less_layers", 0),
                  _opt("--parallelism.num_pp_microbatches", plan.microbatches(job))]
    items.append(_opt("--parallelism.context_parallel_degree", plan.cp))
    if plan.ep > 1:
        items.append(_opt("--parallelism.expert_parallel_degree", plan.ep))
    micro_tokens = plan.mbs * job.seq_len
    divisor = (plan.tp if plan.sp else 1) * (2 * plan.cp if plan.cp > 1 else 1)
    if micro_tokens % divisor:
        raise SpecError(f"torchtitan needs tokens per micro-batch ({micro_tokens}) divisible by tp*2cp ({divisor})")
    items += [_opt("--training.num_tokens_per_microbatch_per_dp_rank", micro_tokens),
              _opt("--training.num_tokens_per_train_step", job.tokens_per_step),
              _opt("--training.max_context_length", job.seq_len),
              _opt("--training.mixed_precision_param", "bfloat16")]
    if plan.pp > 1:
        items.append("--training.disable_cuda_graphs")  # torchtitan refuses CUDA graphs with PP
    return items


def torchtitan_command(
    model: ModelSpec, plan: Plan, job: Job, *, config: str, module: str = "llama3", nnodes: int, nproc_per_node: int,
    rdzv_endpoint: str = "$MASTER_ADDR:29500", rdzv_id: str | None = None, extra_args: Sequence[str] = (),
    multiline: bool = False,
) -> str:
    """One torchrun line for ``python -m torchtitan.train`` with ``plan`` as CLI overrides.

    torchtitan builds the model from a Python config function (``--module`` names the module,
    ``--config`` the function, e.g. ``llama3`` / ``llama3_70b``); its command line cannot set the
    model shape, so the caller names the config whose model is ``model``. Its TOML files are gone
    at the pinned commit, so overrides on one line are the whole interface: they take precedence
    over the config function. ``extra_args`` go before the activation-checkpoint subcommand.
    """
    _check_launch(plan, model, job, nnodes, nproc_per_node)
    items = [*torchrun_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint,
                             rdzv_id=rdzv_id), "-m torchtitan.train", _opt("--module", module), _opt("--config", config)]
    items += torchtitan_items(model, plan, job)
    items += [quote(arg) for arg in extra_args]
    items.append(TORCHTITAN_AC_SUBCOMMANDS[plan.recompute])
    return _render(items, multiline)


# --- SLURM ------------------------------------------------------------------------------


def _directive(name: str, value: object) -> str:
    text = str(value)
    if not _SBATCH_VALUE.fullmatch(text):
        raise SpecError(f"SLURM {name} {text!r} may hold only letters, digits and _.:,@+/=-")
    return f"#SBATCH --{name}={text}"


def slurm_script(
    command: str, *, nnodes: int, nproc_per_node: int, job_name: str, partition: str | None = None,
    time: str | None = None, account: str | None = None, output: str | None = None,
) -> str:
    """An sbatch script that runs ``command`` once on every node.

    One srun task per node starts ``bash -c`` on the command (quoted as one word), so environment
    prefixes work and ``$MASTER_ADDR`` is expanded on each node, where srun has exported it from
    the batch shell: the first host of the allocation. Directive values are checked against a
    strict character set, since #SBATCH lines are not shell and quoting cannot protect them.
    """
    if nnodes < 1 or nproc_per_node < 1:
        raise SpecError(f"nnodes ({nnodes}) and nproc_per_node ({nproc_per_node}) must be >= 1")
    lines = ["#!/bin/bash", _directive("job-name", job_name), _directive("nodes", nnodes),
             _directive("ntasks-per-node", 1), _directive("gpus-per-node", nproc_per_node), "#SBATCH --exclusive"]
    for name, value in (("partition", partition), ("time", time), ("account", account), ("output", output)):
        if value is not None:
            lines.append(_directive(name, value))
    lines += ["", "set -euo pipefail", "", "# The rendezvous host: the first node of the allocation.",
              'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"', "export MASTER_ADDR", "",
              f"srun --nodes={nnodes} --ntasks-per-node=1 bash -c {shlex.quote(command)}", ""]
    return "\n".join(lines)
