"""`python -m sglang.launch_server` lines for a deployment.

Flag names read from SGLang 0.5.6.post2's parser (PyPI wheel,
sglang/srt/server_args.py ServerArgs.add_cli_args). SGLang counts --tp-size over
the whole engine: with --enable-dp-attention it is tp x dp GPUs, --dp-size the
attention data-parallel ranks (attention TP = tp-size / dp-size), and
--ep-size splits the experts over the same GPUs.
"""

from __future__ import annotations

from autopar.emit.serving import MODEL_VAR, QUANTIZE_ON_LOAD, SSM_DTYPE_NAMES, ServeLaunch, per_engine, server_lines, sglang_bench
from autopar.spec.serve import Deployment, Engine, Workload, for_deployment

SGLANG_FLAGS = frozenset(
    {
        "--model-path",
        "--tp-size",
        "--pp-size",
        "--dp-size",
        "--enable-dp-attention",
        "--ep-size",
        "--quantization",
        "--kv-cache-dtype",
        "--mem-fraction-static",
        "--max-running-requests",
        "--chunked-prefill-size",
        "--enable-mixed-chunk",
        "--max-prefill-tokens",
        "--scheduler-recv-interval",
        "--disable-radix-cache",
        "--mamba-ssm-dtype",
        "--disaggregation-mode",
        "--port",
    }
)
PORT = 30000


def _line(dep: Deployment, engine: Engine, *, batch: int, role: str | None) -> str:
    fw = for_deployment(dep, role)
    batch = dep.args_for(role).max_batch_size or batch
    words = ["python", "-m", "sglang.launch_server", "--model-path", MODEL_VAR, "--tp-size", str(engine.tp * engine.dp)]
    if engine.dp > 1:
        words += ["--dp-size", str(engine.dp), "--enable-dp-attention"]
    if engine.pp > 1:
        words += ["--pp-size", str(engine.pp)]
    if engine.ep > 1:
        words += ["--ep-size", str(engine.ep)]
    if dep.weights == QUANTIZE_ON_LOAD["sglang"]:
        words += ["--quantization", dep.weights]
    if dep.kv_dtype == "fp8":
        words += ["--kv-cache-dtype", "fp8_e4m3"]
    words += [
        "--mem-fraction-static",
        str(fw.memory_fraction),
        "--max-running-requests",
        str(batch),
        "--chunked-prefill-size",
        str(fw.chunk_tokens),
    ]
    if fw.mixed_chunk:
        words += ["--enable-mixed-chunk"]
    if fw.max_prefill_tokens:
        words += ["--max-prefill-tokens", str(fw.max_prefill_tokens)]
    if fw.recv_interval > 1:
        words += ["--scheduler-recv-interval", str(fw.recv_interval)]
    args = dep.args_for(role)
    if args.prefix_cache is False:
        words += ["--disable-radix-cache"]
    if args.ssm_state_dtype is not None:
        words += ["--mamba-ssm-dtype", SSM_DTYPE_NAMES[args.ssm_state_dtype]]
    if role is not None:
        words += ["--disaggregation-mode", role]
    return " ".join([*words, "--port", "{port}"])


def launch(dep: Deployment, wl: Workload, *, host_gpus: int | None = None) -> ServeLaunch:
    """Server lines (one per engine, per host past `host_gpus` GPUs) and `sglang.bench_serving` for the workload."""
    servers = server_lines(
        dep,
        line=lambda engine, role: _line(dep, engine, batch=per_engine(dep, wl), role=role),
        port=PORT,
        front="route them with SGLang's router in PD-disaggregation mode",
        host_gpus=host_gpus,
    )
    return ServeLaunch(
        framework="sglang",
        servers=servers,
        files=(),
        benchmark=sglang_bench(wl, port=PORT, replicas=dep.replicas if dep.prefill is None else 1),
    )
