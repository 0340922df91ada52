"""The Python API's results: frozen dataclasses built from the CLI's --json documents.

Each result keeps the document it was built from, so to_dict() and to_json() are the CLI's --json
for the same inputs; the typed fields are the document's keys of the same name (docs/python.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, TypeVar

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


def build(cls: type[T], doc: Mapping[str, Any], **given: Any) -> T:
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
    mfu: float  # against the dense peak of the job's GEMMs (bf16, or fp8 for an fp8 job), 0-1
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
        return json.loads(
            json.dumps(
                {f.name: _thawed(getattr(self, f.name)) for f in fields(self) if f.name != "recompute_modules" or self.recompute_modules}
            )
        )


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
