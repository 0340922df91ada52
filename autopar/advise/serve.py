"""Serving use cases: explain one deployment, or search for the best ones."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autopar.cost.serve_load import ServeEstimate, estimate
from autopar.errors import InfeasibleError, SpecError
from autopar.io.error_model import error_model
from autopar.io.frameworks import resolve_framework
from autopar.io.models import load_model
from autopar.io.profiles import resolve_hardware
from autopar.search.serve import DEFAULT_TARGETS, ServeSweep, Targets, sweep

# what render/ and the CLI show of a sweep, re-exported so that they need not reach into search/
from autopar.search.serve import DEFAULT_TARGETS_TEXT as DEFAULT_TARGETS_TEXT
from autopar.search.serve import RULES as RULES
from autopar.spec.error_model import ErrorModel
from autopar.spec.framework import FRAMEWORKS, Framework
from autopar.spec.hardware import HardwareProfile
from autopar.spec.limits import MAX_RANK_CONCURRENCY, MAX_SERVE_GPUS, MIN_STEP_TOKENS
from autopar.spec.model import ModelSpec
from autopar.spec.serve import DEFAULT_ARGS, MODES, POOL_ARGS, Deployment, Engine, EngineArgs, Workload, kv_auto


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeContext:
    """The inputs every serving answer starts from."""

    model: ModelSpec
    hw: HardwareProfile
    hw_reason: str  # why this profile (flag, saved profile, default)
    gpus: int  # GPUs of the deployment
    fw: Framework  # the serving framework at the version whose data applies
    weights: str  # bf16 | fp8 | fp4 | int4
    kv_dtype: str  # auto | bf16 | fp8
    framework_note: str = ""  # which version's data a --framework NAME@VERSION without its own file uses ("": its own)
    engine_args: EngineArgs = DEFAULT_ARGS  # launch settings given on the command line (every engine)
    prefill_own: EngineArgs = DEFAULT_ARGS  # --prefill-* launch settings (disagg: the prefill engines' own)
    decode_own: EngineArgs = DEFAULT_ARGS  # --decode-* launch settings (disagg: the decode engines' own)
    errors: ErrorModel = field(default_factory=lambda: ErrorModel(min_rows=1, classes={}))  # TTFT and TPOT bands

    @property
    def framework(self) -> str:
        """vllm | sglang | trtllm"""
        return self.fw.name

    @property
    def pool_args(self) -> tuple[EngineArgs, EngineArgs]:
        """(prefill, decode) launch settings of a disaggregated deployment: each pool's own flags over the shared ones."""
        return self.prefill_own.over(self.engine_args), self.decode_own.over(self.engine_args)

    def pool_flags(self) -> list[str]:
        """The per-pool launch parameters given (prefill_max_batch_size, ...), in order."""
        pools = (("prefill_", self.prefill_own), ("decode_", self.decode_own))
        return [f"{prefix}{name}" for prefix, own in pools for name in own.given()]


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolArgs:
    """One pool's layout as given on the command line (None, False: not given)."""

    tp: int | None = None  # tensor parallelism
    pp: int | None = None  # pipeline stages (default 1)
    dp: int | None = None  # replicas, or attention-DP ranks with attention_dp
    ep: int | None = None  # expert parallelism (default 1)
    attention_dp: bool = False  # dp counts attention-DP ranks inside one engine
    workers: int | None = None  # disagg: engines in the pool

    def given(self) -> list[str]:
        """The parameters given, without their pool's prefix (workers, tp, ..., attention_dp)."""
        return [name for name in ("workers", "tp", "pp", "dp", "ep") if getattr(self, name) is not None] + (
            ["attention_dp"] if self.attention_dp else []
        )


