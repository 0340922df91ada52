"""Plan: how a job is split across GPUs, and the one set of rules a plan must obey."""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError
from autopar.spec.families import KIND_PARTS
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.stack import RECOMPUTE_MODULES, StackProfile

RECOMPUTE = ("none", "selective", "full")
# what the search's selective variant recomputes on a stack with module-level recompute, for MoE models:
# the MoE activation and the norms, output-discarding recomputes of elementwise ops (no GEMM is redone;
# TransformerConfig.recompute_modules at core_v0.16.1), as the Megatron-Bridge gpt-oss recipes
# (GPT_OSS_120B_PRETRAIN_CONFIG_*_V2) and the MoE model zoo's Qwen3-235B rows ('norm, act') run them
SEARCHED_MODULES = ("moe_act", "layernorm")
ZERO_STAGES = (0, 1, 2, 3)
CP_COMMS = ("ring", "allgather")
# pipeline slots that are not decoder layers, where a stack counts them (StackProfile.pipeline_counts_embedding):
# the embedding and the loss (Megatron-Core's account_for_{embedding,loss}_in_pipeline_split)
END_SLOTS = 2


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
    # under selective recompute, the modules recomputed (Megatron --recompute-modules, in RECOMPUTE_MODULES
    # order); () = the stack's own selective policy
    recompute_modules: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def microbatches(self, job: Job) -> int:
        """Micro-batches per pipeline per step."""
        return job.global_batch // (self.dp * self.mbs)

    def stage_layers(self, layers: int) -> int:
        """Blocks on the most loaded pipeline stage (stages take ceil(layers / pp) at most)."""
        return -(-layers // self.pp)

    @property
    def recompute_label(self) -> str:
        """The recompute mode, with its modules: selective(mla_up_proj,mlp)."""
        if self.recompute_modules:
            return f"{self.recompute}({','.join(self.recompute_modules)})"
        return self.recompute

    def label(self) -> str:
        parts = [f"dp{self.dp}", f"tp{self.tp}", f"pp{self.pp}"]
        if self.vpp > 1:
            parts.append(f"vpp{self.vpp}")
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        return " ".join(parts)


# --- the rules ------------------------------------------------------------------------
# One function per rule, named by the fields it reads. Each returns None when the
# plan obeys it, else the message. validate() runs them all; the search's enumeration
# (search/space.py) runs each as soon as the fields it reads are chosen; the launch
# commands call validate(). So the three agree by construction, and a property test
# checks that the plans validate() accepts are the plans the search enumerates.


def degree_rule(name: str, value: int) -> str | None:
    return None if value >= 1 else f"`{name}` must be >= 1, got {value}"


def tp_rule(model: ModelSpec, job: Job, tp: int) -> str | None:
    """TP inside a node; heads, KV heads, the MLP and Mamba heads/groups split evenly (Megatron's divide())."""
    if tp > job.gpus_per_node:
        return f"tp ({tp}) must fit in one node ({job.gpus_per_node} GPUs)"
    if model.num_kv_heads % tp:
        return f"{model.name}: num_kv_heads ({model.num_kv_heads}) must be divisible by tp ({tp})"
    if model.ffn_hidden_size % tp:
        return f"{model.name}: ffn_hidden_size ({model.ffn_hidden_size}) must be divisible by tp ({tp})"
    m = model.mamba
    if m is not None and (m.heads(model.hidden_size) % tp or m.num_groups % tp):
        return f"{model.name}: Mamba heads ({m.heads(model.hidden_size)}) and groups ({m.num_groups}) must be divisible by tp ({tp})"
    return None


def cp_rule(model: ModelSpec, job: Job, tp: int, cp: int) -> str | None:
    """Causal load balancing cuts each sequence into 2*cp chunks; Mamba's CP swaps sequence for heads."""
    if cp == 1:
        return None
    if job.seq_len % (2 * cp):
        return f"seq_len ({job.seq_len}) must be divisible by 2*cp ({2 * cp}) for causal load balancing"
    m = model.mamba
    if m is not None and (m.heads(model.hidden_size) // tp) % cp:
        return (
            f"{model.name}: CP for Mamba layers swaps sequence for heads, so heads/tp "
            f"({m.heads(model.hidden_size) // tp}) must be divisible by cp ({cp})"
        )
    return None


def gpus_rule(job: Job, *, dp: int, tp: int, pp: int, cp: int) -> str | None:
    if dp * tp * pp * cp != job.gpus:
        return f"dp*tp*pp*cp = {dp}*{tp}*{pp}*{cp} = {dp * tp * pp * cp} must equal `gpus` ({job.gpus})"
    return None


def end_slots_allowed(stack: StackProfile | None) -> int:
    """Pipeline chunks a plan may have beyond the decoder layers on `stack`: END_SLOTS where it counts the
    embedding and the loss as pipeline layers (spec/layout.py chunk_sizes), else 0."""
    return END_SLOTS if stack is not None and stack.pipeline_counts_embedding else 0


def pp_rule(model: ModelSpec, pp: int, *, ends: int = 0) -> str | None:
    """At least one pipeline slot per stage: a decoder layer, or (`ends` of them) the embedding or the loss."""
    if pp <= model.layers + ends:
        return None
    if ends:
        return f"pp ({pp}) exceeds the number of layers ({model.layers}) plus the embedding and the loss"
    return f"pp ({pp}) exceeds the number of layers ({model.layers})"


def batch_rule(job: Job, dp: int, mbs: int) -> str | None:
    if job.global_batch % (dp * mbs):
        return f"global batch ({job.global_batch}) must be divisible by dp*mbs ({dp}*{mbs})"
    return None


def vpp_rule(model: ModelSpec, *, pp: int, vpp: int, microbatches: int, ends: int = 0) -> str | None:
    """Interleaving: at least one slot per virtual stage (a decoder layer, or `ends` of them the
    embedding or the loss), micro-batches in whole groups of pp."""
    if vpp == 1:
        return None
    if pp == 1:
        return "vpp > 1 needs pp > 1"
    if model.layers + ends < pp * vpp:
        plus = " plus the embedding and the loss" if ends else ""
        return f"pp*vpp ({pp}*{vpp}) exceeds the number of layers ({model.layers}){plus}"
    if microbatches % pp:
        return f"interleaving needs the micro-batch count ({microbatches}) to be a multiple of pp ({pp})"
    return None


def ep_rule(model: ModelSpec, *, dp: int, cp: int, ep: int, tp: int = 1, etp: int = 1, ep_over_tp: bool = False) -> str | None:
    """Experts split evenly; the EP group lies within the DP x CP ranks, or within DP x CP x TP
    where the stack lays EP over TP too and experts are whole (Megatron-Core with etp 1:
    StackProfile.ep_over_tp)."""
    moe = model.moe
    if moe is None:
        return None if ep == 1 else f"ep ({ep}) needs an MoE model; {model.name} has no experts"
    if moe.num_experts % ep:
        return f"{model.name}: moe.num_experts ({moe.num_experts}) must be divisible by ep ({ep})"
    if ep_over_tp and etp == 1:
        if (dp * cp * tp) % ep:
            return f"ep ({ep}) must divide dp*cp*tp ({dp}*{cp}*{tp}): with etp 1 the EP group lies within the DP x CP x TP ranks"
        return None
    if (dp * cp) % ep:
        return f"ep ({ep}) must divide dp*cp ({dp}*{cp}): the EP group lies within the DP x CP ranks"
    return None


def etp_rule(model: ModelSpec, *, tp: int, etp: int) -> str | None:
    """Experts whole (etp 1) or split like the MLP (etp = tp)."""
    moe = model.moe
    if moe is None:
        return None if etp == 1 else f"etp ({etp}) needs an MoE model; {model.name} has no experts"
    if etp not in (1, tp):
        return f"etp ({etp}) must be 1 or tp ({tp})"
    if moe.expert_ffn_hidden_size % etp:
        return f"moe.expert_ffn_hidden_size ({moe.expert_ffn_hidden_size}) must be divisible by etp ({etp})"
    return None


def sp_rule(model: ModelSpec, *, tp: int, sp: bool) -> str | None:
    """Megatron-Core's MoE layer refuses tensor parallelism without sequence parallelism in training
    (megatron/core/transformer/moe/moe_layer.py: "performance may degrade if MoE and tensor
    parallelism are enabled without also enabling sequence parallelism" is raised, not warned)."""
    if model.moe is not None and tp > 1 and not sp:
        return f"{model.name}: MoE with tp ({tp}) > 1 needs sequence parallelism (`sp`), as Megatron-Core requires"
    return None


def knob_rule(plan: Plan) -> str | None:
    if plan.recompute not in RECOMPUTE:
        return f"`recompute` must be one of {', '.join(RECOMPUTE)}, got {plan.recompute!r}"
    if plan.zero not in ZERO_STAGES:
        return f"`zero` must be 0, 1, 2 or 3, got {plan.zero}"
    if plan.cp_comm not in CP_COMMS:
        return f"`cp_comm` must be one of {', '.join(CP_COMMS)}, got {plan.cp_comm!r}"
    return None


def modules_rule(model: ModelSpec, *, recompute: str, modules: tuple[str, ...]) -> str | None:
    """Module-level recompute is a selective mode; each module must exist in the model (Megatron-Core's
    TransformerConfig checks: moe_act needs MoE, mla_up_proj needs MLA)."""
    if not modules:
        return None
    unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
    if unknown:
        return f"`recompute_modules`: unknown module {unknown[0]!r}; one of {', '.join(RECOMPUTE_MODULES)}"
    if len(set(modules)) != len(modules):
        return f"`recompute_modules`: {','.join(modules)} names a module twice"
    if recompute != "selective":
        return f"`recompute_modules` needs `recompute=selective`, got {recompute!r}"
    moe = model.moe
    needs = {
        "mla_up_proj": (model.mla is not None, "multi-latent attention"),
        "moe_act": (moe is not None, "experts"),
        "moe": (moe is not None, "experts"),
        "shared_experts": (moe is not None and moe.shared_width > 0, "shared experts"),
        "mlp": (any("mlp" in KIND_PARTS[k] for k in model.layer_kinds()), "dense MLP layers"),
    }
    for m in modules:
        ok, what = needs.get(m, (True, ""))
        if not ok:
            return f"`recompute_modules={m}`: {model.name} has no {what}"
    return None


def searched_modules(model: ModelSpec, stack: StackProfile | None) -> tuple[str, ...]:
    """The modules the search's selective variant recomputes: SEARCHED_MODULES for an MoE model on a
    stack that offers them (Megatron's), else () (the stack's own selective policy)."""
    if stack is None or model.moe is None:
        return ()
    modules = tuple(m for m in SEARCHED_MODULES if m in stack.recompute_modules)
    return modules if modules_rule(model, recompute="selective", modules=modules) is None else ()


def plan_errors(plan: Plan, model: ModelSpec, job: Job, stack: StackProfile | None = None) -> list[str]:
    """Every rule the plan breaks, in a fixed order (the first is the one to report); with a
    stack, also what that stack cannot launch (StackProfile.refusal) and its EP layout."""
    p = plan
    errors = [degree_rule(n, getattr(p, n)) for n in ("dp", "tp", "pp", "cp", "vpp", "ep", "etp", "mbs")]
    if any(errors):
        return [e for e in errors if e]
    checks = [
        knob_rule(p),
        modules_rule(model, recompute=p.recompute, modules=p.recompute_modules),
        gpus_rule(job, dp=p.dp, tp=p.tp, pp=p.pp, cp=p.cp),
        tp_rule(model, job, p.tp),
        pp_rule(model, p.pp, ends=end_slots_allowed(stack)),
        cp_rule(model, job, p.tp, p.cp),
        batch_rule(job, p.dp, p.mbs),
    ]
    if not checks[-1]:
        checks.append(vpp_rule(model, pp=p.pp, vpp=p.vpp, microbatches=p.microbatches(job), ends=end_slots_allowed(stack)))
    over_tp = stack is not None and stack.ep_over_tp
    checks += [
        ep_rule(model, dp=p.dp, cp=p.cp, ep=p.ep, tp=p.tp, etp=p.etp, ep_over_tp=over_tp),
        etp_rule(model, tp=p.tp, etp=p.etp),
        sp_rule(model, tp=p.tp, sp=p.sp),
    ]
    if stack is not None:
        checks.append(stack.refusal(p))
    return [e for e in checks if e]


def validate(plan: Plan, model: ModelSpec, job: Job, *, stack: StackProfile | None = None) -> None:
    """Raise SpecError naming the first rule the plan breaks (and, with a stack, what it cannot launch)."""
    errors = plan_errors(plan, model, job, stack)
    if errors:
        raise SpecError(errors[0])
