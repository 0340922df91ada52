"""estimate(model, hw, job, plan) -> Estimate: one training step, explained.

Step time = pipeline (micro-batches through the stages, with the fill/drain
bubble) + exposed pipeline p2p + exposed data-parallel sync + optimizer step.

Pipeline with stage times t_i per micro-batch (forward + backward), m
micro-batches and v virtual stages per rank: m * max(t) + (sum(t) - max(t)) / v,
from the one pipeline model (cost/pipeline.py: stage layout, schedule time, p2p).
With equal stages this is (m + (p-1)/v) * t, the 1F1B bubble (p-1)/m and the
interleaved one (p-1)/(v*m) of Narayanan et al. 2021 (sec. 2.2); unequal stages
(extra layers, the loss layer on the last one) stretch it.

Every cached piece is a function of a Memo (model, hardware, job) and one small
key holding exactly the plan values it reads (LayerPlan, P2PPlan, SyncPlan,
ParamPlan): see cost/memo.py. Layer and stage times: cost/layers.py; lower
bounds of the step for the search: cost/floors.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import NamedTuple

from autopar.cost import calibration as cal
from autopar.cost.comm import collective_time
from autopar.cost.compute import LayerPlan
from autopar.cost.flops import model_flops_per_token
from autopar.cost.kernels import memory_time
from autopar.cost.layers import Stages, stage_times
from autopar.cost.memo import Memo, memo_for
from autopar.cost.memory import MemoryBreakdown, memory_breakdown
from autopar.cost.pipeline import P2PTime, p2p_time, schedule_time_of
from autopar.cost.shape import Dims
from autopar.cost.states import ParamPlan, end_params, pipe_kinds
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate
from autopar.spec.stack import NEUTRAL, StackProfile
from autopar.spec.topology import Group, RankGrid


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBreakdown:
    """Seconds per step on the critical path."""

    compute: float  # GEMMs, attention, memory-bound ops, recomputation
    tp_comm: float  # exposed tensor-parallel collectives
    cp_comm: float  # exposed context-parallel K/V (or Mamba all-to-all) exchange
    ep_comm: float  # exposed expert-parallel all-to-all
    pp_comm: float  # exposed pipeline point-to-point transfers
    dp_comm: float  # exposed gradient / parameter sync
    bubble: float  # pipeline fill and drain
    optimizer: float  # the optimizer step
    overlap: float  # compute slowed by the communication it hides

    @property
    def total(self) -> float:
        return (
            self.compute
            + self.tp_comm
            + self.cp_comm
            + self.ep_comm
            + self.pp_comm
            + self.dp_comm
            + self.bubble
            + self.optimizer
            + self.overlap
        )

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_TIME_FIELDS = tuple(f.name for f in fields(TimeBreakdown))


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """Predicted time, throughput and memory of one plan."""

    plan: Plan  # the plan estimated
    time: TimeBreakdown  # where a step's time goes
    memory: MemoryBreakdown  # where the worst GPU's memory goes
    memory_capacity_bytes: float  # what the GPU has
    step_time_s: float  # seconds per optimizer step
    tokens_per_s: float  # whole job
    tokens_per_s_per_gpu: float  # per GPU
    model_tflops_per_gpu: float  # PaLM-convention model FLOP/s per GPU, in TFLOP/s
    mfu: float  # model FLOPs utilization against the dense peak of the job's GEMMs (HardwareProfile.mfu_peak)

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.memory_capacity_bytes

    @property
    def memory_bytes(self) -> float:
        """Peak memory on the worst GPU."""
        return self.memory.total


def estimate(
    model: ModelSpec,
    hw: HardwareProfile,
    job: Job,
    plan: Plan,
    *,
    memo: Memo | None = None,
    stack: StackProfile = NEUTRAL,
) -> Estimate:
    """Time and memory of `plan` as `stack` runs it. `memo` (made for this model, hardware, job and
    stack) shares block costs across plans."""
    validate(plan, model, job, stack=stack)
    memo = memo_for(memo, model, hw, job, stack)
    return timed_estimate(memo, plan, memory_breakdown(model, job, plan, memo=memo))


class P2PPlan(NamedTuple):
    """What pipeline send/recv reads of a plan."""

    tp: int
    cp: int
    dp: int
    pp: int
    vpp: int
    mbs: int


class SyncPlan(NamedTuple):
    """What the data-parallel sync and the optimizer step read of a plan."""

    tp: int
    cp: int
    dp: int
    pp: int
    vpp: int
    ep: int
    etp: int
    zero: int

    @classmethod
    def of(cls, p: Plan) -> SyncPlan:
        return cls(tp=p.tp, cp=p.cp, dp=p.dp, pp=p.pp, vpp=p.vpp, ep=p.ep, etp=p.etp, zero=p.zero)

    def params(self) -> ParamPlan:
        return ParamPlan(tp=self.tp, ep=self.ep, etp=self.etp, pp=self.pp, vpp=self.vpp)

    def grid(self) -> GridPlan:
        return GridPlan(tp=self.tp, cp=self.cp, dp=self.dp, pp=self.pp, vpp=self.vpp, ep=self.ep, etp=self.etp)


class GridPlan(NamedTuple):
    """What the sync's groups and parameter counts read of a plan: a SyncPlan less its ZeRO stage,
    so that a layout's ZeRO stages share them."""

    tp: int
    cp: int
    dp: int
    pp: int
    vpp: int
    ep: int
    etp: int


