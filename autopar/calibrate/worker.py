"""What one rank does: build its chunks, run warm-up and measured steps, meter, gather.

Every rank meters itself; rank 0 gathers the ranks' results with
``all_gather_object`` before anyone tears the process group down, and only
rank 0 returns them. Progress and the watchdog come from autopar.probe.

``AUTOPAR_PROBE_FAULT=exit:R`` or ``hang:R`` makes rank R die or hang at the
first measured step (the tests check that the run then ends with a message).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from autopar.calibrate.meters import CollectiveMeter, SavedTensorMeter, by_kind, state_bytes
from autopar.calibrate.parallel import make_mesh, parallelize
from autopar.calibrate.request import cp_positions
from autopar.calibrate.results import RankResult, RunResult
from autopar.probe import runtime
from autopar.probe.results import Topology
from autopar.probe.worker import inject_fault
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRun:
    """One plan to run, with the model built for it."""

    model: ModelSpec  # as built (scaled)
    plan: Plan  # degrees and knobs; dp * tp * pp == world size
    microbatches: int  # per step
    seq_len: int  # tokens per sequence


@dataclass(frozen=True, slots=True, kw_only=True)
class Work:
    """The picklable input of every rank: the plans, run one after the other in one process group."""

    runs: tuple[PlanRun, ...]  # in order
    warmup: int  # untimed steps per plan
    steps: int  # measured steps per plan
    device: str  # cuda | cpu


def _loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.flatten(0, 1).float(), target.flatten(0, 1))


class _InFlight:
    """Forwards begun and backwards finished: the peak of their difference."""

    def __init__(self) -> None:
        self.live = self.peak = 0

    def forward(self) -> None:
        self.live += 1
        self.peak = max(self.peak, self.live)

    def backward(self) -> None:
        self.live -= 1


def _pipeline_step(
    work: PlanRun, chunks: list[tuple[int, nn.Module]], mesh: Any, device: torch.device, flight: _InFlight
) -> Callable[[torch.Tensor, torch.Tensor], None]:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

    plan = work.plan
    total = plan.pp * plan.vpp
    stages: list[Any] = []
    for c, m in chunks:
        stage = PipelineStage(m, c, total, device, group=mesh["pp"].get_group())
        fwd, bwd = stage.forward_one_chunk, stage.backward_one_chunk

        def forward(*a: Any, _f: Any = fwd, **k: Any) -> Any:
            flight.forward()
            return _f(*a, **k)

        def backward(*a: Any, _b: Any = bwd, **k: Any) -> Any:
            out = _b(*a, **k)
            flight.backward()
            return out

        stage.forward_one_chunk, stage.backward_one_chunk = forward, backward  # type: ignore[method-assign]
        stages.append(stage)
    if plan.vpp > 1:
        schedule: Any = ScheduleInterleaved1F1B(stages, n_microbatches=work.microbatches, loss_fn=_loss)
    else:
        schedule = Schedule1F1B(stages[0], n_microbatches=work.microbatches, loss_fn=_loss)
    first = chunks[0][0] == 0
    last = chunks[-1][0] == total - 1

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> None:
        kwargs = {"target": labels} if last else {}
        if first:
            schedule.step(tokens, **kwargs)
        else:
            schedule.step(**kwargs)

    return step


def _plain_step(work: PlanRun, model: nn.Module, flight: _InFlight, losses: list[float]) -> Callable[[torch.Tensor, torch.Tensor], None]:
    mbs = work.plan.mbs

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> None:
        total = 0.0
        for i in range(work.microbatches):
            part = slice(i * mbs, (i + 1) * mbs)
            flight.forward()
            loss = _loss(model(tokens[part]), labels[part])
            loss.backward()
            flight.backward()
            total += float(loss.detach()) / work.microbatches
        losses.append(total)

    return step


def run_calibration(work: Work, topo: Topology, *, sink: runtime.Sink, watchdog: runtime.Watchdog) -> tuple[RunResult, ...] | None:
    """Run the plans on this rank; rank 0 returns every rank's results, the others None."""
    device = runtime.bind_device(torch, work.device, local_rank=topo.local_rank, local_world_size=topo.local_world_size)
    own_group = not dist.is_initialized()
    if own_group:  # one process: a group of one, so that meshes and FSDP work the same way
        dist.init_process_group(
            "nccl" if work.device == "cuda" else "gloo",
            store=dist.HashStore(),
            rank=0,
            world_size=1,
            timeout=timedelta(seconds=watchdog.limit_s),
        )
    sink.total(len(work.runs) * (2 + work.warmup + work.steps))
    results = []
    for i, run in enumerate(work.runs):
        tag = f"{run.plan.label()}: " if len(work.runs) > 1 else ""
        results.append(_run_plan(work, run, topo, device, tag=tag, first=i == 0, sink=sink, watchdog=watchdog))
    if own_group:
        dist.destroy_process_group()
    return tuple(r for r in results if r is not None) if topo.rank == 0 else None