def context(
    model: str,
    *,
    hardware: str | None,
    gpus: int | None,
    framework: str,
    weights: str,
    kv_dtype: str,
    engine_args: EngineArgs = DEFAULT_ARGS,
    prefill_args: EngineArgs = DEFAULT_ARGS,
    decode_args: EngineArgs = DEFAULT_ARGS,
) -> ServeContext:
    """The serving inputs; `framework` is NAME[@VERSION] or a framework .yaml (autopar/io/frameworks.py);
    `prefill_args`, `decode_args`: a disaggregated deployment's per-pool launch settings (POOL_ARGS only)."""
    if gpus is None:
        raise SpecError("`gpus` is required")
    if gpus < 1:
        raise SpecError(f"`gpus` must be at least 1, got {gpus}")
    if gpus > MAX_SERVE_GPUS:
        raise SpecError(
            f"`gpus` must be at most {MAX_SERVE_GPUS:,} for serve (autopar's limit: the disaggregated sweep "
            f"grows with the GPU count; plan one fleet and replicate it), got {gpus:,}"
        )
    spec = load_model(model)
    hw, reason = resolve_hardware(hardware)
    resolved = resolve_framework(framework)
    fw = resolved.framework
    # build a throwaway deployment to validate the names once, with the flags in the message
    Deployment(fw=fw, mode="agg", engine=Engine(), replicas=1, weights=weights, kv_dtype=kv_dtype)
    engine_args.check(spec, fw)
    for prefix, own in (("prefill_", prefill_args), ("decode_", decode_args)):
        if extra := [name for name in own.given() if name not in POOL_ARGS]:
            raise SpecError(f"`{prefix}{extra[0]}` is not a per-pool setting; give `{extra[0]}` (every engine)")
    return ServeContext(
        model=spec,
        hw=hw,
        hw_reason=reason,
        gpus=gpus,
        fw=fw,
        weights=weights,
        kv_dtype=kv_dtype,
        framework_note=resolved.note,
        engine_args=engine_args,
        prefill_own=prefill_args,
        decode_own=decode_args,
        errors=error_model(),
    )


def options_context(
    model: str,
    *,
    hardware: str | None,
    gpus: int | None,
    framework: str | None,
    emit: str | None,
    weights: str,
    kv_dtype: str,
    engine_args: EngineArgs = DEFAULT_ARGS,
    prefill_args: EngineArgs = DEFAULT_ARGS,
    decode_args: EngineArgs = DEFAULT_ARGS,
) -> ServeContext:
    """context() from the serve commands' options (CLI and Python API): the framework defaults to the
    --emit target, else vllm; an --emit target is checked before any work."""
    check_emit(emit)
    return context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=(emit or "vllm") if framework is None else framework,
        weights=weights,
        kv_dtype=kv_dtype,
        engine_args=engine_args,
        prefill_args=prefill_args,
        decode_args=decode_args,
    )


def parse_modes(modes: str | Sequence[str]) -> tuple[str, ...]:
    """--modes "agg,disagg" (or a sequence of names) -> ("agg", "disagg"); suggest() checks the names."""
    names = modes.split(",") if isinstance(modes, str) else modes
    return tuple(m.strip() for m in names if m.strip())


def kv_dtypes(kv_dtype: str | None) -> tuple[str, ...]:
    """The KV dtypes serve suggest sweeps: the one given, else the model's own (auto) and fp8."""
    return ("auto", "fp8") if kv_dtype is None else (kv_dtype,)


def _engine(args: PoolArgs, *, prefix: str) -> Engine:
    for name, value in (("tp", args.tp), ("pp", args.pp), ("dp", args.dp), ("ep", args.ep)):
        if value is not None and value < 1:
            raise SpecError(f"`{prefix}{name}` must be at least 1, got {value}")
    tp, pp, ep = (1 if v is None else v for v in (args.tp, args.pp, args.ep))
    dp = (args.dp or 1) if args.attention_dp else 1
    if ep > 1 and not args.attention_dp and ep > tp:
        raise SpecError(
            f"`{prefix}ep` ({ep}) exceeds `{prefix}tp` ({tp}): without `{prefix}attention_dp` the experts span the TP ranks of one engine"
        )
    if (tp * dp) % ep:
        raise SpecError(
            f"`{prefix}ep` ({ep}) must divide `{prefix}tp` x `{prefix}dp` ({tp} x {dp}): the MoE layers span "
            "the engine's tp x dp ranks (tp x dp = moe_tp x ep)"
        )
    return Engine(tp=tp, pp=pp, dp=dp, ep=ep)