SyncLayout = tuple[tuple[float, Group], tuple[float, Group], int]


def _sync_layout(memo: Memo, key: GridPlan) -> SyncLayout:
    """((dense parameters, the dp x cp group), (expert parameters, the expert-DP group), layers) of the
    rank with the most parameters and of the stage with the most layers."""
    dense, expert = max(memo.get(end_params, ParamPlan(tp=key.tp, ep=key.ep, etp=key.etp, pp=key.pp, vpp=key.vpp)), key=sum)
    layers = memo.get(_most_layers, (key.pp, key.vpp))
    grid = RankGrid(gpus_per_node=memo.profile.gpus_per_node, tp=key.tp, cp=key.cp, dp=key.dp, pp=key.pp, ep=key.ep, etp=key.etp)
    return (dense, grid.group("dpcp")), (expert, grid.group("edp")), layers


def _most_layers(memo: Memo, key: tuple[int, int]) -> int:
    """The layers of the stage with the most, for key (pp, vpp)."""
    return max(sum(r.values()) for r in memo.get(pipe_kinds, key))


def _collective(memo: Memo, key: tuple[str, float, Group]) -> float:
    """collective_time for key (kind, bytes, group): the DP sync's few distinct collectives (178 for the
    24,156 plans of deepseek-v3 on 1,024 GPUs, out of 18,962 calls), priced once each."""
    return collective_time(memo.profile, *key)


def _p2p(memo: Memo, key: P2PPlan) -> P2PTime:
    """Pipeline send/recv: one micro-batch's activations, split by tp (Megatron's scatter/gather)."""
    grid = RankGrid(gpus_per_node=memo.profile.gpus_per_node, tp=key.tp, cp=key.cp, dp=key.dp, pp=key.pp)
    nbytes = cal.ACT_BYTES * key.mbs * memo.job.seq_len / key.cp * memo.model.hidden_size / key.tp
    return p2p_time(memo.profile, nbytes=nbytes, pp=key.pp, vpp=key.vpp, pair=grid.neighbours("pp"))


def _sync(memo: Memo, key: SyncPlan) -> tuple[float, float, float]:
    """(reduce, gather) seconds of the data-parallel sync, and the optimizer step's."""
    layout = memo.get(_sync_layout, key.grid())
    reduce, gather = _dp_collectives(memo, key, layout)
    return reduce, gather, _optimizer(memo, key, layout)


def _optimizer(memo: Memo, key: SyncPlan, layout: SyncLayout) -> float:
    """The optimizer step on the rank with the most parameters, over its sharded state (`layout`: _sync_layout's)."""
    (dense, dense_group), (expert, expert_group), _ = layout
    dense_shards, expert_shards = (1, 1) if key.zero == 0 else (dense_group.size, expert_group.size)
    return memory_time(memo.profile, cal.OPTIMIZER_STEP_BYTES_PER_PARAM * (dense / dense_shards + expert / expert_shards))


def _model_flops(memo: Memo, _: None) -> float:
    return model_flops_per_token(memo.model, memo.job.seq_len)


def step_parts(memo: Memo, plan: Plan) -> tuple[float, ...]:
    """TimeBreakdown's fields, in order (their sum is the step time)."""
    stages = memo.get(stage_times, (LayerPlan.of(plan), plan.mbs, plan.pp, plan.vpp))
    p2p = memo.get(_p2p, P2PPlan(tp=plan.tp, cp=plan.cp, dp=plan.dp, pp=plan.pp, vpp=plan.vpp, mbs=plan.mbs))
    return _assemble(memo, plan, stages, p2p, memo.get(_sync, SyncPlan.of(plan)))


