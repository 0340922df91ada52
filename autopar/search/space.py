"""The search space: every plan the rules of spec/plan.py accept, over the values the search tries.

The values tried (the *domain*): tp and cp powers of two (tp up to the node
size), every pp dividing the rest (dp follows from the GPU count), micro-batch
sizes 1-16 in powers of two, interleaving depths 2, 4 and every even split of a
stage's layers, pp up to the layers (plus the embedding and the loss on stacks
that count them as pipeline layers), sequence parallelism on or off when tp > 1, every ep dividing
the experts, etp 1 or tp, every recompute mode, ZeRO 1-3 (ZeRO-0 only when
pinned: see planner.py), ring CP (all-gather CP is tried on the leading plans).

Each rule is applied as soon as the fields it reads are chosen, so the plans
enumerated are exactly the plans of the domain that validate() accepts (a
property test checks this against validate() itself).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from itertools import product
from typing import NamedTuple

from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import (
    RECOMPUTE,
    ZERO_STAGES,
    Plan,
    batch_rule,
    cp_rule,
    end_slots_allowed,
    ep_rule,
    etp_rule,
    pp_rule,
    searched_modules,
    sp_rule,
    tp_rule,
    vpp_rule,
)
from autopar.spec.stack import NEUTRAL, StackProfile

MICRO_BATCH_SIZES = (1, 2, 4, 8, 16)
# ZeRO-0 is dominated by ZeRO-1 in this model: reduce-scatter plus all-gather move
# 6 B/param against the all-reduce's 8, the optimizer step is sharded, and memory
# is lower. The search skips it unless it is fixed (estimate --zero 0 still works).
SEARCHED_ZERO = tuple(z for z in ZERO_STAGES if z != 0)


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, built from its prime factors: the time grows with sqrt(n) at worst
    (trial division), not with n, so a huge GPU count cannot stall the search."""
    divs, rest, p = [1], n, 2
    while p * p <= rest:
        k = 0
        while rest % p == 0:
            rest //= p
            k += 1
        if k:
            divs = [d * p**e for d in divs for e in range(k + 1)]
        p += 1 if p == 2 else 2
    if rest > 1:
        divs += [d * rest for d in divs]
    return sorted(divs)


def powers_of_two(limit: int) -> list[int]:
    return [2**i for i in range(int(math.log2(limit)) + 1)] if limit >= 1 else []