def deployment(ctx: ServeContext, *, mode: str, agg: PoolArgs, prefill: PoolArgs, decode: PoolArgs) -> Deployment:
    """`serve estimate`'s layout: --tp/--pp/--dp/--ep/--attention-dp (agg), or the --prefill-* and
    --decode-* pools (disagg, where --tp stands for --decode-tp); a flag of the other mode is refused."""
    if mode not in MODES:
        raise SpecError(f"`mode` must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "agg":
        for prefix, pool in (("prefill_", prefill), ("decode_", decode)):
            if given := pool.given():
                raise SpecError(f"`{prefix}{given[0]}` needs `mode=disagg`")
        if flags := ctx.pool_flags():
            raise SpecError(f"`{flags[0]}` sets a disaggregated pool and needs `mode=disagg`")
        if agg.tp is None:
            raise SpecError("`tp` is required (the attention tensor parallelism)")
        return agg_deployment(ctx, agg)
    if given := [name for name in agg.given() if name != "tp"]:
        raise SpecError(f"`{given[0]}` sets aggregated engines; with `mode=disagg` give `prefill_{given[0]}` and `decode_{given[0]}`")
    return disagg_deployment(
        ctx,
        prefill,
        PoolArgs(
            tp=agg.tp if decode.tp is None else decode.tp,
            pp=decode.pp,
            dp=decode.dp,
            ep=decode.ep,
            attention_dp=decode.attention_dp,
            workers=decode.workers,
        ),
    )


def agg_deployment(ctx: ServeContext, args: PoolArgs) -> Deployment:
    """--tp/--pp/--dp/--ep/--attention-dp on --gpus: one or more identical engines."""
    engine = _engine(args, prefix="")
    engine.check(ctx.model)
    engine.check_framework(ctx.framework)
    if args.dp is not None and not args.attention_dp:
        replicas = args.dp
    elif ctx.gpus % engine.gpus == 0:
        replicas = ctx.gpus // engine.gpus
    else:
        raise SpecError(f"`gpus` ({ctx.gpus}) must be a multiple of one engine's GPUs (tp x pp x attention-dp = {engine.gpus})")
    dep = Deployment(
        fw=ctx.fw,
        mode="agg",
        engine=engine,
        replicas=replicas,
        weights=ctx.weights,
        kv_dtype=ctx.kv_dtype,
        kv_auto=kv_auto(ctx.model)[0],
        args=ctx.engine_args,
    )
    if dep.gpus != ctx.gpus:
        raise SpecError(f"`gpus` ({ctx.gpus}) does not match the layout: tp x pp x dp = {dep.gpus}")
    return dep


def disagg_deployment(ctx: ServeContext, prefill: PoolArgs, decode: PoolArgs) -> Deployment:
    """--mode disagg: prefill and decode pools, each with its own layout; --gpus is the total."""
    if prefill.workers is None or decode.workers is None:
        raise SpecError("`mode=disagg` needs `prefill_workers` and `decode_workers`")
    engines = []
    for prefix, pool in (("prefill_", prefill), ("decode_", decode)):
        if pool.workers is not None and pool.workers < 1:
            raise SpecError(f"`{prefix}workers` must be at least 1, got {pool.workers}")
        if pool.dp is not None and not pool.attention_dp:
            raise SpecError(
                f"`{prefix}dp` counts attention-DP ranks inside one engine and needs `{prefix}attention_dp` "
                f"(`{prefix}workers` counts the engines)"
            )
        engine = _engine(pool, prefix=prefix)
        engine.check(ctx.model, prefix=prefix)
        engine.check_framework(ctx.framework, prefix=prefix)
        engines.append(engine)
    dep = Deployment(
        fw=ctx.fw,
        mode="disagg",
        engine=engines[1],
        replicas=decode.workers,
        prefill=engines[0],
        prefill_replicas=prefill.workers,
        weights=ctx.weights,
        kv_dtype=ctx.kv_dtype,
        kv_auto=kv_auto(ctx.model)[0],
        args=ctx.pool_args[1],
        prefill_args=ctx.pool_args[0],
    )
    if dep.gpus != ctx.gpus:
        raise SpecError(
            f"`gpus` ({ctx.gpus}) does not match the pools: prefill {prefill.workers} x "
            f"{engines[0].gpus} + decode {decode.workers} x {engines[1].gpus} = {dep.gpus} GPUs"
        )
    return dep


def check_workload(ctx: ServeContext, wl: Workload) -> None:
    """A request must fit the model's context window (its prompt and its whole output), and, on an engine
    without chunked prefill (TensorRT-LLM 1.0), its prompt must fit one step: the LLM API refuses a longer
    one (tensorrt_llm/llmapi/llm.py _check_arguments, "The sum of prompt length ... should not exceed
    max_num_tokens"; tests/unittest/llmapi/test_llm.py test_max_num_token_check)."""
    if wl.isl + wl.osl > ctx.model.max_seq_len:
        raise SpecError(
            f"`isl` + `osl` ({wl.isl:,} + {wl.osl:,}) exceeds {ctx.model.name}'s context window "
            f"(max_seq_len {ctx.model.max_seq_len:,} tokens)"
        )
    fw = ctx.fw
    prefill, decode = ctx.pool_args
    for prefix, args in (("", ctx.engine_args), ("prefill_", prefill), ("decode_", decode)):
        if prefix and args == ctx.engine_args:
            continue  # a pool without its own settings: checked as the shared ones
        _check_step_tokens(args, fw.name, fw.label, fw.chunked, fw.max_seqs, prefix=prefix)
        if prefix == "decode_":
            continue  # a decode engine takes no prompt in one step (the prefill engines computed it)
        tokens = args.max_num_tokens
        budget = fw.chunk_tokens if tokens is None else tokens
        if not fw.chunked and wl.isl > budget:
            flag = f"{prefix}max_num_tokens" if prefix and ctx.prefill_own.max_num_tokens is not None else "max_num_tokens"
            raise SpecError(
                f"`isl` ({wl.isl:,}) exceeds the {budget:,} tokens one {fw.label} step holds "
                f"(`{flag}`{'' if tokens else ', its default'}): without "
                f"chunked context it refuses a longer prompt; give `{flag}` of at least `isl`"
            )


def _check_step_tokens(args: EngineArgs, name: str, label: str, chunked: bool, default_seqs: int, *, prefix: str = "") -> None:
    """A --max-num-tokens the framework starts with, and that autopar simulates in seconds: vLLM refuses fewer
    batched tokens than running requests (vllm/config/scheduler.py SchedulerConfig._verify_args,
    "max_num_batched_tokens ... must be greater than or equal to max_num_seqs"); a chunking engine's steps
    (vLLM, SGLang) grow as 1 / --max-num-tokens, so below MIN_STEP_TOKENS a sweep would run for minutes.
    `prefix`: the pool whose merged settings these are (prefill_, decode_; "" the shared ones)."""
    tokens, seqs = args.max_num_tokens, args.max_batch_size
    if tokens is None:
        return
    if name == "vllm" and tokens < (seqs or default_seqs):
        given = f"{seqs:,}" if seqs is not None else f"{default_seqs:,}, its default"
        raise SpecError(
            f"`{prefix}max_num_tokens` ({tokens:,}) must be at least `{prefix}max_batch_size` ({given}): {label} refuses "
            "fewer batched tokens than running requests"
        )
    if chunked and tokens < MIN_STEP_TOKENS:
        raise SpecError(
            f"`{prefix}max_num_tokens` ({tokens:,}) must be at least {MIN_STEP_TOKENS} with {label} (autopar's "
            "limit: a prompt cut into smaller chunks makes the step simulation run for minutes)"
        )


def explain(ctx: ServeContext, dep: Deployment, wl: Workload) -> ServeEstimate:
    """One deployment under one workload."""
    check_workload(ctx, wl)
    ranks = dep.replicas * dep.engine.dp
    if dep.mode == "agg" and wl.concurrency > MAX_RANK_CONCURRENCY * ranks:  # suggest's sweep bounds its own
        raise SpecError(
            f"`concurrency` ({wl.concurrency:,}) puts {wl.concurrency / ranks:,.0f} requests in flight on each of "
            f"{ranks:,} attention rank(s); the step-by-step loop runs at most {MAX_RANK_CONCURRENCY:,} per rank "
            "(autopar's limit): lower it, or add replicas or attention-DP ranks"
        )
    return estimate(ctx.model, ctx.hw, dep, wl)


def suggest(
    ctx: ServeContext,
    *,
    isl: int,
    osl: int,
    ttft_ms: float | None,
    tpot_ms: float | None,
    modes: tuple[str, ...],
    kv_dtypes: tuple[str, ...],
    progress: Callable[[int, int], None] | None = None,
    keep: Callable[[Deployment], bool] | None = None,
) -> ServeSweep:
    """Sweep the deployments of ctx.gpus GPUs (those `keep` keeps); refuse (exit 1) when none fits or none
    meets the targets. `progress(done, total)` is told of each deployment priced."""
    if not modes:
        raise SpecError("`modes` is empty; use agg, disagg or both (agg,disagg)")
    for mode in modes:
        if mode not in MODES:
            raise SpecError(f"`modes`: unknown mode {mode!r}; use agg, disagg or both (agg,disagg)")
    if (flags := ctx.pool_flags()) and "disagg" not in modes:
        raise SpecError(f"`{flags[0]}` sets a disaggregated pool and needs `modes` with disagg")
    if tuple(modes) == ("disagg",) and ctx.gpus < 2:
        raise SpecError(f"`modes=disagg` needs at least 2 GPUs (a prefill and a decode engine), got `gpus` {ctx.gpus}")
    for name, value in (("`ttft_ms`", ttft_ms), ("`tpot_ms`", tpot_ms)):
        if value is not None and not (0 < value < math.inf):
            raise SpecError(f"{name} must be a positive number of milliseconds, got {value}")
    check_workload(ctx, Workload(isl=isl, osl=osl, concurrency=1))  # validates --isl/--osl
    targets = Targets(ttft_s=None if ttft_ms is None else ttft_ms / 1e3, tpot_s=None if tpot_ms is None else tpot_ms / 1e3)
    if ttft_ms is None and tpot_ms is None:
        targets = DEFAULT_TARGETS
    if kv_auto(ctx.model)[0] == "fp8" and "auto" in kv_dtypes:  # auto already is fp8: one sweep, not two alike
        kv_dtypes = tuple(k for k in kv_dtypes if k != "fp8")
    result = sweep(
        ctx.model,
        ctx.hw,
        gpus=ctx.gpus,
        isl=isl,
        osl=osl,
        framework=ctx.fw,
        weights=ctx.weights,
        kv_dtypes=kv_dtypes,
        args=ctx.engine_args,
        pool_args=ctx.pool_args,
        modes=modes,
        targets=targets,
        progress=progress,
        keep=keep,
    )
    if not result.points:
        raise InfeasibleError(
            f"{ctx.model.name} with {ctx.weights} weights does not fit on {ctx.gpus} x {ctx.hw.name} "
            f"in any layout ({result.layouts} tried): the weights and one request's KV cache "
            "exceed the memory the framework gives them; add GPUs or use `weights=fp8/fp4`"
        )
    if result.best is None and result.rule == "knee":
        raise InfeasibleError(
            f"every deployment of {ctx.gpus} GPUs is queue-saturated at every concurrency tried "
            "(its KV cache or prefill pool cannot keep up); add GPUs"
        )
    if result.best is None:
        fastest = min(result.points, key=lambda e: e.tpot_s)
        quickest = min(result.points, key=lambda e: e.ttft_s)
        raise InfeasibleError(
            f"no deployment of {ctx.gpus} GPUs meets the targets: the lowest TPOT is "
            f"{fastest.tpot_s * 1e3:.1f} ms and the lowest TTFT {quickest.ttft_s * 1e3:.0f} ms"
        )
    return result


def check_emit(target: str | None) -> None:
    if target is not None and target not in FRAMEWORKS:
        raise SpecError(f"`emit` must be one of {', '.join(FRAMEWORKS)}, got {target!r}")
