"""The two questions the CLI asks, as library calls: suggest plans, estimate one plan.

Both take plain values (names, paths, numbers), load and validate the inputs,
and return frozen results that report.py renders. No torch, no printing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from autopar.cost.memory import memory_breakdown
from autopar.cost.step import Estimate, estimate
from autopar.errors import SpecError
from autopar.io.models import load_model
from autopar.io.profiles import resolve_hardware
from autopar.io.stacks import DEFAULT_STACK, load_stack
from autopar.search.planner import SearchResult, search
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job, default_global_batch
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate
from autopar.spec.stack import StackProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """The inputs every answer is about."""

    model: ModelSpec  # what is trained
    hw: HardwareProfile  # on what
    hw_reason: str  # which profile was used and why
    job: Job  # GPUs, batch, sequence length, dtype
    batch_defaulted: bool  # the global batch was chosen by autopar
    stack: StackProfile  # the framework that runs the plan
    stack_reason: str  # --stack NAME, or the default


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    ctx: Context  # inputs
    result: SearchResult  # ranked plans
    search_s: float  # wall time of the search


@dataclass(frozen=True, slots=True, kw_only=True)
class Explained:
    ctx: Context  # inputs
    estimate: Estimate  # the plan's time and memory
    hints: tuple[tuple[str, float], ...]  # when it does not fit: (change, GiB per GPU after it) that would


def context(
    model: str,
    *,
    hardware: str | None,
    gpus: int | None,
    nodes: int | None,
    global_batch: int | None,
    seq_len: int | None,
    dtype: str,
    seq_len_dist: str | None = None,
    stack: str | None = None,
) -> Context:
    """Load and check the inputs; `seq_len_dist` only to refuse it beside an explicit --seq-len."""
    if seq_len_dist is not None and seq_len is not None:
        raise SpecError("give --seq-len or --seq-len-dist, not both")
    spec = load_model(model)
    hw, reason = resolve_hardware(hardware)
    if nodes is not None:
        if nodes < 1:
            raise SpecError(f"--nodes must be positive, got {nodes}")
        if gpus is not None and gpus != nodes * hw.gpus_per_node:
            raise SpecError(f"--gpus ({gpus}) disagrees with --nodes ({nodes}) x {hw.gpus_per_node} GPUs per node")
        gpus = nodes * hw.gpus_per_node
    if gpus is None:
        raise SpecError("give --gpus N or --nodes N")
    seq = seq_len if seq_len is not None else spec.seq_len
    if seq <= 0:
        raise SpecError(f"--seq-len must be positive, got {seq}")
    if seq > spec.max_seq_len:
        raise SpecError(f"--seq-len ({seq}) exceeds {spec.name}'s max_seq_len ({spec.max_seq_len})")
    batch = global_batch if global_batch is not None else default_global_batch(gpus, hw.gpus_per_node, seq)
    job = Job(gpus=gpus, gpus_per_node=hw.gpus_per_node, global_batch=batch, seq_len=seq, dtype=dtype)
    if dtype not in hw.peak_flops:
        raise SpecError(f"--dtype {dtype}: hardware profile {hw.name} has no peak for it")
    stack_profile = load_stack(stack)
    stack_reason = f"--stack {stack}" if stack else f"default {DEFAULT_STACK} (no --stack)"
    return Context(model=spec, hw=hw, hw_reason=reason, job=job, batch_defaulted=global_batch is None,
                   stack=stack_profile, stack_reason=stack_reason)


def suggest(ctx: Context) -> Suggestion:
    start = time.perf_counter()
    result = search(ctx.model, ctx.hw, ctx.job, stack=ctx.stack)
    return Suggestion(ctx=ctx, result=result, search_s=time.perf_counter() - start)


def explain(ctx: Context, *, tp: int, pp: int, cp: int, vpp: int, ep: int, mbs: int, recompute: str, zero: int, sp: bool,
            etp: int = 1, cp_comm: str = "ring") -> Explained:
    denom = tp * pp * cp
    if denom <= 0 or ctx.job.gpus % denom:
        raise SpecError(f"--gpus ({ctx.job.gpus}) must be divisible by tp*pp*cp ({tp}*{pp}*{cp})")
    plan = Plan(dp=ctx.job.gpus // denom, tp=tp, pp=pp, cp=cp, vpp=vpp, ep=ep, etp=etp, cp_comm=cp_comm, mbs=mbs,
                recompute=recompute, zero=zero, sp=sp and tp > 1)
    step = plan.dp * max(1, mbs)
    if ctx.batch_defaulted and ctx.job.global_batch % step:  # the default batch follows the plan's dp x mbs
        ctx = replace(ctx, job=replace(ctx.job, global_batch=step * -(-ctx.job.global_batch // step)))
    refused = ctx.stack.refusal(plan)
    if refused:
        raise SpecError(f"{refused}; see `autopar stacks`")
    est = estimate(ctx.model, ctx.hw, ctx.job, plan, stack=ctx.stack)
    hints = () if est.fits else fit_hints(ctx, plan)
    return Explained(ctx=ctx, estimate=est, hints=hints)


def fit_hints(ctx: Context, plan: Plan) -> tuple[tuple[str, float], ...]:
    """One-knob changes that make an over-budget plan fit, smallest memory first."""
    options: list[tuple[str, Plan]] = [(f"--recompute {r}", replace(plan, recompute=r)) for r in ("selective", "full")]
    options += [(f"--zero {z}", replace(plan, zero=z)) for z in (1, 2, 3) if z > plan.zero]
    options += [(f"--mbs {b}", replace(plan, mbs=b)) for b in (1, 2, 4) if b < plan.mbs]
    if plan.tp > 1 and not plan.sp:
        options.append(("--sp", replace(plan, sp=True)))
    found = []
    for label, candidate in options:
        try:
            validate(candidate, ctx.model, ctx.job, stack=ctx.stack)
        except SpecError:
            continue
        need = memory_breakdown(ctx.model, ctx.job, candidate, stack=ctx.stack).total
        if need <= ctx.hw.memory_bytes:
            found.append((label, need / 2**30))
    return tuple(sorted(found, key=lambda x: x[1])[:3])
