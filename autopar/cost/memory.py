"""Memory per GPU: weights, gradients, optimizer states, activations, buffers.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", sec. 4), re-derived for GQA, gated MLPs and flash
attention. Per block and micro-batch, with t = tp, tokens T = b*s/cp, bf16:

  attention: norm input 2Th, QKV input 2Th, Q/K/V 2T(a+2g)d/t, output 2T*a*d/t,
             dropout mask Th (when the model uses dropout)
  MLP:       norm input 2Th, input 2Th, activation saved tensors, mask Th
             (SwiGLU: gate and up outputs 4Tf/t plus their product 2Tf/t;
              GELU/ReLU^2: input and output of the activation 4Tf/t)

With GPT's shapes (a*d = h, g = a, f = 4h) this is T*h*(10 + 24/t), their eq. (2)
with flash attention removing the 5as/h term; sequence parallelism divides the
10 by t as well (their eq. (4)). MLA, MoE and Mamba sub-layers follow the same
rule: every tensor a backward kernel reads is counted once (part_activation_bytes).
Weights, gradients and optimizer states per rank are cost/states.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

from autopar.cost import calibration as cal
from autopar.cost.activations import ActPlan, part_activation_bytes
from autopar.cost.compute import cp_backward_bytes_per_token, cp_kv_bytes_per_token
from autopar.cost.habits import eager_block_bytes
from autopar.cost.memo import Memo
from autopar.cost.pipeline import in_flight_microbatches
from autopar.cost.recompute import module_dropped_bytes, op_sac_bytes
from autopar.cost.states import (
    ParamPlan,
    StatePlan,
    pipe_kinds,
    rank_states,
)
from autopar.spec.families import KIND_PARTS
from autopar.spec.job import Job
from autopar.spec.layout import peak_rank
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import NEUTRAL, StackProfile

__all__ = [
    "MemoryBreakdown",
    "block_peaks",
    "end_kinds",
    "layer_activation_bytes",
    "memory_breakdown",
    "peak_bytes",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Bytes on the most loaded GPU."""

    weights: float  # bf16 parameters (sharded under ZeRO-3)
    grads: float  # fp32 gradient buffers
    optimizer: float  # fp32 master weights, Adam m and v
    activations: float  # saved activations of the in-flight micro-batches
    logits: float  # the loss layer on the last stage: logits, and the output projection's saved input
    buffers: float  # CUDA context, NCCL and library workspaces, ZeRO-3 gather buffers
    fragmentation: float  # allocator slack
    # of buffers, what torch's caching allocator does not hold: the stack's fixed overhead (CUDA context,
    # NCCL's and the libraries' own buffers, StackProfile.fixed_overhead_gib); not a part of its own in total
    outside_allocator: float = 0.0

    @property
    def total(self) -> float:
        """The device's peak: what nvidia-smi shows, what must fit in the GPU's memory."""
        return self.weights + self.grads + self.optimizer + self.activations + self.logits + self.buffers + self.fragmentation

    @property
    def allocator_reserved(self) -> float:
        """What torch.cuda.max_memory_reserved() reports: the device's peak less what is outside the allocator."""
        return self.total - self.outside_allocator

    def as_gib(self) -> dict[str, float]:
        """The parts that add up to the total (outside_allocator is a share of buffers), and the total."""
        out = {f.name: getattr(self, f.name) / 2**30 for f in fields(self) if f.name != "outside_allocator"}
        out["total"] = self.total / 2**30
        return out


def layer_activation_bytes(
    model: ModelSpec, kind: str, *, tokens: float, plan: Plan | ActPlan, fp8: bool = False, stack: StackProfile = NEUTRAL
) -> float:
    """Bytes one layer keeps for backward as `stack` saves them; under full recompute only its input
    (split by tp under SP)."""
    if plan.recompute == "full":
        return cal.ACT_BYTES * tokens * model.hidden_size / (plan.tp if plan.sp and plan.tp > 1 else 1)
    if stack.activation_saves == "eager-torch" and kind == "dense" and plan.recompute == "none" and not fp8:
        return eager_block_bytes(model, tokens=tokens, tp=plan.tp, sp=plan.sp)
    fp8 = fp8 and stack.fp8_saves_fp8_inputs
    out = stack.moe_saves_expert_output
    modules = plan.recompute_modules if plan.recompute == "selective" else ()
    if modules:  # Megatron's module-level recompute: what no recompute keeps, less what the modules drop
        whole = plan._replace(recompute="none") if isinstance(plan, ActPlan) else replace(plan, recompute="none")
        return sum(
            part_activation_bytes(model, p, tokens=tokens, plan=whole, fp8=fp8, expert_output=out)
            - module_dropped_bytes(model, p, tokens=tokens, plan=whole, fp8=fp8, modules=modules, expert_output=out)
            for p in KIND_PARTS[kind]
        )
    if plan.recompute == "selective" and stack.selective == "op":
        op = op_sac_bytes(model, KIND_PARTS[kind], tokens=tokens, plan=plan)
        if op is not None:
            return op
    return sum(part_activation_bytes(model, p, tokens=tokens, plan=plan, fp8=fp8, expert_output=out) for p in KIND_PARTS[kind])