def variant_step_seconds(memo: Memo, skeleton: Plan, variants: list[tuple[str, int]]) -> list[float]:
    """Step seconds of `skeleton` under each (recompute, zero): sum(step_parts(...)) of each, with the
    keys the variants share built once (the search's hot path)."""
    p, get_by = skeleton, memo.get_by
    p2p = memo.get(_p2p, P2PPlan(tp=p.tp, cp=p.cp, dp=p.dp, pp=p.pp, vpp=p.vpp, mbs=p.mbs))
    sp = p.sp and p.tp > 1
    out = []
    for recompute, zero in variants:
        modules = p.recompute_modules if recompute == "selective" else ()
        # the keys as plain tuples of LayerPlan's and SyncPlan's fields, in order (Memo.get_by)
        lp = ((p.tp, p.cp, sp, recompute, modules), p.cp_comm, p.ep, p.etp, p.pp > 1)
        stages = get_by(stage_times, (lp, p.mbs, p.pp, p.vpp), _stage_key)
        sync = get_by(_sync, (p.tp, p.cp, p.dp, p.pp, p.vpp, p.ep, p.etp, zero), SyncPlan._make)
        out.append(sum(_assemble(memo, p, stages, p2p, sync, zero=zero)))
    return out


def _stage_key(values: tuple) -> tuple[LayerPlan, int, int, int]:
    """stage_times's key from its plain tuple: (LayerPlan's fields, Dims's first, then mbs, pp, vpp)."""
    (dims, *rest), *tail = values
    return (LayerPlan(Dims(*dims), *rest), *tail)


def _assemble(
    memo: Memo, plan: Plan, stages: Stages, p2p: P2PTime, sync: tuple[float, float, float], *, zero: int | None = None
) -> tuple[float, ...]:
    """TimeBreakdown's fields from the step's cached parts (`zero` overrides plan.zero)."""
    reduce, gather, optimizer = sync
    m = memo.job.global_batch // (plan.dp * plan.mbs)
    sched = schedule_time_of(stages.worst_s, stages.total_s, stages=plan.pp, microbatches=m, vpp=plan.vpp, p2p_s=p2p.per_microbatch_s)
    w = stages
    # the backward window holds the recomputed forward too: a block's backward collectives run
    # behind its recompute and its backward alike
    dp_comm, dp_hidden = _dp_overlap(
        (reduce, gather),
        plan.zero if zero is None else zero,
        m,
        fwd_s=w.fwd,
        bwd_s=w.bwd + w.recompute,
        overlap=memo.stack.dp_overlap,
        gather_overlap=memo.stack.gather_overlap,
    )
    return (
        m * (w.fwd + w.bwd + w.recompute + w.loss_s),
        m * w.tp_exposed,
        m * w.cp_exposed,
        m * w.ep_exposed,
        m * p2p.per_microbatch_s + p2p.fill_s,
        dp_comm,
        sched.bubble_s,
        optimizer,
        m * w.overlap_penalty + (memo.profile.compute_slowdown - 1) * dp_hidden,
    )


def step_seconds(memo: Memo, plan: Plan) -> TimeBreakdown:
    """Where one step's time goes."""
    return TimeBreakdown(**dict(zip(_TIME_FIELDS, step_parts(memo, plan), strict=True)))


def timed_estimate(memo: Memo, plan: Plan, memory: MemoryBreakdown) -> Estimate:
    """The time half of estimate(), for a plan whose memory is already known."""
    hw, job = memo.profile, memo.job
    time = step_seconds(memo, plan)
    step = time.total
    tokens = job.tokens_per_step / step
    flops = tokens * memo.get(_model_flops, None) / job.gpus
    return Estimate(
        plan=plan,
        time=time,
        memory=memory,
        memory_capacity_bytes=hw.memory_bytes,
        step_time_s=step,
        tokens_per_s=tokens,
        tokens_per_s_per_gpu=tokens / job.gpus,
        model_tflops_per_gpu=flops / 1e12,
        mfu=flops / hw.mfu_peak(job.dtype),
    )


