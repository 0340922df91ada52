"""Plan: how a job is split across GPUs, validated against the model and job."""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec

RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
CP_COMMS = ("ring", "allgather")


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Parallel degrees and knobs. Rank order is Megatron's: tp innermost, then cp, dp, pp."""

    dp: int  # data-parallel replicas
    tp: int  # tensor-parallel degree
    pp: int  # pipeline stages
    cp: int = 1  # context-parallel degree (sequence split across ranks)
    vpp: int = 1  # virtual stages per pipeline rank (interleaved 1F1B when > 1)
    ep: int = 1  # expert-parallel degree (MoE only); the EP group lies within the DP x CP ranks
    etp: int = 1  # expert tensor-parallel degree: 1 (experts whole) or tp (experts split like the MLP)
    cp_comm: str = "ring"  # how CP exchanges K/V: ring (overlapped p2p) | allgather (gather K/V, then attend)
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
        if model.layers < plan.pp * plan.vpp:
            raise SpecError(f"pp*vpp ({plan.pp}*{plan.vpp}) exceeds the number of layers ({model.layers})")
    if job.seq_len % (2 * plan.cp) and plan.cp > 1:
        raise SpecError(f"seq_len ({job.seq_len}) must be divisible by 2*cp ({2 * plan.cp}) for causal load balancing")
    if job.global_batch % (plan.dp * plan.mbs):
        raise SpecError(f"global batch ({job.global_batch}) must be divisible by dp*mbs ({plan.dp}*{plan.mbs})")
    m = plan.microbatches(job)
    if plan.vpp > 1 and m % plan.pp:
        raise SpecError(f"interleaving needs the micro-batch count ({m}) to be a multiple of pp ({plan.pp})")
    if plan.cp_comm not in CP_COMMS:
        raise SpecError(f"--cp-comm must be one of {', '.join(CP_COMMS)}, got {plan.cp_comm!r}")
    _validate_families(plan, model)


def _validate_families(plan: Plan, model: ModelSpec) -> None:
    moe, mamba = model.moe, model.mamba
    if moe is None:
        if plan.ep != 1 or plan.etp != 1:
            raise SpecError(f"ep ({plan.ep}) and etp ({plan.etp}) need an MoE model; {model.name} has no experts")
    else:
        if moe.num_experts % plan.ep:
            raise SpecError(f"{model.name}: moe.num_experts ({moe.num_experts}) must be divisible by ep ({plan.ep})")
        if (plan.dp * plan.cp) % plan.ep:
            raise SpecError(f"ep ({plan.ep}) must divide dp*cp ({plan.dp}*{plan.cp}): the EP group lies within the DP x CP ranks")
        if plan.etp not in (1, plan.tp):
            raise SpecError(f"etp ({plan.etp}) must be 1 or tp ({plan.tp})")
        if moe.expert_ffn_hidden_size % plan.etp:
            raise SpecError(f"moe.expert_ffn_hidden_size ({moe.expert_ffn_hidden_size}) must be divisible by etp ({plan.etp})")
    if mamba is not None:
        heads = mamba.heads(model.hidden_size)
        if heads % plan.tp or mamba.num_groups % plan.tp:
            raise SpecError(f"{model.name}: Mamba heads ({heads}) and groups ({mamba.num_groups}) must be divisible by tp ({plan.tp})")
        if plan.cp > 1 and (heads // plan.tp) % plan.cp:
            raise SpecError(f"{model.name}: CP for Mamba layers swaps sequence for heads, so heads/tp ({heads // plan.tp}) "
                            f"must be divisible by cp ({plan.cp})")
