"""The file formats autopar reads, as pydantic models: model specs, hardware
profiles and length distributions (``autopar schema model|hardware|distribution``
prints their JSON Schema, for editors).

Every model forbids unknown keys and every number is constrained: positive,
finite, and bounded by :mod:`autopar.spec.limits`. Ints may be written as
integral floats (``1.0e+3``); nothing else is coerced (``"32"`` is not 32).
:func:`validate` turns pydantic's errors into one line naming the file and
the field. Checks that involve several fields stay with the values they build
(``ModelSpec``, ``MoESpec``...) or with the loader.

pydantic is imported here only, and this module only when a file is read, so
that ``autopar --help`` does not pay for it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, StringConstraints, ValidationError, model_validator

from autopar.errors import AutoparError
from autopar.io.reading import JsonConstant, did_you_mean, one_line, shown
from autopar.spec import limits as lim
from autopar.spec.framework import ADMISSIONS, FRAMEWORKS, MEMORY_RULES, MOE_DECODE_READS, POLICIES
from autopar.spec.hardware import COLLECTIVES, DTYPES
from autopar.spec.model import NORMS, POSITIONS
from autopar.spec.plan import CP_COMMS, RECOMPUTE_MODULES, ZERO_STAGES
from autopar.spec.stack import ACTIVATION_SAVES, ATTENTION_KERNELS, DP_GRANULARITY, LAUNCHERS, SELECTIVE_POLICIES

__all__ = ["DistFile", "FrameworkFile", "ModelFile", "ProfileFile", "StackFile", "VariantFile", "schemas", "validate"]
Model = TypeVar("Model", bound=BaseModel)


def _integral(value: Any) -> Any:
    """1.0e+3 -> 1000; any other value is left for the type check."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _int(low: int, high: int) -> Any:
    return Field(ge=low, le=high)


def _num(high: float, *, low: float = 0.0, inclusive: bool = False) -> Any:
    """A finite number in (low, high], or [low, high] when `inclusive`."""
    return Field(ge=low, le=high, allow_inf_nan=False) if inclusive else Field(gt=low, le=high, allow_inf_nan=False)


def _rate(low: float, high: float) -> Any:
    """A rate, size or efficiency in [low, high]: a time is work / rate, so a rate has a floor as well."""
    return _num(high, low=low, inclusive=True)


_I = BeforeValidator(_integral)
Layers = Annotated[int, _int(1, lim.MAX_LAYERS), _I]
Layers0 = Annotated[int, _int(0, lim.MAX_LAYERS), _I]
Width = Annotated[int, _int(1, lim.MAX_WIDTH), _I]
Width0 = Annotated[int, _int(0, lim.MAX_WIDTH), _I]
Heads = Annotated[int, _int(1, lim.MAX_HEADS), _I]
Vocab = Annotated[int, _int(1, lim.MAX_VOCAB), _I]
Tokens = Annotated[int, _int(1, lim.MAX_SEQ), _I]
Tokens0 = Annotated[int, _int(0, lim.MAX_SEQ), _I]
Experts = Annotated[int, _int(1, lim.MAX_EXPERTS), _I]
Experts0 = Annotated[int, _int(0, lim.MAX_EXPERTS), _I]
Small = Annotated[int, _int(1, lim.MAX_SMALL), _I]
Small0 = Annotated[int, _int(0, lim.MAX_SMALL), _I]
Group = Annotated[int, _int(2, lim.MAX_GPUS), _I]
NodeSize = Annotated[int, _int(1, lim.MAX_GPUS_PER_NODE), _I]
Version = Annotated[int, _int(1, 1_000_000), _I]
Capacity = Annotated[float, _num(lim.MAX_CAPACITY_FACTOR, low=1.0, inclusive=True)]
Latency = Annotated[float, _num(lim.MAX_LATENCY_US)]
BusBw = Annotated[float, _rate(lim.MIN_BUS_GBPS, lim.MAX_BUS_GBPS)]
Memory = Annotated[float, _rate(lim.MIN_MEMORY_GIB, lim.MAX_MEMORY_GIB)]
Hbm = Annotated[float, _rate(lim.MIN_HBM_GBPS, lim.MAX_HBM_GBPS)]
Efficiency = Annotated[float, _rate(lim.MIN_EFFICIENCY, 1.0)]
Fraction = Annotated[float, _num(1.0, inclusive=True)]  # [0, 1]
Tflops = Annotated[float, _rate(lim.MIN_TFLOPS, lim.MAX_TFLOPS)]
CurveX = Annotated[float, _num(lim.MAX_CURVE_X)]
Power = Annotated[float, _rate(lim.MIN_POWER_W, lim.MAX_POWER_W)]
Slowdown = Annotated[float, _num(lim.MAX_SLOWDOWN, low=1.0, inclusive=True)]
Factor = Annotated[float, _num(lim.MAX_SLOWDOWN)]
Median = Annotated[float, _num(lim.MAX_SEQ, low=1.0, inclusive=True)]
Sigma = Annotated[float, _num(lim.MAX_SIGMA)]
Count = Annotated[float, _num(lim.MAX_COUNT, inclusive=True)]
Weight = Annotated[float, _num(lim.MAX_COUNT)]
RopeBase = Annotated[float, _num(lim.MAX_ROPE_BASE, low=1.0, inclusive=True)]
RopeScaling = Annotated[float, _num(lim.MAX_ROPE_SCALING, low=1.0, inclusive=True)]


