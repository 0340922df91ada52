"""Importing torch, choosing the device, reading versions, and the watchdog.

``require_torch`` is the one place that turns a missing torch into a one-line
error with the fix. The watchdog ends a rank that stops making progress (a hung
collective, a peer that died) with a message naming the step, instead of
leaving the user with a process that never returns.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from autopar.errors import ProfileError, SpecError
from autopar.spec.limits import MAX_GPUS_PER_NODE

TORCH_FIX = "pip install torch==2.13.0 (or pip install 'autopar[profile]')"


def die_with_parent(parent_pid: int) -> None:
    """End this worker when the process that started it dies (SIGTERM or SIGKILL alike).

    On Linux the kernel sends SIGKILL at the parent's death (``PR_SET_PDEATHSIG``);
    elsewhere, and against the race where the parent died before the call, a
    daemon thread polls the parent's pid once a second.
    """
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    if os.getppid() != parent_pid:
        os._exit(1)
    threading.Thread(target=watch, name="autopar-parent-watch", daemon=True).start()


def require_torch(command: str = "autopar profile") -> ModuleType:
    """Import torch or raise a ProfileError that names the command and says how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise ProfileError(f"{command} needs PyTorch, which is not installed ({exc.name or 'torch'}): {TORCH_FIX}") from None
    return torch


def cores() -> int:
    """CPU cores this process may run on (its affinity: a container's cpuset), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def processes(nproc: int | None, *, kind: str | None, gpus: int = 0) -> int:
    """The processes a run starts on this node, checked before any is started: --nproc, else one per visible
    GPU (2 gloo processes on CPU). At most one per visible GPU on cuda (NCCL), one per core on CPU (at least
    2); while the device is not known yet (kind None: before torch is imported), at most the larger of the
    cores and MAX_GPUS_PER_NODE. Returns 0 for the default while the device is not known."""
    if nproc is None:
        return 0 if kind is None else gpus if kind == "cuda" else 2
    if nproc < 1:
        raise SpecError(f"`nproc`: must be >= 1, got {nproc}")
    if kind == "cuda" and nproc > gpus:
        raise SpecError(f"`nproc={nproc}`: only {gpus} GPU(s) visible; NCCL needs one GPU per process")
    n = cores()
    bound = max(2, n) if kind == "cpu" else max(n, MAX_GPUS_PER_NODE) if kind is None else gpus
    if nproc > bound:
        what = f"{n} CPU cores here: one gloo process per core" if kind == "cpu" else "the GPUs of one node"
        raise SpecError(f"`nproc` must be at most {bound:,} ({what}), got {nproc:,}")
    return nproc


def resolve_device(torch: ModuleType, requested: str) -> str:
    """auto | cuda | cpu -> cuda | cpu, refusing cuda when no GPU is visible."""
    if requested not in ("auto", "cuda", "cpu"):
        raise ProfileError(f"`device`: expected auto, cuda or cpu, got {requested!r}")
    has_cuda = bool(torch.cuda.is_available())
    if requested == "cuda" and not has_cuda:
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        raise ProfileError(
            f"`device=cuda`: no CUDA GPU is visible (torch {torch.__version__} is {build}{hint}); "
            "run on a GPU node with a CUDA build of torch, or use `device=cpu` `nproc=2`"
        )
    if requested == "auto":
        return "cuda" if has_cuda else "cpu"
    return requested


def bind_device(torch: ModuleType, kind: str, *, local_rank: int, local_world_size: int) -> Any:
    """This rank's torch.device: its own GPU under CUDA; on CPU, the cores shared out
    between the ranks of this node so that they do not oversubscribe it."""
    if kind == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world_size))
    return torch.device("cpu")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def nvidia_driver() -> str:
    """The NVIDIA kernel driver version, or 'unknown'."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    for word in text.split():
        parts = word.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return word
    return "unknown"


def nccl_version(torch: ModuleType) -> str:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this build (CPU wheels, ROCm without RCCL)
        return "n/a"
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def physical_memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


class Sink(Protocol):
    """Where rank 0 reports progress: a rich bar here, or a queue to the parent."""

    def total(self, steps: int) -> None: ...

    def step(self, label: str, *, advance: bool = True) -> None: ...

    def note(self, text: str) -> None: ...


class NullSink:
    """Progress of ranks other than 0: nowhere."""

    def total(self, steps: int) -> None:
        pass

    def step(self, label: str, *, advance: bool = True) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class Watchdog:
    """Ends this process when a step runs past its limit.

    ``beat(label)`` starts a step; if the next beat does not come within the
    limit, the watchdog prints one line naming the rank and the step, calls
    ``on_expire`` (the spawned worker tells its parent), and exits the process
    with status 3. A daemon thread, so it never keeps a finished process alive.
    """

    def __init__(self, *, rank: int, limit_s: float, on_expire: Callable[[str], None] | None = None):
        self._rank = rank
        self._limit = limit_s
        self._on_expire = on_expire
        self._label = "start-up"
        self._current = limit_s
        self._deadline = time.monotonic() + limit_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autopar-watchdog", daemon=True)
        self._thread.start()

    @property
    def limit_s(self) -> float:
        """The default limit of a step, seconds."""
        return self._limit

    def beat(self, label: str, *, limit_s: float | None = None) -> None:
        with self._lock:
            self._label = label
            self._current = limit_s if limit_s is not None else self._limit
            self._deadline = time.monotonic() + self._current

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                late = time.monotonic() > self._deadline
                label, limit = self._label, self._current
            if late:
                msg = (
                    f"rank {self._rank} made no progress in '{label}' for {limit:.0f} s (a hung collective or a dead rank); ending the run"
                )
                print(f"autopar: error: {msg}", file=sys.stderr, flush=True)
                if self._on_expire is not None:
                    with contextlib.suppress(Exception):  # the parent may be gone already; we exit either way
                        self._on_expire(msg)
                os._exit(3)
