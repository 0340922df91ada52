"""What each serving framework does by default that the cost model needs, and the
constants fitted on measured serving runs.

Documented defaults carry their source. Fitted constants were set on
benchmarks/data/serving_runs.csv (810 rows, from ai-dynamo/aiconfigurator
silicon_sample.csv @095f58a; see benchmarks/serving_accuracy.py, which prints
the rows and the fit). Queue-saturated rows (KV cache too small for the
concurrency) and rows whose stated concurrency would need more than the compute
peak were left out of every fit. Each fitted constant names its mechanism:

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
  stalls decodes for it).
- moe_bandwidth: fraction of the streaming bandwidth that the framework's fused
  MoE kernels reach when reading expert weights at decode.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    """Defaults and fitted constants of one serving framework."""

    name: str  # vllm | sglang | trtllm
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
    moe_bandwidth: float  # fitted: fused-MoE expert-weight read efficiency at decode


GIB = 2**30

FRAMEWORKS: dict[str, Framework] = {
    # vLLM: --gpu-memory-utilization 0.9 of total memory holds weights, activations
    # and KV (vllm/config/cache.py gpu_memory_utilization default 0.9); V1
    # --max-num-batched-tokens 8192 for the API server on >= 70 GiB GPUs
    # (vllm/engine/arg_utils.py default_max_num_batched_tokens).
    "vllm": Framework(name="vllm", label="vLLM 0.12", memory_fraction=0.9, memory_rule="total", chunk_tokens=8192,
                      graph_reserve_bytes=1.5 * GIB, step_overhead_s=0.001, ttft_overhead_s=0.08,
                      prefill_slowdown=2.5, queue_share=0.0, prefill_mix=0.2, moe_bandwidth=1.0),
    # SGLang: --mem-fraction-static of total memory for weights + KV pool (about
    # 0.85-0.88 on 80-141 GB GPUs, python/sglang/srt/server_args.py); chunked
    # prefill 8192 tokens on >= 80 GB GPUs (same file).
    "sglang": Framework(name="sglang", label="SGLang 0.5", memory_fraction=0.85, memory_rule="total",
                        chunk_tokens=8192, graph_reserve_bytes=1.0 * GIB, step_overhead_s=0.003, ttft_overhead_s=0.1,
                        prefill_slowdown=4.0, queue_share=0.1, prefill_mix=0.6, moe_bandwidth=1.0),
    # TensorRT-LLM: KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory left
    # after weights and activations (tensorrt_llm/llmapi/llm_args.py); trtllm-serve
    # --max_num_tokens 8192 (tensorrt_llm/commands/serve.py).
    "trtllm": Framework(name="trtllm", label="TensorRT-LLM 1.0", memory_fraction=0.9, memory_rule="free",
                        chunk_tokens=8192, graph_reserve_bytes=1.5 * GIB, step_overhead_s=0.0, ttft_overhead_s=0.1,
                        prefill_slowdown=3.0, queue_share=0.04, prefill_mix=1.0, moe_bandwidth=1.0),
}
