"""The two questions the CLI asks, as library calls: suggest plans, estimate one plan.

Both take plain values (names, paths, numbers), load and validate the inputs,
and return frozen results that report.py renders. No torch, no printing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from autopar.advise.bands import TrainingBands, training_bands
from autopar.advise.ties import Reranked, Ties, rerank
from autopar.cost.memory import memory_breakdown
from autopar.cost.step import Estimate as Estimate  # an estimate, as the CLI and render/ see it
from autopar.cost.step import estimate
from autopar.errors import InfeasibleError, SpecError
from autopar.io.error_model import error_model
from autopar.io.models import load_model
from autopar.io.profiles import resolve_hardware
from autopar.io.stacks import DEFAULT_STACK, load_stack, read_options
from autopar.search.planner import Candidate as Candidate  # a ranked plan, as render/ shows it
from autopar.search.planner import SearchResult, search
from autopar.search.space import divisors
from autopar.spec.error_model import ErrorModel
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import DEFAULT_HEADROOM, Job, default_global_batch, headroom_bytes
from autopar.spec.limits import MAX_BATCH, MAX_GPUS
from autopar.spec.model import ModelSpec
from autopar.spec.plan import RECOMPUTE_MODULES, Plan, searched_modules, validate
from autopar.spec.stack import StackProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """The inputs every answer is about."""

    model: ModelSpec  # what is trained
    hw: HardwareProfile  # on what
    hw_reason: str  # which profile was used and why
    job: Job  # GPUs, batch, sequence length, dtype
    batch_defaulted: bool  # the global batch was chosen by autopar
    stack: StackProfile  # the framework that runs the plan
    stack_reason: str  # --stack NAME, or the default
    headroom_bytes: float = 0.0  # a plan that leaves less of the GPU free is warned about (--headroom)
    headroom: str = DEFAULT_HEADROOM  # as the user gave it (GiB or a share)

    def headroom_warning(self, est: Estimate) -> str | None:
        """Why a plan that fits leaves less than the headroom free, or None (fits with room, or does not fit)."""
        free = est.memory_capacity_bytes - est.memory.total
        if not est.fits or free >= self.headroom_bytes:
            return None
        return (
            f"{est.memory.total / 2**30:.1f} GiB fits the {est.memory_capacity_bytes / 2**30:.1f} GiB GPU but "
            f"leaves {free / 2**30:.1f} GiB free, less than the headroom of {self.headroom_bytes / 2**30:.1f} GiB "
            f"(--headroom {self.headroom})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    ctx: Context  # inputs
    result: SearchResult  # ranked plans
    search_s: float  # wall time of the search
    warnings: tuple[str, ...] = ()  # what the user should know about the job (a batch that limits dp)
    errors: ErrorModel = field(default_factory=lambda: ErrorModel(min_rows=1, classes={}))  # the error bands
    reranked: Reranked | None = None  # result.ranked with its error band re-ranked (advise/ties.py)
    ties: Ties | None = None  # the plans within the error band of the fastest

    @property
    def plans(self) -> Sequence[Estimate]:
        """Best first: the recommendation, then the others."""
        return self.result.ranked if self.reranked is None else self.reranked

    @property
    def plan_order(self) -> Sequence[Plan]:
        """The plans alone, in that order (read lazily)."""
        return self.result.ranked.plans if self.reranked is None else self.reranked.plans

    def bands(self, est: Estimate) -> TrainingBands:
        return bands_of(self.ctx, self.errors, est)


@dataclass(frozen=True, slots=True, kw_only=True)
class Explained:
    ctx: Context  # inputs
    estimate: Estimate  # the plan's time and memory
    hints: tuple[tuple[str, float], ...]  # when it does not fit: (change, GiB per GPU after it) that would
    bands: TrainingBands | None = None  # its error bands and fit confidence


def context(
    model: str,
    *,
    hardware: str | None,
    gpus: int | None,
    nodes: int | None,
    global_batch: int | None,
    seq_len: int | None,
    dtype: str,
    seq_len_dist: str | None = None,
    stack: str | None = None,
    headroom: str = DEFAULT_HEADROOM,
    stack_options: Sequence[str] = (),
    recipe: str | None = None,
) -> Context:
    """Load and check the inputs; `seq_len_dist` only to refuse it beside an explicit --seq-len.

    Plans fit in the GPU's whole memory; `headroom` (GiB or a share, spec/job.py headroom_bytes)
    is what a plan should leave free, warned about, not refused.
    """
    if seq_len_dist is not None and seq_len is not None:
        raise SpecError("give `seq_len` or `seq_len_dist`, not both")
    spec = load_model(model)
    hw, reason = resolve_hardware(hardware)
    room = headroom_bytes(headroom, hw.memory_bytes)
    if nodes is not None:
        if nodes < 1:
            raise SpecError(f"`nodes` must be positive, got {nodes}")
        if nodes > MAX_GPUS // hw.gpus_per_node:  # named as --nodes, not as the --gpus it makes
            raise SpecError(
                f"`nodes` must be at most {MAX_GPUS // hw.gpus_per_node:,} ({hw.gpus_per_node} GPUs per "
                f"node; autopar's limit is {MAX_GPUS:,} GPUs), got {nodes:,}"
            )
        if gpus is not None and gpus != nodes * hw.gpus_per_node:
            raise SpecError(f"`gpus` ({gpus}) disagrees with `nodes` ({nodes}) x {hw.gpus_per_node} GPUs per node")
        gpus = nodes * hw.gpus_per_node
    if gpus is None:
        raise SpecError("give `gpus=N` or `nodes=N`")
    seq = seq_len if seq_len is not None else spec.seq_len
    if seq <= 0:
        raise SpecError(f"`seq_len` must be positive, got {seq}")
    if seq > spec.max_seq_len:
        raise SpecError(f"`seq_len` ({seq}) exceeds {spec.name}'s max_seq_len ({spec.max_seq_len})")
    batch = global_batch if global_batch is not None else default_global_batch(gpus, hw.gpus_per_node, seq)
    job = Job(
        gpus=gpus,
        gpus_per_node=hw.gpus_per_node,
        global_batch=batch,
        seq_len=seq,
        dtype=dtype,
        gpus_per_host=hw.gpus_per_host if hw.gpus_per_host and hw.gpus_per_host < hw.gpus_per_node else 0,
    )
    if dtype not in hw.peak_flops:
        raise SpecError(f"`dtype` {dtype}: hardware profile {hw.name} has no peak for it")
    options = read_options(stack_options, recipe)
    stack_profile = load_stack(stack, options)
    stack_reason = f"--stack {stack}" if stack else f"default {DEFAULT_STACK} (no --stack)"
    if options:  # echoed in every output: the recipe facts the estimate assumed
        stack_reason += "; options " + " ".join(f"{k}={v}" for k, v in options.items())
    return Context(
        model=spec,
        hw=hw,
        hw_reason=reason,
        job=job,
        batch_defaulted=global_batch is None,
        stack=stack_profile,
        stack_reason=stack_reason,
        headroom_bytes=room,
        headroom=headroom,
    )


def bands_of(ctx: Context, errors: ErrorModel, est: Estimate) -> TrainingBands:
    return training_bands(errors, stack=ctx.stack.name, dtype=ctx.job.dtype, model=ctx.model, est=est)


def suggest(ctx: Context, *, progress: Callable[[int, int], None] | None = None) -> Suggestion:
    """The search's plans, those within the model's error of the fastest re-ranked (advise/ties.py)."""
    errors = error_model()  # a corrupt file fails before the search
    start = time.perf_counter()
    try:
        result = search(ctx.model, ctx.hw, ctx.job, stack=ctx.stack, progress=progress)
    except InfeasibleError as exc:  # name the profile: a saved one is easy to forget (issue 25)
        raise InfeasibleError(f"{exc}; hardware: {ctx.hw_reason}") from None
    search_s = time.perf_counter() - start
    # the default batch is built for the natural dp degrees (spec/job.py default_global_batch): no warning about it
    warning = None if ctx.batch_defaulted else batch_warning(ctx.job)
    order, ties = rerank(result.ranked, bands=lambda e: bands_of(ctx, errors, e), model=ctx.model)
    return Suggestion(
        ctx=ctx,
        result=result,
        search_s=search_s,
        warnings=(warning,) if warning else (),
        errors=errors,
        reranked=order if isinstance(order, Reranked) else None,
        ties=ties,
    )


def batch_warning(job: Job) -> str | None:
    """The global batch must split evenly over the data-parallel replicas (dp x mbs divides it). A batch
    with few small factors (513 = 3^3 x 19 sequences on 24 GPUs allows dp 1 or 3 only) forces the other
    GPUs into tp, pp or cp, slower for most models.

    A warning when the global batch allows less than half the data parallelism the GPUs allow, else None."""
    gpus, batch = job.gpus, job.global_batch
    by_gpus = max(d for d in divisors(gpus) if d <= batch)
    by_batch = max(d for d in divisors(gpus) if batch % d == 0)
    if 2 * by_batch >= by_gpus:
        return None
    lower = batch - batch % by_gpus
    options = [b for b in (lower, lower + by_gpus) if b > 0]
    return (
        f"global batch {batch} allows data parallelism of at most {by_batch} on {gpus} GPUs (dp must divide "
        f"the batch); {' or '.join(str(b) for b in options)} sequences would allow dp {by_gpus}"
    )


def parse_modules(text: str | None) -> tuple[str, ...]:
    """--recompute-modules a,b -> ("a", "b") in Megatron's order (RECOMPUTE_MODULES); unknown names are kept for
    the plan rule to name."""
    names = [m.strip() for m in (text or "").split(",") if m.strip()]
    return tuple(sorted(names, key=lambda m: RECOMPUTE_MODULES.index(m) if m in RECOMPUTE_MODULES else len(names)))


def explain(
    ctx: Context,
    *,
    tp: int,
    pp: int,
    cp: int,
    vpp: int,
    ep: int,
    mbs: int,
    recompute: str,
    zero: int | None,
    sp: bool,
    etp: int = 1,
    cp_comm: str | None = None,
    recompute_modules: str | None = None,
) -> Explained:
    """One plan, costed and explained; ZeRO stage and CP exchange default to the stack's (issue 27: a user who
    names only --stack torchtitan is not refused for a --zero 1 they did not type)."""
    zero = ctx.stack.default_zero if zero is None else zero
    cp_comm = ctx.stack.default_cp_comm if cp_comm is None else cp_comm
    for name, value in (("tp", tp), ("pp", pp), ("cp", cp)):
        if value < 1:
            raise SpecError(f"`{name}` must be >= 1, got {value}")
    denom = tp * pp * cp
    if ctx.job.gpus % denom:
        raise SpecError(f"`gpus` ({ctx.job.gpus}) must be divisible by tp*pp*cp ({tp}*{pp}*{cp})")
    plan = Plan(
        dp=ctx.job.gpus // denom,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        ep=ep,
        etp=etp,
        cp_comm=cp_comm,
        mbs=mbs,
        recompute=recompute,
        zero=zero,
        sp=sp and tp > 1,
        recompute_modules=parse_modules(recompute_modules),
    )
    step = plan.dp * max(1, mbs)
    if step > MAX_BATCH:  # a batch of one micro-batch per replica would pass the limit
        raise SpecError(f"`mbs` ({mbs:,}) x dp ({plan.dp:,}) must be at most {MAX_BATCH:,} sequences (autopar's limit)")
    if ctx.batch_defaulted and ctx.job.global_batch % step:  # the default batch follows the plan's dp x mbs
        ctx = replace(ctx, job=replace(ctx.job, global_batch=step * -(-ctx.job.global_batch // step)))
    refused = ctx.stack.refusal(plan)
    if refused:
        raise SpecError(f"{refused}; see `autopar stacks`")
    errors = error_model()
    est = estimate(ctx.model, ctx.hw, ctx.job, plan, stack=ctx.stack)
    hints = () if est.fits else fit_hints(ctx, plan)
    return Explained(ctx=ctx, estimate=est, hints=hints, bands=bands_of(ctx, errors, est))


def fit_hints(ctx: Context, plan: Plan) -> tuple[tuple[str, float], ...]:
    """One-knob changes that make an over-budget plan fit, smallest memory first.

    Every change offered is a plan the rules accept on the same GPUs (validate and the
    stack's refusals): "--tp 16" is never offered on 8-GPU nodes, nor "--pp" beyond the
    layers. Splitting the model further (tp, pp or cp twice as large) takes the GPUs
    from data parallelism, so it is offered only while dp is even. On a stack with
    module-level recompute, an MoE model is also offered the modules the search tries
    (spec/plan.py searched_modules: the MoE activation and the norms, no GEMM redone);
    when it fits it is always listed, as the cheapest recompute in time.
    """
    options: list[tuple[str, Plan]] = [
        (f"--recompute {r}", replace(plan, recompute=r, recompute_modules=())) for r in ("selective", "full")
    ]
    modules = searched_modules(ctx.model, ctx.stack)
    module_label = f"--recompute selective --recompute-modules {','.join(modules)}"
    if modules and (plan.recompute, plan.recompute_modules) != ("selective", modules):
        options.append((module_label, replace(plan, recompute="selective", recompute_modules=modules)))
    options += [(f"--zero {z}", replace(plan, zero=z)) for z in (1, 2, 3) if z > plan.zero]
    options += [(f"--mbs {b}", replace(plan, mbs=b)) for b in (1, 2, 4) if b < plan.mbs]
    if plan.tp > 1 and not plan.sp:
        options.append(("--sp", replace(plan, sp=True)))
    if plan.dp % 2 == 0:
        half = plan.dp // 2
        options += [
            (f"--tp {2 * plan.tp}", replace(plan, dp=half, tp=2 * plan.tp, sp=True)),
            (f"--pp {2 * plan.pp}", replace(plan, dp=half, pp=2 * plan.pp)),
            (f"--cp {2 * plan.cp}", replace(plan, dp=half, cp=2 * plan.cp)),
        ]
    found = []
    for label, candidate in options:
        try:
            validate(candidate, ctx.model, ctx.job, stack=ctx.stack)
        except SpecError:
            continue
        if ctx.stack.refusal(candidate):
            continue
        need = memory_breakdown(ctx.model, ctx.job, candidate, stack=ctx.stack).total
        if need <= ctx.hw.memory_bytes:
            found.append((label, need / 2**30))
    leanest = sorted(found, key=lambda x: x[1])[:3]
    return tuple(leanest + [x for x in found if x[0] == module_label and x not in leanest])
