"""Megatron-LM launch: torchrun + ``pretrain_gpt.py`` (``pretrain_mamba.py`` for Mamba and hybrids).

Pinned to Megatron-LM ``core_v0.16.1`` (55ac7082517c3878ae653c07c09c534b8aed49f6, 2026-03-16), the
release of the ``megatron-core`` 0.16.1 package. Flag names are not listed here twice: the tests
build the model from the emitted words with megatron-core's own ``TransformerConfig`` and
``GPTModel`` / ``MambaModel`` (meta device) and compare parameter counts with ours, and, where
``MEGATRON_LM_PATH`` points to a checkout at the pin, run its ``parse_args`` and ``validate_args``.

The words say everything the estimate assumed: the architecture (norm, positions and rotary base,
biases, dropout, activation, GQA, MoE with its dispatcher and grouped GEMM, MLA, the hybrid
pattern), numerics (FP8 recipe), recompute, the CP exchange, the pipeline layout (from
``spec.layout.chunk_sizes``, the function the estimate uses) and the overlaps the cost model counts
as hidden: DP gradient reduce and parameter gather, TP communication under SP, and the MoE
all-to-all where Megatron can hide it. What Megatron cannot run as costed comes back as notes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from autopar.emit.common import check_launch, extra_items, opt, quote, render, torchrun_items
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.layout import chunk_sizes, end_slots, ends_shared
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import StackProfile

MEGATRON_PIN = "core_v0.16.1 (55ac7082517c3878ae653c07c09c534b8aed49f6)"

# Megatron-LM numerics flags per job dtype. fp8: TransformerEngine's hybrid format (E4M3 forward,
# E5M2 backward) with per-tensor current scaling ("tensorwise"): FP8 GEMMs and FP8 saved GEMM
# inputs, bf16 master weights, as the cost model charges them.
_DTYPE = {"bf16": ("--bf16",), "fp16": ("--fp16",), "fp8": ("--bf16", "--fp8-format hybrid", "--fp8-recipe tensorwise")}
_NORM = {
    "rmsnorm": ("--normalization RMSNorm",),
    "layernorm": ("--normalization LayerNorm",),
    "layernorm1p": ("--normalization LayerNorm", "--apply-layernorm-1p"),
}
_POSITION = {"rope": "rope", "learned": "learned_absolute", "none": "none", "alibi": "none"}
# Megatron-FSDP sharding strategy for ZeRO-2 and ZeRO-3 (docs/user-guide/features/megatron_fsdp.md).
_FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}
_CP_COMM = {"ring": "p2p", "allgather": "all_gather"}
MAMBA_SPEC = ("megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec")  # --spec MODULE NAME


def entry_point(model: ModelSpec) -> str:
    """Megatron-LM's training script for the model: Mamba and hybrid stacks have their own."""
    return "pretrain_mamba.py" if model.mamba is not None else "pretrain_gpt.py"


# --- pipeline ---------------------------------------------------------------------------


def stage_layout(layers: int, pp: int, vpp: int = 1) -> list[int]:
    """Layers per pipeline chunk in model order (chunk c on rank c % pp): the estimate's split, as a stack
    that counts the embedding and the loss lays it out (megatron-0.16.yaml pipeline_counts_embedding)."""
    return chunk_sizes(layers, pp * vpp, ends=True)


LAYOUT_PLAIN_MAX = 60  # longer layouts repeat runs of equal chunks: a launch line fits 80 columns


def layout_string(counts: Sequence[int]) -> str:
    """Megatron's explicit layout: E embedding, t*n decoder layers, L loss, | between chunks.

    Past LAYOUT_PLAIN_MAX characters a run of k equal chunks is written (t*n|)*k, which Megatron's
    parser unrolls before it reads the chunks (PipelineParallelLayerLayout.parse_str_to_list at
    core_v0.16.1; its own example is "Et*3|(tt|)*29,m|L"): deepseek-v3's 61 layers on pp16 x vpp3 go
    from 193 to 23 characters."""
    plain = "E" + "|".join(f"t*{n}" for n in counts) + "L"
    if len(plain) <= LAYOUT_PLAIN_MAX:
        return plain
    runs = []
    for chunk, group in itertools.groupby(f"t*{n}|" for n in counts[:-1]):
        k = len(list(group))
        runs.append(f"({chunk})*{k}" if k > 1 else chunk)
    return "E" + "".join(runs) + f"t*{counts[-1]}L"


