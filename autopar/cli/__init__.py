"""The command line: the Typer app, built from one module per command group. No maths here.

options.py holds the options several commands share, run.py the one runner
(exit codes, one-line errors, broken pipe, Ctrl-C), train.py suggest and
estimate, serve.py `autopar serve`, tools.py the rest. Every command is
registered here through :func:`autopar.cli.run.handled`, so a library error
is said the same way by all of them. Library modules are imported inside the
commands, so that `autopar --help` and shell completion start fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from autopar.cli import coerce, serve, tools, train
from autopar.cli.run import handled

coerce.install()  # no pydantic adapter for an option left at its default

HELP = "Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits."

app = typer.Typer(name="autopar", help=HELP, no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False)
serve_app = typer.Typer(
    name="serve",
    help="Inference: plan a serving deployment (TP/PP/DP/EP, attention-DP, disaggregated) and its TTFT/TPOT.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(serve_app, name="serve")


def _print_version(value: bool) -> None:
    if value:
        from autopar import version

        print(f"autopar {version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print autopar's version (its package metadata) and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits."""


COMMANDS: tuple[tuple[typer.Typer, str, Callable[..., Any]], ...] = (  # in the order `autopar --help` lists them
    (app, "profile", tools.profile),
    (app, "calibrate", tools.calibrate),
    (app, "suggest", train.suggest),
    (app, "estimate", train.estimate),
    (app, "models", tools.models_cmd),
    (app, "hardware", tools.hardware_cmd),
    (app, "stacks", tools.stacks_cmd),
    (app, "frameworks", tools.frameworks_cmd),
    (app, "schema", tools.schema_cmd),
    (serve_app, "estimate", serve.estimate_cmd),
    (serve_app, "suggest", serve.suggest_cmd),
)
for group, name, command in COMMANDS:
    group.command(name)(handled(command))


def main() -> None:
    """The console script `autopar` and `python -m autopar`."""
    import os

    from autopar.cli.run import run

    if os.environ.get("COLUMNS", "").strip().isdigit():  # rich only then: start-up and completion stay fast
        from autopar.render.text import floor_columns

        floor_columns()
    run(app)  # also under `python -m autopar`, so completion finds _AUTOPAR_COMPLETE; exit codes in cli/run.py
