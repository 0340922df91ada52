"""`trtllm-serve` lines for a deployment.

Flag names read from TensorRT-LLM's click options at commit
00209af149e7774406881a37283dce303571eb11 (tensorrt_llm/commands/serve.py):
--tp_size, --pp_size, --ep_size, --max_batch_size, --max_num_tokens,
--kv_cache_free_gpu_memory_fraction, --extra_llm_api_options, --backend, --port.
Attention-DP and the KV dtype have no flag; they go in the LLM-API YAML that
--extra_llm_api_options reads (enable_attention_dp, kv_cache_config.dtype).
TensorRT-LLM's --tp_size counts the engine's GPUs; with attention-DP each rank
runs attention alone, so the attention TP must be 1.

Disaggregated (TensorRT-LLM examples/disaggregated/README.md): each context
(prefill) and generation (decode) engine is its own `trtllm-serve` with a
`cache_transceiver_config` in its LLM-API YAML (backend UCX, a buffer of at
least the input length), the context engines with the overlap scheduler off
(`disable_overlap_scheduler: true`, not supported on context servers); then
`trtllm-serve disaggregated -c CONFIG` starts the OpenAI front end, whose YAML
lists the engines' URLs under context_servers and generation_servers.
"""

from __future__ import annotations

from autopar.emit.serving import MODEL_VAR, SSM_DTYPE_NAMES, ServeLaunch, per_engine, server_lines, vllm_bench
from autopar.errors import SpecError
from autopar.spec.serve import Deployment, Engine, Workload, for_deployment

TRTLLM_FLAGS = frozenset(
    {
        "--backend",
        "--tp_size",
        "--pp_size",
        "--ep_size",
        "--max_batch_size",
        "--max_num_tokens",
        "--kv_cache_free_gpu_memory_fraction",
        "--extra_llm_api_options",
        "--port",
    }
)
PORT = 8000
EXTRA = "extra_llm_api_options.yaml"
ROLE_EXTRA = {"prefill": "ctx_extra_llm_api_options.yaml", "decode": "gen_extra_llm_api_options.yaml"}
DISAGG_CONFIG = "disagg_config.yaml"
FRONT = f"trtllm-serve disaggregated -c {DISAGG_CONFIG}"


def _yaml(dep: Deployment, engine: Engine, role: str | None, wl: Workload) -> list[str]:
    """The engine's LLM-API YAML lines (empty when the flags say it all)."""
    out = []
    if engine.dp > 1:
        out.append("enable_attention_dp: true")
    args = dep.args_for(role)
    kv = (["  dtype: fp8"] if dep.kv_dtype == "fp8" else []) + (["  enable_block_reuse: false"] if args.prefix_cache is False else [])
    if args.ssm_state_dtype is not None:
        kv.append(f"  mamba_ssm_cache_dtype: {SSM_DTYPE_NAMES[args.ssm_state_dtype]}")
    if kv:
        out += ["kv_cache_config:", *kv]
    if role == "prefill":
        out.append("disable_overlap_scheduler: true")
    if role is not None:
        out += ["cache_transceiver_config:", "  backend: UCX", f"  max_tokens_in_buffer: {wl.isl}"]
    return out


def _line(dep: Deployment, engine: Engine, role: str | None, *, batch: int, extra: bool) -> str:
    if engine.dp > 1 and engine.tp > 1:
        raise SpecError(
            f"`emit=trtllm`: TensorRT-LLM's attention-DP runs attention on one GPU per rank; "
            f"use `tp=1` `dp={engine.tp * engine.dp}` `attention_dp=True`"
        )
    fw = for_deployment(dep, role)
    batch = dep.args_for(role).max_batch_size or batch
    words = ["trtllm-serve", MODEL_VAR, "--backend", "pytorch", "--tp_size", str(engine.tp * engine.dp)]
    if engine.pp > 1:
        words += ["--pp_size", str(engine.pp)]
    if engine.ep > 1:
        words += ["--ep_size", str(engine.ep)]
    words += [
        "--max_batch_size",
        str(batch),
        "--max_num_tokens",
        str(fw.chunk_tokens),
        "--kv_cache_free_gpu_memory_fraction",
        str(fw.memory_fraction),
    ]
    if extra:
        words += ["--extra_llm_api_options", ROLE_EXTRA[role] if role else EXTRA]
    return " ".join([*words, "--port", "{port}"])


def _disagg_config(dep: Deployment) -> str:
    """The front end's YAML: its port and the engines' URLs (ports as emit.serving.server_lines places them)."""
    lines = ["hostname: localhost", f"port: {PORT}", "backend: pytorch"]
    for key, count, first in (("context_servers", dep.prefill_replicas, PORT + 100), ("generation_servers", dep.replicas, PORT + 200)):
        lines += [f"{key}:", f"  num_instances: {count}", "  urls:"]
        lines += [f'    - "localhost:{first + i}"' for i in range(count)]
    return "\n".join(lines) + "\n"


def launch(dep: Deployment, wl: Workload, *, host_gpus: int | None = None) -> ServeLaunch:
    """Server lines (one per engine, per host past `host_gpus` GPUs), the YAML files they read, and a
    benchmark for the workload."""
    batch = per_engine(dep, wl)
    if dep.prefill is None:
        yaml = _yaml(dep, dep.engine, None, wl)
        servers = server_lines(
            dep, line=lambda engine, role: _line(dep, engine, role, batch=batch, extra=bool(yaml)), port=PORT, front="", host_gpus=host_gpus
        )
        files = ((EXTRA, "\n".join(yaml) + "\n"),) if yaml else ()
        return ServeLaunch(framework="trtllm", servers=servers, files=files, benchmark=vllm_bench(wl, port=PORT, replicas=dep.replicas))
    engines = {"prefill": dep.prefill, "decode": dep.engine}
    extras = tuple((ROLE_EXTRA[role], "\n".join(_yaml(dep, engines[role], role, wl)) + "\n") for role in ROLE_EXTRA)
    servers = server_lines(
        dep, line=lambda engine, role: _line(dep, engine, role, batch=batch, extra=True), port=PORT, front=f"`{FRONT}`", host_gpus=host_gpus
    )
    return ServeLaunch(
        framework="trtllm",
        servers=(*servers, FRONT),
        files=(*extras, (DISAGG_CONFIG, _disagg_config(dep))),
        benchmark=vllm_bench(wl, port=PORT, replicas=1),
    )
