"""suggest/estimate with a sequence-length distribution: plans ranked by simulated steps.

The fixed-length search runs on packed micro-batches (packing length P = the
longest sequence rounded up to a power of two, so the fixed plan's CP is sized
for it). Its leading layouts are then simulated with the varlen package: steps
sampled from the distribution, sequences assigned by each strategy
(varlen/strategies.py), the per-sequence and per-micro-batch cost from the
cost model (ModelSeqCost), the per-GPU token room from the memory model. Plans are re-ranked by the chosen
strategy's mean step time, which can pick different DP/CP/PP than the
fixed-length answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from autopar import varlen
from autopar.advise.bands import TrainingBands, with_speed
from autopar.advise.launch import FRAMEWORK, LaunchRequest
from autopar.advise.train import Context, Explained, Suggestion, bands_of, suggest
from autopar.cost import calibration as cal
from autopar.cost.flops import model_flops_per_token
from autopar.cost.sequence import ModelSeqCost
from autopar.cost.step import Estimate
from autopar.emit.megatron import megatron_hybrid_cp_args
from autopar.errors import InfeasibleError, SpecError
from autopar.io.distributions import load_distribution
from autopar.io.error_model import error_model
from autopar.spec.error_model import ErrorModel
from autopar.spec.hardware import fit_for
from autopar.spec.job import DEFAULT_TOKENS_PER_STEP, Job
from autopar.spec.limits import MAX_VARLEN_SEQUENCES
from autopar.varlen.strategies import STRATEGY_INFO as STRATEGY_INFO  # the names the CLI completes

CANDIDATES = 8  # distinct layouts of the fixed-length ranking that are simulated
STEPS = 128  # sampled steps per candidate (at most; stops earlier once converged)
MIN_STEPS = 32
REL_SEM = 0.01  # stop when the mean step time is known to 1%


@dataclass(frozen=True, slots=True, kw_only=True)
class VarlenCandidate:
    """One plan under the length distribution."""

    estimate: Estimate  # the fixed-length (packed) estimate
    results: dict[str, varlen.StrategyResult]  # per strategy
    max_tokens_per_rank: int  # activation room of one GPU for one micro-batch, tokens
    mfu: dict[str, float]  # per strategy: model FLOPs (PaLM convention, per document) / (GPUs x mfu_peak)


@dataclass(frozen=True, slots=True, kw_only=True)
class VarlenSuggestion:
    fixed: Suggestion  # the fixed-length search on packed micro-batches
    dist: varlen.LengthDist  # the lengths
    strategy: str  # the strategy plans are ranked by
    sequences_per_step: int  # global batch, in sequences of the distribution
    plans: tuple[VarlenCandidate, ...]  # best first under `strategy`

    def tokens_per_s(self, plan: VarlenCandidate, strategy: str) -> float:
        return plan.results[strategy].tokens_per_s

    def bands(self, plan: VarlenCandidate) -> TrainingBands:
        """The plan's fixed-length classes on its simulated tokens/s under `strategy`."""
        return strategy_bands(self.fixed.ctx, self.fixed.errors, plan, self.strategy)


def strategy_bands(ctx: Context, errors: ErrorModel, plan: VarlenCandidate, strategy: str) -> TrainingBands:
    """The error bands of a plan under a strategy: its training class (stack, dtype, family, scale), set on
    fixed-length rows, applied to the strategy's tokens/s; memory and fit from the packed plan."""
    r = plan.results[strategy]
    return with_speed(bands_of(ctx, errors, plan.estimate), tokens_per_s=r.tokens_per_s, gpus=ctx.job.gpus, step_time_s=r.step_time_mean_s)


def load(path: str, ctx_model_max: int, model_name: str) -> varlen.LengthDist:
    dist = load_distribution(path)
    varlen.check_max(dist, ctx_model_max, model_name)
    return dist


def packing_length(dist: varlen.LengthDist) -> int:
    """The fixed plan's sequence length: the longest sequence, rounded up to a power of two."""
    return 2 ** math.ceil(math.log2(max(dist.max_len, 2)))


