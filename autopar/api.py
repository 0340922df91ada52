"""autopar as a library: the CLI's four questions as functions returning frozen results.

    import autopar
    r = autopar.suggest("llama3-70b", gpus=64, hardware="h100-sxm")
    r.recommended.tokens_per_s_per_gpu; r.to_dict()  # == `autopar suggest ... --json`; r.to_pandas()

A front end beside the CLI: it calls the same advise/ use cases and builds `to_dict()` with the same
render functions as `--json`, so the numbers and keys are the CLI's. Bad input raises autopar.SpecError,
no plan that fits raises autopar.InfeasibleError (both autopar.AutoparError); messages name the parameter (`gpus`).
Nothing is printed. Documented in docs/python.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = [
    "EstimateResult",
    "PlanResult",
    "ServeEstimateResult",
    "ServePoint",
    "ServeSuggestResult",
    "SuggestResult",
    "estimate",
    "serve_estimate",
    "serve_suggest",
    "suggest",
]

T = TypeVar("T")


def _frozen(value: Any) -> Any:
    """JSON values as immutable ones: lists -> tuples, objects -> read-only mappings."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _thawed(value: Any) -> Any:
    """_frozen undone, for to_dict: mappings back to dicts, tuples to lists."""
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def _build(cls: type[T], doc: Mapping[str, Any], **given: Any) -> T:
    """cls from the fields of a --json document that it names (absent optional keys take the field default)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {k: _frozen(v) for k, v in doc.items() if k in names and k not in given}
    return cls(**values, **given)


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise ImportError("to_pandas() needs pandas, which is not installed: pip install pandas") from exc
    return pandas


class _Document:
    """A result that keeps the --json document it was built from, as text (immutable, JSON-native)."""

    __slots__ = ()
    _json: str

    def to_dict(self) -> dict[str, Any]:
        """The CLI's --json document for the same inputs: same keys, same numbers (a fresh copy)."""
        return dict(json.loads(self._json))

    def to_json(self) -> str:
        """The CLI's --json output, byte for byte."""
        return self._json


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanResult:
    """One training plan and its predicted figures (the keys of `plans[]` in `suggest --json`)."""

    dp: int  # data-parallel replicas
    tp: int  # tensor-parallel degree
    pp: int  # pipeline stages
    vpp: int  # virtual stages per pipeline rank
    cp: int  # context-parallel degree
    ep: int  # expert-parallel degree
    etp: int  # expert tensor-parallel degree
    cp_comm: str  # ring | allgather
    mbs: int  # micro-batch size, sequences
    recompute: str  # none | selective | full
    zero: int  # ZeRO stage
    sp: bool  # sequence parallelism
    step_time_s: float  # one optimizer step
    tokens_per_s: float  # whole job
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float  # PaLM convention
    mfu: float  # against the bf16 dense peak, 0-1
    memory_gib_per_gpu: float  # device peak, worst stage (nvidia-smi)
    allocator_reserved_gib: float  # the same less what torch's allocator does not hold (max_memory_reserved)
    fits: bool  # the device peak is within the GPU's memory
    within_headroom: bool | None = None  # it fits and leaves the headroom free (docs/memory.md)
    recompute_modules: tuple[str, ...] = ()  # Megatron's --recompute-modules, when the plan names some
    # error bands (docs/error-bars.md): [p10, p90] of each figure, None where the class has too few rows
    tokens_per_s_range: tuple[float, float] | None = None
    tokens_per_s_per_gpu_range: tuple[float, float] | None = None
    step_time_s_range: tuple[float, float] | None = None
    memory_gib_per_gpu_range: tuple[float, float] | None = None
    fit_margin_gib: float | None = None  # GiB left on the GPU at the predicted peak
    fit_confidence: str | None = None  # sure | likely | borderline; None when it does not fit
    error_classes: Mapping[str, Any] | None = None  # the class each band was read from

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps({f.name: _thawed(getattr(self, f.name)) for f in fields(self)
                                      if f.name != "recompute_modules" or self.recompute_modules}))


