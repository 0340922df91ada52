"""Starting the ranks: under torchrun, with torch.multiprocessing, or alone.

- torchrun (RANK, WORLD_SIZE, LOCAL_RANK set): this process is one rank; it
  joins the process group torchrun set up, and torchrun tears the job down if
  a rank dies. Rank 0 shows progress and returns the measurements.
- otherwise, more than one process: this process is a parent that starts one
  worker per local GPU (or ``--nproc`` gloo workers on CPU), shows rank 0's
  progress, and watches them: a worker that exits early, reports an error, or
  sends no progress for longer than the step timeout ends the run, and every
  worker still alive is killed, with a message naming the rank and the step.
- one process: measured here, without a process group.

What each rank runs is a ``Task``: `autopar profile` runs ``worker.run_rank``,
`autopar calibrate` its own worker, under the same launching and watchdog.
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from autopar.errors import ProfileError
from autopar.probe import runtime
from autopar.probe.results import Measurements, Topology
from autopar.probe.settings import Settings
from autopar.probe.worker import init_group, one_line, run_rank

GRACE_S = 30.0  # beyond the step timeout, before the parent gives up on silent workers


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """What every rank runs, and how long a step may take.

    ``work(payload, topo, sink=..., watchdog=...)`` returns the result on the
    rank that holds it (rank 0) and None elsewhere; it must be a module-level
    function, since spawned workers receive it pickled.
    """

    work: Callable[..., Any]  # the rank's body
    payload: Any  # its picklable input (profile Settings, a calibration request)
    device: str  # cuda | cpu: NCCL or gloo
    timeout_s: float  # a step that takes longer ends the run
    timeout_env: str = "AUTOPAR_PROBE_TIMEOUT_S"  # the variable that sets timeout_s, named in messages


class RichSink:
    """Progress as a rich bar: one step begun per label."""

    def __init__(self, console: Console):
        columns = (SpinnerColumn(), TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        self._progress = Progress(*columns, console=console)
        self._task: Any = None
        self._begun = 0

    def total(self, steps: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task("starting", total=steps)

    def step(self, label: str, *, advance: bool = True) -> None:
        """Begin a step (``advance``) or just say what the current one is doing."""
        if self._task is not None:
            self._progress.update(self._task, description=label, completed=self._begun)
            self._begun += int(advance)

    def note(self, text: str) -> None:
        self._progress.console.print(text)

    def close(self, *, done: bool) -> None:
        if self._task is not None and done:
            self._progress.update(self._task, description="done", completed=self._begun)
        self._progress.stop()


class QueueSink:
    """Progress of a spawned rank 0, sent to the parent."""

    def __init__(self, q: Any):
        self._q = q

    def total(self, steps: int) -> None:
        self._q.put(("total", steps))

    def step(self, label: str, *, advance: bool = True) -> None:
        self._q.put(("step", label, advance))

    def note(self, text: str) -> None:
        self._q.put(("note", text))


def torchrun_topology() -> Topology | None:
    env = os.environ
    if not all(k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return None
    try:
        rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
        per_node = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise ProfileError("RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be integers (set by torchrun)") from None
    if per_node < 1 or world % per_node:
        raise ProfileError(f"WORLD_SIZE ({world}) must be a multiple of LOCAL_WORLD_SIZE ({per_node}): same ranks on every node")
    return Topology(rank=rank, world_size=world, local_rank=local, local_world_size=per_node, launcher="torchrun")


def launch(settings: Settings, *, nproc: int | None, console: Console) -> Measurements | None:
    """Run the measurements; the process that holds rank 0's result gets it, others None."""
    task = Task(work=run_rank, payload=settings, device=settings.device, timeout_s=settings.timeout_s)
    result: Measurements | None = run_task(task, nproc=nproc, console=console)
    return result


def run_task(task: Task, *, nproc: int | None, console: Console) -> Any:
    """Run ``task`` on every rank; the process that holds rank 0's result gets it, others None."""
    topo = torchrun_topology()
    if topo is not None:
        if nproc is not None and topo.rank == 0:
            console.print("[yellow]--nproc is ignored under torchrun (it sets the ranks)[/]")
        return _in_process(task, topo, console)
    n = runtime.processes(nproc, kind=task.device, gpus=torch.cuda.device_count() if task.device == "cuda" else 0)
    if n == 1:
        return _in_process(task, Topology(rank=0, world_size=1, local_rank=0, local_world_size=1, launcher="single"), console)
    return _spawn(task, n, console)