def _one_line_texts(value: Any) -> Any:
    """provenance/citations: a mapping of names to scalars, all read as text; nested values are refused."""
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        if isinstance(v, dict | list):
            raise ValueError(f"{str(k)[:60]}: expected a text, got a {type(v).__name__}")
        out[str(k)[:200].replace("\n", "\\n")] = str(v)[:2000].replace("\n", "\\n")
    return out


Text = Annotated[str, StringConstraints(min_length=1, max_length=10_000, pattern=r"\S")]
Texts = Annotated[dict[str, str], BeforeValidator(_one_line_texts)]
Dtype = Literal["bf16", "fp16", "fp8", "fp4", "fp32", "tf32"]
assert set(Dtype.__args__) == set(DTYPES)  # type: ignore[attr-defined]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --- model spec (DESIGN.md) ---------------------------------------------------------


class MoEFile(_Strict):
    num_experts: Experts
    top_k: Small
    expert_ffn_hidden_size: Width
    shared_experts: Experts0 = 0
    shared_expert_ffn_hidden_size: Width0 = 0
    first_dense_layers: Layers0 = 0
    capacity_factor: Capacity = 1.0
    max_nodes_per_token: Small0 = 0


class MLAFile(_Strict):
    q_lora_rank: Width0 = 0
    kv_lora_rank: Width
    qk_nope_head_dim: Width
    qk_rope_head_dim: Width
    v_head_dim: Width
    index_head_dim: Width0 = 0  # DeepSeek Sparse Attention indexer key width (GLM-5); 0: none


class MambaFile(_Strict):
    state_size: Small
    head_dim: Width
    expand: Small = 2
    layer_pattern: Annotated[str, StringConstraints(min_length=1, max_length=lim.MAX_LAYERS)]
    num_groups: Small = 8
    conv_kernel: Small = 4
    chunk_size: Small = 128


class ModelFile(_Strict):
    """A model spec YAML (format in DESIGN.md and the README)."""

    name: Text
    layers: Layers
    hidden_size: Width
    num_attention_heads: Heads
    num_kv_heads: Heads | None = None  # default: num_attention_heads (MHA)
    head_dim: Width | None = None  # default: hidden_size / num_attention_heads
    ffn_hidden_size: Width
    ffn_activation: Literal["swiglu", "gelu", "relu2"] = "swiglu"
    vocab_size: Vocab
    seq_len: Tokens
    max_seq_len: Tokens | None = None  # default: seq_len
    tie_embeddings: bool = False
    source: Text | None = None  # a citation; default: the file's path
    dropout: bool = False
    norm: Literal["rmsnorm", "layernorm", "layernorm1p"] = "rmsnorm"
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    rope_base: RopeBase = 10000.0
    rope_scaling: RopeScaling = 1.0  # Llama 3.1 rotary frequency scaling (1 = none)
    linear_bias: bool = False
    qk_norm: bool = False
    sliding_window: Tokens0 = 0  # tokens a windowed attention layer sees (0: none)
    window_layers: Layers0 = 0  # how many attention layers have the window
    kv_dtype_default: Literal["bf16", "fp8"] | None = None  # what a serving engine's KV dtype auto reads (default bf16)
    moe: MoEFile | None = None
    mla: MLAFile | None = None
    mamba: MambaFile | None = None


