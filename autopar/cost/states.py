"""What one rank holds of the model's state: parameters per pipeline rank, and their weights, gradients
and optimizer states under each ZeRO stage and stack (with the ZeRO-3 gather buffers).

cost/memory.py adds the activations, logits and allocator slack to these for the peak.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import NamedTuple

from autopar.cost import calibration as cal
from autopar.cost.habits import FSDP2_STATE
from autopar.cost.memo import Memo
from autopar.spec.families import KIND_PARTS
from autopar.spec.job import Job
from autopar.spec.layout import chunk_sizes, first_smaller, rank_kinds, virtual_stage
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import NEUTRAL, StackProfile


class ParamPlan(NamedTuple):
    """What the per-rank parameter counts read of a plan."""

    tp: int  # dense weights split by tp
    ep: int  # routed experts split by ep * etp
    etp: int
    pp: int  # stages
    vpp: int  # chunks per stage


def pipe_kinds(memo: Memo, key: tuple[int, int]) -> tuple[Counter[str], ...]:
    """Per pipeline rank, its layers' kinds, for key (pp, vpp), as the memo's stack lays them out."""
    return rank_kinds(memo.model.layer_kinds(), key[0], key[1], ends=memo.stack.pipeline_counts_embedding, split=memo.stack.pipeline_split)


def _first_smaller(memo: Memo, key: tuple[int, int]) -> bool:
    """spec/layout.py first_smaller for key (pp, vpp), as the memo's stack lays the layers out."""
    return first_smaller(memo.model.layers, key[0], key[1], ends=memo.stack.pipeline_counts_embedding, split=memo.stack.pipeline_split)


def end_params(memo: Memo, key: ParamPlan) -> tuple[tuple[float, float], tuple[float, float]]:
    """(dense, expert) parameters of the first and of the last pipeline rank. Where the embedding holds
    rank 0's first chunk alone or with a layer fewer than rank 1's, or the stack's split gives rank 0's
    first chunk a layer fewer (spec/layout.py first_smaller), the first is the larger of rank 0 (with
    the embedding) and rank 1, either of which the first rank's activations may be (peak_rank)."""
    ranks = memo.get(pipe_kinds, (key.pp, key.vpp))
    last = key.pp - 1
    model, sizes = memo.model, memo.get(_kind_sizes, None)
    first = rank_params(model, key, ranks[0], first=True, last=last == 0, sizes=sizes)
    if key.pp > 2 and memo.get(_first_smaller, (key.pp, key.vpp)):
        first = max(first, rank_params(model, key, ranks[1], first=False, last=False, sizes=sizes), key=sum)
    return first, rank_params(model, key, ranks[last], first=last == 0, last=True, sizes=sizes)


def last_chunk_params(memo: Memo, key: ParamPlan) -> tuple[tuple[float, float], tuple[float, float]]:
    """(dense, expert) parameters of the last local chunk of the first rank (the larger of rank 0's and rank 1's
    where end_params compares them) and of the last rank.

    unsharded_chunk_grads: torch.distributed.pipelining's Interleaved1F1B runs rank r's backwards round its
    chunks in groups of pp micro-batches, the last chunk first (_calculate_single_rank_operations,
    backward_stage_index); FSDP2, fully_shard per model chunk (torchtitan applies it to each model part),
    accumulates a chunk's unsharded fp32 gradient from its first backward and reduce-scatters and frees it
    after its last (backward_maybe_with_nosync, last_backward). With m <= pp micro-batches that is one round:
    at the first backward, where the in-flight activations peak, only the last chunk's gradient is held; the
    earlier chunks' come as the activations of the later ones are freed."""
    model, pp, vpp = memo.model, key.pp, key.vpp

    def chunk(rank: int) -> tuple[float, float]:
        layers, first, last = memo.get(_last_chunk, (pp, vpp, rank))
        return rank_params(model, key, layers, first=first, last=last, sizes=memo.get(_kind_sizes, None))

    first = chunk(0)
    if pp > 2 and memo.get(_first_smaller, (pp, vpp)):
        first = max(first, chunk(1), key=sum)
    return first, chunk(pp - 1)


def _last_chunk(memo: Memo, key: tuple[int, int, int]) -> tuple[Counter[str], bool, bool]:
    """For key (pp, vpp, rank): the layer kinds of the rank's last local chunk, and whether that chunk is
    the model's first and its last."""
    pp, vpp, rank = key
    kinds = memo.model.layer_kinds()
    sizes = chunk_sizes(len(kinds), pp * vpp, ends=memo.stack.pipeline_counts_embedding, split=memo.stack.pipeline_split)
    c = virtual_stage(rank=rank, chunk=vpp - 1, pp=pp)
    start = sum(sizes[:c])
    return Counter(kinds[start : start + sizes[c]]), c == 0, c == pp * vpp - 1


