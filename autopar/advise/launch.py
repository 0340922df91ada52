"""From an answer to a launch: which framework's command, on how many nodes, and where it goes.

Glue between the CLI's ``--emit`` options and the pure string builders of ``autopar.emit.targets``:

- ``megatron``          torchrun + Megatron-LM's ``pretrain_gpt.py``
- ``torchtitan``        torchrun + ``torchtitan.train`` (needs the name of torchtitan's config function)
- ``slurm``             an sbatch script running the Megatron-LM command once per node
- ``slurm-torchtitan``  the same with the torchtitan command

One torchrun per node: nnodes = gpus / gpus_per_node and nproc_per_node = gpus_per_node, or one
node with all the GPUs when the job fits in one. Every node meets at a c10d rendezvous on
``$MASTER_ADDR:29500`` (``localhost:29500`` for a single node outside SLURM).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autopar.advise.train import Context
from autopar.emit import targets as emit
from autopar.errors import SpecError
from autopar.io.files import write_atomic
from autopar.spec.job import Job
from autopar.spec.plan import Plan

EMIT_KINDS = ("megatron", "torchtitan", "slurm", "slurm-torchtitan")
FRAMEWORK = {"megatron": "Megatron-LM", "torchtitan": "torchtitan", "slurm": "Megatron-LM",
             "slurm-torchtitan": "torchtitan"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchRequest:
    """What the user asked --emit for."""

    kind: str  # one of EMIT_KINDS
    out: Path | None  # write here instead of printing (--emit-out)
    titan_module: str  # torchtitan's model module (--module), e.g. llama3
    titan_config: str | None  # torchtitan's config function (--config), e.g. llama3_70b


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """A launch for one plan, ready to print, save or put in JSON."""

    kind: str  # one of EMIT_KINDS
    framework: str  # Megatron-LM | torchtitan
    text: str  # for people and files: one flag per line, or the sbatch script
    line: str  # for programs: the command on one line (shlex.split reads it back), or the sbatch script
    nnodes: int  # torchrun agents, one per node
    nproc_per_node: int  # GPUs (processes) per node
    path: Path | None  # where text was written, if anywhere


def request(kind: str | None, *, out: Path | None, torchtitan_config: str | None) -> LaunchRequest | None:
    """Check the --emit options together, before any work is done; None when --emit is absent."""
    if kind is None:
        if out is not None:
            raise SpecError("--emit-out needs --emit megatron|torchtitan|slurm|slurm-torchtitan")
        if torchtitan_config is not None:
            raise SpecError("--torchtitan-config needs --emit torchtitan or --emit slurm-torchtitan")
        return None
    if kind not in EMIT_KINDS:
        raise SpecError(f"--emit must be one of {', '.join(EMIT_KINDS)}, got {kind!r}")
    module, config = "llama3", None
    if torchtitan_config is not None:
        module, _, config = torchtitan_config.rpartition(":")
        module = module or "llama3"
        if not (_DOTTED.fullmatch(module) and _IDENT.fullmatch(config)):
            raise SpecError(f"--torchtitan-config {torchtitan_config!r}: expected NAME or MODULE:NAME, "
                            "e.g. llama3_70b or llama3:llama3_70b")
    if FRAMEWORK[kind] == "torchtitan" and config is None:
        raise SpecError(f"--emit {kind} needs --torchtitan-config NAME: the torchtitan config function that "
                        "builds this model (e.g. llama3_70b; MODULE:NAME for a module other than llama3)")
    return LaunchRequest(kind=kind, out=out, titan_module=module, titan_config=config)


def node_layout(job: Job) -> tuple[int, int]:
    """(nnodes, nproc_per_node) for the job: whole nodes, or one node holding every GPU."""
    if job.gpus <= job.gpus_per_node:
        return 1, job.gpus
    if job.gpus % job.gpus_per_node:
        raise SpecError(f"--gpus ({job.gpus}) is not a whole number of {job.gpus_per_node}-GPU nodes; "
                        "torchrun starts the same number of processes on every node")
    return job.gpus // job.gpus_per_node, job.gpus_per_node


def _command(req: LaunchRequest, ctx: Context, plan: Plan, *, endpoint: str, multiline: bool,
             extra_args: Sequence[str] = ()) -> str:
    nnodes, nproc = node_layout(ctx.job)
    if FRAMEWORK[req.kind] == "torchtitan":
        if req.titan_config is None:
            raise SpecError(f"--emit {req.kind} needs --torchtitan-config NAME")
        return emit.torchtitan_command(ctx.model, plan, ctx.job, config=req.titan_config, module=req.titan_module,
                                       nnodes=nnodes, nproc_per_node=nproc, rdzv_endpoint=endpoint, multiline=multiline)
    return emit.megatron_command(ctx.model, plan, ctx.job, nnodes=nnodes, nproc_per_node=nproc, rdzv_endpoint=endpoint,
                                 multiline=multiline, extra_args=extra_args)


def job_name(model_name: str) -> str:
    """A SLURM job name from the model's: characters #SBATCH accepts, others as '-'."""
    return "autopar-" + re.sub(r"[^A-Za-z0-9_.-]", "-", model_name)


def build(req: LaunchRequest, ctx: Context, plan: Plan, *, extra_args: Sequence[str] = ()) -> Launch:
    """The launch text for `plan`, without writing anything; ``extra_args``: more Megatron-LM words."""
    nnodes, nproc = node_layout(ctx.job)
    if req.kind.startswith("slurm"):
        line = _command(req, ctx, plan, endpoint="$MASTER_ADDR:29500", multiline=False, extra_args=extra_args)
        text = emit.slurm_script(line, nnodes=nnodes, nproc_per_node=nproc, job_name=job_name(ctx.model.name))
        return Launch(kind=req.kind, framework=FRAMEWORK[req.kind], text=text, line=text, nnodes=nnodes,
                      nproc_per_node=nproc, path=None)
    endpoint = "localhost:29500" if nnodes == 1 else "$MASTER_ADDR:29500"
    return Launch(kind=req.kind, framework=FRAMEWORK[req.kind],
                  text=_command(req, ctx, plan, endpoint=endpoint, multiline=True, extra_args=extra_args),
                  line=_command(req, ctx, plan, endpoint=endpoint, multiline=False, extra_args=extra_args),
                  nnodes=nnodes, nproc_per_node=nproc, path=None)


def script_text(launch: Launch) -> str:
    """What --emit-out writes: the sbatch script, or the command as a bash script."""
    if launch.kind.startswith("slurm"):
        return launch.text
    where = (f"{launch.nnodes} nodes x {launch.nproc_per_node} GPUs: run this on every node, with MASTER_ADDR set "
             "to the first node's address" if launch.nnodes > 1 else f"one node, {launch.nproc_per_node} GPUs")
    return (f"#!/bin/bash\n# {launch.framework} ({where}); written by autopar\n"
            f"set -euo pipefail\n\n{launch.text}\n")


def prepare(req: LaunchRequest | None, ctx: Context, plan: Plan, *,
            extra_args: Sequence[str] = ()) -> Launch | None:
    """Build the launch for `plan` and, with --emit-out, write it (atomically)."""
    if req is None:
        return None
    launch = build(req, ctx, plan, extra_args=extra_args)
    if req.out is None:
        return launch
    write_atomic(req.out, script_text(launch), option="--emit-out", executable=True)
    return replace(launch, path=req.out)