# --- hardware profile (schema in autopar/spec/hardware.py) -------------------------


class FitFile(_Strict):
    group_size: Group
    latency_us: Latency
    bw_gbps: BusBw


Fits = Annotated[list[FitFile], Field(min_length=1, max_length=lim.MAX_HISTOGRAM_BINS)]
# [size, achieved / peak]: a pair read as a tuple (strict pydantic takes only tuples), each number strict
Point = Annotated[tuple[Annotated[CurveX, Strict()], Annotated[Efficiency, Strict()]], Strict(False)]
Curve = Annotated[list[Point], Field(min_length=1, max_length=lim.MAX_HISTOGRAM_BINS)]


class CollectivesFile(_Strict):
    all_reduce: Fits
    all_gather: Fits
    reduce_scatter: Fits
    all_to_all: Fits
    send_recv: Fits


assert tuple(CollectivesFile.model_fields) == COLLECTIVES
assert ModelFile.model_fields["norm"].annotation.__args__ == NORMS  # type: ignore[union-attr]
assert ModelFile.model_fields["position_embedding"].annotation.__args__ == POSITIONS  # type: ignore[union-attr]


class GpuFile(_Strict):
    name: Text
    memory_gib: Memory
    hbm_bw_gbps: Hbm
    memory_efficiency: Efficiency
    peak_tflops: dict[Dtype, Tflops]  # must give bf16
    gemm_efficiency: dict[Dtype, Curve]  # [GEMM FLOPs, achieved/peak] pairs; must give bf16
    attention_efficiency: dict[Dtype, Curve]  # [sequence length, achieved/peak] pairs; must give bf16


class NodeFile(_Strict):
    gpus_per_node: NodeSize
    gpus_per_host: NodeSize | None = None  # GPUs one host (one OS) holds, for launch lines; default: the node
    intra: CollectivesFile


class ClusterFile(_Strict):
    inter: CollectivesFile


class OverlapFile(_Strict):
    compute_slowdown: Slowdown
    comm_slowdown: Slowdown


class CorrectionFile(_Strict):
    factor: Factor  # each correction's own bounds are checked by the loader
    stack: Text
    source: Text


class ProfileFile(_Strict):
    """A hardware profile YAML, built-in (datasheet) or measured."""

    schema_version: Version
    name: Text
    description: str = ""
    source: Literal["datasheet", "measured"]
    provenance: Texts | None = None
    citations: Texts | None = None  # required when source is datasheet
    gpu: GpuFile
    node: NodeFile
    cluster: ClusterFile
    overlap: OverlapFile
    corrections: dict[str, CorrectionFile] | None = None
    raw: Any = None  # measured: the timings behind the fits, not read


class PowerFile(_Strict):
    tdp_w: Power  # rated board power
    limit_w: Power  # the cap; at most tdp_w (checked by the loader)


class VariantFile(_Strict):
    """A profile derived from another (autopar.io.profiles._variant): the merged profile is a ProfileFile."""

    schema_version: Version
    name: Text
    description: Text | None = None
    base: Text
    overrides: dict[str, Any] | None = None
    citations: Texts | None = None
    power: PowerFile | None = None


# --- execution stack (autopar/io/stacks.py, autopar/spec/stack.py) ------------------

Bytes = Annotated[float, _num(lim.MAX_ELEMENT_BYTES)]
Bytes0 = Annotated[float, _num(lim.MAX_ELEMENT_BYTES, inclusive=True)]
HostUs = Annotated[float, _num(lim.MAX_HOST_US, inclusive=True)]
Ratio = Annotated[float, _rate(lim.MIN_ATTENTION_RATIO, lim.MAX_ATTENTION_RATIO)]
SeqX = Annotated[float, _num(lim.MAX_SEQ)]
RatioCurve = Annotated[list[Annotated[tuple[Annotated[SeqX, Strict()], Annotated[Ratio, Strict()]], Strict(False)]],
                       Field(min_length=1, max_length=lim.MAX_HISTOGRAM_BINS)]
Axis = Literal["dp", "tp", "pp", "cp", "ep"]
Zero = Literal[0, 1, 2, 3]
assert Zero.__args__ == ZERO_STAGES  # type: ignore[attr-defined]