@dataclass(frozen=True, slots=True, kw_only=True)
class SuggestResult(_Document):
    """`autopar suggest`: the ranked plans and the recommended one."""

    model: str
    hardware: str
    stack: str
    gpus: int
    global_batch: int  # sequences
    seq_len: int
    dtype: str
    recommended: PlanResult
    plans: tuple[PlanResult, ...]  # best first, at most `top`
    considered: int  # plans the search enumerated
    feasible: int  # plans that fit
    warnings: tuple[str, ...]
    launch: str | None = None  # with emit=: the launch command (one line) or sbatch script
    _json: str = field(default="", repr=False, compare=False)

    def to_pandas(self) -> Any:
        """The plans as a pandas DataFrame, one row per plan, best first (needs pandas)."""
        return _pandas().DataFrame([p.to_dict() for p in self.plans])


@dataclass(frozen=True, slots=True, kw_only=True)
class EstimateResult(_Document):
    """`autopar estimate`: one plan, its time and memory breakdowns and, when it does not fit, what would."""

    model: str
    hardware: str
    stack: str
    gpus: int
    global_batch: int
    seq_len: int
    dtype: str
    plan: PlanResult
    fits: bool
    time_breakdown_s: Mapping[str, float]
    memory_breakdown_gib: Mapping[str, float]
    fit_hints: tuple[Mapping[str, Any], ...]  # {"change": "--recompute full", "memory_gib_per_gpu": ...}
    launch: str | None = None
    _json: str = field(default="", repr=False, compare=False)

    def to_pandas(self) -> Any:
        """The plan as a one-row DataFrame (needs pandas)."""
        return _pandas().DataFrame([self.plan.to_dict()])


