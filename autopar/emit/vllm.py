"""`vllm serve` lines for a deployment.

Flag names read from vLLM 0.12.0's parser (PyPI wheel, vllm/engine/arg_utils.py
EngineArgs.add_cli_args; --port from vllm/entrypoints/openai/cli_args.py).
vLLM's data parallelism with --enable-expert-parallel is attention-DP: each DP
rank runs attention on its own requests and the MoE layers span tp x dp GPUs as
one EP group; without it the experts are tensor-parallel across the same GPUs.
"""

from __future__ import annotations

import json
import shlex

from autopar.emit.serving import MODEL_VAR, QUANTIZE_ON_LOAD, SSM_DTYPE_NAMES, ServeLaunch, per_engine, server_lines, vllm_bench
from autopar.errors import SpecError
from autopar.spec.serve import Deployment, Engine, Workload, for_deployment

VLLM_FLAGS = frozenset(
    {
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--data-parallel-size",
        "--enable-expert-parallel",
        "--quantization",
        "--kv-cache-dtype",
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--kv-transfer-config",
        "--no-enable-prefix-caching",
        "--mamba-ssm-cache-dtype",
        "--port",
    }
)
PORT = 8000
# NIXL moves the KV cache between prefill and decode instances (vLLM docs, "Disaggregated Prefilling");
# kv_both lets one launch line serve either role behind the proxy.
KV_TRANSFER = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def _line(dep: Deployment, engine: Engine, *, batch: int, role: str | None) -> str:
    if engine.ep > 1 and engine.ep != engine.tp * engine.dp:
        raise SpecError(
            f"vLLM runs MoE experts either tensor-parallel (`ep=1`) or expert-parallel over all "
            f"tp x dp = {engine.tp * engine.dp} GPUs; `ep={engine.ep}` is neither"
        )
    fw = for_deployment(dep, role)
    batch = dep.args_for(role).max_batch_size or batch
    words = ["vllm", "serve", MODEL_VAR, "--tensor-parallel-size", str(engine.tp)]
    if engine.pp > 1:
        words += ["--pipeline-parallel-size", str(engine.pp)]
    if engine.dp > 1:
        words += ["--data-parallel-size", str(engine.dp)]
    if engine.ep > 1:
        words.append("--enable-expert-parallel")
    if dep.weights == QUANTIZE_ON_LOAD["vllm"]:
        words += ["--quantization", dep.weights]
    if dep.kv_dtype == "fp8":
        words += ["--kv-cache-dtype", "fp8"]
    words += [
        "--gpu-memory-utilization",
        str(fw.memory_fraction),
        "--max-num-seqs",
        str(batch),
        "--max-num-batched-tokens",
        str(fw.chunk_tokens),
    ]
    args = dep.args_for(role)
    if args.prefix_cache is False:
        words += ["--no-enable-prefix-caching"]
    if args.ssm_state_dtype is not None:
        words += ["--mamba-ssm-cache-dtype", SSM_DTYPE_NAMES[args.ssm_state_dtype]]
    if role is not None:
        words += ["--kv-transfer-config", shlex.quote(KV_TRANSFER)]
    return " ".join([*words, "--port", "{port}"])


def launch(dep: Deployment, wl: Workload, *, host_gpus: int | None = None) -> ServeLaunch:
    """Server lines (one per engine, per host past `host_gpus` GPUs) and `vllm bench serve` for the workload."""
    servers = server_lines(
        dep,
        line=lambda engine, role: _line(dep, engine, batch=per_engine(dep, wl), role=role),
        port=PORT,
        front="put vLLM's disaggregation proxy in front",
        host_gpus=host_gpus,
    )
    return ServeLaunch(
        framework="vllm",
        servers=servers,
        files=(),
        benchmark=vllm_bench(wl, port=PORT, replicas=dep.replicas if dep.prefill is None else 1),
    )