def first_last(counts: Sequence[int]) -> tuple[int | None, int | None] | None:
    """Counts as Megatron's first/last-stage flags (even middle stages), or None when they cannot say it."""
    pp = len(counts)
    if len(set(counts)) == 1:
        return None, None
    if pp == 2:
        return counts[0], None  # the last stage takes the rest
    middle = counts[1:-1]
    if len(set(middle)) != 1:
        return None
    first = None if counts[0] == middle[0] else counts[0]
    last = None if counts[-1] == middle[0] else counts[-1]
    return first, last


def pipeline_items(model: ModelSpec, plan: Plan) -> list[str]:
    """Virtual stages and the per-stage layer counts of ``stage_layout``.

    Even chunks need only the virtual-stage count; uneven ones an explicit layout string (GPT) or
    first/last-stage counts (the Mamba stack at the pin, which has no layout string and no vpp). More
    chunks than layers (one slot each, spec.layout.chunk_sizes) is Megatron's
    --account-for-loss-in-pipeline-split (and --account-for-embedding-in-pipeline-split with two more):
    TransformerConfig splits L + 1 (or L + 2) layers evenly and builds one decoder layer fewer in the
    last (and first) chunk (get_num_layers_to_build at the pin); so are the end chunks of a layer fewer
    where L + 2 splits evenly (spec.layout.ends_shared).
    """
    counts = stage_layout(model.layers, plan.pp, plan.vpp)
    if model.mamba is not None:
        reason = unsupported(model, plan)
        ends = first_last(counts)
        if reason is not None or ends is None:
            raise SpecError(f"Megatron-LM {MEGATRON_PIN} cannot run this plan: {reason}")
        items = []
        if ends[0] is not None:
            items.append(opt("--decoder-first-pipeline-num-layers", ends[0]))
        if ends[1] is not None:
            items.append(opt("--decoder-last-pipeline-num-layers", ends[1]))
        return items
    vpp = [opt("--num-virtual-stages-per-pipeline-rank", plan.vpp)] if plan.vpp > 1 else []
    slots = end_slots(model.layers, plan.pp * plan.vpp)
    if ends_shared(model.layers, plan.pp * plan.vpp, True):
        slots = 2  # the embedding and the loss fill a slot of the end chunks: Megatron's own even split of L + 2
    if slots:  # one slot per chunk, the loss (and the embedding) among them: Megatron's own even split of L + slots
        embedding = ["--account-for-embedding-in-pipeline-split"] if slots == 2 else []
        return [*embedding, "--account-for-loss-in-pipeline-split", *vpp]
    if len(set(counts)) == 1:
        return vpp
    return [opt("--pipeline-model-parallel-layout", layout_string(counts))]


# --- parallel layout, batch, memory ------------------------------------------------------


def ep_overlap(model: ModelSpec, plan: Plan, *, assumed: bool = True) -> bool:
    """Whether to ask Megatron to hide the MoE all-to-all (--overlap-moe-expert-parallel-comm).

    Where the estimate ``assumed`` it hidden (a stack with the overlap, in pipelined plans), and
    Megatron can (TransformerConfig checks at the pin): EP > 1, the all-to-all dispatcher,
    interleaving when pp > 1, no full recompute.
    """
    return assumed and model.moe is not None and plan.ep > 1 and plan.pp > 1 and plan.vpp > 1 and plan.recompute != "full"


def megatron_hybrid_cp_args(plan: Plan, max_seqlen_per_rank: int) -> list[str]:
    """Words for Megatron-LM's hybrid (dynamic) context parallelism, or SpecError where the pin refuses the plan.

    ``--hybrid-context-parallel`` balances packed variable-length micro-batches over the CP ranks
    (ModelParallelConfig.hybrid_context_parallel and max_seqlen_per_dp_cp_rank); validate_args at the
    pin wants per-token loss and the single data loader, and refuses PP and Megatron-FSDP.
    """
    if plan.pp > 1:
        raise SpecError(f"Megatron-LM's --hybrid-context-parallel does not run with pipeline parallelism (pp = {plan.pp})")
    if plan.zero >= 2:
        raise SpecError("Megatron-LM's --hybrid-context-parallel does not run with Megatron-FSDP (zero >= 2)")
    return [
        "--hybrid-context-parallel",
        "--max-seqlen-per-dp-cp-rank",
        str(int(max_seqlen_per_rank)),
        "--calculate-per-token-loss",
        "--dataloader-type",
        "single",
    ]


