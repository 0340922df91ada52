"""Lower bounds of a plan's step time, cheaper than timing it: the search's pruning (search/planner.py).

Two levels: step_floor, from a plan's total stage time spread evenly over its stages with
the smallest bubble; class_floors, looser, one per layer class (every expert placement at
once), so that a search refines only the plans it keeps. Each is at most the step time
(tests/properties/test_properties.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from autopar.cost.compute import LayerPlan, combine_parts, part_args
from autopar.cost.experts import moe_floor
from autopar.cost.layers import all_stages, kind_counts, loss_seconds, part_seconds, stage_times
from autopar.cost.memo import Memo
from autopar.cost.shape import Dims, Shape
from autopar.spec.families import KIND_PARTS
from autopar.spec.plan import Plan


class FloorKey(NamedTuple):
    """What step_floor's stage total reads of a plan: LayerPlan's values and the micro-batch, flat."""

    tp: int
    cp: int
    sp: bool  # in effect (tp > 1)
    recompute: str
    cp_comm: str
    ep: int
    etp: int
    pipelined: bool
    mbs: int
    modules: tuple[str, ...] = ()  # under selective: Megatron's recomputed modules


def _floor_stages(memo: Memo, key: FloorKey) -> float:
    lp = LayerPlan(
        dims=Dims(tp=key.tp, cp=key.cp, sp=key.sp, recompute=key.recompute, modules=key.modules),
        cp_comm=key.cp_comm,
        ep=key.ep,
        etp=key.etp,
        pipelined=key.pipelined,
    )
    return memo.get(all_stages, (lp, key.mbs))


def _either_stages(memo: Memo, key: FloorKey) -> float:
    """The lesser of _floor_stages of the key and of its all-gather CP variant (search/planner.py tries it)."""
    return min(memo.get(_floor_stages, key), memo.get(_floor_stages, key._replace(cp_comm="allgather")))


FLOOR_SLACK = 1e-6  # relative; far above the rounding of two sums of the same terms in different orders


def step_floor(memo: Memo, skeleton: Plan, recompute: str) -> float:
    """A lower bound of the step seconds of `skeleton` with `recompute`, at any ZeRO stage, for a search
    to skip plans that cannot rank high, at a fraction of variant_step_seconds' cost.

    With m micro-batches, p stages, v chunks per stage, stage times t_i (worst w, total S = sum t_i):
    the step is m * w (the worst stage's compute and exposed TP/CP/EP) plus the bubble
    (S + (p-1) * p2p - w) / v plus p2p, DP sync, optimizer and overlap slowdown, none below zero
    (compute_slowdown >= 1: checked). So step >= m * w + (S - w) / v, which grows with w (m >= 1 >= 1/v),
    and w >= S / p: step >= S * (m / p + (p - 1) / (p * v)). Returns 0 where a term could be negative.
    """
    p = skeleton
    if memo.profile.compute_slowdown < 1:
        return 0.0
    modules = p.recompute_modules if recompute == "selective" else ()
    total = memo.get(_floor_stages, FloorKey(p.tp, p.cp, p.sp and p.tp > 1, recompute, p.cp_comm, p.ep, p.etp, p.pp > 1, p.mbs, modules))
    m = memo.job.global_batch // (p.dp * p.mbs)
    return total * (m / p.pp + (p.pp - 1) / (p.pp * p.vpp)) * (1 - FLOOR_SLACK)


def step_floors(memo: Memo, jobs: list[tuple[Plan, str]], *, either: bool = False) -> list[float]:
    """step_floor of each (skeleton, recompute), with what they share read once (the search's hot path);
    `either`: the lesser of its floor and its all-gather CP variant's where cp > 1 (a bound of both)."""
    if memo.profile.compute_slowdown < 1:
        return [0.0] * len(jobs)
    get, batch, keep = memo.get_by, memo.job.global_batch, 1 - FLOOR_SLACK
    return [
        get(
            _either_stages if either and p.cp > 1 else _floor_stages,
            (p.tp, p.cp, p.sp and p.tp > 1, r, p.cp_comm, p.ep, p.etp, p.pp > 1, p.mbs, p.recompute_modules if r == "selective" else ()),
            FloorKey._make,
        )
        * (batch // (p.dp * p.mbs) / p.pp + (p.pp - 1) / (p.pp * p.vpp))
        * keep
        for p, r in jobs
    ]


def placed_floor(memo: Memo, skeleton: Plan, ep: int, etp: int, recompute: str, *, either: bool = False) -> float:
    """step_floors of [(skeleton with these experts' degrees, recompute)], the same float, without building
    the plan (a search refines thousands of jobs of a few hundred blocks: search/timing.py job_seconds)."""
    return placed_floors(memo, skeleton, recompute, either=either)(ep, etp)


def placed_floors(memo: Memo, skeleton: Plan, recompute: str, *, either: bool = False) -> Callable[[int, int], float]:
    """placed_floor of `skeleton` and `recompute` as a function of (ep, etp), what the skeleton's own values
    give found once (search/planner.py _time_jobs refines the jobs of one block and mode by it)."""
    p = skeleton
    if memo.profile.compute_slowdown < 1:
        return lambda ep, etp: 0.0
    modules = p.recompute_modules if recompute == "selective" else ()
    fn, get_by = (_either_stages if either and p.cp > 1 else _floor_stages), memo.get_by
    tp, cp, sp, comm, pipelined, mbs = p.tp, p.cp, p.sp and p.tp > 1, p.cp_comm, p.pp > 1, p.mbs
    scale = memo.job.global_batch // (p.dp * p.mbs) / p.pp + (p.pp - 1) / (p.pp * p.vpp)
    keep = 1 - FLOOR_SLACK

    def floor(ep: int, etp: int) -> float:
        total = get_by(fn, (tp, cp, sp, recompute, comm, ep, etp, pipelined, mbs, modules), FloorKey._make)
        return total * scale * keep

    return floor


def stage_floor(memo: Memo, skeleton: Plan, ep: int, etp: int, recompute: str, *, either: bool = False) -> float:
    """A lower bound of the step seconds of `skeleton` with these experts' degrees and `recompute`, at any
    ZeRO stage, at least step_floor's: step_floor's m * w + (S - w) / v with the worst stage w and the total S
    of the layout's own stages (cost/layers.py stage_times, which timing the plan reads too), before w >= S / p.
    `either`: the lesser of it and its all-gather CP variant's where cp > 1. Refines a leading search's jobs
    (search/lead.py: at llama3-70b's --gpus auto counts, about half as many timed as by step_floor); a full
    search keeps step_floor, so that the plans it times, and a chart draws, stay what they were."""
    p = skeleton
    if memo.profile.compute_slowdown < 1:
        return 0.0
    dims = (p.tp, p.cp, p.sp and p.tp > 1, recompute, p.recompute_modules if recompute == "selective" else ())
    m = memo.job.global_batch // (p.dp * p.mbs)
    out = float("inf")
    for comm in (p.cp_comm, "allgather") if either and p.cp > 1 and p.cp_comm != "allgather" else (p.cp_comm,):
        # stage_times's key as cost/step.py variant_step_seconds looks it up (Memo.get_by): the same entry
        st = memo.get_by(stage_times, ((dims, comm, ep, etp, p.pp > 1), p.mbs, p.pp, p.vpp), _stage_key)
        out = min(out, (m * st.worst_s + (st.total_s - st.worst_s) / p.vpp) * (1 - FLOOR_SLACK))
    return out


def _stage_key(values: tuple) -> tuple[LayerPlan, int, int, int]:
    (dims, *rest), *tail = values
    return (LayerPlan(Dims(*dims), *rest), *tail)


class ClassKey(NamedTuple):
    """A layer class: what every layer's time reads of a plan but its experts' placement (ep, etp) and
    pipelining (which only hides the EP all-to-all)."""

    tp: int
    cp: int
    sp: bool  # in effect (tp > 1)
    recompute: str
    cp_comm: str
    mbs: int
    modules: tuple[str, ...] = ()  # under selective: Megatron's recomputed modules


def _class_stages(memo: Memo, key: ClassKey) -> float:
    """A lower bound of all_stages for every plan of this layer class: layers without experts as they are
    timed, the MoE sub-layer at compute.moe_floor, its exposed all-to-all at 0 (the pipelined pairing
    only hides it, at an overlap slowdown of at least 1)."""
    stack, hw = memo.stack, memo.profile
    dims = Dims(tp=key.tp, cp=key.cp, sp=key.sp, recompute=key.recompute, modules=key.modules)
    lp = LayerPlan(dims=dims, cp_comm=key.cp_comm, ep=1, etp=1, pipelined=False)
    shape = Shape(dtype=memo.job.dtype, seq_len=memo.job.seq_len, mbs=key.mbs, stack=stack)
    total = 0.0
    for kind, n in memo.get(kind_counts, None):
        names = KIND_PARTS[kind]
        parts = [memo.get(part_seconds, (p, shape, part_args(p, lp))) for p in names if p != "moe"]
        if "moe" not in names:
            total += n * combine_parts(hw, parts, pipelined=False, stack=stack).total
            continue
        host_s = (stack.layer_overhead_us + stack.moe_host_us) * 1e-6
        total += n * (sum(t.total for t in parts) + memo.get(_moe_floor, (shape, dims)) + host_s)
    return total + memo.get(loss_seconds, (key.tp, key.cp, key.mbs))


def _either_class(memo: Memo, key: ClassKey) -> float:
    """The lesser of _class_stages of the key and of its all-gather CP variant."""
    return min(memo.get(_class_stages, key), memo.get(_class_stages, key._replace(cp_comm="allgather")))


def _moe_floor(memo: Memo, key: tuple[Shape, Dims]) -> float:
    return moe_floor(memo.model, memo.profile, *key)


def class_floors(memo: Memo, jobs: list[tuple[Plan, str]], *, either: bool = False) -> list[float]:
    """A lower bound of step_floor of each (skeleton, recompute), from its layer class (ClassKey): one
    bound serves every ep and etp, so a search refines (step_floor) only the plans this bound keeps;
    `either` as in step_floors."""
    if memo.profile.compute_slowdown < 1:
        return [0.0] * len(jobs)
    get, batch, keep = memo.get_by, memo.job.global_batch, 1 - 2 * FLOOR_SLACK
    return [
        get(
            _either_class if either and p.cp > 1 else _class_stages,
            (p.tp, p.cp, p.sp and p.tp > 1, r, p.cp_comm, p.mbs, p.recompute_modules if r == "selective" else ()),
            ClassKey._make,
        )
        * (batch // (p.dp * p.mbs) / p.pp + (p.pp - 1) / (p.pp * p.vpp))
        * keep
        for p, r in jobs
    ]
