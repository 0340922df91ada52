"""DeepSpeed launch: a ``ds_config.json`` for the plan and the line that starts the training script.

Pinned to DeepSpeed 0.19.8 (the package). The config fixes what DeepSpeed's runtime reads from it:
the batch (``train_batch_size`` = micro-batch x gradient accumulation x data-parallel ranks, the
identity ``DeepSpeedConfig._configure_train_batch_size`` checks), the ZeRO stage with overlapped
bucketed collectives (what the deepspeed stack costs: ``overlap_comm``), bf16 or fp16, and tensor
parallelism as DeepSpeed's AutoTP (``tensor_parallel.autotp_size``). Pipeline stages are not a
config field: the script builds its model as ``deepspeed.pipe.PipelineModule(num_stages=pp)``; the
launch says so in a note. The tests hand the config to DeepSpeed's own ``DeepSpeedConfig`` and the
words to its launcher's and its ``add_config_arguments`` parsers.

One host: DeepSpeed's own ``deepspeed`` launcher. Several: torchrun on every host at one c10d
rendezvous (no hostfile and no ssh), which ``deepspeed.init_distributed`` reads like its launcher.
What DeepSpeed cannot run as costed, ``unsupported`` says in one line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from autopar.emit.common import check_launch, extra_items, opt, quote, render, torchrun_items
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import StackProfile

DEEPSPEED_PIN = "DeepSpeed 0.19.8"
CONFIG_NAME = "ds_config.json"  # the file the launch line names, written beside the launch script
SCRIPT = "train.py"  # the user's DeepSpeed training script (deepspeed.add_config_arguments, deepspeed.initialize)
_PRECISION = {"bf16": "bf16", "fp16": "fp16"}


def unsupported(model: ModelSpec, plan: Plan, job: Job) -> str | None:
    """Why DeepSpeed at the pin cannot run ``plan`` as costed, or None when it can."""
    if job.dtype not in _PRECISION:
        return f"its config has bf16 and fp16 mixed precision, not {job.dtype}"
    if plan.cp > 1:
        return "it has no ring or all-gather context parallelism (Ulysses sequence parallelism is another scheme)"
    if plan.ep > 1:
        return "its experts are placed by the model's deepspeed.moe layers, not by the launch (ep > 1)"
    if plan.vpp > 1:
        return "its pipeline engine has no interleaved schedule (vpp > 1)"
    if plan.pp > 1 and plan.zero >= 2:
        # deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
        return f"its pipeline engine refuses ZeRO-2 and ZeRO-3 (pp {plan.pp}, ZeRO-{plan.zero})"
    if plan.tp > 1 and plan.pp > 1:
        return "its AutoTP splits a Hugging Face model and its pipeline engine a PipelineModule: not both at once"
    if plan.tp > 1 and plan.sp:
        return "its AutoTP has no sequence parallelism (tp with sp)"
    if plan.recompute == "selective":
        return "a DeepSpeed script recomputes whole layers (full) or nothing, not selected modules"
    return None


def ds_config(model: ModelSpec, plan: Plan, job: Job, stack: StackProfile | None = None) -> dict[str, Any]:
    """The ``ds_config.json`` document for ``plan``, or SpecError where DeepSpeed cannot run it.

    Gradients are reduced in the precision the stack costs (``communication_data_type``: fp32 for
    4 bytes an element, as the deepspeed stack's BF16_Optimizer; fp32 without a stack).
    """
    reason = unsupported(model, plan, job)
    if reason is not None:
        raise SpecError(f"{DEEPSPEED_PIN} cannot run this plan: {reason}")
    zero: dict[str, Any] = {"stage": plan.zero}
    if plan.zero >= 1:
        zero |= {"overlap_comm": True, "contiguous_gradients": True}
    doc: dict[str, Any] = {
        "train_batch_size": job.global_batch,
        "train_micro_batch_size_per_gpu": plan.mbs,
        "gradient_accumulation_steps": plan.microbatches(job),
        _PRECISION[job.dtype]: {"enabled": True},
        "zero_optimization": zero,
        "communication_data_type": "fp32" if stack is None or stack.grad_bytes(job.dtype) >= 4 else job.dtype,
    }
    if plan.tp > 1:
        doc["tensor_parallel"] = {"autotp_size": plan.tp}
    return doc


def config_text(model: ModelSpec, plan: Plan, job: Job, stack: StackProfile | None = None) -> str:
    """The config as the file holds it: sorted keys, two-space indent, a final newline."""
    return json.dumps(ds_config(model, plan, job, stack), indent=2, sort_keys=True) + "\n"


def notes(model: ModelSpec, plan: Plan) -> list[str]:
    """What the training script must do that no config field says."""
    out = []
    if plan.pp > 1:
        out.append(
            f"pp {plan.pp}: the script builds its model as deepspeed.pipe.PipelineModule(layers, "
            f"num_stages={plan.pp}, partition_method='type:transformer|embedding') and calls "
            "engine.train_batch()"
        )
    if plan.tp > 1:
        out.append(f"tp {plan.tp}: AutoTP splits a Hugging Face model loaded after deepspeed.initialize reads the config")
    if plan.recompute == "full":
        out.append(
            "recompute full: the script checkpoints every layer (model.gradient_checkpointing_enable() or "
            "deepspeed.checkpointing.checkpoint)"
        )
    return out


def launcher_items(*, nnodes: int, nproc_per_node: int, rdzv_endpoint: str) -> list[str]:
    """``deepspeed`` on one host; torchrun at a c10d rendezvous on each of several."""
    if nnodes == 1:
        return ["deepspeed", opt("--num_gpus", nproc_per_node), opt("--master_port", 29500)]
    return torchrun_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint, rdzv_id=None)


def deepspeed_command(
    model: ModelSpec,
    plan: Plan,
    job: Job,
    *,
    nnodes: int,
    nproc_per_node: int,
    rdzv_endpoint: str = "$MASTER_ADDR:29500",
    script: str = SCRIPT,
    config_path: str = CONFIG_NAME,
    extra_args: Sequence[str] = (),
    multiline: bool = False,
    stack: StackProfile | None = None,
) -> str:
    """The line that starts ``script`` with DeepSpeed on ``config_path`` (``deepspeed.add_config_arguments``'s
    ``--deepspeed --deepspeed_config``); ``extra_args`` (--emit-extra) are the script's own, last."""
    check_launch(plan, model, job, nnodes, nproc_per_node, stack=stack)
    ds_config(model, plan, job)  # refuses what DeepSpeed cannot run, before any word is printed
    items = launcher_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint)
    items += [quote(script), "--deepspeed", opt("--deepspeed_config", config_path)]
    items += extra_items(extra_args)
    return render(items, multiline)