class StackKernels(_Strict):
    attention: Literal["fa2", "fa3", "cudnn", "sdpa", "triton"]
    attention_vs_fa3: RatioCurve  # [seq_len, throughput over FA3's] pairs
    compiled: bool = False
    elementwise_passes: Annotated[float, _num(lim.MAX_PASSES)]
    layer_overhead_us: HostUs
    fp8_cast_bytes: Bytes0
    logit_bytes: Bytes
    moe_host_us: HostUs = 0.0


class StackOverlap(_Strict):
    tp: Fraction
    cp: bool = False
    ep: bool = False
    dp: Fraction
    dp_gather: Fraction | None = None  # the parameter all-gather's share hidden, where it differs from dp's


class StackCollectives(_Strict):
    dp_granularity: Literal["bucket", "layer"]
    dp_bucket_params: Annotated[float, _num(lim.MAX_BUCKET_PARAMS, inclusive=True)] = 0.0
    grad_reduce_bytes: Bytes
    fp8_grad_reduce_bytes: Bytes


class StackMemory(_Strict):
    selective: Literal["attention", "op"]
    fp8_weight_copy_bytes: Bytes0
    fp8_weight_copy_sharded: bool = False
    fp8_saves_fp8_inputs: bool = False
    fp8_gather: bool = False
    pp_reshard: bool = True
    pp_stage_buffers: Annotated[int, _int(0, lim.MAX_STAGE_BUFFERS), _I] = 0
    fixed_overhead_gib: Memory
    allocator_fragmentation: Fraction
    activation_saves: Literal["fused", "eager-torch"] = "fused"
    fsdp_master: bool = False
    gather_bytes: Bytes = 2.0
    root_gathered: bool = False
    logit_peak_bytes: Bytes0 = 0.0
    logit_peak_bytes_tp: Bytes0 = 0.0
    tp_saves_gathered: bool = False