def packed_context(ctx: Context, dist: varlen.LengthDist, sequences: int | None) -> tuple[Context, int]:
    """The job in packed micro-batches of P tokens, and the distribution's sequences per step."""
    p = packing_length(dist)
    if p > ctx.model.max_seq_len:
        p = ctx.model.max_seq_len
    seqs = sequences or max(1, int(DEFAULT_TOKENS_PER_STEP // dist.mean_len))
    _check_sequences(dist, sequences, seqs)
    nodes = max(1, ctx.job.gpus // ctx.job.gpus_per_node)
    packed = nodes * math.ceil(seqs * dist.mean_len / p / nodes)
    job = Job(gpus=ctx.job.gpus, gpus_per_node=ctx.job.gpus_per_node, global_batch=packed, seq_len=p, dtype=ctx.job.dtype)
    # the packed count is autopar's whatever the sequences: a plan's dp x mbs may round it up (advise/train.py explain)
    return replace(ctx, job=job, batch_defaulted=True), seqs


def _check_sequences(dist: varlen.LengthDist, given: int | None, seqs: int) -> None:
    """Refuse a batch the simulation cannot hold (MAX_VARLEN_SEQUENCES per step), asked for or defaulted."""
    if seqs <= MAX_VARLEN_SEQUENCES:
        return
    if given is not None:
        raise SpecError(
            f"`global_batch` ({given:,}) with `seq_len_dist`: at most {MAX_VARLEN_SEQUENCES:,} sequences "
            "per step can be simulated (autopar's limit)"
        )
    raise SpecError(
        f"{dist.source}: the default global batch (about 4M tokens at a mean length of {dist.mean_len:.3g} "
        f"tokens: {seqs:,} sequences) is over the {MAX_VARLEN_SEQUENCES:,} per step that can be simulated; "
        "give `global_batch`"
    )


def token_room(est: Estimate, job: Job) -> int:
    """Tokens one GPU's activation memory holds per micro-batch, from the memory model.

    Activations and logits grow with tokens; weights, grads, optimizer and buffers
    do not. Whatever the capacity leaves after the fixed part, at the plan's
    per-token rate, is the room.
    """
    m = est.memory
    plan = est.plan
    per_rank = plan.mbs * job.seq_len / plan.cp
    growing = m.activations + m.logits
    room = (est.memory_capacity_bytes - m.buffers) / (1 + cal.ALLOCATOR_FRAGMENTATION) - (m.weights + m.grads + m.optimizer)
    return max(1, int(room / growing * per_rank)) if growing > 0 else max(1, int(per_rank))


def check_strategy(strategy: str) -> None:
    if strategy not in varlen.STRATEGIES:
        raise SpecError(f"`varlen_strategy` must be one of {', '.join(varlen.STRATEGIES)}, got {strategy!r}")


def suggest_varlen(ctx: Context, dist: varlen.LengthDist, *, sequences: int | None, strategy: str, seed: int = 0) -> VarlenSuggestion:
    check_strategy(strategy)
    packed, seqs = packed_context(ctx, dist, sequences)
    fixed = suggest(packed)
    layouts: list[Estimate] = []
    seen = set()
    for est in fixed.result.ranked:
        p = est.plan
        key = (p.dp, p.tp, p.pp, p.cp)
        if key not in seen:
            seen.add(key)
            layouts.append(est)
        if len(layouts) == CANDIDATES:
            break
    # a plan whose strategy cannot hold the longest sequence is left out of the answer: known before simulating
    runnable = [est for est in layouts if runs_longest(packed, dist, est, strategy)]
    plans = [simulate_plan(packed, dist, est, sequences=seqs, seed=seed) for est in runnable]
    fitting = [p for p in plans if p.results[strategy].fits]
    if not fitting:
        raise InfeasibleError(
            f"no simulated plan runs the longest sequence ({dist.max_len} tokens) with "
            f"`varlen_strategy={strategy}`; try megatron_dynamic_cp or hdp, or more GPUs"
        )
    fitting.sort(key=lambda v: v.results[strategy].step_time_mean_s)
    return VarlenSuggestion(fixed=fixed, dist=dist, strategy=strategy, sequences_per_step=seqs, plans=tuple(fitting))


def overheads(ctx: Context, est: Estimate) -> varlen.Overheads:
    """Memory per token (memory model) and NIC bandwidth (profile) for the strategies' own overheads."""
    m, plan = est.memory, est.plan
    per_rank = plan.mbs * ctx.job.seq_len / plan.cp
    nic = fit_for(ctx.hw.inter["send_recv"], 2).bw_bytes_per_s
    return varlen.Overheads(bytes_per_token=(m.activations + m.logits) / per_rank, nic_bytes_per_s=nic, gpus_per_node=ctx.hw.gpus_per_node)


def mfu(ctx: Context, r: varlen.StrategyResult) -> float:
    """Model FLOPs per second of the documents trained (PaLM: 6N + attention linear in each document's length)."""
    per_token = model_flops_per_token(ctx.model, 0)
    per_sq = model_flops_per_token(ctx.model, 1) - per_token
    return (per_token * r.tokens_per_s + per_sq * r.sq_tokens_per_s) / (ctx.job.gpus * ctx.hw.mfu_peak(ctx.job.dtype))


def plan_room(ctx: Context, est: Estimate) -> int:
    """Tokens per GPU per micro-batch the simulation gives the plan: the memory model's, at least the fixed plan's."""
    plan, job = est.plan, ctx.job
    return max(token_room(est, job), -(-plan.mbs * job.seq_len // plan.cp))


def runs_longest(ctx: Context, dist: varlen.LengthDist, est: Estimate, strategy: str) -> bool:
    """Whether ``strategy`` on this plan holds the longest sequence (the ``fits`` its simulation reports)."""
    plan = est.plan
    shape = varlen.VarlenPlan(
        dp=plan.dp, cp=plan.cp, pp=plan.pp, micro_batch_tokens=plan.mbs * ctx.job.seq_len, max_tokens_per_rank=plan_room(ctx, est)
    )
    return dist.max_len <= varlen.longest_fit(strategy, varlen.strategy_plan(strategy, shape, overheads(ctx, est)))


def simulate_plan(
    ctx: Context, dist: varlen.LengthDist, est: Estimate, *, sequences: int, seed: int = 0, steps: int = STEPS, rel_sem: float = REL_SEM
) -> VarlenCandidate:
    """Every strategy for one plan."""
    plan, job = est.plan, ctx.job
    cost = ModelSeqCost.from_model(ctx.model, ctx.hw, plan, dtype=job.dtype)
    room = plan_room(ctx, est)
    overhead = est.time.dp_comm + est.time.optimizer
    results = varlen.simulate(
        dist,
        cost,
        dp=plan.dp,
        cp=plan.cp,
        pp=plan.pp,
        global_batch=sequences,
        micro_batch_tokens=plan.mbs * job.seq_len,
        max_tokens_per_rank=room,
        steps=steps,
        seed=seed,
        step_overhead_s=overhead,
        overheads=overheads(ctx, est),
        rel_sem=rel_sem,
        min_steps=min(MIN_STEPS, steps),
        vpp=plan.vpp,
    )
    return VarlenCandidate(estimate=est, results=results, max_tokens_per_rank=room, mfu={name: mfu(ctx, r) for name, r in results.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class VarlenExplained:
    ctx: Context  # the packed job
    dist: varlen.LengthDist  # the lengths
    sequences_per_step: int  # global batch in sequences of the distribution
    plan: VarlenCandidate  # the plan under every strategy
    strategy: str  # the strategy asked for (--varlen-strategy)
    rank_loads: dict[str, list[float]]  # per strategy: pipeline seconds of every rank in one sampled step
    errors: ErrorModel = field(default_factory=lambda: ErrorModel(min_rows=1, classes={}))  # the error bands
    hints: tuple[tuple[str, float], ...] = ()  # where the packed plan does not fit: changes that would (fit_hints)

    @property
    def bands(self) -> TrainingBands:
        return strategy_bands(self.ctx, self.errors, self.plan, self.strategy)


def explain_varlen(
    ctx: Context,
    dist: varlen.LengthDist,
    explain_for: Callable[[Context], Explained],
    *,
    sequences: int | None,
    strategy: str,
    seed: int = 0,
) -> VarlenExplained:
    """One plan under the distribution, with the per-rank load of one sampled step for each strategy."""
    check_strategy(strategy)
    packed, seqs = packed_context(ctx, dist, sequences)
    explained = explain_for(packed)  # its job: the packed one, the batch rounded up to the plan's dp x mbs
    packed, est = explained.ctx, explained.estimate
    vplan = simulate_plan(packed, dist, est, sequences=seqs, seed=seed)
    p, job = est.plan, packed.job
    cost = ModelSeqCost.from_model(ctx.model, ctx.hw, p, dtype=job.dtype)
    shape = varlen.VarlenPlan(
        dp=p.dp, cp=p.cp, pp=p.pp, micro_batch_tokens=p.mbs * job.seq_len, max_tokens_per_rank=vplan.max_tokens_per_rank
    )
    lengths = dist.sample((1, seqs), np.random.default_rng(seed))
    over = overheads(packed, est)
    loads = {}
    for name in varlen.STRATEGIES:
        assignment = varlen.run_strategy(name, lengths, cost, shape, overheads=over)
        assignment, _ = varlen.with_p2p(assignment, cost)
        loads[name] = [float(x) for x in varlen.row_times(assignment.cell_cost_s, p.pp, p.vpp)[0]]
    return VarlenExplained(
        ctx=packed,
        dist=dist,
        sequences_per_step=seqs,
        plan=vplan,
        rank_loads=loads,
        strategy=strategy,
        errors=error_model(),
        hints=explained.hints,
    )


def launch_args(want: LaunchRequest | None, strategy: str, est: Estimate, job: Job) -> tuple[list[str], str]:
    """Megatron-LM words for the strategy's mode (hybrid CP), and a note saying what the launch runs."""
    info = varlen.STRATEGY_INFO[strategy]
    if want is None:
        return [], ""
    if FRAMEWORK[want.kind] != "Megatron-LM":
        return [], (
            "" if strategy == "naive" else f"{strategy} is not launchable with torchtitan: the command runs the fixed plan (as naive)"
        )
    if not info.megatron_flag:
        if strategy == "naive":
            return [], "the fixed plan; Megatron-LM packs in order, as naive does"
        return [], (f"{strategy} is not launchable with Megatron-LM as pinned: the command runs the fixed plan (as naive)")
    plan = est.plan
    try:
        return megatron_hybrid_cp_args(plan, plan.mbs * job.seq_len // plan.cp), f"{strategy}: {info.megatron_flag}"
    except SpecError as exc:
        return [], f"{strategy} is not launchable here: {exc}; the command runs the fixed plan (as naive)"
