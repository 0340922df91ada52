"""From an answer to a launch: which framework's command, on how many nodes, and where it goes.

Glue between the CLI's ``--emit`` options and the pure string builders of ``autopar.emit``:

- ``megatron``          torchrun + Megatron-LM (``pretrain_gpt.py``, ``pretrain_mamba.py`` for hybrids)
- ``torchtitan``        torchrun + ``torchtitan.train`` (its config function: from the preset, or --torchtitan-config)
- ``slurm``             an sbatch script running the Megatron-LM command once per node
- ``slurm-torchtitan``  the same with the torchtitan command
- ``deepspeed``         a ``ds_config.json`` for the plan and the ``deepspeed`` (one host) or torchrun line
                        starting the training script on it
- ``megatron-bridge``   torchrun + Megatron-Bridge's ``run_recipe.py``: the model's recipe with the plan as
                        config overrides

One torchrun per host: nnodes = gpus / host GPUs and nproc_per_node = host GPUs (the node, or a
GB200 tray of 4), or one host with all the GPUs when the job fits in one. Every host meets at a
c10d rendezvous on ``$MASTER_ADDR:29500`` (``localhost:29500`` for a single host outside SLURM).

The launch follows the execution stack: ``--emit torchtitan`` without ``--stack`` costs and
searches as the torchtitan stack (``stack_for``), and a launch on another framework than the
stack's says so. torchtitan runs fewer plans than the cost model ranks. ``suggest`` launches the
best ranked plan the framework can run and says which it skipped; ``estimate`` refuses a plan it
cannot run and names the nearest one it can.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autopar.advise.train import Context
from autopar.emit import deepspeed, megatron, megatron_bridge, torchtitan
from autopar.emit.slurm import SlurmOptions, slurm_script
from autopar.errors import SpecError
from autopar.io.files import write_atomic
from autopar.spec.job import Job
from autopar.spec.plan import Plan, validate
from autopar.spec.text import counted

EMIT_KINDS = ("megatron", "torchtitan", "slurm", "slurm-torchtitan", "deepspeed", "megatron-bridge")
FRAMEWORK = {
    "megatron": "Megatron-LM",
    "torchtitan": "torchtitan",
    "slurm": "Megatron-LM",
    "slurm-torchtitan": "torchtitan",
    "deepspeed": "DeepSpeed",
    "megatron-bridge": "Megatron-Bridge",
}
# the execution stack (autopar/data/stacks) that costs each framework as it runs a plan
LAUNCHER = {"Megatron-LM": "megatron", "torchtitan": "torchtitan", "DeepSpeed": "deepspeed", "Megatron-Bridge": "megatron"}
PIN = {
    "Megatron-LM": f"Megatron-LM {megatron.MEGATRON_PIN}",
    "torchtitan": torchtitan.TORCHTITAN_PIN,
    "DeepSpeed": deepspeed.DEEPSPEED_PIN,
    "Megatron-Bridge": megatron_bridge.BRIDGE_PIN,
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# sbatch --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours", "days-hours:minutes",
# "days-hours:minutes:seconds" (sbatch(1)), or INFINITE / UNLIMITED (slurm src/common/parse_time.c time_str2mins)
_SLURM_TIME = re.compile(r"\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}|(?i:infinite|unlimited)")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchRequest:
    """What the user asked --emit for."""

    kind: str  # one of EMIT_KINDS
    out: Path | None  # write here instead of printing (--emit-out)
    titan_config: str | None  # torchtitan's config function, NAME or MODULE:NAME (--torchtitan-config)
    extra: tuple[str, ...] = ()  # framework words appended to the command (--emit-extra)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)  # --slurm-partition/-time/-account/-qos


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """A launch for one plan, ready to print, save or put in JSON."""

    kind: str  # one of EMIT_KINDS
    framework: str  # Megatron-LM | torchtitan | DeepSpeed | Megatron-Bridge
    text: str  # for people and files: one flag per line, or the sbatch script
    line: str  # for programs: the command on one line (shlex.split reads it back), or the sbatch script
    nnodes: int  # torchrun agents, one per node
    nproc_per_node: int  # GPUs (processes) per node
    path: Path | None  # where text was written, if anywhere
    plan: Plan  # the plan launched
    notes: tuple[str, ...] = ()  # where the launch differs from what was asked or costed
    files: tuple[tuple[str, str], ...] = ()  # (name, text) the command reads beside it: DeepSpeed's ds_config.json


def request(
    kind: str | None, *, out: Path | None, torchtitan_config: str | None, extra: str | None = None, slurm: SlurmOptions | None = None
) -> LaunchRequest | None:
    """Check the --emit options together, before any work is done; None when --emit is absent."""
    slurm = slurm or SlurmOptions()
    if kind is None:
        for given, name in ((out, "emit_out"), (extra, "emit_extra"), (torchtitan_config, "torchtitan_config")):
            if given is not None:
                raise SpecError(f"`{name}` needs `emit={'|'.join(EMIT_KINDS)}`")
        if slurm != SlurmOptions():
            raise SpecError("`slurm_*` options need `emit=slurm` or `emit=slurm-torchtitan`")
        return None
    if kind not in EMIT_KINDS:
        raise SpecError(f"`emit` must be one of {', '.join(EMIT_KINDS)}, got {kind!r}")
    if torchtitan_config is not None:
        if FRAMEWORK[kind] != "torchtitan":
            raise SpecError("`torchtitan_config` needs `emit=torchtitan` or `emit=slurm-torchtitan`")
        module, _, config = torchtitan_config.rpartition(":")
        if not ((not module or _DOTTED.fullmatch(module)) and _IDENT.fullmatch(config)):
            raise SpecError(
                f"`torchtitan_config` {torchtitan_config!r}: expected NAME or MODULE:NAME, e.g. llama3_70b or llama3:llama3_70b"
            )
    if slurm != SlurmOptions() and not kind.startswith("slurm"):
        raise SpecError("`slurm_*` options need `emit=slurm` or `emit=slurm-torchtitan`")
    if slurm.time is not None and not _SLURM_TIME.fullmatch(slurm.time):
        raise SpecError(f"`slurm_time` {slurm.time!r}: sbatch reads minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
    words: tuple[str, ...] = ()
    if extra is not None:
        try:
            words = tuple(shlex.split(extra))
        except ValueError as exc:
            raise SpecError(f"`emit_extra`: {exc}") from None
    return LaunchRequest(kind=kind, out=out, titan_config=torchtitan_config, extra=words, slurm=slurm)


def node_layout(job: Job, host_gpus: int) -> tuple[int, int]:
    """(nnodes, nproc_per_node) for the job: whole hosts of `host_gpus` GPUs (HardwareProfile.host_gpus:
    the node, or a GB200 NVL72 tray of 4 inside its 72-GPU NVLink node), or one host holding every GPU."""
    if job.gpus <= host_gpus:
        return 1, job.gpus
    if job.gpus % host_gpus:
        raise SpecError(
            f"`gpus` ({job.gpus}) is not a whole number of {host_gpus}-GPU hosts; "
            "torchrun starts the same number of processes on every host"
        )
    return job.gpus // host_gpus, host_gpus


# The emitters that take the plan and the node layout alone (torchtitan also takes its config name)
_COMMANDS: dict[str, Callable[..., str]] = {"deepspeed": deepspeed.deepspeed_command, "megatron-bridge": megatron_bridge.bridge_command}


def _command(req: LaunchRequest, ctx: Context, plan: Plan, *, endpoint: str, multiline: bool, extra_args: Sequence[str] = ()) -> str:
    """``extra_args`` (words the answer adds, e.g. hybrid CP) go before the user's --emit-extra words."""
    nnodes, nproc = node_layout(ctx.job, ctx.hw.host_gpus)
    words = [*extra_args, *req.extra]
    if FRAMEWORK[req.kind] == "torchtitan":
        build: Callable[..., str] = functools.partial(torchtitan.torchtitan_command, config=req.titan_config)
    else:
        build = _COMMANDS.get(req.kind, megatron.megatron_command)
    return build(
        ctx.model,
        plan,
        ctx.job,
        nnodes=nnodes,
        nproc_per_node=nproc,
        rdzv_endpoint=endpoint,
        extra_args=words,
        multiline=multiline,
        stack=ctx.stack,
    )