def unsupported(model: ModelSpec, plan: Plan) -> str | None:
    """Why Megatron-LM at the pin cannot lay out ``plan`` as costed, or None."""
    if model.mamba is None:
        return None
    if plan.vpp > 1:
        return "its Mamba/hybrid stack has no interleaved schedule (vpp > 1)"
    if end_slots(model.layers, plan.pp):
        return f"its hybrid stack cannot leave a stage without layers (pp {plan.pp} > {model.layers} layers)"
    if first_last(stage_layout(model.layers, plan.pp)) is None:
        return (
            f"its hybrid stack takes first/last-stage layer counts only, and the stages "
            f"{stage_layout(model.layers, plan.pp)} differ in the middle"
        )
    return None


def parallel_items(model: ModelSpec, plan: Plan, job: Job, *, stack: StackProfile | None = None) -> list[str]:
    """Parallel degrees, pipeline layout, batch, recompute, ZeRO and the overlaps.

    ZeRO stages: 0 is plain DDP; 1 is Megatron's distributed optimizer; 2 and 3 are Megatron-FSDP
    with sharding strategy ``optim_grads`` / ``optim_grads_params`` (checkpoints in ``fsdp_dtensor``).
    Overlaps follow what the stack's estimate hid (all of them without a stack).
    """
    tp_hidden = stack is None or stack.tp_overlap > 0
    ep_hidden = stack is None or stack.ep_overlap
    items = [
        opt("--tensor-model-parallel-size", plan.tp),
        opt("--pipeline-model-parallel-size", plan.pp),
        opt("--context-parallel-size", plan.cp),
    ]
    if plan.cp > 1:
        items.append(opt("--cp-comm-type", _CP_COMM[plan.cp_comm]))
    if model.moe is not None:
        items += [opt("--expert-model-parallel-size", plan.ep), opt("--expert-tensor-parallel-size", plan.etp)]
    items += pipeline_items(model, plan)
    if plan.sp and plan.tp > 1:
        items += ["--sequence-parallel", *(["--tp-comm-overlap"] if tp_hidden else [])]
    items += [opt("--micro-batch-size", plan.mbs), opt("--global-batch-size", job.global_batch)]
    if plan.recompute == "selective":
        items.append(opt("--recompute-granularity", "selective"))
        if plan.recompute_modules:  # Megatron's default list is core_attn alone
            items.append(" ".join(["--recompute-modules", *plan.recompute_modules]))
    elif plan.recompute == "full":
        items += [opt("--recompute-granularity", "full"), opt("--recompute-method", "uniform"), opt("--recompute-num-layers", 1)]
    if plan.zero >= 1:
        items.append("--use-distributed-optimizer")
    if plan.zero >= 2:
        items += [
            "--use-megatron-fsdp",
            opt("--data-parallel-sharding-strategy", _FSDP_STRATEGY[plan.zero]),
            opt("--ckpt-format", "fsdp_dtensor"),
        ]
    items.append("--overlap-grad-reduce")
    if plan.zero >= 1:
        items.append("--overlap-param-gather")
    if ep_overlap(model, plan, assumed=ep_hidden):
        items.append("--overlap-moe-expert-parallel-comm")
    return items


# --- architecture -------------------------------------------------------------------------