@dataclass(frozen=True, slots=True, kw_only=True)
class ServePoint:
    """One point of the serving Pareto front (`pareto[]` in `serve suggest --json`)."""

    layout: str  # e.g. "tp4 x2", "disagg 2P(tp4) + 1D(tp8)"
    mode: str  # agg | disagg
    kv_dtype: str
    concurrency: int  # requests in flight across the deployment
    ttft_ms: float
    tpot_ms: float  # inter-token latency after the first token
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    queue_saturated: bool
    ttft_breakdown_ms: Mapping[str, float]
    tpot_breakdown_ms: Mapping[str, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeEstimateResult(_Document):
    """`autopar serve estimate` (and serve suggest's recommended deployment)."""

    model: str
    hardware: str
    framework: str
    framework_constants: str
    weights: str
    kv_dtype: str
    gpus: int
    mode: str
    tp: int
    pp: int
    dp: int
    ep: int
    attention_dp: bool
    concurrency: int
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    requests_per_s: float
    kv_cache_tokens: int  # per engine
    max_concurrency: int
    memory_gib_per_gpu: float
    fits: bool
    queue_saturated: bool
    engine_args: Mapping[str, Any]
    ttft_breakdown_ms: Mapping[str, float]
    tpot_breakdown_ms: Mapping[str, float]
    prefill: Mapping[str, Any] | None = None  # disaggregated: the prefill pool
    decode: Mapping[str, Any] | None = None  # disaggregated: the decode pool
    launch: Mapping[str, Any] | None = None  # with emit=: framework, servers, files, benchmark (each command on one line)
    framework_note: str | None = None  # framework="NAME@VERSION" without its own data file: which version's data it uses
    _json: str = field(default="", repr=False, compare=False)

    def to_pandas(self) -> Any:
        """The deployment as a one-row DataFrame of its scalar figures (needs pandas)."""
        return _pandas().DataFrame([{k: v for k, v in self.to_dict().items() if not isinstance(v, dict | list)}])


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSuggestResult(_Document):
    """`autopar serve suggest`: the Pareto front and the recommended deployment."""

    recommended: ServeEstimateResult
    recommended_by: str  # targets | default | knee
    recommendation_rule: str
    pareto: tuple[ServePoint, ...]
    deployments_tried: int
    points_priced: int
    points_bounded: int
    _json: str = field(default="", repr=False, compare=False)

    def to_pandas(self) -> Any:
        """The Pareto front as a DataFrame, one row per point, without the breakdowns (needs pandas)."""
        rows = [{f.name: getattr(p, f.name) for f in fields(p) if not f.name.endswith("_breakdown_ms")} for p in self.pareto]
        return _pandas().DataFrame(rows)


def _plan(doc: Mapping[str, Any]) -> PlanResult:
    return _build(PlanResult, doc)


def _context(
    model: str,
    *,
    gpus: int | None,
    nodes: int | None,
    hardware: str | None,
    stack: str | None,
    global_batch: int | None,
    seq_len: int | None,
    dtype: str,
    headroom: str | None,
    emit: str | None,
    stack_options: Mapping[str, str] | None = None,
) -> tuple[Any, Any]:
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.spec.job import DEFAULT_HEADROOM

    want = launch.request(emit, out=None, torchtitan_config=None)
    ctx = advise.context(
        model,
        hardware=hardware,
        gpus=gpus,
        nodes=nodes,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        stack=launch.stack_for(emit, stack),
        headroom=DEFAULT_HEADROOM if headroom is None else headroom,
        stack_options=[f"{k}={v}" for k, v in (stack_options or {}).items()],
    )
    return want, ctx


def suggest(
    model: str,
    *,
    gpus: int | None = None,
    nodes: int | None = None,
    hardware: str | None = None,
    stack: str | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    dtype: str = "bf16",
    top: int = 10,
    headroom: str | None = None,
    emit: str | None = None,
    stack_options: Mapping[str, str] | None = None,
) -> SuggestResult:
    """Search every parallel plan for a training job and rank them (`autopar suggest`; same options)."""
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.errors import SpecError
    from autopar.render.report import suggestion_dict

    if top < 1:
        raise SpecError(f"`top` must be at least 1, got {top}")
    want, ctx = _context(
        model,
        gpus=gpus,
        nodes=nodes,
        hardware=hardware,
        stack=stack,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        headroom=headroom,
        emit=emit,
        stack_options=stack_options,
    )
    result = advise.suggest(ctx)
    launched = launch.prepare(want, result.ctx, result.plan_order)
    doc = suggestion_dict(result, top, launch=launched)
    return _build(SuggestResult, doc, recommended=_plan(doc), plans=tuple(_plan(p) for p in doc["plans"]), _json=json.dumps(doc, indent=2))


def estimate(
    model: str,
    *,
    gpus: int | None = None,
    nodes: int | None = None,
    tp: int = 1,
    pp: int = 1,
    vpp: int = 1,
    cp: int = 1,
    ep: int = 1,
    etp: int = 1,
    cp_comm: str | None = None,
    mbs: int = 1,
    recompute: str = "none",
    recompute_modules: str | Sequence[str] | None = None,
    zero: int | None = None,
    sp: bool = True,
    hardware: str | None = None,
    stack: str | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    dtype: str = "bf16",
    headroom: str | None = None,
    emit: str | None = None,
    stack_options: Mapping[str, str] | None = None,
) -> EstimateResult:
    """One plan, explained (`autopar estimate`; same options). dp = gpus / (tp * pp * cp)."""
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.render.report import explained_dict

    want, ctx = _context(
        model,
        gpus=gpus,
        nodes=nodes,
        hardware=hardware,
        stack=stack,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        headroom=headroom,
        emit=emit,
        stack_options=stack_options,
    )
    modules = recompute_modules if recompute_modules is None or isinstance(recompute_modules, str) else (",".join(recompute_modules))
    result = advise.explain(
        ctx,
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
        sp=sp,
        recompute_modules=modules,
    )
    launched = launch.prepare(want, result.ctx, result.estimate.plan)
    doc = explained_dict(result, launch=launched)
    return _build(EstimateResult, doc, plan=_plan(doc), _json=json.dumps(doc, indent=2))


def _serve_estimate(doc: Mapping[str, Any]) -> ServeEstimateResult:
    return _build(ServeEstimateResult, doc, _json=json.dumps(doc, indent=2))


def _engine_args(
    max_num_tokens: int | None, max_batch_size: int | None, memory_fraction: float | None, mixed_chunk: bool, max_prefill_tokens: int | None
) -> Any:
    from autopar.spec.serve import EngineArgs

    return EngineArgs(
        max_num_tokens=max_num_tokens,
        max_batch_size=max_batch_size,
        memory_fraction=memory_fraction,
        mixed_chunk=mixed_chunk or None,
        max_prefill_tokens=max_prefill_tokens,
    )


def serve_suggest(
    model: str,
    *,
    gpus: int,
    isl: int = 1024,
    osl: int = 1024,
    hardware: str | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    framework: str | None = None,
    weights: str = "bf16",
    kv_dtype: str | None = None,
    modes: str | Sequence[str] = "agg,disagg",
    max_num_tokens: int | None = None,
    max_batch_size: int | None = None,
    memory_fraction: float | None = None,
    mixed_chunk: bool = False,
    max_prefill_tokens: int | None = None,
    emit: str | None = None,
) -> ServeSuggestResult:
    """Search serving deployments (`autopar serve suggest`; same options)."""
    from autopar.advise import serve as advise
    from autopar.render.serve import suggestion_dict

    ctx = advise.options_context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype="auto" if kv_dtype is None else kv_dtype,
        engine_args=_engine_args(max_num_tokens, max_batch_size, memory_fraction, mixed_chunk, max_prefill_tokens),
    )
    result = advise.suggest(
        ctx, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms, modes=advise.parse_modes(modes), kv_dtypes=advise.kv_dtypes(kv_dtype)
    )
    launched = advise.launch(ctx, emit, result.best) if emit and result.best is not None else None
    doc = suggestion_dict(ctx, result, launched)
    return _build(
        ServeSuggestResult,
        doc,
        recommended=_serve_estimate(doc["recommended"]),
        pareto=tuple(_build(ServePoint, p) for p in doc["pareto"]),
        _json=json.dumps(doc, indent=2),
    )


