"""Megatron-Bridge launch: torchrun + ``scripts/training/run_recipe.py`` with config overrides.

Pinned to Megatron-Bridge v0.3.1 (9c9dd848966322fc3ed7706747ec13219ef49dda, 2026-03-20), the release
built on megatron-core 0.16 (the Megatron-LM pin). A recipe (``llama3_8b_pretrain_config``) builds
the model and everything else; the plan goes in as Hydra overrides of its ``ConfigContainer``
(``model.*``: megatron-core's TransformerConfig through the GPT provider; ``train.*``, ``ddp.*``,
``optimizer.*``, ``dist.*``, ``dataset.*``, ``checkpoint.*``, ``mixed_precision``), which
``run_recipe.py`` applies with ``process_config_with_overrides``. The tests parse the words with
Hydra's own parser and check every field against megatron-core's dataclasses and the names
recorded from Bridge's ``training/config.py`` at the pin.

The parallel layout, pipeline split and ZeRO mapping are Megatron-LM's (``autopar.emit.megatron``),
spelled as fields.
"""

from __future__ import annotations

from collections.abc import Sequence

from autopar.emit.common import check_launch, extra_items, quote, render, torchrun_items
from autopar.emit.megatron import _CP_COMM, _FSDP_STRATEGY, ep_overlap, layout_string, stage_layout
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.layout import end_slots, ends_shared
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import StackProfile

BRIDGE_PIN = "Megatron-Bridge v0.3.1 (9c9dd848966322fc3ed7706747ec13219ef49dda)"
SCRIPT = "scripts/training/run_recipe.py"  # in a Megatron-Bridge checkout at the pin

# autopar preset -> the recipe function (megatron.bridge.recipes at the pin) building the same network
RECIPES = {
    "llama3-8b": "llama3_8b_pretrain_config",
    "llama3-70b": "llama3_70b_pretrain_config",
    "llama3.1-8b": "llama31_8b_pretrain_config",
    "llama3.1-70b": "llama31_70b_pretrain_config",
    "llama3.1-405b": "llama31_405b_pretrain_config",
    "qwen3-30b-a3b": "qwen3_30b_a3b_pretrain_config",
    "deepseek-v3": "deepseek_v3_pretrain_config",
    "gpt-oss-120b": "gpt_oss_120b_pretrain_config",
}
# training/mixed_precision.py at the pin: recipes registered by name
_PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_current_scaling_mixed"}


