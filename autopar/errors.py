"""Error types. Every error a user can cause is an AutoparError; the CLI prints
its message on one line and exits with its ``exit_code``. A closed stdout is a
BrokenPipeError (``broken_pipe``), which the CLI ends quietly with 0.

A message names a parameter as the Python API spells it, between backticks:
`gpus` must be at least 1, got 0; `mode=disagg` needs `prefill_workers`;
`slurm_*` options. That is what str(err) reads for a caller of autopar.api.
The CLI says each as its flag (--gpus, --mode disagg, --slurm-*), in one place:
cli/run.py's ``flagged``, with the flags read from the Typer options. No message
below autopar/cli/ names a flag of autopar's (tests/test_architecture.py).
Backticks rather than a fields= list on the error: the message stays one string
that reads whole in Python, a log or a test, and a raiser passes nothing more.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: `import autopar` imports this module
if TYPE_CHECKING:
    from typing import NoReturn


class AutoparError(Exception):
    """Base class: a problem the user can fix. Exit code 2 (bad input)."""

    exit_code = 2


class SpecError(AutoparError):
    """A model spec, job or plan is malformed or inconsistent."""


class ProfileError(AutoparError):
    """A hardware profile is missing, corrupt or of an unknown schema."""


class InfeasibleError(AutoparError):
    """No plan fits the job; the message says what the smallest plan needs."""

    exit_code = 1


class AnswerError(AutoparError):
    """An answer failed the check before rendering (a non-finite number, a negative time, MFU above 100%). Exit 1."""

    exit_code = 1


class OutputError(AutoparError):
    """The output could not be written: stdout closed, a broken pipe, a full disk, an encoding. Exit code 3."""

    exit_code = 3


BROKEN_PIPE = "the output was closed early (broken pipe); the rest was not written"


def broken_pipe() -> NoReturn:
    """For rich's Console.on_broken_pipe, which would exit 1; cli/run.py's run() ends quietly with 0 instead
    (a BrokenPipeError, which no command's AutoparError handler takes for its own)."""
    raise BrokenPipeError(BROKEN_PIPE)
