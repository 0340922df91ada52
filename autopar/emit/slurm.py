"""An sbatch script that runs a torchrun line once on every node of the allocation."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from autopar.errors import SpecError

_SBATCH_VALUE = re.compile(r"[A-Za-z0-9_.:,@+/=-]+")
# CPUs the one task per node asks for, per GPU it starts: Slurm's default is one CPU per task, which
# torchrun, its workers and their data loaders would share. 8 is below what 8-GPU training nodes
# have (DGX H100: 112 cores, 14 per GPU; DGX A100: 128 cores, 16 per GPU).
CPUS_PER_GPU = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmOptions:
    """Directives the user may set (--slurm-partition, --slurm-time, --slurm-account, --slurm-qos)."""

    partition: str | None = None
    time: str | None = None  # minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, passed through
    account: str | None = None
    qos: str | None = None
    output: str | None = None
    cpus_per_task: int | None = None  # default CPUS_PER_GPU x GPUs per node


def directive(name: str, value: object) -> str:
    """One ``#SBATCH --name=value`` line; the value is checked, since #SBATCH lines are not shell."""
    text = str(value)
    if not _SBATCH_VALUE.fullmatch(text):
        raise SpecError(f"`slurm_{name.replace('-', '_')}` {text!r} may hold only letters, digits and _.:,@+/=-")
    return f"#SBATCH --{name}={text}"


def slurm_script(command: str, *, nnodes: int, nproc_per_node: int, job_name: str, options: SlurmOptions | None = None) -> str:
    """An sbatch script that runs ``command`` once on every node.

    One srun task per node starts ``bash -c`` on the command (quoted as one word), so environment
    prefixes work and ``$MASTER_ADDR`` is expanded on each node, where srun has exported it from
    the batch shell: the first host of the allocation.
    """
    if nnodes < 1 or nproc_per_node < 1:
        raise SpecError(f"nnodes ({nnodes}) and nproc_per_node ({nproc_per_node}) must be >= 1")
    opts = options or SlurmOptions()
    cpus = opts.cpus_per_task or CPUS_PER_GPU * nproc_per_node
    lines = [
        "#!/bin/bash",
        directive("job-name", job_name),
        directive("nodes", nnodes),
        directive("ntasks-per-node", 1),
        directive("gpus-per-node", nproc_per_node),
        directive("cpus-per-task", cpus),
        "#SBATCH --exclusive",
    ]
    for name in ("partition", "time", "account", "qos", "output"):
        value = getattr(opts, name)
        if value is not None:
            lines.append(directive(name, value))
    lines += [
        "",
        "set -euo pipefail",
        "",
        "# The rendezvous host: the first node of the allocation.",
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        "export MASTER_ADDR",
        "",
        # srun is given the CPUs again: since Slurm 22.05 it no longer takes --cpus-per-task from sbatch
        f"srun --nodes={nnodes} --ntasks-per-node=1 --cpus-per-task={cpus} bash -c {shlex.quote(command)}",
        "",
    ]
    return "\n".join(lines)