def _attention_items(model: ModelSpec) -> list[str]:
    if model.mla is not None:
        mla = model.mla
        items = ["--multi-latent-attention"]
        if mla.q_lora_rank:
            items.append(opt("--q-lora-rank", mla.q_lora_rank))
        # --qk-layernorm gives MLA its norms on the query and key/value latents (DeepSeek's q_a/kv_a norms)
        return [
            *items,
            opt("--kv-lora-rank", mla.kv_lora_rank),
            opt("--qk-head-dim", mla.qk_nope_head_dim),
            opt("--qk-pos-emb-head-dim", mla.qk_rope_head_dim),
            opt("--v-head-dim", mla.v_head_dim),
            "--qk-layernorm",
        ]
    items = []
    if model.num_kv_heads != model.num_attention_heads:
        items += ["--group-query-attention", opt("--num-query-groups", model.num_kv_heads)]
    if model.head_dim * model.num_attention_heads != model.hidden_size:
        items.append(opt("--kv-channels", model.head_dim))
    if model.qk_norm:
        items.append("--qk-layernorm")
    return items


def _moe_items(model: ModelSpec, plan: Plan, job: Job) -> list[str]:
    moe = model.moe
    if moe is None:
        return []
    items = [
        opt("--num-experts", moe.num_experts),
        opt("--moe-router-topk", moe.top_k),
        opt("--moe-ffn-hidden-size", moe.expert_ffn_hidden_size),
    ]
    if moe.shared_experts:
        items.append(opt("--moe-shared-expert-intermediate-size", moe.shared_width))
    if moe.first_dense_layers and model.mamba is None:
        dense = moe.first_dense_layers
        items.append(opt("--moe-layer-freq", f"([0]*{dense}+[1]*{model.layers - dense})"))
    items += [opt("--moe-token-dispatcher-type", "alltoall"), "--moe-grouped-gemm"]
    nodes = max(1, plan.ep * plan.tp // job.gpus_per_node)  # nodes one EP group spans (tp innermost)
    if moe.max_nodes_per_token and nodes > moe.max_nodes_per_token and moe.num_experts % nodes == 0:
        # node-limited routing: experts grouped by node, a token reaches at most M groups
        items += [opt("--moe-router-num-groups", nodes), opt("--moe-router-group-topk", moe.max_nodes_per_token)]
    return items


def _mamba_items(model: ModelSpec) -> list[str]:
    mamba = model.mamba
    if mamba is None:
        return []
    return [
        opt("--hybrid-override-pattern", mamba.layer_pattern),
        "--spec " + " ".join(quote(w) for w in MAMBA_SPEC),
        opt("--mamba-state-dim", mamba.state_size),
        opt("--mamba-head-dim", mamba.head_dim),
        opt("--mamba-num-groups", mamba.num_groups),
        opt("--mamba-num-heads", mamba.heads(model.hidden_size)),
    ]


def model_items(model: ModelSpec, plan: Plan, job: Job) -> list[str]:
    """Architecture and numerics flags. The vocabulary is padded only up to a multiple of tp."""
    items = [
        opt("--num-layers", model.layers),
        opt("--hidden-size", model.hidden_size),
        opt("--ffn-hidden-size", model.ffn_hidden_size),
        opt("--num-attention-heads", model.num_attention_heads),
    ]
    items += _attention_items(model)
    items += [opt("--seq-length", job.seq_len), opt("--max-position-embeddings", max(model.max_seq_len, job.seq_len))]
    items += list(_NORM[model.norm])
    items.append(opt("--position-embedding-type", _POSITION[model.position_embedding]))
    if model.position_embedding == "rope":
        items.append(opt("--rotary-base", round(model.rope_base)))  # an integer flag at the pin
        if model.rope_scaling > 1:  # Llama 3.1's frequency scaling
            items += ["--use-rope-scaling", opt("--rope-scaling-factor", model.rope_scaling)]
    if not model.linear_bias:
        items.append("--disable-bias-linear")
    if not model.dropout:
        items += [opt("--hidden-dropout", 0), opt("--attention-dropout", 0)]
    if model.ffn_activation == "swiglu":
        items.append("--swiglu")
    elif model.ffn_activation == "relu2":
        items += ["--squared-relu", "--no-bias-gelu-fusion"]  # Megatron's fused bias-activation is gelu/swiglu only
    if not model.tie_embeddings:
        items.append("--untie-embeddings-and-output-weights")
    items += _moe_items(model, plan, job) + _mamba_items(model)
    items.append(opt("--padded-vocab-size", -(-model.vocab_size // plan.tp) * plan.tp))
    if job.dtype not in _DTYPE:
        raise SpecError(f"Megatron-LM has no flags for dtype {job.dtype!r}")
    return items + list(_DTYPE[job.dtype])


def env(plan: Plan, model: ModelSpec, *, ep_hidden: bool = True) -> dict[str, str]:
    """Environment Megatron-LM asserts in validate_args (GPUs before Blackwell).

    With TP or CP it wants CUDA_DEVICE_MAX_CONNECTIONS=1, so that communication kernels launch in
    order; Megatron-FSDP (ZeRO-2/3) and the MoE all-to-all overlap want more queues, so there we
    set 32 in case the container exported 1.
    """
    if plan.zero >= 2 or (ep_overlap(model, plan, assumed=ep_hidden) and plan.tp == 1 and plan.cp == 1):
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if plan.tp > 1 or plan.cp > 1 else {}


def notes(model: ModelSpec, plan: Plan, *, stack: StackProfile | None = None) -> list[str]:
    """Where Megatron-LM at the pin runs something other than what was costed (under ``stack``)."""
    out = []
    hidden = stack is None or stack.ep_overlap
    if hidden and model.moe is not None and plan.pp > 1 and plan.ep > 1 and not ep_overlap(model, plan):
        out.append(
            "the estimate hides the MoE all-to-all behind the pipeline; Megatron-LM overlaps it only with "
            "interleaving (vpp > 1) and without full recompute, so this plan may run slower than estimated"
        )
    if model.position_embedding == "alibi":
        out.append(f"{model.name} uses ALiBi, which Megatron-LM's GPT model does not have: the launch uses no position embedding")
    if model.position_embedding == "rope" and model.rope_scaling not in (1.0, 8.0):
        out.append(f"Megatron-LM's GPT builder at the pin applies Llama 3.1 rope scaling with factor 8, not {model.rope_scaling:g}")
    if model.position_embedding == "rope" and model.rope_base != round(model.rope_base):
        out.append(f"Megatron-LM takes an integer --rotary-base; {model.rope_base} was rounded")
    return out


def megatron_command(
    model: ModelSpec,
    plan: Plan,
    job: Job,
    *,
    nnodes: int,
    nproc_per_node: int,
    rdzv_endpoint: str = "$MASTER_ADDR:29500",
    rdzv_id: str | None = None,
    script: str | None = None,
    data_path: str | None = None,
    tokenizer_model: str | None = None,
    train_iters: int = 100,
    lr: float = 3e-4,
    extra_args: Sequence[str] = (),
    multiline: bool = False,
    stack: StackProfile | None = None,
) -> str:
    """A complete torchrun line for Megatron-LM running ``plan`` on ``model``.

    Without ``data_path`` it trains on Megatron's mock data with the null tokenizer, enough to
    measure throughput; with it, on that indexed dataset with the Hugging Face tokenizer at
    ``tokenizer_model``. ``train_iters`` and ``lr`` are placeholders Megatron needs to start.
    ``extra_args`` (--emit-extra) come last, each one quoted word, so they override ours.
    """
    check_launch(plan, model, job, nnodes, nproc_per_node, stack=stack)
    items = torchrun_items(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint, rdzv_id=rdzv_id)
    ep_hidden = stack is None or stack.ep_overlap
    prefix = [f"{name}={quote(value)}" for name, value in env(plan, model, ep_hidden=ep_hidden).items()]
    items[0] = " ".join([*prefix, items[0]])
    items.append(quote(script or entry_point(model)))
    items += parallel_items(model, plan, job, stack=stack) + model_items(model, plan, job)
    items.append("--mock-data" if data_path is None else opt("--data-path", data_path))
    if tokenizer_model is None:
        # the null tokenizer adds one end-of-document id to --vocab-size
        items += [opt("--tokenizer-type", "NullTokenizer"), opt("--vocab-size", model.vocab_size - 1)]
    else:
        items += [opt("--tokenizer-type", "HuggingFaceTokenizer"), opt("--tokenizer-model", tokenizer_model)]
    items += [opt("--train-iters", train_iters), opt("--lr", lr)]
    items += extra_items(extra_args)
    return render(items, multiline)