def _run_plan(
    work: Work, run: PlanRun, topo: Topology, device: torch.device, *, tag: str, first: bool, sink: runtime.Sink, watchdog: runtime.Watchdog
) -> RunResult | None:
    start = time.perf_counter()
    lead = topo.rank == 0

    def beat(label: str) -> None:
        watchdog.beat(tag + label)
        if lead:
            sink.step(tag + label)

    beat("building the model")
    notes: list[str] = []
    mesh = make_mesh(work.device, run.plan)
    chunks = parallelize(run.model, run.plan, mesh, device)
    modules = [m for _, m in chunks]
    params = [p for m in modules for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=False)  # foreach fails on a mix of DTensor and plain params
    saved = SavedTensorMeter(modules)
    flight = _InFlight()
    losses: list[float] = []  # per step, this rank's mean over its tokens (plain plans only)
    pipelined = run.plan.pp > 1
    step = _pipeline_step(run, chunks, mesh, device, flight) if pipelined else _plain_step(run, modules[0], flight, losses)
    tokens, labels = _batch(run, mesh, device)
    times: list[float] = []
    coll_bytes: Counter[str] = Counter()
    coll_calls: Counter[str] = Counter()
    unknown: set[str] = set()
    state = (0, 0, 0, 0)
    for i in range(work.warmup + work.steps):
        measured = i >= work.warmup
        beat(f"step {i - work.warmup + 1}/{work.steps}" if measured else f"warm-up {i + 1}/{work.warmup}")
        if measured and i == work.warmup:
            if first:
                inject_fault(topo.rank)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
        opt.zero_grad(set_to_none=True)  # set_to_none=False fails on SP's Partial gradients
        saved.reset()
        flight.peak = 0
        meter = CollectiveMeter()
        t0 = time.perf_counter()
        with saved.hooks(), meter:
            step(tokens, labels)
        state = state_bytes(modules, opt) if measured else state
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if measured:
            times.append(time.perf_counter() - t0)
            coll_bytes.update(meter.bytes)
            coll_calls.update(meter.calls)
            unknown |= meter.unknown
    block_bytes, blocks = saved.per_block()
    optimizer = state_bytes(modules, opt)  # AdamW's moments exist after its first step
    if unknown:
        notes.append(f"collectives not counted: {', '.join(sorted(unknown))}")
    mine = RankResult(
        rank=topo.rank,
        pp_rank=mesh["pp"].get_local_rank(),
        param_bytes=state[0],
        grad_bytes=state[1],
        optimizer_bytes=optimizer[2],
        optimizer_scalar_bytes=optimizer[3],
        block_activation_bytes=block_bytes,
        blocks_metered=blocks,
        in_flight_chunks=flight.peak,
        collective_bytes=by_kind(coll_bytes, work.steps),
        collective_calls=by_kind(coll_calls, work.steps),
        peak_memory_bytes=float(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None,
        step_times_s=tuple(times),
        first_loss=losses[0] if losses else None,
    )
    beat("gathering the results")
    return _gathered(work, topo, device, mine, notes, start=start)


def _batch(run: PlanRun, mesh: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's tokens and next-token labels for one step: random, seeded by its DP rank; under CP its chunks."""
    gen = torch.Generator().manual_seed(7 + mesh["dp"].get_local_rank())
    batch = run.plan.mbs * run.microbatches
    tokens = torch.randint(0, run.model.vocab_size, (batch, run.seq_len), generator=gen).to(device)
    labels = torch.roll(tokens, -1, dims=1)
    if run.plan.cp > 1:  # this rank's two chunks of every sequence
        local = torch.tensor(cp_positions(run.seq_len, run.plan.cp, mesh["cp"].get_local_rank()), device=device)
        tokens, labels = tokens[:, local], labels[:, local]
    return tokens, labels


def _gathered(work: Work, topo: Topology, device: torch.device, mine: RankResult, notes: list[str], *, start: float) -> RunResult | None:
    """Every rank's result and notes gathered on rank 0, which returns the run's result; the others None."""
    gathered: list[Any] = [None] * topo.world_size
    if topo.world_size > 1:
        dist.all_gather_object(gathered, (mine, notes))
    else:
        gathered = [(mine, notes)]
    if topo.rank != 0:
        return None
    all_notes = sorted({n for _, ns in gathered for n in ns})
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else runtime.cpu_name()
    return RunResult(
        ranks=tuple(r for r, _ in gathered),
        device=work.device,
        device_name=name,
        torch_version=torch.__version__,
        warmup=work.warmup,
        steps=work.steps,
        load_average=os.getloadavg(),
        duration_s=time.perf_counter() - start,
        notes=tuple(all_notes),
    )