def block_activation_bytes(model: ModelSpec, *, tokens: float, tp: int, sp: bool, recompute: str) -> float:
    """Bytes one dense block (attention + MLP) keeps for backward."""
    return layer_activation_bytes(model, "dense", tokens=tokens, plan=Plan(dp=1, tp=tp, pp=1, sp=sp, recompute=recompute))


def memory_breakdown(model: ModelSpec, job: Job, plan: Plan, *, memo: Memo | None = None, stack: StackProfile = NEUTRAL) -> MemoryBreakdown:
    """Peak memory of the worse of the first stage (most activations) and the last (logits), as `stack` holds it.

    `memo` (made for this model, job and stack) shares per-layer and per-stage sizes across plans.
    """
    memo = Memo(model, None, job, stack) if memo is None else memo
    w, g, o, acts, logits, buffers, frag = _peak_parts(memo, plan)
    return MemoryBreakdown(
        weights=w,
        grads=g,
        optimizer=o,
        activations=acts,
        logits=logits,
        buffers=buffers,
        fragmentation=frag,
        outside_allocator=memo.stack.fixed_overhead_gib * 2**30,
    )


def peak_bytes(memo: Memo, plan: Plan) -> float:
    """memory_breakdown(...).total without building the breakdown (the search's hot path)."""
    return sum(_peak_parts(memo, plan))


def end_kinds(memo: Memo, key: tuple[int, int]) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """The (kind, layers) of the first (spec/layout.py peak_rank) and of the last pipeline rank, for key (pp, vpp)."""
    ranks = memo.get(pipe_kinds, key)
    return tuple(ranks[first_rank(memo, key)].items()), tuple(ranks[-1].items())


def first_rank(memo: Memo, key: tuple[int, int]) -> int:
    """spec/layout.py peak_rank of the memo's model and stack, for key (pp, vpp) (computed once per key)."""
    return memo.get(_peak_rank, key)


def _peak_rank(memo: Memo, key: tuple[int, int]) -> int:
    return peak_rank(memo.model.layers, *key, ends=memo.stack.pipeline_counts_embedding, split=memo.stack.pipeline_split)