class StackRules(_Strict):
    parallelisms: Annotated[list[Axis], Field(min_length=1, max_length=5)]  # must include dp (checked by the loader)
    cp_comms: Annotated[list[Literal["ring", "allgather"]], Field(max_length=2)]
    zero_stages: Annotated[list[Zero], Field(min_length=1, max_length=4)]
    vpp: bool = False
    equal_stages: bool = False
    ep_over_tp: bool = False
    experts_whole_with_ep: bool = False  # experts split like the MLP (etp = tp) without EP, whole (etp 1) with EP
    pipeline_counts_embedding: bool = False
    recompute_modules: Annotated[list[Literal["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                                              "shared_experts"]], Field(max_length=7)] = []


OptionValue = Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.+-]+$")]
StackField = Annotated[str, StringConstraints(pattern=r"^(kernels|overlap|collectives|memory|plan_rules)\.[a-z0-9_]+$")]


class StackOption(_Strict):
    """A recipe fact a user may set (--stack-opt KEY=VALUE): each choice sets stack fields, or a number sets one."""

    help: Text  # what it is, the framework's own flag, and its source
    choices: Annotated[dict[OptionValue, dict[StackField, Any]], Field(min_length=2, max_length=8)] | None = None
    number: StackField | None = None  # the field the value sets (bounded as that field is)


class StackFile(_Strict):
    """An execution-stack YAML (format in autopar/io/stacks.py)."""

    schema_version: Version
    name: Text
    version: OptionValue | None = None  # the framework version it describes (NAME@VERSION; the file name's)
    description: str = ""
    launcher: Literal["megatron", "torchtitan", "deepspeed", "none"]
    source: Text | None = None  # the framework version the numbers describe
    kernels: StackKernels
    overlap: StackOverlap
    collectives: StackCollectives
    memory: StackMemory
    plan_rules: StackRules
    options: Annotated[dict[OptionValue, StackOption], Field(max_length=32)] | None = None
    citations: Texts | None = None


def _choices(cls: type[BaseModel], name: str) -> tuple[Any, ...]:
    annotation = cls.model_fields[name].annotation
    while getattr(annotation, "__origin__", None) is not Literal:
        annotation = annotation.__args__[0]  # type: ignore[union-attr]
    return tuple(annotation.__args__)  # type: ignore[union-attr]


assert _choices(StackKernels, "attention") == ATTENTION_KERNELS
assert _choices(StackCollectives, "dp_granularity") == DP_GRANULARITY
assert _choices(StackMemory, "selective") == SELECTIVE_POLICIES
assert _choices(StackMemory, "activation_saves") == ACTIVATION_SAVES
assert _choices(StackFile, "launcher") == LAUNCHERS
assert _choices(StackRules, "cp_comms") == CP_COMMS
assert _choices(StackRules, "recompute_modules") == RECOMPUTE_MODULES


# --- serving framework at a version (autopar/io/frameworks.py) ---------------------

OneLine = Annotated[str, StringConstraints(min_length=1, max_length=400, pattern=r"^[^\n]*\S[^\n]*$")]


class _Value(_Strict):
    """One engine value: what it does, and where it comes from (a source, or the rows and command of a fit)."""

    mechanism: OneLine
    source: OneLine | None = None
    fitted_on: OneLine | None = None  # the measured rows the value was set on
    fitted_by: OneLine | None = None  # the command that sets it

    @model_validator(mode="after")
    def _cited(self) -> _Value:
        if (self.fitted_on is None) != (self.fitted_by is None):
            raise ValueError("a fitted value names both fitted_on (the rows) and fitted_by (the command)")
        if self.source is None and self.fitted_on is None:
            raise ValueError("needs a source, or fitted_on and fitted_by")
        return self


class FractionValue(_Value):
    value: Annotated[float, _rate(0.05, 1.0)]


class SecondsValue(_Value):
    value: Annotated[float, _num(lim.MAX_FRAMEWORK_SECONDS, inclusive=True)]


class FactorValue(_Value):
    value: Annotated[float, _num(lim.MAX_SLOWDOWN)]


class BytesValue(_Value):
    value: Annotated[float, _num(lim.MAX_MEMORY_GIB * 2**30, inclusive=True)]


class TokensValue(_Value):
    value: Tokens


class Tokens0Value(_Value):
    value: Tokens0


class RequestsValue(_Value):
    value: Annotated[int, _int(1, lim.MAX_SERVE_CONCURRENCY), _I]


class SizesValue(_Value):
    value: Annotated[list[Annotated[int, _int(1, lim.MAX_SERVE_CONCURRENCY), _I]], Field(max_length=4096)]


class FlagValue(_Value):
    value: bool


class MemoryRuleValue(_Value):
    value: Literal["total", "free"]


class PolicyValue(_Value):
    value: Literal["decode_first", "prefill_first"]


class ExpertReadsValue(_Value):
    value: Literal["touched", "local"]


class AdmissionValue(_Value):
    value: Literal["reserve_full", "blocks_now_preempt", "reserve_ratio"]


class StepsValue(_Value):
    value: Annotated[int, _int(1, lim.MAX_SMALL), _I]


class FrameworkFile(_Strict):
    """A serving framework's data file at one version; every key past `source` is a Framework field."""

    schema_version: Version
    name: Literal["vllm", "sglang", "trtllm"]
    version: Annotated[str, StringConstraints(min_length=1, max_length=40)]
    label: OneLine
    description: OneLine
    source: OneLine
    memory_fraction: FractionValue
    memory_rule: MemoryRuleValue
    chunk_tokens: TokensValue
    graph_reserve_bytes: BytesValue
    step_overhead_s: SecondsValue
    ttft_overhead_s: SecondsValue
    prefill_slowdown: FactorValue
    policy: PolicyValue
    chunked: FlagValue
    max_seqs: RequestsValue
    admission: AdmissionValue
    retract_steps: StepsValue
    graph_sizes: SizesValue
    eager_layer_s: SecondsValue
    overlap: FlagValue
    dp_padding: FlagValue
    moe_decode_reads: ExpertReadsValue
    host_request_s: SecondsValue
    mixed_chunk: FlagValue
    max_prefill_tokens: Tokens0Value
    host_token_s: SecondsValue
    moe_decode_slowdown: FactorValue


assert _choices(FrameworkFile, "name") == FRAMEWORKS
assert _choices(PolicyValue, "value") == POLICIES
assert _choices(MemoryRuleValue, "value") == MEMORY_RULES
assert _choices(ExpertReadsValue, "value") == MOE_DECODE_READS
assert _choices(AdmissionValue, "value") == ADMISSIONS


# --- length distribution (autopar/io/distributions.py) -----------------------------------


class LognormalFile(_Strict):
    median: Median
    sigma: Sigma
    max: Tokens
    min: Tokens = 1


Lengths = Annotated[list[Tokens], Field(max_length=lim.MAX_HISTOGRAM_BINS + 1)]
Counts = Annotated[list[Count], Field(max_length=lim.MAX_HISTOGRAM_BINS)]


class ComponentFile(_Strict):
    """A histogram (bin_edges and counts) or a clipped lognormal."""

    bin_edges: Lengths | None = None
    counts: Counts | None = None
    lognormal: LognormalFile | None = None


class MixtureEntry(ComponentFile):
    weight: Weight


class DistFile(ComponentFile):
    """A length distribution YAML/JSON: one component, or a mixture of them."""

    name: str | None = None
    source: str | None = None
    description: str | None = None
    mixture: Annotated[list[MixtureEntry], Field(min_length=1, max_length=1000)] | None = None


def schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema of each format, by the name `autopar schema` takes."""
    return {name: {"$schema": "https://json-schema.org/draft/2020-12/schema", **cls.model_json_schema()} for name, cls in
            (("model", ModelFile), ("hardware", ProfileFile), ("distribution", DistFile), ("stack", StackFile),
             ("framework", FrameworkFile))}


# --- errors --------------------------------------------------------------------------


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{one_line(str(part), 60)}" if out else one_line(str(part), 60)
    return out


def _model_at(cls: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the last key of `loc`, for 'did you mean'."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = cls.model_fields.get(str(part))
        found = _find_model(field.annotation) if field is not None else None
        if found is None:
            return None
        cls = found
    return cls


def _find_model(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in getattr(tp, "__args__", ()):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else (f"{value:,}" if isinstance(value, int) else str(value))


def describe(cls: type[BaseModel], error: Any) -> str:
    """One pydantic error as '<field>: <what is wrong>'."""
    loc, kind, ctx, value = tuple(error["loc"]), error["type"], error.get("ctx") or {}, error.get("input")
    path = _dotted(loc)
    if kind == "missing" or (value is None and kind.endswith("_type")):
        return f"{path}: missing required field"
    if kind == "extra_forbidden":
        holder = _model_at(cls, loc)
        known = [f.alias or name for name, f in holder.model_fields.items()] if holder is not None else []
        return f"{path}: unknown field{did_you_mean(str(loc[-1]), known)}"
    if kind == "literal_error":
        choices = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        hint = did_you_mean(str(value), [c.strip() for c in choices.split(",")]) if isinstance(value, str) else ""
        return f"{path}: must be one of {choices}, got {shown(value)}{hint}"
    messages = {
        "int_type": f"expected an integer, got {shown(value)}",
        "float_type": f"expected a number, got {shown(value)}",
        "bool_type": f"expected true or false, got {shown(value)}",
        "string_type": f"expected a non-empty string, got {shown(value)}",
        "string_too_short": f"expected a non-empty string, got {shown(value)}",
        "string_pattern_mismatch": f"expected a non-empty string, got {shown(value)}",
        "string_too_long": f"must be at most {_number(ctx.get('max_length'))} characters",
        "dict_type": f"expected a mapping, got {type(value).__name__}",
        "model_type": f"expected a mapping, got {type(value).__name__}",
        "list_type": f"expected a list, got {type(value).__name__}",
        "tuple_type": f"expected a pair [size, value], got {shown(value)}",
        "too_short": f"expected at least {_number(ctx.get('min_length'))} item(s), got {_number(ctx.get('actual_length'))}",
        "too_long": f"expected at most {_number(ctx.get('max_length'))} item(s)",
        "finite_number": f"must be a finite number, got {shown(value)}",
        "greater_than": f"must be a positive number, got {shown(value)}" if ctx.get("gt") == 0
        else f"must be > {_number(ctx.get('gt'))}, got {shown(value)}",
        "greater_than_equal": f"must be >= {_number(ctx.get('ge'))}, got {shown(value)}",
        "less_than_equal": f"must be at most {_number(ctx.get('le'))}, got {shown(value)}",
    }
    if isinstance(value, JsonConstant) and kind in ("int_type", "float_type"):
        return f"{path}: must be a finite number, got {value} (JSON has no {value})"
    if kind in messages:
        return f"{path}: {messages[kind]}"
    text = str(error.get("msg", kind)).removeprefix("Value error, ")
    return f"{path}: {one_line(text, 200)}" if path else one_line(text, 200)


def validate(cls: type[Model], data: dict[str, Any], *, where: str, err: type[AutoparError]) -> Model:
    """`data` as a `cls`, or the first problem as one line: '<where>: <field>: <what>'."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise err(f"{where}: {describe(cls, exc.errors(include_url=False)[0])}") from None
