"""Enumerate every plan the frameworks accept, prune by memory, rank by tokens/s.

The space: all factorizations gpus = dp * tp * pp * cp, with vpp, micro-batch
size, recompute, ZeRO stage and sequence parallelism, under Megatron-LM's rules
(TP inside a node, heads and KV heads divisible by tp, layers divisible by
pp * vpp when interleaving, micro-batches a multiple of pp when interleaving,
global batch divisible by dp * mbs, seq_len divisible by 2 * cp). Pipeline
stages may hold uneven layer counts (Megatron's uneven first/last stage flags);
the cost model charges the imbalance.

Memory is checked before time, and block costs are shared across plans, so the
whole space of a 405B model on 16,384 GPUs takes well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from autopar.cost.memo import Memo
from autopar.cost.memory import memory_breakdown
from autopar.cost.step import Estimate, timed_estimate
from autopar.errors import InfeasibleError
from autopar.hardware import HardwareProfile
from autopar.job import Job
from autopar.model import ModelSpec
from autopar.plan import RECOMPUTE, ZERO_STAGES, Plan

MICRO_BATCH_SIZES = (1, 2, 4, 8, 16)
TIE_BAND = 0.005  # plans within 0.5% of each other rank as equal; the simpler one first


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """Ranked feasible plans and what the search looked at."""

    ranked: tuple[Estimate, ...]  # feasible plans, best first
    considered: int  # plans enumerated
    feasible: int  # plans that fit in memory


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _powers_of_two(limit: int) -> list[int]:
    return [2**i for i in range(int(math.log2(limit)) + 1)] if limit >= 1 else []


def enumerate_plans(model: ModelSpec, job: Job, fixed: Mapping[str, object] | None = None) -> Iterator[Plan]:
    """Every valid plan; `fixed` pins any Plan field to one value."""
    fixed = dict(fixed or {})

    def choices(name: str, values: list) -> list:
        return [fixed[name]] if name in fixed else values

    gpn = min(job.gpus_per_node, job.gpus)
    for tp in choices("tp", [t for t in _powers_of_two(gpn) if model.num_kv_heads % t == 0 and model.ffn_hidden_size % t == 0]):
        for cp in choices("cp", [c for c in _powers_of_two(job.gpus // tp) if job.seq_len % (2 * c) == 0 or c == 1]):
            if job.gpus % (tp * cp):
                continue
            rest = job.gpus // (tp * cp)
            for pp in choices("pp", [p for p in _divisors(rest) if p <= model.layers]):
                if rest % pp:
                    continue
                dp = rest // pp
                if ("dp" in fixed and fixed["dp"] != dp) or job.global_batch % dp:
                    continue
                for mbs in choices("mbs", [b for b in MICRO_BATCH_SIZES if job.global_batch % (dp * b) == 0]):
                    m = job.global_batch // (dp * mbs)
                    vpps = [1]
                    if pp > 1 and m % pp == 0:
                        vpps += [v for v in _divisors(model.layers // pp) if v > 1 and model.layers % (pp * v) == 0]
                    for vpp in choices("vpp", vpps):
                        for sp in choices("sp", [True, False] if tp > 1 else [False]):
                            for recompute in choices("recompute", list(RECOMPUTE)):
                                for zero in choices("zero", list(ZERO_STAGES)):
                                    yield Plan(dp=dp, tp=tp, pp=pp, cp=cp, vpp=vpp, mbs=mbs, recompute=recompute,
                                               zero=zero, sp=sp)


def _simplicity(plan: Plan) -> tuple[int, ...]:
    """Smaller is simpler: fewer stages, no interleaving, no CP, less TP, default ZeRO-1, less recompute."""
    return (plan.pp, plan.vpp, plan.cp, plan.tp, plan.zero != 1, RECOMPUTE.index(plan.recompute), plan.mbs)


def search(
    model: ModelSpec, hw: HardwareProfile, job: Job, *, fixed: Mapping[str, object] | None = None
) -> SearchResult:
    """All feasible plans ranked by tokens/s. Raises InfeasibleError when none fits, saying why."""
    cache: Memo = {}
    considered = 0
    smallest: tuple[float, Plan] | None = None
    ranked = []
    for plan in enumerate_plans(model, job, fixed):
        considered += 1
        memory = memory_breakdown(model, job, plan, cache=cache)
        if memory.total > hw.memory_bytes:
            if smallest is None or memory.total < smallest[0]:
                smallest = (memory.total, plan)
            continue
        ranked.append(timed_estimate(model, hw, job, plan, memory, cache))
    if not ranked:
        raise InfeasibleError(_why_none(model, hw, job, considered, smallest))
    ranked.sort(key=lambda e: (-math.floor(math.log(e.tokens_per_s) / math.log1p(TIE_BAND)), _simplicity(e.plan)))
    return SearchResult(ranked=tuple(ranked), considered=considered, feasible=len(ranked))


def _why_none(model: ModelSpec, hw: HardwareProfile, job: Job, considered: int, smallest: tuple[float, Plan] | None) -> str:
    if smallest is None:
        return (
            f"no valid plan for {model.name} on {job.gpus} GPUs with global batch {job.global_batch}: "
            "check that the batch is divisible by the data-parallel degrees the GPU count allows"
        )
    need, plan = smallest
    p = plan
    return (
        f"no plan fits: the smallest of {considered} plans needs {need / 2**30:.1f} GiB per GPU "
        f"(dp{p.dp} tp{p.tp} pp{p.pp} cp{p.cp} mbs{p.mbs} recompute={p.recompute} zero={p.zero}) "
        f"but {hw.gpu_name} has {hw.memory_bytes / 2**30:.1f} GiB; use more GPUs or a shorter --seq-len"
    )