def _dp_collectives(memo: Memo, key: SyncPlan, layout: SyncLayout) -> tuple[float, float]:
    """Seconds of the (reduce, gather) collectives of gradient and parameter sync.

    Dense weights sync over the DP x CP group, routed-expert weights over the
    expert-DP group (placements from the rank grid). ZeRO 0: all-reduce fp32
    grads, no gather. ZeRO 1/2: reduce-scatter fp32 grads and all-gather bf16
    weights, once per step. ZeRO 3 (FSDP): per micro-batch, reduce-scatter
    grads, and all-gather weights twice (forward and backward).

    The stack sets the wire bytes (gradients in fp32 or bf16; weights in its FSDP
    param dtype, fp32 under Composer's DEFAULT; FSDP2 + torchao float8 gathers FP8
    weights) and the granularity: FSDP gathers and reduces one
    transformer block at a time, bucketed stacks one bucket at a time. Each
    collective pays its latency, which grows with the ring (comm._beyond_fits), so
    at thousands of GPUs many small collectives cost more than their bytes.
    """
    stack, get = memo.stack, memo.get
    fp8 = memo.job.dtype == "fp8"
    dense, expert, layers = layout
    reduce = gather = 0.0
    for params, group in (dense, expert):
        if group.size == 1 or params == 0:
            continue
        grads = stack.grad_bytes(memo.job.dtype) * params
        weights = (1 if fp8 and stack.fp8_gather else stack.gather_bytes) * params  # FP8 param all-gather
        k = _collectives_per_pass(stack, params, layers)
        if key.zero == 0:
            reduce += k * get(_collective, ("all_reduce", grads / k, group))
            continue
        reduce += k * get(_collective, ("reduce_scatter", grads / k, group))
        gathers = 2 if key.zero == 3 and (key.pp == 1 or stack.pp_reshard) else 1  # kept gathered under PP: one
        gather += gathers * k * get(_collective, ("all_gather", weights / k, group))
    return reduce, gather


def _collectives_per_pass(stack: StackProfile, params: float, layers: int) -> int:
    """How many collectives carry one pass over `params`: one per block (FSDP) or per bucket."""
    if stack.dp_granularity == "layer":
        return max(1, layers)
    return max(1, math.ceil(params / stack.dp_bucket_params)) if stack.dp_bucket_params else 1


def _dp_overlap(
    times: tuple[float, float],
    zero: int,
    microbatches: int,
    *,
    fwd_s: float,
    bwd_s: float,
    overlap: float = cal.DP_OVERLAP_FRACTION,
    gather_overlap: float | None = None,
) -> tuple[float, float]:
    """(exposed, hidden) seconds of DP sync given one micro-batch's forward/backward on the worst stage
    (`bwd_s` with its recomputed forward: activation recomputation runs inside the backward pass).

    ZeRO 0/1: the reduce hides behind the last backward, the gather behind the
    first forward (Megatron --overlap-grad-reduce/--overlap-param-gather).
    ZeRO 2: a sharded gradient cannot accumulate a full micro-batch's gradient,
    so every micro-batch reduce-scatters behind its own backward (DeepSpeed
    ZeRO-2, FSDP SHARD_GRAD_OP); the gather stays once per step.
    ZeRO 3 (FSDP): every micro-batch gathers the weights behind its forward
    (prefetching the next layer), and gathers them again and reduce-scatters
    the gradients behind its backward. Each stage moves at least what the one
    before it moves, behind no more compute, so a higher stage is never faster:
    the search times only the lowest stage that fits.
    """
    reduce, gather = times
    ov = overlap
    gv = overlap if gather_overlap is None else gather_overlap  # a gather waited on (DeepSpeed 0.5) hides nothing
    if zero == 3:
        gather_one = gather / 2  # _dp_collectives counts both gathers
        per_mb = max(0.0, gather_one - gv * fwd_s) + max(0.0, gather_one + reduce - ov * bwd_s)
        if gv != ov:  # the backward window hides the re-gather up to its own share, then the reduce
            gather_hidden = min(gather_one, gv * bwd_s)
            reduce_hidden = min(reduce, max(0.0, ov * bwd_s - gather_hidden))
            per_mb = max(0.0, gather_one - gv * fwd_s) + gather_one - gather_hidden + reduce - reduce_hidden
        exposed = microbatches * per_mb
        return exposed, microbatches * (reduce + gather) - exposed
    reduces = microbatches if zero == 2 else 1
    exposed = reduces * max(0.0, reduce - ov * bwd_s) + max(0.0, gather - gv * fwd_s)
    return exposed, reduces * reduce + gather - exposed
