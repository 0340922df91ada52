"""``run_calibrate``: what `autopar calibrate` does, in order.

1. load the model and parse the plan (no torch yet); refuse what calibrate
   does not build, with the reason;
2. shrink the model (--scale-to-fit) or check that it fits this node;
3. run warm-up and measured steps on every rank (autopar.probe's launching and
   watchdog: torchrun, spawned processes, or one process);
4. on the process holding rank 0: predict, compare, print; --save writes the
   corrections into the saved profile (atomically).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from autopar.calibrate.compare import Row, compare
from autopar.calibrate.predict import SAVES, STATE, Prediction, predict
from autopar.calibrate.request import BUDGETS, PlanRequest, Scaling, check_family, make_job, parse_plan, scale_to_fit
from autopar.calibrate.results import RunResult
from autopar.cost.habits import dense_block_activation_bytes
from autopar.errors import AutoparError, ProfileError, SpecError
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware, saved_profile, saved_profile_path
from autopar.probe.runtime import physical_memory_bytes, processes, require_torch, resolve_device
from autopar.probe.settings import step_timeout
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.limits import MAX_STEPS, MAX_WARMUP
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

FIT_FRACTION = 0.5  # an unscaled model must need at most this share of a rank's memory (GPU, or RAM / ranks)


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """One finished run, ready to render or save."""

    model_name: str  # as the user named it
    model: ModelSpec  # as built
    scaling: Scaling  # how it was shrunk
    plan: Plan  # as run
    job: Job  # batch and sequence
    prediction: Prediction  # the models' numbers
    run: RunResult  # the meters
    rows: tuple[Row, ...]  # compared


def world_size(kind: str, nproc: int | None) -> int:
    """The number of ranks a run will have (torchrun's WORLD_SIZE, --nproc, the GPUs, or 2 on CPU)."""
    cuda = 0
    if kind == "cuda":
        import torch

        cuda = torch.cuda.device_count()
    return _world(kind, nproc, cuda)


def _world(kind: str, nproc: int | None, torch_cuda_count: int) -> int:
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ:
        try:
            return int(os.environ["WORLD_SIZE"])
        except ValueError:
            raise SpecError("WORLD_SIZE must be an integer (set by torchrun)") from None
    return processes(nproc, kind=kind, gpus=torch_cuda_count)


def check_run(*, steps: int, warmup: int, nproc: int | None, device: str, top: int | None = None, plans: int = 0) -> None:
    """What bounds a run, checked before torch is imported: steps, warm-up steps, processes, --top (or `plans`)."""
    if top is not None and top < 1:
        raise SpecError(f"`top` must be >= 1, got {top}")
    if top is not None and plans:
        raise SpecError("`plan` and `top` do not combine: give the plans to run, or how many of suggest's best")
    if not 1 <= steps <= MAX_STEPS or not 0 <= warmup <= MAX_WARMUP:
        raise SpecError(f"`steps` must be from 1 to {MAX_STEPS:,} and `warmup` from 0 to {MAX_WARMUP:,}, got {steps:,} and {warmup:,}")
    processes(nproc, kind="cpu" if device == "cpu" else None)


def _check_fits(model: ModelSpec, plan: Plan, job: Job, *, capacity: float) -> None:
    params = model.total_params() / (plan.tp * plan.pp * plan.dp)
    state = params * (STATE.weight + STATE.grad + STATE.optimizer)
    acts = dense_block_activation_bytes(model, SAVES, tokens=plan.mbs * job.seq_len, tp=plan.tp, sp=plan.sp)
    need = state + acts * model.layers / plan.pp * min(plan.pp, plan.microbatches(job))
    if need > FIT_FRACTION * capacity:
        raise SpecError(
            f"{model.name} needs about {need / 2**30:.1f} GiB per rank for this plan; this node gives "
            f"{capacity / 2**30:.1f} GiB per rank: add `scale_to_fit`"
        )


def _saved_hardware(kind: str) -> tuple[HardwareProfile | None, str]:
    """The saved profile for the step-time prediction if it was measured on this kind of device; None and why."""
    path = saved_profile()
    if path is None:
        return None, f"no saved profile: run `autopar profile --device {kind}` for a step-time prediction"
    hw = load_hardware(str(path))
    if hw.provenance.get("device", "cuda") != kind:
        return None, f"the saved profile was not measured on {kind}; give --hardware"
    return hw, f"saved profile {path}"


def _step_time(model: ModelSpec, plan: Plan, job: Job, hw: HardwareProfile | None, why: str) -> tuple[float | None, str]:
    """The cost model's step time on `hw` (None: no prediction, `why` says so)."""
    from autopar.cost.step import estimate

    if hw is None:
        return None, why
    try:
        per_node = max(hw.gpus_per_node, plan.tp)
        est = estimate(
            model, hw, Job(gpus=job.gpus, gpus_per_node=per_node, global_batch=job.global_batch, seq_len=job.seq_len, dtype="bf16"), plan
        )
    except AutoparError as exc:
        return None, f"{why}: {exc}"
    return est.step_time_s, why


@dataclass(frozen=True, slots=True, kw_only=True)
class _Prepared:
    text: str  # the --plan as given
    scaling: Scaling  # the model as built, and how it was shrunk
    plan: Plan  # parsed
    job: Job  # batch and sequence


def _prepare(spec: ModelSpec, text: str, *, scale: bool, kind: str, world: int, capacity: float) -> _Prepared:
    req: PlanRequest = parse_plan(text)
    if req.plan.gpus != world:
        raise SpecError(
            f"`plan` {text}: dp*tp*pp = {req.plan.gpus} must equal the number of processes ({world}; `nproc` or torchrun's WORLD_SIZE)"
        )
    scaling = scale_to_fit(spec, req.plan, BUDGETS[kind]) if scale else Scaling(model=spec, lines=())
    if scaling.model.tie_embeddings:  # the Llama module has its own output matrix; predict what is built
        scaling = Scaling(
            model=replace(scaling.model, tie_embeddings=False),
            lines=(*scaling.lines, "tied embeddings -> untied (a separate output matrix)"),
        )
    job = make_job(scaling.model, req, gpus=world)
    if job.seq_len != scaling.model.seq_len:  # rotary tables and CP chunks follow the run's sequence
        scaling = Scaling(
            model=replace(scaling.model, seq_len=job.seq_len, max_seq_len=max(job.seq_len, scaling.model.max_seq_len)), lines=scaling.lines
        )
    if not scale:
        _check_fits(scaling.model, req.plan, job, capacity=capacity)
    return _Prepared(text=text, scaling=scaling, plan=req.plan, job=job)


def plan_text(plan: Plan, global_batch: int) -> str:
    """A searched plan as a --plan string calibrate runs (ZeRO 0/1 over dp > 1 become FSDP2's zero3)."""
    zero = plan.zero if plan.zero >= 2 or plan.dp == 1 else 3
    vpp = f",vpp{plan.vpp}" if plan.vpp > 1 else ""
    return f"dp{plan.dp},tp{plan.tp},pp{plan.pp}{vpp},mbs{plan.mbs},gb{global_batch},zero{zero}," + ("sp" if plan.sp else "nosp")


def top_plans(spec: ModelSpec, k: int, *, world: int, hardware: str | None, scale: bool, kind: str) -> tuple[list[str], str]:
    """The --plan strings of suggest's best k plans for `world` GPUs that calibrate runs, and the hardware used.

    The search runs on the model as calibrate builds it (scaled when asked), for a global batch of
    4 sequences per process, on --hardware or the saved profile (else the default); plans with CP,
    recompute or EP are passed over (calibrate does not run them).
    """
    from autopar.io.profiles import resolve_hardware
    from autopar.search.planner import search

    if k < 1:
        raise SpecError(f"`top` must be >= 1, got {k}")
    model = scale_to_fit(spec, Plan(dp=world, tp=1, pp=1), BUDGETS[kind]).model if scale else spec
    hw, why = resolve_hardware(hardware)
    batch = 4 * world
    job = Job(gpus=world, gpus_per_node=max(hw.gpus_per_node, world), global_batch=batch, seq_len=model.seq_len)
    found = search(model, hw, job, fixed={"cp": 1, "recompute": "none", "ep": 1})
    texts: list[str] = []
    for est in found.ranked:
        if est.plan.pp > 1 and est.plan.microbatches(job) < est.plan.pp:
            continue  # torch's schedules need at least pp micro-batches
        text = plan_text(est.plan, batch)
        if text not in texts:
            texts.append(text)
        if len(texts) == k:
            break
    return texts, why


def run_calibrate(
    model_ref: str,
    *,
    plan_texts: list[str],
    scale: bool,
    nproc: int | None,
    device: str,
    steps: int,
    warmup: int,
    hardware: str | None,
    before_run: Callable[[], None] | None = None,
) -> tuple[Calibration, ...] | None:
    """Run the plans, one after the other in one process group; rank 0's process gets the results, others None.
    `before_run` is called once every input is checked, just before the processes start."""
    check_run(steps=steps, warmup=warmup, nproc=nproc, device=device)
    if not plan_texts:
        raise SpecError("give at least one `plan` (e.g. `plan=dp1,tp2,pp1`)")
    spec = load_model(model_ref)
    check_family(spec)
    for text in plan_texts:
        parse_plan(text)  # bad tokens before torch is imported
    given = (load_hardware(hardware), f"--hardware {hardware}") if hardware is not None else None  # before any run
    torch = require_torch("autopar calibrate")
    kind = resolve_device(torch, device)
    hw, why = given or _saved_hardware(kind)
    world = _world(kind, nproc, torch.cuda.device_count() if kind == "cuda" else 0)
    capacity = torch.cuda.get_device_properties(0).total_memory if kind == "cuda" else physical_memory_bytes() / max(1, world)
    prepared = [_prepare(spec, t, scale=scale, kind=kind, world=world, capacity=capacity) for t in plan_texts]
    from autopar.calibrate.worker import PlanRun, Work, run_calibration
    from autopar.probe.launch import Task, run_task

    runs = tuple(
        PlanRun(model=p.scaling.model, plan=p.plan, microbatches=p.plan.microbatches(p.job), seq_len=p.job.seq_len) for p in prepared
    )
    work = Work(runs=runs, warmup=warmup, steps=steps, device=kind)
    task = Task(work=run_calibration, payload=work, device=kind, timeout_s=step_timeout(120.0))
    if before_run is not None:
        before_run()
    results = run_task(task, nproc=nproc, console=Console(stderr=True))
    if results is None:
        return None
    out = []
    for p, run in zip(prepared, results, strict=True):
        step_s, said = _step_time(p.scaling.model, p.plan, p.job, hw, why)
        pred = predict(p.scaling.model, p.plan, p.job, step_time_s=step_s, hardware=said)
        out.append(
            Calibration(
                model_name=spec.name,
                model=p.scaling.model,
                scaling=p.scaling,
                plan=p.plan,
                job=p.job,
                prediction=pred,
                run=run,
                rows=compare(pred, run, p.plan),
            )
        )
    return tuple(out)


def saved_path(out: Path | None) -> Path:
    path = out if out is not None else saved_profile_path()
    if not path.exists():
        raise ProfileError(f"`save`: no profile at {path}: run `autopar profile` first (corrections live in a profile)")
    return path