def serve_estimate(
    model: str,
    *,
    gpus: int,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    attention_dp: bool = False,
    concurrency: int = 1,
    isl: int = 1024,
    osl: int = 1024,
    hardware: str | None = None,
    framework: str | None = None,
    weights: str = "bf16",
    kv_dtype: str = "auto",
    mode: str = "agg",
    prefill_workers: int | None = None,
    prefill_tp: int | None = None,
    prefill_pp: int | None = None,
    prefill_dp: int | None = None,
    prefill_ep: int | None = None,
    prefill_attention_dp: bool = False,
    decode_workers: int | None = None,
    decode_tp: int | None = None,
    decode_pp: int | None = None,
    decode_dp: int | None = None,
    decode_ep: int | None = None,
    decode_attention_dp: bool = False,
    max_num_tokens: int | None = None,
    max_batch_size: int | None = None,
    memory_fraction: float | None = None,
    mixed_chunk: bool = False,
    max_prefill_tokens: int | None = None,
    emit: str | None = None,
) -> ServeEstimateResult:
    """One serving deployment, explained (`autopar serve estimate`; same options)."""
    from autopar.advise import serve as advise
    from autopar.render.serve import estimate_dict, launch_dict
    from autopar.spec.serve import Workload

    ctx = advise.options_context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype=kv_dtype,
        engine_args=_engine_args(max_num_tokens, max_batch_size, memory_fraction, mixed_chunk, max_prefill_tokens),
    )
    dep = advise.deployment(
        ctx,
        mode=mode,
        agg=advise.PoolArgs(tp=tp, pp=pp, dp=dp, ep=ep, attention_dp=attention_dp),
        prefill=advise.PoolArgs(
            tp=prefill_tp, pp=prefill_pp, dp=prefill_dp, ep=prefill_ep, attention_dp=prefill_attention_dp, workers=prefill_workers
        ),
        decode=advise.PoolArgs(
            tp=decode_tp, pp=decode_pp, dp=decode_dp, ep=decode_ep, attention_dp=decode_attention_dp, workers=decode_workers
        ),
    )
    est = advise.explain(ctx, dep, Workload(isl=isl, osl=osl, concurrency=concurrency))
    launched = advise.launch(ctx, emit, est) if emit else None
    return _serve_estimate({**estimate_dict(ctx, est), **launch_dict(launched)})
