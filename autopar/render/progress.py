"""A progress bar for work that turns out long: shown on a terminal once it has run about a second.

rich is imported when a bar may be drawn, so that `--json` loads none (tests/cli/test_startup.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

DELAY_S = 1.0  # no bar for work that ends sooner


@contextmanager
def progress_after(
    label: str, *, console: Console | None = None, delay_s: float = DELAY_S, enabled: bool = True
) -> Iterator[Callable[[int, int], None] | None]:
    """A callback(done, total) that draws a transient bar on stderr once `delay_s` has passed;
    None when stderr is not a terminal (or not `enabled`), so piped output and --json stay clean."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    start = time.perf_counter()
    bar: Progress | None = None
    task = None

    def report(done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:
            if time.perf_counter() - start < delay_s:
                return
            bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True
            )
            bar.start()
            task = bar.add_task(label, total=total)
        if task is not None:
            bar.update(task, completed=done, total=total)

    try:
        yield report
    finally:
        if bar is not None:
            bar.stop()
