"""How spawned gloo workers end (autopar/probe/launch.py): rank 0's result reaches the parent
even when a peer dies after it was sent, and a normal run's workers all exit 0.

CI once lost a whole `autopar calibrate` run to a rank aborted by gloo's teardown (signal 6,
"terminate called without an active exception") after the last gather had succeeded."""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Any

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


def _gather_work(payload: Any, topo: Any, *, sink: Any, watchdog: Any) -> Any:
    """Every rank sends its rank; rank 0 returns them all. With payload 'abort' rank 1 then dies
    (after the others' result is on its way, as a crash at teardown would)."""
    import torch.distributed as dist

    got: list[Any] = [None] * topo.world_size
    dist.all_gather_object(got, topo.rank)
    if payload == "abort" and topo.rank == 1:
        time.sleep(2.0)  # rank 0 puts its result in the queue meanwhile
        os.abort()
    return tuple(got) if topo.rank == 0 else None


def _run(payload: str) -> Any:
    from rich.console import Console

    from autopar.probe.launch import Task, run_task

    task = Task(work=_gather_work, payload=payload, device="cpu", timeout_s=60)
    with open(os.devnull, "w") as sink:
        return run_task(task, nproc=2, console=Console(file=sink))


def test_a_run_returns_rank_zeros_result() -> None:
    assert _run("ok") == (0, 1)


def test_a_rank_dying_after_the_result_was_sent_does_not_lose_it() -> None:
    start = time.monotonic()
    assert _run("abort") == (0, 1)
    assert time.monotonic() - start < 30  # not the 30 s grace for silent workers
