"""How much a GEMM and an all-reduce slow each other down when they overlap.

Training overlaps gradient reduction with backward compute, and TP/CP
communication with neighbouring GEMMs; both then share SMs, memory bandwidth
and (on CPU) cores. We time a loop of GEMMs alone, a loop of all-reduces over
all ranks alone, then both at once (two CUDA streams on a GPU, two threads on
a CPU) and report each loop's time together / alone. The loops are sized to
last about the same time so that they overlap for most of their length; the
median of three tries is kept.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from autopar.probe.compute import sync_fn
from autopar.probe.results import OverlapResult
from autopar.probe.settings import MIB, Settings
from autopar.probe.timing import Timer, loop_s

TRIES = 3


def _agree(count: int, device: torch.device) -> int:
    t = torch.tensor([float(count)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def _together_cuda(compute: Callable[[], object], n_c: int, comm: Callable[[], object], n_m: int) -> tuple[float, float]:
    s_c, s_m = torch.cuda.Stream(), torch.cuda.Stream()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    torch.cuda.synchronize()
    with torch.cuda.stream(s_c):
        ev[0].record()
        for _ in range(n_c):
            compute()
        ev[1].record()
    with torch.cuda.stream(s_m):
        ev[2].record()
        for _ in range(n_m):
            comm()
        ev[3].record()
    torch.cuda.synchronize()
    return ev[0].elapsed_time(ev[1]) / 1e3, ev[2].elapsed_time(ev[3]) / 1e3


def _together_cpu(compute: Callable[[], object], n_c: int, comm: Callable[[], object], n_m: int) -> tuple[float, float]:
    box: list[float] = []

    def run() -> None:
        start = time.perf_counter()
        for _ in range(n_c):
            compute()
        box.append(time.perf_counter() - start)

    thread = threading.Thread(target=run, name="autopar-overlap-gemm")
    thread.start()
    start = time.perf_counter()
    for _ in range(n_m):
        comm()
    comm_s = time.perf_counter() - start
    thread.join()
    return box[0], comm_s


def measure_overlap(settings: Settings, device: torch.device) -> OverlapResult:
    """Every rank runs this together; the all-reduce spans all ranks."""
    cuda = device.type == "cuda"
    size = 4096 if cuda else 256
    dtype = torch.bfloat16 if cuda else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    c = torch.empty(size, size, device=device, dtype=dtype)
    buf = torch.ones(min(max(settings.coll_bytes), (64 if cuda else 1) * MIB) // a.element_size(), device=device, dtype=dtype)

    def compute() -> object:
        return torch.mm(a, b, out=c)

    def comm() -> object:
        return dist.all_reduce(buf)

    sync = sync_fn(device)
    timer = Timer.of(settings, sync)
    one_c = timer.median_s(compute)
    one_m = timer.median_s(comm, agree=lambda n: _agree(n, device))
    n_c = max(1, math.ceil(settings.overlap_target_s / one_c))
    n_m = _agree(max(1, math.ceil(settings.overlap_target_s / one_m)), device)
    alone_c, alone_m, both_c, both_m = [], [], [], []
    for _ in range(TRIES):
        alone_c.append(loop_s(compute, n_c, sync))
        alone_m.append(loop_s(comm, n_m, sync))
        dist.barrier()
        together = _together_cuda if cuda else _together_cpu
        bc, bm = together(compute, n_c, comm, n_m)
        both_c.append(bc)
        both_m.append(bm)
    return OverlapResult(
        compute_alone_s=statistics.median(alone_c),
        compute_overlapped_s=statistics.median(both_c),
        comm_alone_s=statistics.median(alone_m),
        comm_overlapped_s=statistics.median(both_m),
        method=(
            f"{n_c} x bf16 GEMM {size}^3 on one CUDA stream, {n_m} x all-reduce of {buf.numel() * 2 // MIB} MiB on another"
            if cuda
            else f"{n_c} x fp32 GEMM {size}^3 in a thread, {n_m} x gloo all-reduce of {buf.numel() * 4 // 1024} KiB in the main thread"
        ),
    )