def _in_process(task: Task, topo: Topology, console: Console) -> Any:
    sink = RichSink(console) if topo.rank == 0 else None
    watchdog = runtime.Watchdog(rank=topo.rank, limit_s=task.timeout_s)
    ok = False
    ours = topo.world_size > 1 and not dist.is_initialized()  # torchrun only sets the environment; we own the group
    try:
        init_group(topo, task.device, timeout_s=task.timeout_s, init_method=None)
        result = task.work(task.payload, topo, sink=sink or runtime.NullSink(), watchdog=watchdog)
        ok = True
        return result
    except (RuntimeError, ValueError, OSError) as exc:
        raise ProfileError(f"rank {topo.rank}: {one_line(exc)}") from None
    finally:
        watchdog.stop()
        if sink is not None:
            sink.close(done=ok)
        if ok and ours:
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawned_main(task: Task, rank: int, world: int, port: int, q: Any, parent_pid: int) -> None:
    """Entry point of a worker started by ``_spawn`` (one rank on one node); it dies with its parent."""
    runtime.die_with_parent(parent_pid)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)

    def tell_parent(msg: str) -> None:
        q.put(("error", rank, msg))
        q.close()
        q.join_thread()

    topo = Topology(rank=rank, world_size=world, local_rank=rank, local_world_size=world, launcher="spawn")
    watchdog = runtime.Watchdog(rank=rank, limit_s=task.timeout_s, on_expire=tell_parent)
    sink: runtime.Sink = QueueSink(q) if rank == 0 else runtime.NullSink()
    try:
        init_group(topo, task.device, timeout_s=task.timeout_s, init_method=f"tcp://127.0.0.1:{port}")
        result = task.work(task.payload, topo, sink=sink, watchdog=watchdog)
        if result is not None:
            q.put(("result", result))
    except Exception as exc:  # any failure: one line to the parent, then leave without waiting on peers
        tell_parent(one_line(exc))
        os._exit(1)
    _leave(q, world, watchdog)


def _leave(q: Any, world: int, watchdog: runtime.Watchdog) -> None:
    """End a worker whose work is done: rank 0's result is in the parent's pipe first, then no rank
    leaves before every rank has finished, and none runs the process group's C++ teardown.

    Tearing gloo down at exit aborted a rank now and then ("terminate called without an active
    exception", signal 6, right after the last gather of `autopar calibrate` in CI) and cost the
    run its result. The parent owns the workers' lifetime and the OS closes their sockets, so
    a worker leaves with os._exit once the barrier is passed.
    """
    q.close()
    q.join_thread()  # flushed into the pipe: the parent reads the result even if a peer dies now
    code = 0
    if world > 1:
        watchdog.beat("leaving")
        try:
            dist.barrier()
        except Exception:  # a peer died after the result was sent; the parent reads it anyway
            code = 1
    watchdog.stop()
    os._exit(code)


def _exit_text(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"


def _failure(procs: list[Any], rank: int, text: str, phase: str, task: Task) -> str:
    """The message for a rank's error, naming first any other rank that died (often the cause)."""
    if ("timeout" in text.lower() or "timed out" in text.lower()) and "no progress" not in text:
        text += f" (a peer stopped responding within the {task.timeout_s:.0f} s step timeout, {task.timeout_env})"
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        dead = [(r, p.exitcode) for r, p in enumerate(procs) if r != rank and p.exitcode not in (None, 0)]
        if dead:
            r, code = dead[0]
            return f"rank {r} {_exit_text(code)} during '{phase}'; rank {rank} then failed: {text}"
        time.sleep(0.1)
    return f"rank {rank} failed during '{phase}': {text}"


def _spawn(task: Task, n: int, console: Console) -> Any:
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # the workers' c10d warnings repeat what we report
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=spawned_main, args=(task, r, n, port, q, os.getpid()), name=f"autopar-rank{r}") for r in range(n)]
    sink = RichSink(console)
    phase, result, ok = "start-up", None, False
    silent_limit = task.timeout_s + GRACE_S
    try:
        for p in procs:
            p.start()
        last = time.monotonic()
        while True:
            try:
                msg = q.get(timeout=0.2)
            except queue_mod.Empty:
                msg = None
            if msg is not None:
                last = time.monotonic()
                kind = msg[0]
                if kind == "total":
                    sink.total(msg[1])
                elif kind == "step":
                    phase = msg[1]
                    sink.step(phase, advance=msg[2])
                elif kind == "note":
                    sink.note(msg[1])
                elif kind == "error":
                    raise ProfileError(_failure(procs, msg[1], msg[2], phase, task))
                elif kind == "result":
                    result = msg[1]
                continue
            for r, p in enumerate(procs):
                if p.exitcode not in (None, 0) and result is None:  # once the result is in, a rank's exit spoils nothing
                    raise ProfileError(f"rank {r} {_exit_text(p.exitcode)} during '{phase}'; the other ranks were stopped")
            if result is not None and all(p.exitcode is not None for p in procs):
                ok = True
                return result
            waited = time.monotonic() - last
            if result is not None and waited > GRACE_S:
                ok = True  # measured and sent; a rank slow to tear down does not spoil the result
                return result
            if result is None and waited > silent_limit:
                raise ProfileError(
                    f"no progress for {waited:.0f} s during '{phase}' (a hung collective or a dead rank); the ranks were stopped"
                )
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=5)
        sink.close(done=ok)
