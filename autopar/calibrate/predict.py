"""What the models predict for one calibration run, rank by rank. Pure, no torch.

- parameter, gradient and optimizer bytes: memory.rank_params (the layers and
  embedding/output a pipeline rank holds, matrices split by tp, norms whole)
  times the stack's bytes per parameter (habits.FSDP2_STATE), sharded over dp
  (FSDP2 shards parameters, gradients and optimizer state at ZeRO-2 and -3);
- activation bytes per block and micro-batch: the fused formula of memory.py
  and the stack's own (habits.EAGER_TORCH);
- micro-batches in flight on the first stage: memory.in_flight_microbatches;
- collective bytes per step: traffic.step_traffic;
- step time: cost.step.estimate on a hardware profile, when one is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.cost import habits
from autopar.cost.pipeline import in_flight_microbatches
from autopar.cost.states import rank_params
from autopar.cost.traffic import step_traffic
from autopar.spec.job import Job
from autopar.spec.layout import rank_kinds
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

STATE = habits.FSDP2_STATE
SAVES = habits.EAGER_TORCH


@dataclass(frozen=True, slots=True, kw_only=True)
class RankPrediction:
    """The models' numbers for one pipeline rank (every dp/tp rank of a stage alike)."""

    pp_rank: int  # pipeline rank
    param_bytes: float  # local parameter storage
    grad_bytes: float  # local gradients
    optimizer_bytes: float  # AdamW moments
    collective_bytes: dict[str, float]  # per step, by kind


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """Everything the comparison holds the run against."""

    ranks: tuple[RankPrediction, ...]  # by pipeline rank
    block_activation_fused: float  # memory.py's formula (fused kernels)
    block_activation_stack: float  # the stack's own accounting (eager torch)
    stack_saves: str  # its name
    in_flight: float  # micro-batches the first stage holds at the peak
    microbatches: int  # per step
    step_time_s: float | None  # cost model on the given hardware profile, or None
    hardware: str  # the profile used for the step time, or why none


def microbatches(plan: Plan, job: Job) -> int:
    return plan.microbatches(job)


def predict(model: ModelSpec, plan: Plan, job: Job, *, step_time_s: float | None = None, hardware: str = "none") -> Prediction:
    m = plan.microbatches(job)
    kinds = rank_kinds(model.layer_kinds(), plan.pp, plan.vpp)
    ranks = []
    for r in range(plan.pp):
        dense, _ = rank_params(model, plan, kinds[r], first=r == 0, last=r == plan.pp - 1)
        per_rank = dense / (plan.dp * plan.cp)  # FSDP shards over dp x cp
        ranks.append(
            RankPrediction(
                pp_rank=r,
                param_bytes=per_rank * STATE.weight,
                grad_bytes=per_rank * STATE.grad,
                optimizer_bytes=per_rank * STATE.optimizer,
                collective_bytes=step_traffic(model, plan, seq_len=job.seq_len, microbatches=m, pp_rank=r),
            )
        )
    tokens = plan.mbs * job.seq_len / plan.cp
    return Prediction(
        ranks=tuple(ranks),
        block_activation_fused=habits.dense_block_activation_bytes(model, habits.FUSED, tokens=tokens, tp=plan.tp, sp=plan.sp),
        block_activation_stack=habits.dense_block_activation_bytes(model, SAVES, tokens=tokens, tp=plan.tp, sp=plan.sp, cp=plan.cp),
        stack_saves=SAVES.name,
        in_flight=in_flight_microbatches(pp=plan.pp, vpp=plan.vpp, microbatches=m),
        microbatches=m,
        step_time_s=step_time_s,
        hardware=hardware,
    )
