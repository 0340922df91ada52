"""The launch settings each measured serving row ran with, where they differ from the framework's defaults.

The rows of benchmarks/data/serving_runs.csv were measured by a campaign that launched every
engine with its own settings (serving_runs.SOURCE.md). autopar prices a deployment as it is
launched (spec/serve.py EngineArgs, cost/serve_frameworks.py for_deployment), so the benchmark
gives each row the settings its engines ran with. Every value here names the file and commit
it is read from; a backend without a sourced setting runs at its framework's defaults.
"""

from __future__ import annotations

from autopar.spec.serve import DEFAULT_ARGS, EngineArgs


def launch_args(row: dict[str, str], role: str | None = None) -> EngineArgs:
    """The settings the row's engines ran with (role "prefill": a disaggregated row's prefill engines)."""
    if row.get("mode") == "disagg":
        return _disagg(row, role)
    backend = row["backend"]
    if backend == "trtllm":
        return _trtllm(row, role)
    if backend == "sglang":
        return _sglang(row, role)
    if backend == "vllm":
        return _vllm(row, role)
    return DEFAULT_ARGS


def _trtllm(row: dict[str, str], role: str | None) -> EngineArgs:
    return DEFAULT_ARGS


def _sglang(row: dict[str, str], role: str | None) -> EngineArgs:
    return DEFAULT_ARGS


def _vllm(row: dict[str, str], role: str | None) -> EngineArgs:
    return DEFAULT_ARGS


# --- Disaggregated rows (prefill and decode pools) -------------------------------------------------
# The disaggregated rows name the Dynamo campaign in silicon_data_source (dynamo_version=0.8.0,
# image nvcr.io/nvidia/ai-dynamo/<backend>-runtime:0.8.0, measured 2026-01-23 and -25). Their
# engines were launched from ai-dynamo/aiconfigurator's generator as it stood then: commit
# 5e0243eb10dd894be5cba2ff7aa42f99e9a309b2 (2026-01-24, "align generator run script with dynamo
# 0.8.0"; the rule files below are the same at c46a56b02630723413d7ab4ad747b5ea0968d3a5 of
# 2026-01-23, which added the 0.8.0 templates). Its rules (src/aiconfigurator/generator/rule_plugin/
# {vllm,sglang,trtllm}.rule), for the columns of a disaggregated row:
# - prefill engines: `prefill max_batch_size = (max_batch_size if max_batch_size else 1)` with the
#   row's prefill_batch_size (1 in every row), launched as vLLM --max-num-seqs (cli_args.0.12.0.j2,
#   per data-parallel rank), SGLang --max-running-requests (cli_args.0.5.6.post2.j2), TensorRT-LLM
#   max_batch_size; `prefill max_num_tokens = isl + 1500` reaches TensorRT-LLM's max_num_tokens
#   only: backend_config_mapping.yaml maps max_num_tokens to vLLM --max-num-batched-tokens, which
#   cli_args.0.12.0.j2 does not print, and to nothing for SGLang (its `max_prefill_tokens = isl +
#   1500` is --max-prefill-tokens, the prefill batch's token budget, not --chunked-prefill-size).
# - decode engines: `decode max_batch_size = max_batch_size` with the row's decode_batch_size
#   (module_bridge.py _build_worker_params: "max_batch_size": the result's (d)bs), the requests one
#   attention rank runs; TensorRT-LLM's `decode max_num_tokens = max_batch_size` (one token each).
# - KV cache dtype: fp8 (kv_dtype below).
# No rule sets the memory fraction for vLLM or SGLang (their defaults), nor turns prefix caching
# off (`disable_prefix_cache = false` only when ModelConfig.prefix > 0; vLLM 0.12 and SGLang cache
# prefixes by default).
CAMPAIGN = "dynamo_version=0.8.0"


def _disagg(row: dict[str, str], role: str | None) -> EngineArgs:
    if role == "prefill":
        prefill = _count(row["prefill_batch_size"])
        if row["backend"] == "trtllm":
            return EngineArgs(max_batch_size=prefill, max_num_tokens=int(row["isl"]) + 1500)
        return EngineArgs(max_batch_size=prefill)
    decode = _count(row["decode_batch_size"])
    return EngineArgs(max_batch_size=decode, max_num_tokens=decode if row["backend"] == "trtllm" else None)


def kv_dtype(row: dict[str, str]) -> str:
    """The KV cache dtype a row's engines ran with: fp8 for the Dynamo campaign's rows, else auto.

    aiconfigurator picks the quantisation of a deployment it generates in sdk/task.py
    _get_quant_mode (commit 5e0243eb1): on SM 89 and newer (H100, H200) kvcache_quant_mode = "fp8"
    (kept unless the perf database has no fp8 attention table; collector/vllm/collect_attn.py and
    collector/sglang/collect_attn.py collect fp8 KV on SM > 86 and SM >= 90), with gemm "fp8" for
    vLLM and "fp8_block" for SGLang on SM 90, the gemm_quant_mode of these rows. The generator
    passes it on (module_bridge.py: kv_cache_dtype = kvcache_quant_mode; backend_config_mapping.yaml:
    vLLM --kv-cache-dtype, SGLang --kv-cache-dtype as fp8_e4m3 by sglang.rule, TensorRT-LLM
    kv_cache_config.dtype). The older rows carry no source (serving_runs.SOURCE.md): auto."""
    return "fp8" if CAMPAIGN in row.get("silicon_data_source", "") else "auto"


def _count(value: str) -> int:
    return int(value) if value and int(value) > 0 else 1
