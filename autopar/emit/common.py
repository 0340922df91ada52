"""What every launch shares: shell quoting, the torchrun launcher, one-line or multi-line rendering.

A command is a list of *items*, each one flag with its value already quoted, rendered on one line
(what ``shlex.split`` and torchrun's parser read back) or one flag per line with ``\\``
continuations (``multiline=True``) for a human.

Quoting: every value from the user or the spec goes through ``shlex.quote``, so a path holding a
space or a ``;`` stays one word and runs nothing. The one exception is a value that is exactly one
environment variable with an optional ``:port`` (``$MASTER_ADDR:29500``): it is double-quoted so
the shell on each node expands it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate
from autopar.spec.stack import StackProfile

_ENV_REF = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)(:[0-9]+)?")


def quote(value: object) -> str:
    """One shell word for ``value``: shlex-quoted, except a lone ``$VAR`` or ``$VAR:port``.

    >>> quote("my data; rm -rf /")
    "'my data; rm -rf /'"
    >>> quote("$MASTER_ADDR:29500")
    '"$MASTER_ADDR:29500"'
    """
    text = str(value)
    if _ENV_REF.fullmatch(text):
        return f'"{text}"'
    return shlex.quote(text)


def opt(flag: str, value: object = None) -> str:
    """One item: a flag alone (a switch) or a flag and its quoted value."""
    return flag if value is None else f"{flag} {quote(value)}"


def render(items: Sequence[str], multiline: bool) -> str:
    return (" \\\n    " if multiline else " ").join(items)


def extra_items(extra_args: Sequence[str]) -> list[str]:
    """--emit-extra words, each quoted as one shell word; a value rides with the option before it, so a
    multi-line command reads `--save /ckpt` on one line, as it does its own options (was `--save \\` then `/ckpt`)."""
    items: list[str] = []
    for arg in extra_args:
        if items and items[-1].startswith("-") and not arg.startswith("-"):
            items[-1] += " " + quote(arg)
        else:
            items.append(quote(arg))
    return items


def torchrun_items(*, nnodes: int, nproc_per_node: int, rdzv_endpoint: str, rdzv_id: str | None) -> list[str]:
    """The launcher part: one torchrun per node, all meeting at a c10d rendezvous.

    c10d rendezvous needs no --node-rank: the agents agree on ranks among themselves, so the very
    same line runs on every node (which is what the SLURM script relies on).
    """
    items = [
        "torchrun",
        opt("--nnodes", nnodes),
        opt("--nproc-per-node", nproc_per_node),
        opt("--rdzv-backend", "c10d"),
        opt("--rdzv-endpoint", rdzv_endpoint),
    ]
    if rdzv_id is not None:
        items.append(opt("--rdzv-id", rdzv_id))
    return items


def check_launch(plan: Plan, model: ModelSpec, job: Job, nnodes: int, nproc_per_node: int, *, stack: StackProfile | None = None) -> None:
    """The plan is valid (under the stack's rules, e.g. EP over TP) and the node layout starts exactly its GPUs."""
    validate(plan, model, job, stack=stack)
    if nnodes < 1 or nproc_per_node < 1:
        raise SpecError(f"nnodes ({nnodes}) and nproc_per_node ({nproc_per_node}) must be >= 1")
    if nnodes * nproc_per_node != plan.gpus:
        raise SpecError(
            f"nnodes*nproc_per_node = {nnodes}*{nproc_per_node} = {nnodes * nproc_per_node} must equal the plan's GPUs ({plan.gpus})"
        )
