"""Enumerate every plan the frameworks accept, prune by memory, rank by tokens/s.

The space: all factorizations gpus = dp * tp * pp * cp, with vpp, micro-batch
size, recompute, ZeRO stage and sequence parallelism, under Megatron-LM's rules
(TP inside a node, heads and KV heads divisible by tp, at least one layer per
virtual stage when interleaving, micro-batches a multiple of pp when interleaving,
global batch divisible by dp * mbs, seq_len divisible by 2 * cp). Pipeline
stages may hold uneven layer counts (Megatron's uneven first/last stage flags);
the cost model charges the imbalance.

Memory is checked before time, and block costs are shared across plans, so the
whole space of a 405B model on 16,384 GPUs takes well under a second.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import product

from autopar.cost.memo import Memo
from autopar.cost.memory import memory_breakdown, peak_bytes
from autopar.cost.step import Estimate, timed_estimate
from autopar.errors import InfeasibleError
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import RECOMPUTE, ZERO_STAGES, Plan

MICRO_BATCH_SIZES = (1, 2, 4, 8, 16)
TIE_BAND = 0.005  # plans within 0.5% of each other rank as equal; the simpler one first
CP_VARIANT_CANDIDATES = 64  # leading plans on which the all-gather CP variant is tried
# ZeRO-0 is dominated by ZeRO-1 in this model: reduce-scatter plus all-gather move
# 6 B/param against the all-reduce's 8, the optimizer step is sharded, and memory
# is lower. The search skips it unless it is fixed (estimate --zero 0 still works).
SEARCHED_ZERO = tuple(z for z in ZERO_STAGES if z != 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """Ranked feasible plans and what the search looked at."""

    ranked: tuple[Estimate, ...]  # timed plans, best first: per layout and recompute, the lowest ZeRO stage that fits
    considered: int  # plans in the space
    feasible: int  # plans that fit in memory


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _powers_of_two(limit: int) -> list[int]:
    return [2**i for i in range(int(math.log2(limit)) + 1)] if limit >= 1 else []


def _tp_ok(model: ModelSpec, t: int) -> bool:
    if model.num_kv_heads % t or model.ffn_hidden_size % t:
        return False
    m = model.mamba
    return m is None or (m.heads(model.hidden_size) % t == 0 and m.num_groups % t == 0)


def _cp_ok(model: ModelSpec, job: Job, tp: int, c: int) -> bool:
    if c == 1:
        return True
    m = model.mamba
    return job.seq_len % (2 * c) == 0 and (m is None or (m.heads(model.hidden_size) // tp) % c == 0)


def enumerate_plans(model: ModelSpec, job: Job, fixed: Mapping[str, object] | None = None) -> Iterator[Plan]:
    """Every valid plan; `fixed` pins any Plan field to one value."""
    fixed = dict(fixed or {})
    for skeleton in enumerate_skeletons(model, job, fixed):
        for recompute, zero in product(_choices(fixed, "recompute", list(RECOMPUTE)), _choices(fixed, "zero", list(SEARCHED_ZERO))):
            yield _with(skeleton, recompute, zero)


def _with(s: Plan, recompute: str, zero: int) -> Plan:
    """The skeleton with these knobs (a direct constructor: dataclasses.replace is slow in the hot loop)."""
    return Plan(dp=s.dp, tp=s.tp, pp=s.pp, cp=s.cp, vpp=s.vpp, ep=s.ep, etp=s.etp, mbs=s.mbs, recompute=recompute, zero=zero,
                sp=s.sp, cp_comm=s.cp_comm)


def _virtual_stages(layers: int, pp: int) -> list[int]:
    """Interleaving depths worth trying: 2 and 4 (chunks may differ by one layer, as Megatron's
    --pipeline-model-parallel-layout allows), and every even split of the stage's layers."""
    even = _divisors(layers // pp) if layers % pp == 0 else []
    return sorted({v for v in (2, 4, *even) if v > 1 and pp * v <= layers})


def _choices(fixed: Mapping[str, object], name: str, values: list) -> list:
    return [fixed[name]] if name in fixed else values


def enumerate_skeletons(model: ModelSpec, job: Job, fixed: Mapping[str, object]) -> Iterator[Plan]:
    """Every valid layout (degrees, micro-batch, interleaving, SP); recompute and ZeRO stage left at defaults."""

    def choices(name: str, values: list) -> list:
        return _choices(fixed, name, values)

    moe = model.moe
    gpn = min(job.gpus_per_node, job.gpus)
    for tp in choices("tp", [t for t in _powers_of_two(gpn) if _tp_ok(model, t)]):
        for cp in choices("cp", [c for c in _powers_of_two(job.gpus // tp) if _cp_ok(model, job, tp, c)]):
            if job.gpus % (tp * cp):
                continue
            rest = job.gpus // (tp * cp)
            for pp in choices("pp", [p for p in _divisors(rest) if p <= model.layers]):
                dp = rest // pp
                if rest % pp or ("dp" in fixed and fixed["dp"] != dp) or job.global_batch % dp:
                    continue
                eps = [e for e in _divisors(moe.num_experts) if (dp * cp) % e == 0] if moe else [1]
                etps = [1, tp] if moe and tp > 1 and moe.expert_ffn_hidden_size % tp == 0 else [1]
                for mbs in choices("mbs", [b for b in MICRO_BATCH_SIZES if job.global_batch % (dp * b) == 0]):
                    m = job.global_batch // (dp * mbs)
                    vpps = [1]
                    if pp > 1 and m % pp == 0:
                        vpps += _virtual_stages(model.layers, pp)
                    knobs = product(choices("vpp", vpps), choices("sp", [True, False] if tp > 1 else [False]),
                                    choices("ep", eps), choices("etp", etps))
                    for vpp, sp, ep, etp in knobs:
                        yield Plan(dp=dp, tp=tp, pp=pp, cp=cp, vpp=vpp, ep=ep, etp=etp, mbs=mbs, sp=sp,
                                   cp_comm=str(fixed.get("cp_comm", "ring")))


def _simplicity(plan: Plan) -> tuple[int, ...]:
    """Smaller is simpler: fewer stages, no interleaving, no CP, less TP, default ZeRO-1, less recompute."""
    return (plan.pp, plan.vpp, plan.cp, plan.tp, plan.zero != 1, RECOMPUTE.index(plan.recompute), plan.mbs)


def search(
    model: ModelSpec, hw: HardwareProfile, job: Job, *, fixed: Mapping[str, object] | None = None
) -> SearchResult:
    """All feasible plans ranked by tokens/s. Raises InfeasibleError when none fits, saying why."""
    with _no_cyclic_gc():
        return _search(model, hw, job, dict(fixed or {}))


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The search allocates ~10^5 short-lived, acyclic objects; the cyclic collector's passes over
    them cost about a fifth of the time and free nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _search(model: ModelSpec, hw: HardwareProfile, job: Job, fixed: dict[str, object]) -> SearchResult:
    cache: Memo = {}
    considered = feasible = 0
    smallest: tuple[float, Plan] | None = None
    ranked = []
    recomputes = _choices(fixed, "recompute", list(RECOMPUTE))
    zeros = sorted(int(str(z)) for z in _choices(fixed, "zero", list(SEARCHED_ZERO)))
    for skeleton in enumerate_skeletons(model, job, fixed):
        # When the fastest variant does not fit, try the leanest: if that fails too, no variant fits.
        fastest = peak_bytes(model, job, _with(skeleton, recomputes[0], zeros[0]), cache=cache)
        if fastest > hw.memory_bytes:
            lean_plan = _with(skeleton, recomputes[-1], zeros[-1])
            lean = peak_bytes(model, job, lean_plan, cache=cache)
            if lean > hw.memory_bytes:
                considered += len(recomputes) * len(zeros)
                if smallest is None or lean < smallest[0]:
                    smallest = (lean, lean_plan)
                continue
        for recompute in recomputes:
            considered += len(zeros)
            # Higher ZeRO stages only shard more state (less memory) for more communication: the
            # lowest stage that fits dominates the rest, which are counted as feasible but not timed.
            for i, zero in enumerate(zeros):
                plan = _with(skeleton, recompute, zero)
                need = fastest if (recompute, i) == (recomputes[0], 0) else peak_bytes(model, job, plan, cache=cache)
                if need <= hw.memory_bytes:
                    feasible += len(zeros) - i
                    ranked.append(timed_estimate(model, hw, job, plan, memory_breakdown(model, job, plan, cache=cache), cache))
                    break
                if smallest is None or need < smallest[0]:
                    smallest = (need, plan)
    if not ranked:
        raise InfeasibleError(_why_none(model, hw, job, considered, smallest))
    ranked.sort(key=lambda e: -e.tokens_per_s)
    if "cp_comm" not in (fixed or {}):
        ranked = _pick_cp_comm(model, hw, job, ranked, cache)
    ranked.sort(key=lambda e: (-math.floor(math.log(e.tokens_per_s) / math.log1p(TIE_BAND)), _simplicity(e.plan)))
    return SearchResult(ranked=tuple(ranked), considered=considered, feasible=feasible)


def _pick_cp_comm(model: ModelSpec, hw: HardwareProfile, job: Job, ranked: list[Estimate], cache: Memo) -> list[Estimate]:
    """For the leading plans with CP, keep all-gather K/V instead of the ring where it is faster and fits.

    The ring is enumerated for every plan; the all-gather variant is tried only on
    the plans that can matter (the first CP_VARIANT_CANDIDATES), which keeps the
    search fast.
    """
    out = list(ranked)
    for i, est in enumerate(out[:CP_VARIANT_CANDIDATES]):
        if est.plan.cp == 1:
            continue
        plan = replace(est.plan, cp_comm="allgather")
        memory = memory_breakdown(model, job, plan, cache=cache)
        if memory.total <= hw.memory_bytes:
            other = timed_estimate(model, hw, job, plan, memory, cache)
            if other.tokens_per_s > est.tokens_per_s:
                out[i] = other
    return out


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
