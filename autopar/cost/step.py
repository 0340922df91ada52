"""estimate(model, hw, job, plan) -> Estimate: one training step, explained.

Step time = pipeline (micro-batches through the stages, with the fill/drain
bubble) + exposed pipeline p2p + exposed data-parallel sync + optimizer step.

Pipeline with stage times t_i per micro-batch (forward + backward), m
micro-batches and v virtual stages per rank: m * max(t) + (sum(t) - max(t)) / v.
With equal stages this is (m + (p-1)/v) * t, the 1F1B bubble (p-1)/m and the
interleaved one (p-1)/(v*m) of Narayanan et al. 2021 (sec. 2.2); unequal stages
(extra layers, the loss layer on the last one) stretch it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

from autopar.cost import calibration as cal
from autopar.cost.comm import Group, collective_time, group_of
from autopar.cost.compute import BlockTime, Shape, layer_time, loss_time, memory_time
from autopar.cost.flops import model_flops_per_token
from autopar.cost.layout import rank_kinds
from autopar.cost.memo import Memo, memo
from autopar.cost.memory import MemoryBreakdown, end_rank_params, memory_breakdown
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate


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
        return (self.compute + self.tp_comm + self.cp_comm + self.ep_comm + self.pp_comm + self.dp_comm + self.bubble
                + self.optimizer + self.overlap)

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
    mfu: float  # model FLOPs utilization against the bf16 dense peak

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.memory_capacity_bytes


def estimate(
    model: ModelSpec, hw: HardwareProfile, job: Job, plan: Plan, *, cache: Memo | None = None
) -> Estimate:
    """Time and memory of `plan`. `cache` (any dict) shares block costs across plans."""
    validate(plan, model, job)
    cache = {} if cache is None else cache
    return timed_estimate(model, hw, job, plan, memory_breakdown(model, job, plan, cache=cache), cache)


def _layer_times(model: ModelSpec, hw: HardwareProfile, job: Job, plan: Plan) -> tuple[dict[str, BlockTime], float]:
    shape = Shape(dtype=job.dtype, seq_len=job.seq_len, mbs=plan.mbs)
    layers = {k: layer_time(model, hw, shape, plan, k) for k in set(model.layer_kinds())}
    loss = loss_time(model, hw, dtype=job.dtype, seq_len=job.seq_len, mbs=plan.mbs, tp=plan.tp, cp=plan.cp)
    return layers, loss


@dataclass(frozen=True, slots=True, kw_only=True)
class _StageProfile:
    """Per-micro-batch stage times of one layout, before pipeline p2p."""

    t_max: float  # the slowest stage, seconds
    t_sum: float  # all stages together
    worst: BlockTime  # the slowest stage's layers, summed
    worst_is_last: bool  # it is the last stage (and carries the loss)


def _stage_profile(times: dict[str, BlockTime], loss: float, ranks: tuple[Counter[str], ...]) -> _StageProfile:
    if len(times) == 1:  # one layer kind (dense models): stages differ only in layer count
        ((kind, t),) = times.items()
        totals = [kinds[kind] * t.total for kinds in ranks]
    else:
        per_layer = {k: t.total for k, t in times.items()}
        totals = [sum(n * per_layer[k] for k, n in kinds.items()) for kinds in ranks]
    totals[-1] += loss
    i = totals.index(max(totals))
    parts = [times[k].scaled(n) for k, n in ranks[i].items()]
    worst = parts[0]
    for part in parts[1:]:
        worst = worst + part
    return _StageProfile(t_max=totals[i], t_sum=sum(totals), worst=worst, worst_is_last=i == len(ranks) - 1)


def timed_estimate(model: ModelSpec, hw: HardwareProfile, job: Job, plan: Plan, memory: MemoryBreakdown, cache: Memo) -> Estimate:
    """The time half of estimate(), for a plan whose memory is already known."""
    key = (plan.tp, plan.cp, plan.mbs, plan.sp and plan.tp > 1, plan.recompute, plan.ep, plan.etp, plan.cp_comm)
    times, loss = memo(cache, ("layers", *key), lambda: _layer_times(model, hw, job, plan))
    ranks = memo(cache, ("ranks", plan.pp, plan.vpp), lambda: rank_kinds(model, plan.pp, plan.vpp))
    m, p, v = plan.microbatches(job), plan.pp, plan.vpp
    p2p_mb, fill = memo(cache, ("p2p", plan.tp, plan.cp, plan.dp, plan.pp, plan.vpp, plan.mbs),
                        lambda: _p2p_times(model, hw, job, plan))
    prof = memo(cache, ("stages", *key, plan.pp, plan.vpp), lambda: _stage_profile(times, loss, ranks))
    # p2p adds the same to every stage: the slowest stage stays the slowest
    t_max = prof.t_max + p2p_mb
    bubble = (prof.t_sum + p * p2p_mb - t_max) / v

    dp_times = memo(cache, ("dp", plan.tp, plan.cp, plan.dp, plan.pp, plan.vpp, plan.zero, plan.ep, plan.etp),
                    lambda: _dp_collectives(model, hw, plan, ranks))
    dp_comm, dp_hidden = _dp_overlap(dp_times, plan, m, fwd_s=prof.worst.fwd, bwd_s=prof.worst.bwd)
    params = max(memo(cache, ("params", plan.tp, plan.pp, plan.vpp, plan.ep, plan.etp),
                      lambda: end_rank_params(model, plan, ranks)), key=sum)
    dense_shards, expert_shards = _shards(plan)
    if plan.zero == 0:
        dense_shards = expert_shards = 1
    optimizer = memory_time(hw, cal.OPTIMIZER_STEP_BYTES_PER_PARAM * (params[0] / dense_shards + params[1] / expert_shards))

    w = prof.worst
    time = TimeBreakdown(
        compute=m * (w.compute + (loss if prof.worst_is_last else 0.0)),
        tp_comm=m * w.tp_exposed,
        cp_comm=m * w.cp_exposed,
        ep_comm=m * w.ep_exposed,
        pp_comm=m * p2p_mb + fill,
        dp_comm=dp_comm,
        bubble=bubble,
        optimizer=optimizer,
        overlap=m * w.overlap_penalty + (hw.compute_slowdown - 1) * dp_hidden,
    )
    step = time.total
    tokens = job.tokens_per_step / step
    flops = tokens * memo(cache, ("model_flops",), lambda: model_flops_per_token(model, job.seq_len)) / job.gpus
    return Estimate(
        plan=plan,
        time=time,
        memory=memory,
        memory_capacity_bytes=hw.memory_bytes,
        step_time_s=step,
        tokens_per_s=tokens,
        tokens_per_s_per_gpu=tokens / job.gpus,
        model_tflops_per_gpu=flops / 1e12,
        mfu=flops / hw.peak("bf16"),
    )


def _shards(plan: Plan) -> tuple[int, int]:
    """Ranks sharing (dense, routed-expert) optimizer state: DP x CP, and the expert-DP group."""
    dense = plan.dp * plan.cp
    return dense, max(1, dense * plan.tp // (plan.ep * plan.etp))


def _p2p_times(model: ModelSpec, hw: HardwareProfile, job: Job, plan: Plan) -> tuple[float, float]:
    """(per micro-batch on every stage, fill/drain) seconds of exposed pipeline send/recv.

    A stage boundary carries one micro-batch's activations forward and their
    gradients back, split by tp (Megatron's scatter/gather). Plain 1F1B sends and
    receives blockingly between steps (Megatron's forward_backward_pipelining_
    without_interleaving), so both transfers add to every stage's time. The
    interleaved schedule overlaps them with compute (--overlap-p2p-comm) except
    for their latency, at v boundaries per micro-batch, the overlapped part slows
    the compute by the profile's overlap factor, and the fill/drain path still
    waits for 2(p-1) full transfers.
    """
    if plan.pp == 1:
        return 0.0, 0.0
    stride = plan.tp * plan.cp * plan.dp
    nbytes = cal.ACT_BYTES * plan.mbs * job.seq_len / plan.cp * model.hidden_size / plan.tp
    pair = Group(size=2, per_node=2 if stride < hw.gpus_per_node else 1)
    transfer = collective_time(hw, "send_recv", nbytes, pair)
    if plan.vpp == 1:
        return 2 * transfer, 0.0
    latency = collective_time(hw, "send_recv", 1.0, pair)
    hidden = transfer - latency  # still slows the compute it overlaps
    per_mb = 2 * plan.vpp * (latency + (hw.compute_slowdown - 1) * hidden)
    return per_mb, 2 * (plan.pp - 1) * transfer


def _dp_collectives(model: ModelSpec, hw: HardwareProfile, plan: Plan, ranks: tuple[Counter[str], ...]) -> tuple[float, float]:
    """Seconds of the (reduce, gather) collectives of gradient and parameter sync.

    Dense weights sync over the DP x CP group (stride tp), routed-expert weights
    over the expert-DP group (stride ep * etp). ZeRO 0: all-reduce fp32 grads, no
    gather. ZeRO 1/2: reduce-scatter fp32 grads and all-gather bf16 weights, once
    per step. ZeRO 3 (FSDP): per micro-batch, reduce-scatter grads, and
    all-gather weights twice (forward and backward).
    """
    dense_params, expert_params = max(end_rank_params(model, plan, ranks), key=sum)
    dense_n, expert_n = _shards(plan)
    reduce = gather = 0.0
    for params, n, stride in ((dense_params, dense_n, plan.tp), (expert_params, expert_n, plan.ep * plan.etp)):
        if n == 1 or params == 0:
            continue
        group = group_of(size=n, stride=stride, gpus_per_node=hw.gpus_per_node)
        grads, weights = cal.GRAD_BYTES * params, cal.WEIGHT_BYTES * params
        if plan.zero == 0:
            reduce += collective_time(hw, "all_reduce", grads, group)
            continue
        reduce += collective_time(hw, "reduce_scatter", grads, group)
        gather += (2 if plan.zero == 3 else 1) * collective_time(hw, "all_gather", weights, group)
    return reduce, gather


def _dp_overlap(times: tuple[float, float], plan: Plan, microbatches: int, *, fwd_s: float, bwd_s: float) -> tuple[float, float]:
    """(exposed, hidden) seconds of DP sync given one micro-batch's forward/backward on the worst stage.

    ZeRO 0/1: the reduce hides behind the last backward, the gather behind the
    first forward (Megatron --overlap-grad-reduce/--overlap-param-gather).
    ZeRO 2: a sharded gradient cannot accumulate a full micro-batch's gradient,
    so every micro-batch reduce-scatters behind its own backward (DeepSpeed
    ZeRO-2, FSDP SHARD_GRAD_OP); the gather stays once per step.
    ZeRO 3: each micro-batch's collectives hide behind its own compute.
    """
    reduce, gather = times
    ov = cal.DP_OVERLAP_FRACTION
    if plan.zero == 3:
        per_mb = reduce + gather
        exposed = microbatches * max(0.0, per_mb - ov * (fwd_s + bwd_s))
        return exposed, microbatches * per_mb - exposed
    reduces = microbatches if plan.zero == 2 else 1
    exposed = reduces * max(0.0, reduce - ov * bwd_s) + max(0.0, gather - ov * fwd_s)
    return exposed, reduces * reduce + gather - exposed
