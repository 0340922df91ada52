"""Serving inputs: an engine's parallel layout, a deployment of engines, a workload.

Conventions follow how vLLM, SGLang and TensorRT-LLM deployments are described
(DESIGN.md, `autopar serve estimate`):

- `tp` is the tensor parallelism of attention inside one rank group.
- `dp` with attention-DP: `dp` attention data-parallel ranks inside one engine
  (tp x pp x dp GPUs). The MoE layers span all tp x dp ranks: tp x dp = etp x ep.
  Without attention-DP, `dp` is the number of independent replicas.
- `concurrency` is the number of requests in flight across the whole deployment.
- TPOT is the inter-token latency after the first token:
  (request latency - TTFT) / (osl - 1).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from autopar.errors import SpecError
from autopar.spec.framework import Framework
from autopar.spec.limits import MAX_SEQ, MAX_SERVE_CONCURRENCY
from autopar.spec.model import ModelSpec

WEIGHT_DTYPES = ("bf16", "fp8", "fp4", "int4")
KV_DTYPES = ("auto", "bf16", "fp8")
SSM_STATE_DTYPES = ("bf16", "fp32")  # EngineArgs.ssm_state_dtype (cost/serve.py SSM_STATE_BYTES)
MODES = ("agg", "disagg")
TPOT_DEFINITION = "TPOT = inter-token latency after the first token: (request latency - TTFT) / (osl - 1)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    """One serving engine (one model instance): how its GPUs split the model."""

    tp: int = 1  # tensor parallelism of attention (and of dense MLPs)
    pp: int = 1  # pipeline stages
    dp: int = 1  # attention data-parallel ranks inside the engine (attention-DP); 1 without it
    ep: int = 1  # expert parallelism of the MoE layers, over the engine's tp x dp ranks

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep"):
            value = getattr(self, name)
            if value < 1:
                raise SpecError(f"`{name}` must be at least 1, got {value}")
        if (self.tp * self.dp) % self.ep:
            raise SpecError(
                f"`ep` ({self.ep}) must divide tp x dp ({self.tp} x {self.dp}): "
                "the MoE layers span the engine's tp x dp ranks (tp x dp = moe_tp x ep)"
            )

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def etp(self) -> int:
        """Tensor parallelism inside each expert: tp x dp / ep."""
        return self.tp * self.dp // self.ep

    def check(self, model: ModelSpec, *, prefix: str = "") -> None:
        """The rules the frameworks enforce, with the numbers; `prefix` prefixes the parameters named
        (prefill_ / decode_ for a disaggregated pool)."""
        if model.num_attention_heads % self.tp:
            raise SpecError(
                f"{model.name}: num_attention_heads ({model.num_attention_heads}) must be divisible by `{prefix}tp` ({self.tp})"
            )
        if self.pp > model.layers:
            raise SpecError(f"{model.name}: `{prefix}pp` ({self.pp}) exceeds layers ({model.layers})")
        if model.moe is None and self.ep > 1:
            raise SpecError(f"{model.name}: `{prefix}ep={self.ep}` needs an MoE model")
        if model.moe is not None:
            if model.moe.num_experts % self.ep:
                raise SpecError(f"{model.name}: moe.num_experts ({model.moe.num_experts}) must be divisible by `{prefix}ep` ({self.ep})")
            if model.moe.expert_ffn_hidden_size % self.etp:
                raise SpecError(
                    f"{model.name}: moe.expert_ffn_hidden_size ({model.moe.expert_ffn_hidden_size}) "
                    f"must be divisible by the expert TP `{prefix}tp` x `{prefix}dp` / `{prefix}ep` ({self.etp})"
                )
        elif model.ffn_hidden_size % self.tp:
            raise SpecError(f"{model.name}: ffn_hidden_size ({model.ffn_hidden_size}) must be divisible by `{prefix}tp` ({self.tp})")

    def check_framework(self, framework: str, *, prefix: str = "") -> None:
        """Layouts a framework cannot express: vLLM's experts are TP-split (ep 1) or EP over all tp x dp GPUs;
        TensorRT-LLM's attention-DP runs attention on one GPU per rank."""
        if framework == "vllm" and self.ep not in (1, self.tp * self.dp):
            raise SpecError(
                f"vLLM runs MoE experts either tensor-parallel (`{prefix}ep=1`) or expert-parallel over all "
                f"tp x dp = {self.tp * self.dp} GPUs; `{prefix}ep={self.ep}` is neither (SGLang runs it)"
            )
        if framework == "trtllm" and self.dp > 1 and self.tp > 1:
            raise SpecError(
                f"TensorRT-LLM's attention-DP runs attention on one GPU per rank: `{prefix}tp` must be 1 with "
                f"`{prefix}attention_dp`, got {self.tp} (SGLang runs it)"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineArgs:
    """Launch settings of an engine that differ from its framework's defaults (None: the default).

    Each maps to one flag per framework (the emitters print the value used):
    max_num_tokens: vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size, TensorRT-LLM
    --max_num_tokens (tokens one engine step holds); max_batch_size: --max-num-seqs,
    --max-running-requests, --max_batch_size (requests running at once); memory_fraction:
    --gpu-memory-utilization, --mem-fraction-static (of total memory), TensorRT-LLM
    --kv_cache_free_gpu_memory_fraction (of the memory the weights leave). SGLang only:
    mixed_chunk: --enable-mixed-chunk (a prefill step also runs the running decodes);
    max_prefill_tokens: --max-prefill-tokens (new prompt tokens a step admits beyond its first prompt);
    recv_interval: --scheduler-recv-interval (decode steps between the scheduler's takes of new requests).
    prefix_cache False: vLLM --no-enable-prefix-caching, SGLang --disable-radix-cache, TensorRT-LLM
    kv_cache_config.enable_block_reuse false (no prompt reuses a cached prefix; for SGLang also the
    overlap scheduler a hybrid model loses while the radix cache is on, Framework.hybrid_overlap);
    ssm_state_dtype: the Mamba SSM state a hybrid model's engine keeps per request (vLLM
    --mamba-ssm-cache-dtype, SGLang --mamba-ssm-dtype, TensorRT-LLM kv_cache_config.mamba_ssm_cache_dtype;
    default the checkpoint's config, MambaSpec.ssm_state_dtype)."""

    max_num_tokens: int | None = None
    max_batch_size: int | None = None
    memory_fraction: float | None = None
    mixed_chunk: bool | None = None
    max_prefill_tokens: int | None = None
    recv_interval: int | None = None
    prefix_cache: bool | None = None
    ssm_state_dtype: str | None = None

    def __post_init__(self) -> None:
        for name in ("max_num_tokens", "max_batch_size", "max_prefill_tokens", "recv_interval"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= MAX_SERVE_CONCURRENCY:
                raise SpecError(f"`{name}` must be between 1 and {MAX_SERVE_CONCURRENCY:,}, got {value:,}")
        if self.memory_fraction is not None and not 0.05 <= self.memory_fraction <= 1.0:  # also refuses nan
            raise SpecError(f"`memory_fraction` must be between 0.05 and 1.0, got {self.memory_fraction}")
        if self.ssm_state_dtype is not None and self.ssm_state_dtype not in SSM_STATE_DTYPES:
            raise SpecError(f"`ssm_state_dtype` must be one of {', '.join(SSM_STATE_DTYPES)}, got {self.ssm_state_dtype!r}")

    def given(self) -> list[str]:
        """The settings given (not None), in declaration order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def check(self, model: ModelSpec, fw: Framework, *, prefix: str = "") -> None:
        """Settings the framework and model take: SGLang's own flags on SGLang only, a state dtype on a model with
        Mamba layers only (refused by parameter name, so that the CLI names its flag)."""
        if fw.name != "sglang":
            for name in ("mixed_chunk", "max_prefill_tokens", "recv_interval"):
                if getattr(self, name) is not None:
                    raise SpecError(f"`{prefix}{name}` is an SGLang setting (`framework=sglang`), got `framework={fw.name}`")
        if self.ssm_state_dtype is not None and model.mamba is None:
            raise SpecError(f"`{prefix}ssm_state_dtype` sets the Mamba state of a hybrid model; {model.name} has no Mamba layers")

    def over(self, base: EngineArgs) -> EngineArgs:
        """These settings where given, `base`'s elsewhere (a pool's own launch flags over the shared ones)."""
        mine = {f.name: getattr(self, f.name) for f in fields(self)}
        return EngineArgs(**{name: getattr(base, name) if value is None else value for name, value in mine.items()})


DEFAULT_ARGS = EngineArgs()  # every setting at the framework's default
POOL_ARGS = ("max_num_tokens", "max_batch_size", "memory_fraction")  # the settings a disaggregated pool may set apart


def launched_model(model: ModelSpec, args: EngineArgs) -> ModelSpec:
    """`model` with the Mamba SSM state dtype the engines were launched with (args.ssm_state_dtype) where it
    differs from the checkpoint's; the same object otherwise, so that caches keyed on the model still hit."""
    dtype, mamba = args.ssm_state_dtype, model.mamba
    if dtype is None or mamba is None or dtype == mamba.ssm_state_dtype:
        return model
    return replace(model, mamba=replace(mamba, ssm_state_dtype=dtype))


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """Engines serving one model: aggregated (one pool) or disaggregated (prefill and decode pools)."""

    fw: Framework  # the serving framework at its version (autopar/io/frameworks.py reads it)
    mode: str  # agg | disagg
    engine: Engine  # agg: every engine; disagg: the decode engines
    replicas: int  # agg: engines; disagg: decode workers
    weights: str = "bf16"  # bf16 | fp8 | fp4 | int4 (weight-only)
    kv_dtype: str = "auto"  # auto (what the checkpoint names: kv_auto) | bf16 | fp8
    kv_auto: str = "bf16"  # what auto resolves to: the checkpoint's KV dtype (ModelSpec.kv_dtype_default), else bf16
    prefill: Engine | None = None  # disagg: the prefill engines
    prefill_replicas: int = 0  # disagg: prefill workers
    args: EngineArgs = DEFAULT_ARGS  # launch settings of the engines (disagg: the decode engines)
    prefill_args: EngineArgs = DEFAULT_ARGS  # disagg: launch settings of the prefill engines

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("`mode`", self.mode, MODES),
            ("`weights`", self.weights, WEIGHT_DTYPES),
            ("`kv_dtype`", self.kv_dtype, KV_DTYPES),
            ("kv_auto", self.kv_auto, ("bf16", "fp8")),
        ):
            if value not in allowed:
                raise SpecError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        if self.replicas < 1:
            raise SpecError(f"replicas (`dp` without `attention_dp`, or `decode_workers`) must be at least 1, got {self.replicas}")
        if self.mode == "disagg" and (self.prefill is None or self.prefill_replicas < 1):
            raise SpecError("`mode=disagg` needs `prefill_workers` (at least 1) and the prefill engine")
        if self.mode == "agg" and self.prefill is not None:
            raise SpecError("`prefill_*` options need `mode=disagg`")

    def __hash__(self) -> int:
        """The engines, their counts and dtypes: equal deployments hash alike, and the deployments of one
        sweep (one framework and launch settings) seldom share these; a cost cache's key
        (cost/serve_memo.py) need not hash the framework and launch settings again."""
        return hash((self.mode, self.engine, self.replicas, self.prefill, self.prefill_replicas, self.weights, self.kv_dtype))

    @property
    def framework(self) -> str:
        """vllm | sglang | trtllm"""
        return self.fw.name

    @property
    def framework_version(self) -> str:
        """The version whose data the deployment uses."""
        return self.fw.version

    @property
    def gpus(self) -> int:
        extra = self.prefill.gpus * self.prefill_replicas if self.prefill is not None else 0
        return self.engine.gpus * self.replicas + extra

    def args_for(self, role: str | None) -> EngineArgs:
        """Launch settings of the engines in `role` (prefill: a disaggregated deployment's prefill pool)."""
        return self.prefill_args if role == "prefill" else self.args

    def framework_for(self, role: str | None = None) -> Framework:
        """The framework as the engines in `role` are launched: its values with the launch settings
        (args; role "prefill": a disaggregated deployment's prefill engines, prefill_args)."""
        fw, args = self.fw, self.args_for(role)
        if args is DEFAULT_ARGS:  # no setting given: nothing changes (the sweep's commonest call)
            return fw
        changed: dict[str, Any] = {
            name: value
            for name, value in (
                ("chunk_tokens", args.max_num_tokens),
                ("max_seqs", args.max_batch_size),
                ("memory_fraction", args.memory_fraction),
                ("mixed_chunk", args.mixed_chunk),
                ("max_prefill_tokens", args.max_prefill_tokens),
                ("recv_interval", args.recv_interval),
                # hybrid_overlap is SGLang's rule while its radix cache is on (server_args.py
                # _handle_mamba_radix_cache: no_buffer turns the overlap scheduler off unless
                # --disable-radix-cache); with the cache off a hybrid keeps `overlap`
                ("hybrid_overlap", True if args.prefix_cache is False else None),
            )
            if value is not None
        }
        return replace(fw, **changed) if changed else fw

    def model_as_launched(self, model: ModelSpec) -> ModelSpec:
        """`model` as the engines run it (launched_model of args)."""
        return launched_model(model, self.args)

    @property
    def kv_bytes(self) -> float:
        """Bytes per cached K or V element."""
        return 1.0 if self.kv_resolved == "fp8" else 2.0

    @property
    def kv_resolved(self) -> str:
        """The KV dtype the engines run: --kv-dtype, or what auto reads from the checkpoint."""
        return self.kv_auto if self.kv_dtype == "auto" else self.kv_dtype


