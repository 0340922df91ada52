"""The command line: parse, call one library function, render. No maths here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from autopar.errors import AutoparError

app = typer.Typer(
    name="autopar",
    help="Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _fail(exc: AutoparError) -> None:
    print(f"autopar: error: {exc}", file=sys.stderr)
    raise typer.Exit(exc.exit_code)


@app.command()
def profile(
    out: Annotated[Path | None, typer.Option(help="Where to write the profile (default: the saved-profile path).")] = None,
    quick: Annotated[bool, typer.Option(help="Fewer sizes and repetitions: about 30 s on an 8-GPU node.")] = False,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    nproc: Annotated[int | None, typer.Option(help="Processes to start (default: one per local GPU; CPU needs this).")] = None,
    compare: Annotated[str | None, typer.Option(help="Built-in profile to print the measured numbers against.")] = None,
) -> None:
    """Measure this node (or, under torchrun, these nodes) and save a hardware profile."""
    try:
        from autopar.probe.command import run_profile

        run_profile(out=out, quick=quick, device=device, nproc=nproc, compare=compare)
    except AutoparError as exc:
        _fail(exc)


def main() -> None:
    app()
