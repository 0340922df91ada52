"""What every sub-layer's time is built from: BlockTime, its TP collectives, its norm and residual work.

cost/compute.py (attention, MLP, Mamba, the layer) and cost/experts.py (the MoE
sub-layer) assemble their times from these pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.cost import calibration as cal
from autopar.cost.comm import collective_time
from autopar.cost.kernels import elementwise_time
from autopar.cost.shape import Dims, Shape
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.topology import RankGrid


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockTime:
    """Seconds one layer spends on one micro-batch (forward + backward) on one rank."""

    fwd: float  # forward compute: GEMMs, attention, memory-bound ops
    bwd: float  # backward compute
    recompute: float  # extra forward work of activation recomputation
    tp_exposed: float  # TP collectives left on the critical path
    cp_exposed: float  # CP exchange not hidden behind attention
    ep_exposed: float  # MoE all-to-all dispatch and combine
    overlap_penalty: float  # compute slowed down by the communication it hides

    @property
    def compute(self) -> float:
        return self.fwd + self.bwd + self.recompute

    @property
    def total(self) -> float:
        return self.compute + self.tp_exposed + self.cp_exposed + self.ep_exposed + self.overlap_penalty

    def scaled(self, n: float) -> BlockTime:
        """n layers of this kind."""
        return BlockTime(
            fwd=n * self.fwd,
            bwd=n * self.bwd,
            recompute=n * self.recompute,
            tp_exposed=n * self.tp_exposed,
            cp_exposed=n * self.cp_exposed,
            ep_exposed=n * self.ep_exposed,
            overlap_penalty=n * self.overlap_penalty,
        )

    def __add__(self, other: BlockTime) -> BlockTime:
        return BlockTime(
            fwd=self.fwd + other.fwd,
            bwd=self.bwd + other.bwd,
            recompute=self.recompute + other.recompute,
            tp_exposed=self.tp_exposed + other.tp_exposed,
            cp_exposed=self.cp_exposed + other.cp_exposed,
            ep_exposed=self.ep_exposed + other.ep_exposed,
            overlap_penalty=self.overlap_penalty + other.overlap_penalty,
        )


def outside_tokens(plan: Dims, tokens: float) -> float:
    """Tokens the norm/residual work runs on: split by tp under SP, replicated otherwise."""
    return tokens / plan.tp if plan.sp else tokens


def tp_collectives(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, tokens: float) -> tuple[float, float]:
    """(exposed, hidden) seconds of one sub-layer's TP collectives.

    One collective forward (all-reduce, or all-gather + reduce-scatter under SP:
    Korthikanti et al. 2022 sec. 4.2.2, same bytes), one backward, one more when
    the forward is recomputed. Under SP a share is hidden by TP comm overlap. On a
    stack whose FP8 linears gather FP8 (StackProfile.tp_fp8_gather) every all-gather
    carries 1 B an element, the reduce-scatters stay bf16.
    """
    if plan.tp == 1:
        return 0.0, 0.0
    group = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp).group("tp")
    nbytes = cal.ACT_BYTES * tokens * model.hidden_size
    if plan.sp:
        fp8 = shape.dtype == "fp8" and shape.stack.tp_fp8_gather
        gathered = tokens * model.hidden_size * 1.0 if fp8 else nbytes  # FP8: 1 B an element
        one = collective_time(hw, "all_gather", gathered, group) + collective_time(hw, "reduce_scatter", nbytes, group)
    else:
        one = collective_time(hw, "all_reduce", nbytes, group)
    total = (3 if plan.recompute == "full" else 2) * one
    hidden = shape.stack.tp_overlap * total if plan.sp else 0.0
    return total - hidden, hidden


def assemble(
    hw: HardwareProfile,
    plan: Dims,
    *,
    fwd: float,
    bwd: float,
    selective: float,
    tp: tuple[float, float],
    cp: tuple[float, float] = (0.0, 0.0),
    ep: float = 0.0,
    op_sac: float | None = None,
    modules: dict[str, float] | None = None,
) -> BlockTime:
    """`selective` is what Megatron's selective recompute redoes; `op_sac` what a per-op SAC policy redoes;
    `modules` the forward seconds of each module a module-level recompute (plan.modules) redoes."""
    if plan.recompute == "selective" and op_sac is not None:
        selective = op_sac
    if plan.recompute == "selective" and plan.modules:
        selective = sum((modules or {}).get(m, 0.0) for m in plan.modules)
    recompute = {"none": 0.0, "selective": selective, "full": fwd}[plan.recompute]
    hidden = tp[1] + cp[1]
    return BlockTime(
        fwd=fwd,
        bwd=bwd,
        recompute=recompute,
        tp_exposed=tp[0],
        cp_exposed=cp[0],
        ep_exposed=ep,
        overlap_penalty=(hw.compute_slowdown - 1) * hidden,
    )


def norm_time(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, tokens: float) -> float:
    """One norm's forward (read h, write h): what recomputing a "layernorm" module redoes per sub-layer."""
    return elementwise_time(hw, shape, cal.ACT_BYTES * 2 * model.hidden_size * outside_tokens(plan, tokens))


def norm_residual_bytes(model: ModelSpec, plan: Dims, tokens: float) -> float:
    """One norm (read h, write h) and one residual add (read 2h, write h) per sub-layer."""
    return cal.ACT_BYTES * cal.ELEMS_OUTSIDE_TP_PER_PART * model.hidden_size * outside_tokens(plan, tokens)


def act_elems(model: ModelSpec, width: float) -> float:
    """Elements the MLP activation reads and writes per token: SwiGLU 2f in, f out; else f in, f out."""
    return (3 if model.ffn_activation == "swiglu" else 2) * width
