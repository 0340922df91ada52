"""Plan: how a job is split across GPUs, validated against the model and job."""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError
from autopar.job import Job
from autopar.model import ModelSpec

RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Parallel degrees and knobs. Rank order is Megatron's: tp innermost, then cp, dp, pp."""

    dp: int  # data-parallel replicas
    tp: int  # tensor-parallel degree
    pp: int  # pipeline stages
    cp: int = 1  # context-parallel degree (sequence split across ranks)
    vpp: int = 1  # virtual stages per pipeline rank (interleaved 1F1B when > 1)
    ep: int = 1  # expert-parallel degree (MoE only)
    mbs: int = 1  # micro-batch size, sequences
    recompute: str = "none"  # none | selective | full
    zero: int = 1  # 0 plain DP, 1 sharded optimizer, 2 + sharded grads, 3 + sharded weights (FSDP)
    sp: bool = True  # sequence parallelism alongside TP

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def microbatches(self, job: Job) -> int:
        """Micro-batches per pipeline per step."""
        return job.global_batch // (self.dp * self.mbs)

    def stage_layers(self, layers: int) -> int:
        """Blocks on the most loaded pipeline stage (stages take ceil(layers / pp) at most)."""
        return -(-layers // self.pp)

    def label(self) -> str:
        parts = [f"dp{self.dp}", f"tp{self.tp}", f"pp{self.pp}"]
        if self.vpp > 1:
            parts.append(f"vpp{self.vpp}")
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        return " ".join(parts)


def validate(plan: Plan, model: ModelSpec, job: Job) -> None:
    """Raise SpecError naming the first constraint the plan breaks."""
    for name in ("dp", "tp", "pp", "cp", "vpp", "ep", "mbs"):
        if getattr(plan, name) < 1:
            raise SpecError(f"--{name} must be >= 1, got {getattr(plan, name)}")
    if plan.recompute not in RECOMPUTE:
        raise SpecError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {plan.recompute!r}")
    if plan.zero not in ZERO_STAGES:
        raise SpecError(f"--zero must be 0, 1, 2 or 3, got {plan.zero}")
    if plan.gpus != job.gpus:
        raise SpecError(
            f"dp*tp*pp*cp = {plan.dp}*{plan.tp}*{plan.pp}*{plan.cp} = {plan.gpus} must equal --gpus ({job.gpus})"
        )
    if plan.tp > job.gpus_per_node:
        raise SpecError(f"tp ({plan.tp}) must fit in one node ({job.gpus_per_node} GPUs)")
    if model.num_kv_heads % plan.tp:
        raise SpecError(f"{model.name}: num_kv_heads ({model.num_kv_heads}) must be divisible by tp ({plan.tp})")
    if plan.pp > model.layers:
        raise SpecError(f"pp ({plan.pp}) exceeds the number of layers ({model.layers})")
    if plan.vpp > 1:
        if plan.pp == 1:
            raise SpecError("vpp > 1 needs pp > 1")
        if model.layers % (plan.pp * plan.vpp):
            raise SpecError(f"layers ({model.layers}) must be divisible by pp*vpp ({plan.pp}*{plan.vpp})")
    if job.seq_len % (2 * plan.cp) and plan.cp > 1:
        raise SpecError(f"seq_len ({job.seq_len}) must be divisible by 2*cp ({2 * plan.cp}) for causal load balancing")
    if job.global_batch % (plan.dp * plan.mbs):
        raise SpecError(f"global batch ({job.global_batch}) must be divisible by dp*mbs ({plan.dp}*{plan.mbs})")
    m = plan.microbatches(job)
    if plan.vpp > 1 and m % plan.pp:
        raise SpecError(f"interleaving needs the micro-batch count ({m}) to be a multiple of pp ({plan.pp})")
    if plan.ep != 1:
        raise SpecError(f"ep ({plan.ep}) needs an MoE model; {model.name} is dense")