def job_name(model_name: str) -> str:
    """A SLURM job name from the model's: characters #SBATCH accepts, others as '-'."""
    return "autopar-" + re.sub(r"[^A-Za-z0-9_.-]", "-", model_name)


def unsupported(kind: str, ctx: Context, plan: Plan) -> str | None:
    """Why the framework of ``kind`` cannot run ``plan`` as costed, or None."""
    if FRAMEWORK[kind] == "torchtitan":
        return torchtitan.unsupported(ctx.model, plan, ctx.job)
    if kind == "deepspeed":
        return deepspeed.unsupported(ctx.model, plan, ctx.job)
    if kind == "megatron-bridge":
        return megatron_bridge.unsupported(ctx.model, plan, ctx.job)
    return megatron.unsupported(ctx.model, plan)


def _variants(plan: Plan) -> list[Plan]:
    """Plans one change away, the least disruptive first."""
    other = "allgather" if plan.cp_comm == "ring" else "ring"
    out = [replace(plan, cp_comm=other), replace(plan, etp=plan.tp if plan.ep == 1 else 1)]
    out += [replace(plan, vpp=v) for v in range(plan.vpp - 1, 0, -1)]
    if plan.zero >= 2:  # DeepSpeed's pipeline engine runs ZeRO-0 and 1 only
        out.append(replace(plan, zero=1))
    out += [replace(plan, pp=p, dp=plan.dp * plan.pp // p, vpp=1) for p in range(plan.pp - 1, 0, -1) if (plan.dp * plan.pp) % p == 0]
    if plan.zero == 0:
        out.append(replace(plan, zero=1))
    return out


def nearest(kind: str, ctx: Context, plan: Plan) -> Plan | None:
    """The closest valid plan the framework runs: up to three of the changes in ``_variants``."""
    frontier, seen = [plan], {plan}
    for _ in range(3):
        step = []
        for base in frontier:
            for cand in _variants(base):
                if cand in seen:
                    continue
                seen.add(cand)
                try:
                    validate(cand, ctx.model, ctx.job, stack=ctx.stack)
                except SpecError:
                    continue
                if unsupported(kind, ctx, cand) is None:
                    return cand
                step.append(cand)
        frontier = step
    return None


def choose(req: LaunchRequest, ctx: Context, plans: Sequence[Plan]) -> tuple[Plan, tuple[str, ...]]:
    """The plan to launch, and notes: the first of ``plans`` (best first) the framework can run.

    When none of them runs (``estimate`` passes one plan), the error names the nearest plan that does.
    """
    name = PIN[FRAMEWORK[req.kind]]
    if FRAMEWORK[req.kind] == "torchtitan":
        module, config = torchtitan.config_for(ctx.model, req.titan_config)  # a model torchtitan cannot build fails here
        if req.titan_config is not None:
            torchtitan.check_config(ctx.model, module, config)  # and a config of another shape (issue 25)
    if req.kind == "megatron-bridge":
        megatron_bridge.recipe_for(ctx.model)  # likewise a model with no recipe
    first = unsupported(req.kind, ctx, plans[0])
    if first is None:
        return plans[0], ()
    for rank, plan in enumerate(plans[1:], 2):
        if unsupported(req.kind, ctx, plan) is None:
            return plan, (
                f"the best plan ({plans[0].label()}) cannot run on {name}: {first}; "
                f"launching plan #{rank} ({plan.label()}), the best it can run",
            )
    near = nearest(req.kind, ctx, plans[0])
    hint = f"; the nearest plan it can run: {describe(near)}" if near is not None else ""
    raise SpecError(f"{name} cannot run this plan: {first}{hint}")


def describe(plan: Plan) -> str:
    """A plan as the estimate parameters that select it (the CLI says them as flags)."""
    return (
        f"`tp={plan.tp}` `pp={plan.pp}` `vpp={plan.vpp}` `cp={plan.cp}` `cp_comm={plan.cp_comm}` "
        f"`ep={plan.ep}` `etp={plan.etp}` `mbs={plan.mbs}` `recompute={plan.recompute}` `zero={plan.zero}`"
        + (f" `recompute_modules={','.join(plan.recompute_modules)}`" if plan.recompute_modules else "")
    )


def stack_for(kind: str | None, stack: str | None) -> str | None:
    """The execution stack to cost with: --stack, else the --emit framework's own (torchtitan, deepspeed), else
    the default."""
    if stack is None and kind in FRAMEWORK and FRAMEWORK[kind] in ("torchtitan", "DeepSpeed"):
        return LAUNCHER[FRAMEWORK[kind]]
    return stack


def _notes(req: LaunchRequest, ctx: Context, plan: Plan) -> tuple[str, ...]:
    out = list(megatron.notes(ctx.model, plan, stack=ctx.stack)) if FRAMEWORK[req.kind] == "Megatron-LM" else []
    if req.kind == "deepspeed":
        out += deepspeed.notes(ctx.model, plan)
    launcher = LAUNCHER[FRAMEWORK[req.kind]]
    if ctx.stack.launcher != launcher:
        out.append(
            f"costed for stack {ctx.stack.name}, launched on {FRAMEWORK[req.kind]}: its speed and memory may "
            f"differ (--stack {launcher} costs it as that framework runs it)"
        )
    return tuple(out)


def build(req: LaunchRequest, ctx: Context, plans: Sequence[Plan], *, extra_args: Sequence[str] = ()) -> Launch:
    """The launch text for the best of ``plans`` the framework runs, without writing anything."""
    plan, chosen = choose(req, ctx, plans)
    nnodes, nproc = node_layout(ctx.job, ctx.hw.host_gpus)
    notes = chosen + _notes(req, ctx, plan)
    if req.kind.startswith("slurm"):
        # the command one flag a line inside srun's `bash -c '...'`: the inner shell joins the lines
        line = _command(req, ctx, plan, endpoint="$MASTER_ADDR:29500", multiline=True, extra_args=extra_args)
        text = slurm_script(line, nnodes=nnodes, nproc_per_node=nproc, job_name=job_name(ctx.model.name), options=req.slurm)
        return Launch(
            kind=req.kind,
            framework=FRAMEWORK[req.kind],
            text=text,
            line=text,
            nnodes=nnodes,
            nproc_per_node=nproc,
            path=None,
            plan=plan,
            notes=notes,
        )
    endpoint = "localhost:29500" if nnodes == 1 else "$MASTER_ADDR:29500"
    files = ((deepspeed.CONFIG_NAME, deepspeed.config_text(ctx.model, plan, ctx.job, ctx.stack)),) if req.kind == "deepspeed" else ()
    return Launch(
        kind=req.kind,
        framework=FRAMEWORK[req.kind],
        text=_command(req, ctx, plan, endpoint=endpoint, multiline=True, extra_args=extra_args),
        line=_command(req, ctx, plan, endpoint=endpoint, multiline=False, extra_args=extra_args),
        nnodes=nnodes,
        nproc_per_node=nproc,
        path=None,
        plan=plan,
        notes=notes,
        files=files,
    )


def script_text(launch: Launch) -> str:
    """What --emit-out writes: the sbatch script, or the command as a bash script."""
    if launch.kind.startswith("slurm"):
        return launch.text
    where = (
        f"{launch.nnodes} nodes x {launch.nproc_per_node} GPUs: run this on every node, with MASTER_ADDR set to the first node's address"
        if launch.nnodes > 1
        else f"one node, {counted(launch.nproc_per_node, 'GPU')}"
    )
    notes = "".join(f"# note: {n}\n" for n in launch.notes)
    # the files the command reads, written next to where it runs (a quoted here-document expands nothing)
    files = "".join(f"cat > {name} <<'AUTOPAR_EOF'\n{text}AUTOPAR_EOF\n\n" for name, text in launch.files)
    return f"#!/bin/bash\n# {launch.framework} ({where}); written by autopar\n{notes}set -euo pipefail\n\n{files}{launch.text}\n"


def prepare(req: LaunchRequest | None, ctx: Context, plans: Plan | Sequence[Plan], *, extra_args: Sequence[str] = ()) -> Launch | None:
    """Build the launch for the best of ``plans`` and, with --emit-out, write it (atomically).

    ``extra_args``: more framework words the answer needs (hybrid CP for --seq-len-dist plans).
    """
    if req is None:
        return None
    launch = build(req, ctx, [plans] if isinstance(plans, Plan) else plans, extra_args=extra_args)
    if req.out is None:
        return launch
    write_atomic(req.out, script_text(launch), option="`emit_out`", executable=True)
    return replace(launch, path=req.out)
