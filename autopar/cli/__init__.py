"""The command line: the Typer app, built from one module per command group. No maths here.

options.py holds the options several commands share, run.py the one runner
(exit codes, one-line errors, broken pipe, Ctrl-C), train.py suggest and
estimate, serve.py `autopar serve`, tools.py the rest. Every command is
registered here through :func:`autopar.cli.run.handled`, so a library error
is said the same way by all of them. Library modules are imported inside the
commands, so that `autopar --help` and shell completion start fast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

from autopar.cli import coerce, serve, tools, train
from autopar.cli.run import handled

coerce.install()  # no pydantic adapter for an option left at its default

HELP = "Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits."
SERVE_HELP = "Inference: plan a serving deployment (TP/PP/DP/EP, attention-DP, disaggregated) and its TTFT/TPOT."


def _print_version(value: bool) -> None:
    if value:
        from autopar import version

        print(f"autopar {version()}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print autopar's version (its package metadata) and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits."""


COMMANDS: tuple[tuple[str, str, Callable[..., Any]], ...] = (  # (group, name, function), in the order `autopar --help` lists them
    ("", "profile", tools.profile),
    ("", "calibrate", tools.calibrate),
    ("", "suggest", train.suggest),
    ("", "estimate", train.estimate),
    ("", "models", tools.models_cmd),
    ("", "hardware", tools.hardware_cmd),
    ("", "stacks", tools.stacks_cmd),
    ("", "frameworks", tools.frameworks_cmd),
    ("", "schema", tools.schema_cmd),
    ("serve", "estimate", serve.estimate_cmd),
    ("serve", "suggest", serve.suggest_cmd),
)


def build(rows: Sequence[tuple[str, str, Callable[..., Any]]] = COMMANDS) -> typer.Typer:
    """The app with the commands of `rows` (every command by default), each wrapped by run.handled."""
    root = typer.Typer(name="autopar", help=HELP, no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False)
    root.callback()(_root)
    groups = {"": root}
    if any(group == "serve" for group, _, _ in rows):
        groups["serve"] = typer.Typer(name="serve", help=SERVE_HELP, no_args_is_help=True, pretty_exceptions_enable=False)
        root.add_typer(groups["serve"], name="serve")
    for group, name, command in rows:
        groups[group].command(name)(handled(command))
    return root


app = build()


def invoked(argv: Sequence[str]) -> list[tuple[str, str, Callable[..., Any]]]:
    """The row of COMMANDS that `argv` (the words after the program's name) runs, alone, where its first
    words are that command's name (`suggest ...`, `serve estimate ...`); every row otherwise.

    Typer builds the Click command of every registered command from its signature before it parses
    (typer.main.get_group_from_info: about 30 ms for the eleven), so `main` builds only the one that runs.
    A root option first (`--help`, `--version`, completion), `serve` alone or anything else sees the whole
    app, so the help that lists the commands and Click's "No such command" are as they were."""
    for group, name, command in COMMANDS:
        if list(argv[: 2 if group else 1]) == ([group, name] if group else [name]):
            return [(group, name, command)]
    return list(COMMANDS)


def main() -> None:
    """The console script `autopar` and `python -m autopar`."""
    import os
    import sys

    from autopar.cli.run import run
    from autopar.completions import COMPLETE_VAR

    if os.environ.get("COLUMNS", "").strip().isdigit():  # rich only then: start-up and completion stay fast
        from autopar.render.text import floor_columns

        floor_columns()
    rows = list(COMMANDS) if COMPLETE_VAR in os.environ else invoked(sys.argv[1:])
    # also under `python -m autopar`, so completion finds _AUTOPAR_COMPLETE; exit codes in cli/run.py
    run(app if len(rows) == len(COMMANDS) else build(rows), whole=app)