def _kind_sizes(memo: Memo, _: None) -> dict[str, tuple[int, int, int]]:
    """Per layer kind of the model: (its weights, its routed-expert weights, its norms' weights), for rank_params."""
    model = memo.model
    return {
        k: (model.kind_params(k), routed_expert_params(model, k), model.hidden_size * len(KIND_PARTS[k])) for k in set(model.layer_kinds())
    }


def routed_expert_params(model: ModelSpec, kind: str) -> int:
    """The routed-expert weights of one layer (sharded by ep * etp, not by tp)."""
    if model.moe is None or "moe" not in KIND_PARTS[kind]:
        return 0
    return model.moe.num_experts * model.mlp_matrices * model.hidden_size * model.moe.expert_ffn_hidden_size


def rank_params(
    model: ModelSpec,
    plan: Plan | ParamPlan,
    kinds: Counter[str],
    *,
    first: bool,
    last: bool,
    sizes: Mapping[str, tuple[int, int, int]] | None = None,
) -> tuple[float, float]:
    """(dense, routed-expert) parameters one rank holds for the layers `kinds` and its embedding/output;
    `sizes`: _kind_sizes of the model, when a caller has them.

    Norm weights are whole on every TP rank (Megatron and DTensor TP replicate
    them; `autopar calibrate` counts them so), the matrices are split by tp.
    """
    dense = expert = 0.0
    h = model.hidden_size
    for kind, n in kinds.items():
        if sizes is None:
            params, routed, norms = model.kind_params(kind), routed_expert_params(model, kind), h * len(KIND_PARTS[kind])
        else:
            params, routed, norms = sizes[kind]
        dense += n * ((params - routed - norms) / plan.tp + norms)
        expert += n * routed / (plan.ep * plan.etp)
    embed = model.embedding_params() / plan.tp
    if first:
        dense += embed
    if last:
        dense += (model.output_params() - h) / plan.tp + h  # the final norm is whole too
        if model.tie_embeddings and not first:
            dense += embed  # the last stage keeps its own copy of the tied matrix
    return dense, expert


