"""What each serving framework does by default that the cost model needs, and the
constants fitted on measured serving runs.

Documented defaults carry their source. Fitted constants were set on the
aggregated rows of benchmarks/data/serving_runs.csv (810 rows, from
ai-dynamo/aiconfigurator silicon_sample.csv @095f58a) by
`python benchmarks/serving_accuracy.py --fit NAME@VERSION`, one set per
framework version that the file measures:

- vllm 0.12: the vLLM 0.12.0 rows (Qwen3-32B bf16/fp8 on H100, Qwen3-235B-A22B-FP8
  and Llama-3.1-8B-FP8 on H200);
- sglang 0.5.1: the SGLang 0.5.1.post1 rows (Qwen3-32B bf16 on H100);
- sglang 0.5.6: the SGLang 0.5.6.post2 rows (Llama-3.1-8B fp8 and Qwen3-235B-A22B-FP8
  on H200); rows of other versions (0.5.8) use the newest set;
- trtllm 1.0: the TensorRT-LLM 1.0.0rc3 rows (Llama-3.1-8B, Qwen3-32B fp8,
  Qwen3-235B-A22B-FP8 on H100).

Queue-saturated rows (KV cache too small for the concurrency), rows whose
stated concurrency would need more than the GPUs' sustained compute, and the
disaggregated rows (held out to validate) were left out of every fit. Each
fitted constant names its mechanism:

- step_overhead_s: host work per engine step that the GPU waits for (scheduler,
  sampling, detokenisation, Python), added to every decode step.
- ttft_overhead_s: per-request work before the first step (HTTP, tokenisation,
  admission) and after it (first-token return), added to TTFT.
- prefill_slowdown: serving prefill against the training GEMM/attention curves
  of the profile (paged attention over the KV cache, no CUDA graphs for prefill,
  variable chunk shapes); multiplies the prefill of a request's own prompt.
- queue_share: fraction of the other in-flight requests' prefills that a new
  request waits behind before its own (how bunched arrivals are under the
  framework's scheduler: 0 staggered, 1 all queued ahead).
- prefill_mix: fraction of the other requests' prefill work that lands inside a
  request's decode steps (chunked prefill mixes it in; a prefill-first scheduler
  stalls decodes for it); the work is each prompt's prefill less the weight
  read of the decode step it rides in (cost/serve.py prefill_in_step).
- waves (not fitted: read off the rows with benchmarks/serving_accuracy.py
  --waves): the version's aggregated TTFT is the mean over a wave of the
  concurrency's prompts arriving together (cost/serve.py wave_ttft), in place
  of the prefill slowdown and queue share. Only SGLang 0.5.1 has it.

Refitted after two model changes (a prompt riding in a decode step shares its
weight read; no EP all-to-all without attention-DP): TensorRT-LLM's
step_overhead_s 0 -> 0.001 and prefill_slowdown 1.75 -> 2.0; the other sets
were unchanged by the refit.
- moe_layer_overhead_s: fixed time per MoE layer and decode step beyond the
  weights it reads (routing top-k, token permutation, the fused-MoE launch
  chain, attention-DP synchronisation), added to every decode step.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    """Defaults and fitted constants of one serving framework."""

    name: str  # vllm | sglang | trtllm
    version: str  # the framework version the fitted constants belong to
    label: str  # display name with the version the constants were fitted on
    memory_fraction: float  # share of GPU memory (total or free, see memory_rule) the engine may take
    memory_rule: str  # total: fraction of total memory holds weights + KV; free: KV gets the fraction of what weights leave
    chunk_tokens: int  # tokens one prefill step takes at most (chunked prefill budget)
    graph_reserve_bytes: float  # CUDA graphs, NCCL and workspace memory outside the KV pool
    step_overhead_s: float  # fitted: host time per decode step
    ttft_overhead_s: float  # fitted: per-request time outside the engine steps
    prefill_slowdown: float  # fitted: serving prefill over the profile's curves
    queue_share: float  # fitted: share of others' prefills a new request queues behind
    prefill_mix: float  # fitted: share of others' prefills inside a request's decode steps
    moe_layer_overhead_s: float  # fitted: fixed seconds per MoE layer per decode step
    waves: bool = False  # measured: aggregated TTFT is a wave's prefill (cost/serve.py wave_ttft), see FITTED


GIB = 2**30

FITTED: dict[tuple[str, str], Framework] = {
    # vLLM: --gpu-memory-utilization 0.9 of total memory holds weights, activations
    # and KV (vllm/config/cache.py gpu_memory_utilization default 0.9); V1
    # --max-num-batched-tokens 8192 and --max-num-seqs 1024 for the API server on
    # >= 70 GiB GPUs other than A100 (vllm 0.12.0, vllm/engine/arg_utils.py
    # EngineArgs.get_batch_defaults).
    ("vllm", "0.12"): Framework(name="vllm", version="0.12", label="vLLM 0.12", memory_fraction=0.9, memory_rule="total", chunk_tokens=8192,
                      graph_reserve_bytes=1.5 * GIB, step_overhead_s=0.002, ttft_overhead_s=0.06,
                      prefill_slowdown=2.5, queue_share=0.0, prefill_mix=0.8, moe_layer_overhead_s=0.0002),
    # SGLang: --mem-fraction-static of total memory for weights + KV pool (about
    # 0.85-0.88 on 80-141 GB GPUs, python/sglang/srt/server_args.py); chunked
    # prefill 8192 tokens on >= 80 GB GPUs (same file). Versions 0.5.1 and 0.5.6
    # schedule prefill differently and are fitted apart (0.5.1 on the H100 rows,
    # 0.5.6 on the H200 rows).
    ("sglang", "0.5.6"): Framework(name="sglang", version="0.5.6", label="SGLang 0.5.6", memory_fraction=0.85, memory_rule="total",
                        chunk_tokens=8192, graph_reserve_bytes=1.0 * GIB, step_overhead_s=0.004, ttft_overhead_s=0.15,
                        prefill_slowdown=3.0, queue_share=0.06, prefill_mix=0.8, moe_layer_overhead_s=0.0),
    # SGLang 0.5.1 (the H100 Qwen3-32B rows, sglang.bench_serving at fixed lengths): TTFT is the prefill
    # of a wave (waves=True, cost/serve.py wave_ttft): all requests of the concurrency arrive together
    # and are prefilled back to back in 8192-token steps at the profile's own GEMM and attention rates.
    # Why the wave re-forms every cycle: SGLang's scheduler runs a waiting prefill batch before any
    # decode step ("Run prefill first if possible", python/sglang/srt/managers/scheduler.py
    # get_next_batch_to_run) and does not put decode tokens into it (server_args.py
    # enable_mixed_chunk False), so the wave's requests start decoding in the same step and, with
    # equal output lengths, end and return together. vLLM V1 schedules the running decodes first and
    # fills the rest of the token budget with prefill (vllm/v1/core/sched/scheduler.py), so first
    # tokens, ends and returns are staggered and no wave holds (60 of its 89 H100 rows are below the
    # one-wave bound).
    # No row is below the one-wave bound (benchmarks/serving_accuracy.py --waves) and the wave alone,
    # with no fitted slowdown or queue share, predicts the 75 scored rows' TTFT to 8.7% (11.0% with
    # the fitted prefill_slowdown 2.5 and queue_share 0.4 it replaces); those two are then 1 and 0
    # (a disaggregated prefill engine runs at the profile's rate). ttft_overhead_s refitted 0.15 -> 0.1.
    ("sglang", "0.5.1"): Framework(name="sglang", version="0.5.1", label="SGLang 0.5.1", memory_fraction=0.85, memory_rule="total",
                        chunk_tokens=8192, graph_reserve_bytes=1.0 * GIB, step_overhead_s=0.0, ttft_overhead_s=0.1,
                        prefill_slowdown=1.0, queue_share=0.0, prefill_mix=0.6, moe_layer_overhead_s=0.0,
                        waves=True),
    # TensorRT-LLM: KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory left
    # after weights and activations (tensorrt_llm/commands/serve.py
    # --kv_cache_free_gpu_memory_fraction default 0.9); --max_num_tokens 8192.
    ("trtllm", "1.0"): Framework(name="trtllm", version="1.0", label="TensorRT-LLM 1.0", memory_fraction=0.9, memory_rule="free",
                        chunk_tokens=8192, graph_reserve_bytes=1.5 * GIB, step_overhead_s=0.001, ttft_overhead_s=0.1,
                        prefill_slowdown=2.0, queue_share=0.06, prefill_mix=1.0, moe_layer_overhead_s=0.0),
}
DEFAULT_VERSION = {"vllm": "0.12", "sglang": "0.5.6", "trtllm": "1.0"}  # what --framework NAME uses


def constants(name: str, version: str = "") -> Framework:
    """The constants of `name` at `version` (a fitted version, or a longer one it prefixes: 0.5.1.post1 -> 0.5.1)."""
    if name not in DEFAULT_VERSION:
        raise SpecError(f"--framework must be one of {', '.join(DEFAULT_VERSION)}, got {name!r}")
    if not version:
        return FITTED[name, DEFAULT_VERSION[name]]
    for (fw, fitted), value in FITTED.items():
        if fw == name and (version == fitted or version.startswith(fitted + ".")):
            return value
    known = ", ".join(v for fw, v in FITTED if fw == name)
    raise SpecError(f"--framework-version {version!r}: {name} has constants for {known}")
