"""`trtllm-serve` lines for a deployment.

Flag names read from TensorRT-LLM's click options at commit
00209af149e7774406881a37283dce303571eb11 (tensorrt_llm/commands/serve.py):
--tp_size, --pp_size, --ep_size, --max_batch_size, --max_num_tokens,
--kv_cache_free_gpu_memory_fraction, --extra_llm_api_options, --backend, --port.
Attention-DP and the KV dtype have no flag; they go in the LLM-API YAML that
--extra_llm_api_options reads (enable_attention_dp, kv_cache_config.dtype).
TensorRT-LLM's --tp_size counts the engine's GPUs; with attention-DP each rank
runs attention alone, so the attention TP must be 1.
"""

from __future__ import annotations

from autopar.cost.serve_frameworks import constants
from autopar.emit.serving import MODEL_VAR, ServeLaunch, per_engine, place, vllm_bench
from autopar.errors import SpecError
from autopar.spec.serve import Deployment, Workload

TRTLLM_FLAGS = frozenset({"--backend", "--tp_size", "--pp_size", "--ep_size", "--max_batch_size", "--max_num_tokens",
                          "--kv_cache_free_gpu_memory_fraction", "--extra_llm_api_options", "--port"})
PORT = 8000
EXTRA = "extra_llm_api_options.yaml"


def launch(dep: Deployment, wl: Workload) -> ServeLaunch:
    """Server lines (one per engine), the LLM-API YAML when needed, and a benchmark for the workload."""
    if dep.prefill is not None:
        raise SpecError("--emit trtllm: disaggregated TensorRT-LLM runs under `trtllm-serve disaggregated -c CONFIG`, "
                        "which autopar does not write yet; emit the aggregated plan or use --emit vllm/sglang")
    e, fw = dep.engine, constants(dep.framework, dep.framework_version)
    if e.dp > 1 and e.tp > 1:
        raise SpecError(f"--emit trtllm: TensorRT-LLM's attention-DP runs attention on one GPU per rank; "
                        f"use --tp 1 --dp {e.tp * e.dp} --attention-dp")
    words = ["trtllm-serve", MODEL_VAR, "--backend", "pytorch", "--tp_size", str(e.tp * e.dp)]
    if e.pp > 1:
        words += ["--pp_size", str(e.pp)]
    if e.ep > 1:
        words += ["--ep_size", str(e.ep)]
    words += ["--max_batch_size", str(per_engine(dep, wl)), "--max_num_tokens", str(fw.chunk_tokens),
              "--kv_cache_free_gpu_memory_fraction", str(fw.memory_fraction)]
    yaml = []
    if e.dp > 1:
        yaml.append("enable_attention_dp: true")
    if dep.kv_dtype == "fp8":
        yaml += ["kv_cache_config:", "  dtype: fp8"]
    if yaml:
        words += ["--extra_llm_api_options", EXTRA]
    servers, _ = place(" ".join([*words, "--port", "{port}"]), e, dep.replicas, first_gpu=0, port=PORT)
    files = ((EXTRA, "\n".join(yaml) + "\n"),) if yaml else ()
    return ServeLaunch(framework="trtllm", servers=tuple(servers), files=files,
                       benchmark=vllm_bench(wl, port=PORT, replicas=dep.replicas))