def kv_auto(model: ModelSpec) -> tuple[str, str]:
    """(dtype, why) of a KV dtype `auto` for `model`: its checkpoint's KV quantisation, else the activation dtype."""
    if model.kv_dtype_default:
        return model.kv_dtype_default, model.kv_dtype_source
    return "bf16", "the activation dtype"


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What the deployment serves: fixed request shapes under a fixed concurrency."""

    isl: int  # input (prompt) tokens per request
    osl: int  # output tokens per request
    concurrency: int  # requests in flight across the deployment
    # False: the run's first `concurrency` requests arrive together and are counted, as in the benchmark
    # command autopar prints (no warm-up); True: only the steady state is measured (a warm-up run first)
    warmed: bool = False
    # each request's output length drawn uniformly from [random_range_ratio x osl, osl], as `sglang.bench_serving
    # --random-range-ratio` draws it (1: every request at osl, the benchmark command autopar prints)
    random_range_ratio: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.random_range_ratio <= 1:
            raise SpecError(f"`random_range_ratio` must be above 0 and at most 1, got {self.random_range_ratio}")
        if self.osl < 2:  # before the others' floor of 1, so that --osl 0 and 1 say the same
            raise SpecError(f"`osl` must be at least 2 (TPOT is measured between output tokens), got {self.osl}")
        for name in ("isl", "osl", "concurrency"):
            value = getattr(self, name)
            if value < 1:
                raise SpecError(f"`{name}` must be at least 1, got {value}")
            if value > (limit := MAX_SERVE_CONCURRENCY if name == "concurrency" else MAX_SEQ):
                raise SpecError(f"`{name}` must be at most {limit:,}, got {value:,}")


def for_deployment(dep: Deployment, role: str | None = None) -> Framework:
    """The framework as `dep` launches the engines in `role` (Deployment.framework_for)."""
    return dep.framework_for(role)
