"""What one rank does, from process-group set-up to the measurements.

Order: compute sweep, collectives, overlap. On GPUs every rank measures its own
device at the same time (a throttled GPU shows up as a spread) and rank 0 keeps
the median per point. On CPU the ranks share cores, so rank 0 measures alone
while the others wait. Only rank 0 returns the result.

``AUTOPAR_PROBE_FAULT=exit:R`` or ``hang:R`` makes rank R die or hang when the
collectives start; the tests use it to check that the run ends with a clear
message instead of hanging.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from autopar.probe import compute, runtime
from autopar.probe.comm import CollectiveBench, comm_steps
from autopar.probe.overlap import measure_overlap
from autopar.probe.results import CollPoint, ComputeResult, Measurements, Topology
from autopar.probe.settings import Settings


def one_line(exc: BaseException) -> str:
    """An exception as one short line (gloo and NCCL errors run to many)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def init_group(topo: Topology, device: str, *, timeout_s: float, init_method: str | None) -> None:
    """Join (or reuse) the default process group: NCCL on GPUs, gloo on CPU."""
    if topo.world_size < 2 or dist.is_initialized():
        return
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(
        backend, init_method=init_method or "env://", rank=topo.rank, world_size=topo.world_size, timeout=timedelta(seconds=timeout_s)
    )


def inject_fault(rank: int) -> None:
    spec = os.environ.get("AUTOPAR_PROBE_FAULT", "")
    kind, _, who = spec.partition(":")
    if not spec or who != str(rank):
        return
    if kind == "exit":
        os._exit(1)
    if kind == "hang":
        time.sleep(10**6)


def _median_points(per_rank: list[tuple[Any, ...]], key: Callable[[Any], tuple]) -> tuple[Any, ...]:
    """Rank 0's points, each with the median time over the ranks that measured the same point."""
    times: dict[tuple, list[float]] = {}
    for points in per_rank:
        for p in points:
            times.setdefault(key(p), []).append(p.seconds)
    return tuple(dataclasses.replace(p, seconds=statistics.median(times[key(p)])) for p in per_rank[0])


def _combine(results: list[ComputeResult]) -> tuple[ComputeResult, str]:
    """Median per point over the ranks' sweeps, and a line on the spread."""
    first = results[0]
    gemm = _median_points([r.gemm for r in results], lambda p: (p.dtype, p.m, p.n, p.k))
    attention = _median_points([r.attention for r in results], lambda p: (p.dtype, p.seq_len, p.head_dim, p.batch))
    copy_bw = statistics.median(r.device.copy_bytes_per_s for r in results)
    memory = min(r.device.memory_bytes for r in results)
    device = dataclasses.replace(first.device, copy_bytes_per_s=copy_bw, memory_bytes=memory)
    spread = ""
    largest = [max((p for p in r.gemm if p.dtype == "bf16"), key=lambda p: p.flops) for r in results if r.gemm]
    rates = [p.flops_per_s / 1e12 for p in largest]
    if rates:
        slow = min(range(len(rates)), key=rates.__getitem__)
        med = statistics.median(rates)
        spread = (
            f"largest bf16 GEMM over {len(rates)} GPUs: min {min(rates):.1f} (rank {slow}), median {med:.1f}, max {max(rates):.1f} TFLOP/s"
        )
        if rates[slow] < 0.9 * med:
            spread += f"; rank {slow} is more than 10% slower than the median (throttled or busy GPU?)"
    return ComputeResult(device=device, gemm=gemm, attention=attention, notes=first.notes), spread


def run_rank(settings: Settings, topo: Topology, *, sink: runtime.Sink, watchdog: runtime.Watchdog) -> Measurements | None:
    """Measure on this rank; rank 0 returns the measurements, the others None."""
    device = runtime.bind_device(torch, settings.device, local_rank=topo.local_rank, local_world_size=topo.local_world_size)
    lead = topo.rank == 0
    multi = topo.world_size > 1

    def step(label: str, *, advance: bool = True) -> None:
        watchdog.beat(label)
        if lead:
            sink.step(label, advance=advance)

    n_compute = compute.compute_steps(settings, device)
    sink.total(n_compute + (comm_steps(topo) + 1 if multi else 0))
    start = time.perf_counter()
    notes: list[str] = []
    result: ComputeResult | None = None
    if device.type == "cuda" or lead:
        result = compute.measure_device(settings, device, procs_per_node=topo.local_world_size, step=step)
    if multi and device.type == "cuda":
        gathered: list[ComputeResult | None] = [None] * topo.world_size
        dist.all_gather_object(gathered, result)
        result, spread = _combine([r for r in gathered if r is not None])
        notes.append(spread)
    elif multi:
        wait_s = settings.timeout_s * (n_compute + 1)
        step("waiting for all ranks", advance=False)
        watchdog.beat("waiting for rank 0's compute sweep", limit_s=wait_s + 30)
        dist.monitored_barrier(timeout=timedelta(seconds=wait_s))
    collectives: list[CollPoint] = []
    overlap = None
    if multi:
        inject_fault(topo.rank)
        bench = CollectiveBench(settings=settings, device=device, timeout_s=settings.timeout_s)
        collectives = bench.measure(topo, step)
        del bench
        step("overlap of compute and all-reduce")
        overlap = measure_overlap(settings, device)
    watchdog.beat("finishing")
    if not lead or result is None:
        return None
    return Measurements(
        topology=topo,
        compute=result,
        collectives=tuple(collectives),
        overlap=overlap,
        duration_s=time.perf_counter() - start,
        quick=settings.quick,
        notes=tuple(n for n in notes if n),
    )
