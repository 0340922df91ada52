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

from dataclasses import dataclass, fields

from autopar.cost import calibration as cal
from autopar.cost.comm import Group, collective_time, group_of
from autopar.cost.compute import BlockTime, block_time, loss_time, memory_time
from autopar.cost.flops import model_flops_per_token
from autopar.cost.memo import Memo, memo
from autopar.cost.memory import MemoryBreakdown, memory_breakdown, stage_params
from autopar.hardware import HardwareProfile
from autopar.job import Job
from autopar.model import ModelSpec
from autopar.plan import Plan, validate


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBreakdown:
    """Seconds per step on the critical path."""

    compute: float  # GEMMs, attention, memory-bound ops, recomputation
    tp_comm: float  # exposed tensor-parallel collectives
    cp_comm: float  # exposed context-parallel ring exchange
    pp_comm: float  # exposed pipeline point-to-point transfers
    dp_comm: float  # exposed gradient / parameter sync
    bubble: float  # pipeline fill and drain
    optimizer: float  # the optimizer step
    overlap: float  # compute slowed by the communication it hides

    @property
    def total(self) -> float:
        return (self.compute + self.tp_comm + self.cp_comm + self.pp_comm + self.dp_comm + self.bubble + self.optimizer
                + self.overlap)

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


def _block_and_loss(model: ModelSpec, hw: HardwareProfile, job: Job, plan: Plan) -> tuple[BlockTime, float]:
    sp = plan.sp and plan.tp > 1
    block = block_time(model, hw, dtype=job.dtype, seq_len=job.seq_len, mbs=plan.mbs, tp=plan.tp, cp=plan.cp, sp=sp,
                       recompute=plan.recompute)
    loss = loss_time(model, hw, dtype=job.dtype, seq_len=job.seq_len, mbs=plan.mbs, tp=plan.tp, cp=plan.cp)
    return block, loss


def stage_layer_counts(layers: int, pp: int) -> list[int]:
    """Blocks per stage: as even as possible, the last stage (which holds the loss) takes fewer."""
    q, r = divmod(layers, pp)
    return [q + 1] * r + [q] * (pp - r)


def timed_estimate(model: ModelSpec, hw: HardwareProfile, job: Job, plan: Plan, memory: MemoryBreakdown, cache: Memo) -> Estimate:
    """The time half of estimate(), for a plan whose memory is already known."""
    block, loss = memo(cache, ("block", plan.tp, plan.cp, plan.mbs, plan.sp and plan.tp > 1, plan.recompute),
                       lambda: _block_and_loss(model, hw, job, plan))
    m, p, v = plan.microbatches(job), plan.pp, plan.vpp
    p2p_mb, fill = memo(cache, ("p2p", plan.tp, plan.cp, plan.dp, plan.pp, plan.vpp, plan.mbs),
                        lambda: _p2p_times(model, hw, job, plan))
    counts = stage_layer_counts(model.layers, p)
    stage = [n * block.total + p2p_mb for n in counts]
    stage[-1] += loss
    t_max = max(stage)
    worst = counts[stage.index(t_max)]
    bubble = (sum(stage) - t_max) / v

    dp_times = memo(cache, ("dp", plan.tp, plan.cp, plan.dp, plan.pp, plan.zero), lambda: _dp_collectives(model, hw, plan))
    dp_comm, dp_hidden = _dp_overlap(dp_times, plan, m, fwd_s=worst * block.fwd, bwd_s=worst * block.bwd)
    shards = plan.dp * plan.cp if plan.zero >= 1 else 1
    params = max(memo(cache, ("params", plan.tp, plan.pp), lambda: stage_params(model, plan)))
    optimizer = memory_time(hw, cal.OPTIMIZER_STEP_BYTES_PER_PARAM * params / shards)

    is_loss_stage = stage.index(t_max) == p - 1
    time = TimeBreakdown(
        compute=m * (worst * block.compute + (loss if is_loss_stage else 0.0)),
        tp_comm=m * worst * block.tp_exposed,
        cp_comm=m * worst * block.cp_exposed,
        pp_comm=m * p2p_mb + fill,
        dp_comm=dp_comm,
        bubble=bubble,
        optimizer=optimizer,
        overlap=m * worst * block.overlap_penalty + (hw.compute_slowdown - 1) * dp_hidden,
    )
    step = time.total
    tokens = job.tokens_per_step / step
    flops = tokens * model_flops_per_token(model, job.seq_len) / job.gpus
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


def _dp_collectives(model: ModelSpec, hw: HardwareProfile, plan: Plan) -> tuple[float, float]:
    """Seconds of the (reduce, gather) collectives of gradient and parameter sync over DP x CP.

    ZeRO 0: all-reduce fp32 grads, no gather. ZeRO 1/2: reduce-scatter fp32 grads
    and all-gather bf16 weights, once per step. ZeRO 3 (FSDP): per micro-batch,
    reduce-scatter grads, and all-gather weights twice (forward and backward).
    """
    n = plan.dp * plan.cp
    if n == 1:
        return 0.0, 0.0
    group = group_of(size=n, stride=plan.tp, gpus_per_node=hw.gpus_per_node)
    params = max(stage_params(model, plan))
    grads, weights = cal.GRAD_BYTES * params, cal.WEIGHT_BYTES * params
    if plan.zero == 0:
        return collective_time(hw, "all_reduce", grads, group), 0.0
    gather = collective_time(hw, "all_gather", weights, group)
    return collective_time(hw, "reduce_scatter", grads, group), 2 * gather if plan.zero == 3 else gather


def _dp_overlap(times: tuple[float, float], plan: Plan, microbatches: int, *, fwd_s: float, bwd_s: float) -> tuple[float, float]:
    """(exposed, hidden) seconds of DP sync given one micro-batch's forward/backward on the worst stage.

    ZeRO 0-2: the reduce hides behind the last backward, the gather behind the
    first forward (Megatron --overlap-grad-reduce/--overlap-param-gather).
    ZeRO 3: each micro-batch's collectives hide behind its own compute.
    """
    reduce, gather = times
    ov = cal.DP_OVERLAP_FRACTION
    if plan.zero == 3:
        per_mb = reduce + gather
        exposed = microbatches * max(0.0, per_mb - ov * (fwd_s + bwd_s))
        return exposed, microbatches * per_mb - exposed
    exposed = max(0.0, reduce - ov * bwd_s) + max(0.0, gather - ov * fwd_s)
    return exposed, reduce + gather - exposed