def value(v: object) -> str:
    """A value in Hydra's override grammar: true/false, null, [a,b], numbers, strings double-quoted
    where they hold a character the grammar reserves (the pipeline layout's ``|``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(value(x) for x in v) + "]"
    text = str(v)
    return text if text.replace("_", "").replace(".", "").isalnum() else f'"{text}"'


def unsupported(model: ModelSpec, plan: Plan, job: Job) -> str | None:
    """Why a Bridge recipe at the pin cannot run ``plan`` as costed, or None."""
    if model.mamba is not None:
        return "autopar writes overrides for its GPT recipes only (Mamba and hybrid recipes use another provider)"
    if job.dtype not in _PRECISION:
        return f"it has no mixed-precision recipe for {job.dtype}"
    if plan.cp > 1 and job.seq_len % (2 * plan.cp):
        # ConfigContainer.validate at the pin: seq_length % (2 * context_parallel_size) == 0
        return f"the sequence ({job.seq_len}) must divide by 2 x cp ({2 * plan.cp})"
    return None


def recipe_for(model: ModelSpec) -> str:
    if model.name in RECIPES:
        return RECIPES[model.name]
    raise SpecError(f"Megatron-Bridge has no known recipe for {model.name} (known: {', '.join(sorted(RECIPES))})")


def pipeline_fields(model: ModelSpec, plan: Plan) -> dict[str, object]:
    """Virtual stages and the estimate's per-stage layer counts, as megatron.pipeline_items says them.

    Every split field is set, since recipes set their own (llama3_70b: account for the embedding and
    the loss; deepseek_v3: a layout string), which would otherwise cut the stages another way.
    """
    slots = end_slots(model.layers, plan.pp * plan.vpp)
    if ends_shared(model.layers, plan.pp * plan.vpp, True):
        slots = 2  # the embedding and the loss take a slot of the end chunks (megatron.pipeline_items)
    counts = stage_layout(model.layers, plan.pp, plan.vpp)
    uneven = not slots and len(set(counts)) > 1
    return {
        "model.virtual_pipeline_model_parallel_size": plan.vpp if plan.vpp > 1 else None,  # the layout agrees
        "model.pipeline_model_parallel_layout": layout_string(counts) if uneven else None,
        "model.account_for_embedding_in_pipeline_split": slots == 2,
        "model.account_for_loss_in_pipeline_split": slots >= 1,
        "model.num_layers_in_first_pipeline_stage": None,
        "model.num_layers_in_last_pipeline_stage": None,
    }


def overrides(model: ModelSpec, plan: Plan, job: Job, *, stack: StackProfile | None = None) -> dict[str, object]:
    """The recipe's fields that the plan sets, in ``run_recipe.py`` order (later ones win)."""
    reason = unsupported(model, plan, job)
    if reason is not None:
        raise SpecError(f"{BRIDGE_PIN} cannot run this plan: {reason}")
    out: dict[str, object] = {
        "model.tensor_model_parallel_size": plan.tp,
        "model.pipeline_model_parallel_size": plan.pp,
        **pipeline_fields(model, plan),
        "model.context_parallel_size": plan.cp,
    }
    if plan.cp > 1:
        out["model.cp_comm_type"] = _CP_COMM[plan.cp_comm]
    if model.moe is not None:
        out["model.expert_model_parallel_size"] = plan.ep
        out["model.expert_tensor_parallel_size"] = plan.etp
    out["model.sequence_parallel"] = plan.sp and plan.tp > 1
    out["model.mtp_num_layers"] = None  # the estimate has no multi-token prediction (deepseek_v3's recipe sets 1)
    if plan.recompute == "selective":
        out["model.recompute_granularity"] = "selective"
        out["model.recompute_modules"] = list(plan.recompute_modules) or ["core_attn"]
    elif plan.recompute == "full":
        out |= {"model.recompute_granularity": "full", "model.recompute_method": "uniform", "model.recompute_num_layers": 1}
    else:
        out["model.recompute_granularity"] = None
    out |= {
        "model.seq_length": job.seq_len,
        "dataset.sequence_length": job.seq_len,
        "train.micro_batch_size": plan.mbs,
        "train.global_batch_size": job.global_batch,
        "ddp.use_distributed_optimizer": plan.zero >= 1,
        "optimizer.use_distributed_optimizer": plan.zero >= 1,
        "ddp.overlap_grad_reduce": True,
        "ddp.overlap_param_gather": plan.zero >= 1,
    }
    if plan.zero >= 2:
        out |= {
            "dist.use_megatron_fsdp": True,
            "ddp.use_megatron_fsdp": True,
            "ddp.data_parallel_sharding_strategy": _FSDP_STRATEGY[plan.zero],
            "checkpoint.ckpt_format": "fsdp_dtensor",
        }
    if model.moe is not None:
        out["model.moe_token_dispatcher_type"] = "alltoall"
        out["model.overlap_moe_expert_parallel_comm"] = ep_overlap(model, plan, assumed=stack is None or stack.ep_overlap)
    out["mixed_precision"] = _PRECISION[job.dtype]
    return out


def bridge_command(
    model: ModelSpec,
    plan: Plan,
    job: Job,
    *,
    nnodes: int,
    nproc_per_node: int,
    rdzv_endpoint: str = "$MASTER_ADDR:29500",
    rdzv_id: str | None = None,
    extra_args: Sequence[str] = (),
    multiline: bool = False,
    stack: StackProfile | None = None,
) -> str:
    """A torchrun line for ``run_recipe.py --recipe NAME`` and the plan's overrides; ``extra_args``
    (--emit-extra, e.g. ``train.train_iters=1000``) come last, so they win."""
    check_launch(plan, model, job, nnodes, nproc_per_node, stack=stack)
    items = torchrun_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint, rdzv_id=rdzv_id)
    items += [quote(SCRIPT), f"--recipe {quote(recipe_for(model))}"]
    items += [quote(f"{key}={value(v)}") for key, v in overrides(model, plan, job, stack=stack).items()]
    items += extra_items(extra_args)
    return render(items, multiline)