def _stage_activations(
    memo: Memo, key: tuple[ActPlan, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """For key (act plan, first rank's and last rank's (kind, layers)), per end rank: (bytes kept per
    micro-batch, transient bytes). Layouts whose end ranks hold the same layers share it.

    The transient is what a layer rebuilds during its own backward on top of
    what it kept: nothing without recompute, the attention core (A - S) under
    selective, the whole layer but its kept input (A - I) under full; the peak
    holds the largest over the rank's layer kinds. Kept-plus-transient never
    rises from none to selective to full recompute, for any layer count.
    """
    act, first, last = key
    # a profile that `autopar calibrate --save` corrected: what this node's eager stack saves over the formula
    takes = memo.hw is not None and memo.stack.takes_eager_corrections  # spec/stack.py: eager stacks only
    factor = memo.hw.correction("activation_bytes_per_block") if memo.hw is not None and takes else 1.0
    per = memo.get(_kind_bytes, act)
    out = []
    recomputes = act.recompute != "none"
    for kinds in (first, last):
        # sum() and max() of the kinds' bytes, as loops: the same additions in the same order
        kept: float = 0
        most: float | None = None
        for k, n in kinds:
            keeps, whole = per[k]
            kept += n * keeps
            if recomputes and (most is None or whole - keeps > most):
                most = whole - keeps
        transient = 0.0 if most is None else most  # none: the loss alone
        out.append((kept * factor, transient * factor))
    return out[0], out[1]


def _kind_bytes(memo: Memo, act: ActPlan) -> dict[str, tuple[float, float]]:
    """Per layer kind of the model: (bytes one layer keeps under act's recompute mode, and without recompute)."""
    whole = act._replace(recompute="none")
    return {k: (memo.get(_layer_bytes, (act, k)), memo.get(_layer_bytes, (whole, k))) for k in set(memo.model.layer_kinds())}


def _layer_bytes(memo: Memo, key: tuple[ActPlan, str]) -> float:
    """layer_activation_bytes of one layer of a kind, for key (act plan, kind), as the memo's stack saves them."""
    act, kind = key
    tokens = act.mbs * memo.job.seq_len / act.cp
    return layer_activation_bytes(memo.model, kind, tokens=tokens, plan=act, fp8=memo.job.dtype == "fp8", stack=memo.stack)


class _Layout(NamedTuple):
    """What the memory of a layout's variants shares: per end rank, in-flight micro-batches and logits."""

    held: tuple[float, float]  # first, last rank: micro-batches whose activations are in flight
    fixed: float  # bytes held once on every rank, through the loss (PP stage buffers)
    logits: tuple[float, float]  # loss-layer logits on the first (pp = 1) and last rank
    # bytes held only while a layer attends (the gathered K/V under all-gather CP, the CP backward's
    # buffers): beside the layer's recomputed activations, never beside the loss's logits
    attending: float = 0.0


def held_microbatches(memo: Memo, pp: int, vpp: int, microbatches: int) -> float:
    """Micro-batches in flight on the first rank (first_rank) of a layout with `microbatches` per step
    (Plan.microbatches: the global batch over dp * mbs): all a layout's activations read of dp and the batch."""
    return in_flight_microbatches(pp=pp, vpp=vpp, microbatches=microbatches, rank=first_rank(memo, (pp, vpp)))


def _layout(plan: Plan | LayoutKey, memo: Memo) -> _Layout:
    """Of a plan, or of the LayoutKey of the layouts that share this part (a search's, without a Plan)."""
    model, job = memo.model, memo.job
    tokens = plan.mbs * job.seq_len / plan.cp
    fixed = attending = 0.0
    if plan.cp > 1 and plan.cp_comm == "allgather":  # the whole sequence's K/V of one layer, while it attends
        attending += cp_kv_bytes_per_token(model, plan.tp, memo.stack) * tokens * plan.cp
    if plan.cp > 1:  # and, under PyTorch's context_parallel, its backward's fp32 gradient buffers
        attending += cp_backward_bytes_per_token(model, plan.tp, memo.stack) * tokens
    logits = memo.stack.logit_peak(plan.tp) * tokens * model.vocab_size / plan.tp
    # the output projection keeps its input for the weight gradient: split by SP (Megatron gathers it
    # again in backward), or whole where DTensor's column-parallel linear saves the gathered input
    split = plan.tp if plan.sp and plan.tp > 1 and not memo.stack.tp_saves_gathered else 1
    logits += tokens * model.hidden_size * cal.ACT_BYTES / split
    held = (
        plan.held if isinstance(plan, LayoutKey) else held_microbatches(memo, plan.pp, plan.vpp, job.global_batch // (plan.dp * plan.mbs))
    )
    if plan.pp > 1 and memo.stack.pp_stage_buffers:
        # torch.distributed.pipelining keeps each in-flight micro-batch's stage input and output
        # (full width: not split by SP) until its backward (PipelineStage fwd_cache, args)
        fixed += memo.stack.pp_stage_buffers * held * tokens * model.hidden_size * cal.ACT_BYTES
    return _Layout(
        held=(held, 1.0),
        fixed=fixed,
        logits=(logits if plan.pp == 1 else 0.0, logits),
        attending=attending,
    )


def _peak_parts(memo: Memo, plan: Plan) -> tuple[float, ...]:
    """MemoryBreakdown's fields, in order, for the worse of the first and last stage."""
    lay = _layout(plan, memo)
    (kept0, extra0), (kept1, extra1) = memo.get(_stage_activations, (ActPlan.of(plan), *memo.get(end_kinds, (plan.pp, plan.vpp))))
    params = ParamPlan(tp=plan.tp, ep=plan.ep, etp=plan.etp, pp=plan.pp, vpp=plan.vpp)
    one = plan.vpp > 1 and plan.microbatches(memo.job) <= plan.pp
    state0, state1, buffers = memo.get(rank_states, StatePlan(params=params, shards=plan.dp * plan.cp, zero=plan.zero, one_round=one))
    frag = memo.stack.allocator_fragmentation
    first = _stage(state0, _acts(kept0 * lay.held[0], extra0 + lay.attending, lay.fixed, lay.logits[0]), lay.logits[0], buffers, frag)
    if plan.pp == 1:
        return first
    last = _stage(state1, _acts(kept1 * lay.held[1], extra1 + lay.attending, lay.fixed, lay.logits[1]), lay.logits[1], buffers, frag)
    return first if sum(first) >= sum(last) else last


def _acts(kept: float, transient: float, fixed: float, logits: float) -> float:
    """Activation bytes at a stage's peak. The loss's logits are freed before the first layer's backward
    rebuilds its recomputed activations, whose blocks the caching allocator carves from the freed logits:
    the transient (with what a layer holds only while it attends, _Layout.attending) counts only by what it
    exceeds the logits."""
    return kept + fixed + (transient - logits if transient > logits else 0.0)


def _stage(state: tuple[float, float, float], acts: float, logits: float, buffers: float, fragmentation: float) -> tuple[float, ...]:
    """(weights, grads, optimizer, activations, logits, buffers, fragmentation) bytes of one stage.

    Allocator slack grows on what is allocated and freed, in many sizes, every step: the
    activations. Weights, gradient buffers and optimizer states are allocated once and never split,
    and the loss's few same-sized logit blocks are counted as the allocator holds them
    (StackProfile.logit_peak).
    """
    w, g, o = state
    return w, g, o, acts, logits, buffers, fragmentation * acts


def _state_sums(memo: Memo, key: tuple[ParamPlan, int, tuple[int, ...], bool]) -> list[tuple[float, float, float]]:
    """Per ZeRO stage of key (params, dp * cp, zeros, one_round): weights + grads + optimizer of the first and
    last rank, buffers."""
    params, shards, zeros, one = key
    out = []
    for zero in zeros:
        (w0, g0, o0), (w1, g1, o1), buffers = memo.get(rank_states, StatePlan(params=params, shards=shards, zero=zero, one_round=one))
        out.append((w0 + g0 + o0, w1 + g1 + o1, buffers))
    return out


def _mode_acts(memo: Memo, key: tuple[ActPlan, tuple[str, ...]]) -> tuple[ActPlan, ...]:
    """For key (act plan without its mode, modes): the act plan under each mode (its modules under selective)."""
    act, modes = key
    return tuple(act._replace(recompute=r, recompute_modules=act.recompute_modules if r == "selective" else ()) for r in modes)


class LayoutKey(NamedTuple):
    """What a layout's activations, logits and in-flight micro-batches read of a plan (ep is read by
    the states alone): the key of the part of block_peaks its expert-parallel variants share."""

    tp: int
    pp: int
    cp: int
    vpp: int
    etp: int
    mbs: int
    sp: bool
    cp_comm: str
    modules: tuple[str, ...]  # what the selective variant recomputes (Plan.recompute_modules)
    # the first rank's micro-batches in flight (held_microbatches), what is read of dp and the job's global
    # batch: the layouts of other dp (other GPU counts, memos that share values) with as many share the part
    held: float


def _layout_part(memo: Memo, key: LayoutKey) -> _Layout:
    return _layout(key, memo)


def _act_peaks(memo: Memo, key: tuple[LayoutKey, tuple[str, ...]]) -> list[tuple[float, float, float, float, float, float]]:
    """For key (layout, recompute modes): per mode, of the first and the last rank, the activation bytes at
    the rank's peak (_acts), its logits and its allocator slack, as _peak_parts has them."""
    lk, modes = key
    # the layout's part reads neither etp nor the modules: the etp of one layout share it
    lay = memo.get_by(_layout_part, (lk.tp, lk.pp, lk.cp, lk.vpp, 0, lk.mbs, lk.sp, lk.cp_comm, (), lk.held), LayoutKey._make)
    ends = memo.get(end_kinds, (lk.pp, lk.vpp))
    base = ActPlan(lk.tp, lk.sp and lk.tp > 1, "", lk.etp, lk.mbs, lk.cp, lk.modules)
    (held0, held1), fixed, (logits0, logits1), attending = lay
    f = memo.stack.allocator_fragmentation
    out = []
    for act in memo.get(_mode_acts, (base, modes)):
        (kept0, extra0), (kept1, extra1) = memo.get(_stage_activations, (act, *ends))
        a0 = _acts(kept0 * held0, extra0 + attending, fixed, logits0)
        a1 = _acts(kept1 * held1, extra1 + attending, fixed, logits1)
        out.append((a0, logits0, f * a0, a1, logits1, f * a1))
    return out


def block_peaks(
    memo: Memo, skeleton: Plan, experts: Sequence[tuple[int, int]], recomputes: Sequence[str], zeros: Sequence[int]
) -> list[float]:
    """Peak bytes of `skeleton` with each (ep, etp) of `experts` in its place, under each recompute mode
    and ZeRO stage, flat in that order (expert major, then recompute, then zero); under selective its
    recompute_modules are recomputed (search/space.py with_knobs).

    The same sums, in the same order, as memory_breakdown(...).total, so the search's feasibility
    test and a fresh estimate agree to the last bit; what the plans share is found once: the
    activations, logits and in-flight micro-batches read etp but not ep (once per etp), the states
    once per (tp, pp, vpp, dp * cp) and experts list, shared by every micro-batch size and SP.
    """
    s, modes, zs = skeleton, tuple(recomputes), tuple(zeros)
    m = memo.job.global_batch // (s.dp * s.mbs)
    one = s.vpp > 1 and m <= s.pp  # StatePlan.one_round
    held = held_microbatches(memo, s.pp, s.vpp, m)
    if len(experts) == 1:  # a dense block: its one layout's states and activations, the same entries as below
        ((ep, etp),) = experts
        sums = memo.get_by(_state_sums, ((s.tp, ep, etp, s.pp, s.vpp), s.dp * s.cp, zs, one), _state_key)
        layout = (s.tp, s.pp, s.cp, s.vpp, etp, s.mbs, s.sp, s.cp_comm, s.recompute_modules, held)
        per = memo.get_by(_act_peaks, (layout, modes), _layout_key)
        pairs = [(sums, per)]
    else:
        states = memo.get_by(_expert_states, ((s.tp, s.pp, s.vpp), s.dp * s.cp, tuple(experts), zs, one), _expert_states_key)
        rows = {
            etp: memo.get_by(
                _act_peaks, ((s.tp, s.pp, s.cp, s.vpp, etp, s.mbs, s.sp, s.cp_comm, s.recompute_modules, held), modes), _layout_key
            )
            for etp in {etp for _, etp in experts}
        }
        pairs = [(sums, rows[etp]) for (_, etp), sums in zip(experts, states, strict=True)]
    if s.pp == 1:
        return [s0 + a0 + l0 + b + fa0 for sums, per in pairs for a0, l0, fa0, _, _, _ in per for s0, _, b in sums]
    # the worse of the first and last rank (the first on a tie)
    return [
        (x if (x := s0 + a0 + l0 + b + fa0) >= (y := s1 + a1 + l1 + b + fa1) else y)
        for sums, per in pairs
        for a0, l0, fa0, a1, l1, fa1 in per
        for s0, s1, b in sums
    ]


class ExpertStates(NamedTuple):
    """What the states of a Block's layouts read (search/space.py): (tp, pp, vpp), dp * cp, each (ep, etp), zeros."""

    degrees: tuple[int, int, int]
    shards: int
    experts: tuple[tuple[int, int], ...]
    zeros: tuple[int, ...]
    one_round: bool  # StatePlan.one_round


def _expert_states(memo: Memo, key: ExpertStates) -> list[list[tuple[float, float, float]]]:
    """_state_sums of each (ep, etp) of the key."""
    (tp, pp, vpp), shards, experts, zeros, one = key
    return [memo.get_by(_state_sums, ((tp, ep, etp, pp, vpp), shards, zeros, one), _state_key) for ep, etp in experts]


def _expert_states_key(values: tuple) -> ExpertStates:
    return ExpertStates(*values)


def _layout_key(values: tuple[tuple, tuple[str, ...]]) -> tuple[LayoutKey, tuple[str, ...]]:
    return LayoutKey(*values[0]), values[1]


def _state_key(values: tuple[tuple, int, tuple[int, ...], bool]) -> tuple[ParamPlan, int, tuple[int, ...], bool]:
    return ParamPlan(*values[0]), values[1], values[2], values[3]