def state_bytes(
    params: float,
    *,
    zero: int,
    shards: int,
    grad_bytes: float = cal.GRAD_BYTES,
    fsdp_master: bool = False,
    gather_bytes: float = cal.WEIGHT_BYTES,
    optimizer_bytes: float = cal.OPTIMIZER_BYTES,
) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes for `params` under a ZeRO stage over `shards` ranks.

    `grad_bytes`: the gradient buffer's element size, the stack's reduce dtype (Megatron-Core
    allocates main_grad in bf16 when grad_reduce_in_fp32 is off, as its FP8 recipes set it).
    `fsdp_master`: FSDP mixed precision, where the sharded parameter is itself the fp32 master
    (4 B) and the optimizer holds only Adam's two moments (8 B); below ZeRO-3 (FSDP2
    reshard_after_forward=False, FSDP1 SHARD_GRAD_OP) the gathered `gather_bytes` copy of every
    weight is held from forward to backward as well (habits.FSDP2_STATE).
    `optimizer_bytes`: the optimizer's bytes per parameter otherwise (fp32 master, Adam m and v: 12; the
    stack's, StackProfile.optimizer_state_bytes).
    """
    if fsdp_master:
        st = FSDP2_STATE
        shard = shards if zero >= 1 else 1
        w = params * st.weight / shard + (params * gather_bytes if 1 <= zero < 3 else 0.0)
        g = params * grad_bytes / (shards if zero >= 2 else 1)
        return w, g, params * st.optimizer / shard
    w = params * cal.WEIGHT_BYTES
    g = params * grad_bytes
    o = params * optimizer_bytes
    if zero >= 1:
        o /= shards
    if zero >= 2:
        g /= shards
    if zero >= 3:
        w /= shards
    return w, g, o


FLOOR_SHARE = 0.5  # memory_floor's share of an even split: the worse of the first and last rank may hold less
# state than the average rank (dense first layers on rank 0, the extra layers on earlier ranks), never half


def memory_floor(model: ModelSpec, job: Job, stack: StackProfile = NEUTRAL) -> float:
    """Bytes per GPU below which no plan on job.gpus GPUs falls: FLOOR_SHARE of the leanest the model's
    states can be (weights, gradients and optimizer of every parameter under ZeRO-3 over all GPUs, as
    state_bytes counts them) plus the stack's fixed buffers; activations, logits and copies add to it.
    `suggest --gpus auto` skips GPU counts whose floor is above the memory without searching them."""
    w, g, o = state_bytes(
        model.total_params(),
        zero=3,
        shards=job.gpus,
        grad_bytes=stack.grad_bytes(job.dtype),
        fsdp_master=stack.fsdp_master,
        gather_bytes=stack.gather_bytes,
        optimizer_bytes=stack.optimizer_state_bytes(job.dtype),
    )
    return FLOOR_SHARE * (w + g + o) + stack.fixed_overhead_gib * 2**30


class StatePlan(NamedTuple):
    """What weights, gradients, optimizer states and buffers read of a plan."""

    params: ParamPlan  # whose parameters
    shards: int  # dp * cp: the ranks that shard dense state (Megatron's DP x CP group)
    zero: int  # ZeRO stage
    # interleaved with no more micro-batches than stages: each chunk's backwards run in one round, one chunk
    # after another (unsharded_chunk_grads)
    one_round: bool = False


def rank_states(memo: Memo, key: StatePlan) -> tuple[tuple[float, float, float], tuple[float, float, float], float]:
    """(weights, grads, optimizer) bytes of the first and of the last rank, and the buffers."""
    p, stack, fp8 = key.params, memo.stack, memo.job.dtype == "fp8"
    dp_shards = key.shards  # Megatron shards optimizer state over the DP x CP group
    expert_shards = max(1, dp_shards * p.tp // (p.ep * p.etp))  # and expert state over the expert-DP group
    out = []
    grad = stack.grad_bytes(memo.job.dtype)
    gathered = 1 if fp8 and stack.fp8_gather else stack.gather_bytes
    opt = stack.optimizer_state_bytes(memo.job.dtype)
    chunk_grads = memo.get(last_chunk_params, p) if key.one_round and p.vpp > 1 else None
    for i, (dense, expert) in enumerate(memo.get(end_params, p)):
        w, g, o = state_bytes(
            dense,
            zero=key.zero,
            shards=dp_shards,
            grad_bytes=grad,
            gather_bytes=gathered,
            optimizer_bytes=opt,
            fsdp_master=stack.fsdp_master,
        )
        if expert:
            ew, eg, eo = state_bytes(
                expert,
                zero=key.zero,
                shards=expert_shards,
                grad_bytes=grad,
                gather_bytes=gathered,
                optimizer_bytes=opt,
                fsdp_master=stack.fsdp_master,
            )
            w, g, o = w + ew, g + eg, o + eo
        if fp8 and stack.fp8_weight_copy_bytes:
            # Transformer Engine keeps an FP8 weight and its transpose per TP shard; under ZeRO-3 a
            # stack that shards it (Megatron-FSDP) holds only this rank's share.
            sharded = key.zero >= 3 and stack.fp8_weight_copy_sharded
            w += (dense / (dp_shards if sharded else 1) + expert / (expert_shards if sharded else 1)) * stack.fp8_weight_copy_bytes
        if key.zero >= 3 and p.pp > 1 and not stack.pp_reshard:
            # FSDP under PP keeps the stage's weights gathered from forward to backward (torchtitan
            # apply_fsdp: reshard_after_forward=False when PP is enabled)
            w += (dense + expert) * gathered
        if key.zero >= 2 and p.pp > 1 and not stack.pp_reshard:
            # torch.distributed.pipelining runs every micro-batch's backward but the last with FSDP's
            # gradient sync off (PipelineStage.backward_maybe_with_nosync); FSDP2 then accumulates the
            # stage's unsharded gradients in the reduce dtype (FSDPParam.to_accumulated_grad_if_needed)
            # and reduce-scatters once: the whole stage's gradient, not a 1/dp shard, is held
            g = (dense + expert) * grad
            if chunk_grads is not None:  # of its last chunk only, at the peak (unsharded_chunk_grads)
                g = sum(chunk_grads[i]) * grad
        out.append((w, g, o))
    buffers = stack.fixed_overhead_gib * 2**30
    if key.zero >= 3:  # the gathered layer and the prefetched next one (FP8 where the stack gathers FP8)
        buffers += 2 * memo.get(_gathered_layer_params, (p.tp, p.ep, p.etp)) * (1 if fp8 and stack.fp8_gather else stack.gather_bytes)
        if stack.root_gathered and p.pp == 1:
            # FSDP's root unit (embedding, final norm, output projection: not float8 linears) is not
            # resharded after forward and is gathered again at the start of backward, so it is whole
            # at the loss (FSDP2 lazy_init: root post_forward_mesh_info None; FSDP1 _is_root)
            model = memo.model
            buffers += (model.embedding_params() + model.output_params()) / p.tp * stack.gather_bytes
    return out[0], out[1], buffers


def _gathered_layer_params(memo: Memo, key: tuple[int, int, int]) -> float:
    """Parameters of the largest layer one rank all-gathers under ZeRO-3, for key (tp, ep, etp): the dense
    matrices split by tp, and only the rank's own experts (num_experts / ep, split by etp), which FSDP gathers
    over the expert-DP group (torchtitan efsdp, Megatron-FSDP's expert data-parallel group)."""
    tp, ep, etp = key
    model = memo.model
    return max(
        (model.kind_params(k) - routed_expert_params(model, k)) / tp + routed_expert_params(model, k) / (ep * etp)
        for k in set(model.layer_kinds())
    )