def virtual_stages(layers: int, pp: int) -> list[int]:
    """Interleaving depths worth trying: 2 and 4 (chunks may differ by one layer, as Megatron's
    --pipeline-model-parallel-layout allows), and every even split of the stage's layers. Depths with
    more chunks than layers, which stacks that count the embedding and the loss accept (spec/plan.py
    end_slots_allowed), are estimated and launched but not tried: timing them slows the search by about
    5% at 12,288-15,360 GPUs, past its 1 s budget (benchmarks/search_speed.py --sweep)."""
    even = divisors(layers // pp) if layers % pp == 0 else []
    return sorted({v for v in (2, 4, *even) if v > 1 and pp * v <= layers})


def choices(fixed: Mapping[str, object], name: str, values: list) -> list:
    """`values`, or the one value `fixed` pins."""
    return [fixed[name]] if name in fixed else values


def stack_limits(stack: StackProfile, fixed: Mapping[str, object]) -> dict[str, object]:
    """`fixed` narrowed to what the stack can launch (StackProfile.refusal): the axes it has, its
    CP variant, interleaving. Its ZeRO stages: searched_zero. Knobs the caller fixed stay."""
    out = dict(fixed)
    for axis in ("tp", "pp", "cp", "ep"):
        if axis not in stack.parallelisms:
            out.setdefault(axis, 1)
    if not stack.vpp:
        out.setdefault("vpp", 1)
    if len(stack.cp_comms) == 1:
        out.setdefault("cp_comm", stack.cp_comms[0])
    return out


def searched_zero(stack: StackProfile) -> list[int]:
    """ZeRO stages the search tries on `stack`: its stages, without ZeRO-0 where it offers another."""
    return [z for z in SEARCHED_ZERO if z in stack.zero_stages] or list(stack.zero_stages)


Experts = tuple[tuple[int, int], ...]  # (ep, etp) pairs


class Block(NamedTuple):
    """Layouts that differ only in where their experts go: one (dp, tp, pp, cp, vpp, mbs, sp) with each
    (ep, etp) the rules accept for it, in search order. They share their activations, logits and
    in-flight micro-batches (cost/memory.py block_peaks) and their layer class (cost/floors.py)."""

    skeleton: Plan  # the layout with experts[0]; recompute and ZeRO at defaults, recompute_modules its selective variant's
    experts: Experts

    def plan(self, ep: int, etp: int) -> Plan:
        """The skeleton with these experts' degrees."""
        s = self.skeleton
        return _rebuilt(s, ep=ep, etp=etp, recompute=s.recompute, zero=s.zero, modules=s.recompute_modules)

    def knobbed(self, ep: int, etp: int, recompute: str, zero: int) -> Plan:
        """with_knobs(self.plan(ep, etp), recompute, zero), one Plan built instead of two."""
        s = self.skeleton
        return _rebuilt(s, ep=ep, etp=etp, recompute=recompute, zero=zero, modules=s.recompute_modules if recompute == "selective" else ())


def enumerate_skeletons(model: ModelSpec, job: Job, fixed: Mapping[str, object], *, stack: StackProfile = NEUTRAL) -> Iterator[Plan]:
    """Every valid layout (degrees, micro-batch, interleaving, SP) the stack can launch; recompute and
    ZeRO stage left at defaults, recompute_modules the modules of its selective variant."""
    for block in enumerate_blocks(model, job, fixed, stack=stack):
        for ep, etp in block.experts:
            yield block.plan(ep, etp)


def enumerate_blocks(model: ModelSpec, job: Job, fixed: Mapping[str, object], *, stack: StackProfile = NEUTRAL) -> Iterator[Block]:
    """enumerate_skeletons' layouts, grouped: each Block holds, in order, the layouts that differ only in
    ep and etp (the rules on ep and etp read dp, tp and cp alone, so each (tp, cp, pp) has one list)."""
    fixed = stack_limits(stack, fixed)
    ends = end_slots_allowed(stack)
    pinned = fixed.get("recompute_modules")
    modules = tuple(str(m) for m in pinned) if isinstance(pinned, tuple) else searched_modules(model, stack)
    cp_comm = str(fixed.get("cp_comm", "ring"))
    gpn = min(job.gpus_per_node, job.gpus)
    for tp in choices(fixed, "tp", [t for t in powers_of_two(gpn) if tp_rule(model, job, t) is None]):
        sps = choices(fixed, "sp", [s for s in ([True, False] if tp > 1 else [False]) if sp_rule(model, tp=tp, sp=s) is None])
        for cp in choices(fixed, "cp", [c for c in powers_of_two(job.gpus // tp) if cp_rule(model, job, tp, c) is None]):
            if job.gpus % (tp * cp):
                continue
            rest = job.gpus // (tp * cp)
            for pp in choices(fixed, "pp", [p for p in divisors(rest) if pp_rule(model, p, ends=ends) is None]):
                dp = rest // pp
                if rest % pp or ("dp" in fixed and fixed["dp"] != dp) or batch_rule(job, dp, 1):
                    continue
                experts = _experts(model, fixed, stack, dp=dp, tp=tp, cp=cp)
                if not experts:
                    continue
                depths = [1, *virtual_stages(model.layers, pp)]  # the interleavings tried, before the rule on micro-batches
                (ep, etp), rc = experts[0], modules
                for mbs in choices(fixed, "mbs", [b for b in MICRO_BATCH_SIZES if batch_rule(job, dp, b) is None]):
                    m = job.global_batch // (dp * mbs)
                    vpps = [v for v in depths if vpp_rule(model, pp=pp, vpp=v, microbatches=m, ends=ends) is None]
                    for vpp, sp in product(choices(fixed, "vpp", vpps), sps):
                        yield Block(
                            Plan(
                                dp=dp, tp=tp, pp=pp, cp=cp, vpp=vpp, ep=ep, etp=etp, mbs=mbs, sp=sp, cp_comm=cp_comm, recompute_modules=rc
                            ),
                            experts,
                        )


def _experts(model: ModelSpec, fixed: Mapping[str, object], stack: StackProfile, *, dp: int, tp: int, cp: int) -> Experts:
    """The (ep, etp) pairs the rules accept at these degrees, ep major (a Block's experts)."""
    moe, over_tp = model.moe, stack.ep_over_tp
    eps = [e for e in divisors(moe.num_experts) if ep_rule(model, dp=dp, cp=cp, ep=e, tp=tp, ep_over_tp=over_tp) is None] if moe else [1]
    etps = [e for e in {1, tp} if etp_rule(model, tp=tp, etp=e) is None] if moe else [1]
    out = []
    for ep, etp in product(choices(fixed, "ep", eps), choices(fixed, "etp", sorted(etps))):
        if etp > 1 and ep_rule(model, dp=dp, cp=cp, ep=ep, tp=tp, etp=etp, ep_over_tp=over_tp):
            continue
        if moe and stack.experts_whole_with_ep and etp != (1 if ep > 1 else tp):
            continue
        out.append((ep, etp))
    return tuple(out)


def with_knobs(s: Plan, recompute: str, zero: int) -> Plan:
    """The skeleton with these knobs; a skeleton's recompute_modules are what its selective variant
    recomputes (spec/plan.py searched_modules)."""
    modules = s.recompute_modules if recompute == "selective" else ()
    return _rebuilt(s, ep=s.ep, etp=s.etp, recompute=recompute, zero=zero, modules=modules)


def _rebuilt(s: Plan, *, ep: int, etp: int, recompute: str, zero: int, modules: tuple[str, ...]) -> Plan:
    """s with these fields, by a direct constructor (dataclasses.replace is slow in the hot loop)."""
    return Plan(
        dp=s.dp,
        tp=s.tp,
        pp=s.pp,
        cp=s.cp,
        vpp=s.vpp,
        ep=ep,
        etp=etp,
        mbs=s.mbs,
        recompute=recompute,
        zero=zero,
        sp=s.sp,
        cp_comm=s.cp_comm,
        recompute_modules=modules,
    )


def enumerate_plans(
    model: ModelSpec, job: Job, fixed: Mapping[str, object] | None = None, *, stack: StackProfile = NEUTRAL
) -> Iterator[Plan]:
    """Every valid plan of the domain the stack can launch; `fixed` pins any Plan field to one value."""
    fixed = dict(fixed or {})
    zeros = searched_zero(stack)
    for skeleton in enumerate_skeletons(model, job, fixed, stack=stack):
        for recompute, zero in product(choices(fixed, "recompute", list(RECOMPUTE)), choices(fixed, "zero", zeros)):
            yield with_knobs(skeleton, recompute, zero)
