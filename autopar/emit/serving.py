"""What the serving launchers share: the launch value, replica placement, the benchmark client.

A deployment becomes shell lines: one server per engine (replicas get their own
GPUs through CUDA_VISIBLE_DEVICES and their own port), and one benchmark command
that drives the workload the estimate assumed (fixed input and output lengths,
`concurrency` requests in flight) so the prediction can be checked. The model
is "$MODEL" (a Hugging Face id or a local checkpoint); autopar's presets name a
shape, not a checkpoint.

The benchmark clients' flags were read from their parsers at pinned versions
(see the frozen sets below and tests/unit/emit/test_serve_emit.py):
- `vllm bench serve`: vLLM 0.12.0 (PyPI wheel), vllm/benchmarks/serve.py and
  vllm/benchmarks/datasets.py; backend "openai" is any OpenAI-compatible server
  (vllm/benchmarks/lib/endpoint_request_func.py), so it also drives trtllm-serve.
- `python -m sglang.bench_serving`: SGLang 0.5.6.post2 (PyPI wheel), sglang/bench_serving.py.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from autopar.spec.serve import Deployment, Engine, Workload

MODEL_VAR = '"$MODEL"'
PROMPTS_PER_SLOT = 10  # requests per concurrency slot: enough to reach the steady state the estimate assumes

VLLM_BENCH_FLAGS = frozenset(
    {
        "--backend",
        "--base-url",
        "--model",
        "--dataset-name",
        "--random-input-len",
        "--random-output-len",
        "--random-range-ratio",
        "--num-prompts",
        "--max-concurrency",
        "--ignore-eos",
    }
)
SGLANG_BENCH_FLAGS = frozenset(
    {
        "--backend",
        "--host",
        "--port",
        "--dataset-name",
        "--random-input-len",
        "--random-output-len",
        "--random-range-ratio",
        "--num-prompts",
        "--max-concurrency",
    }
)

# The weight format a framework's server line quantizes bf16 weights to on load: vLLM 0.12.0 and SGLang
# 0.5.6.post2 `--quantization fp8` (their Fp8Config with is_checkpoint_fp8_serialized False keeps the
# loaded weights and quantizes them: vllm/model_executor/layers/quantization/fp8.py,
# sglang/srt/layers/quantization/fp8.py). trtllm-serve has no quantization option (TRTLLM_FLAGS). Any
# other format must already be the checkpoint's, which each server reads from its config (config.json
# quantization_config, or ModelOpt's hf_quant_config.json): vllm/config/model.py
# ModelConfig._verify_quantization, sglang/srt/configs/model_config.py _parse_quant_hf_config, TensorRT-LLM
# tensorrt_llm/_torch/model_config.py load_modelopt_quant_config. vLLM and SGLang refuse a --quantization
# that differs from the checkpoint's format (same _verify_quantization functions).
QUANTIZE_ON_LOAD = {"vllm": "fp8", "sglang": "fp8"}
# --ssm-state-dtype as the engines spell it (vLLM --mamba-ssm-cache-dtype, SGLang --mamba-ssm-dtype, TensorRT-LLM
# kv_cache_config.mamba_ssm_cache_dtype: torch dtype names)
SSM_DTYPE_NAMES = {"bf16": "bfloat16", "fp32": "float32"}
CHECKPOINT = {"fp8": "an fp8", "fp4": "an NVFP4 (ModelOpt)", "int4": "an int4 (AWQ/GPTQ)"}  # as cost/serve.py prices them


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeLaunch:
    """Shell lines that start a deployment and benchmark it."""

    framework: str  # vllm | sglang | trtllm
    servers: tuple[str, ...]  # one line per engine (comments start with #)
    files: tuple[tuple[str, str], ...]  # (name, content) of config files the lines read
    benchmark: str  # client command reproducing the workload

    def text(self) -> str:
        out = ["# MODEL=<Hugging Face id or checkpoint path>"]
        for name, content in self.files:  # written before the servers that read them
            out += [f"cat > {name} <<'EOF'", content.rstrip("\n"), "EOF"]
        return "\n".join([*out, *self.servers, self.benchmark])


def flags_of(line: str) -> list[str]:
    """The --flags of one command line (for the tests that freeze them)."""
    return [w.split("=")[0] for w in shlex.split(line) if w.startswith("--")]


def devices(first: int, count: int) -> str:
    return ",".join(str(g) for g in range(first, first + count))


def per_engine(dep: Deployment, wl: Workload) -> int:
    """Requests one engine holds at the workload's concurrency (its batch cap)."""
    return -(-wl.concurrency // dep.replicas)


def place(line: str, engine: Engine, replicas: int, *, first_gpu: int, port: int) -> tuple[list[str], int]:
    """`line` (with {port}) once per replica, each on its own GPUs and port; returns the lines and the next free GPU."""
    out = []
    for i in range(replicas):
        gpus = devices(first_gpu + i * engine.gpus, engine.gpus)
        out.append(f"CUDA_VISIBLE_DEVICES={gpus} " + line.replace("{port}", str(port + i)))
    return out, first_gpu + replicas * engine.gpus


def weights_note(dep: Deployment) -> tuple[str, ...]:
    """What MODEL must hold for the deployment's --weights (nothing for bf16)."""
    w = dep.weights
    if w == "bf16":
        return ()
    if QUANTIZE_ON_LOAD.get(dep.framework) == w:
        return (
            f"# --weights {w}: --quantization {w} quantizes a bf16 MODEL on load; drop it if MODEL is "
            f"an {w} checkpoint of another format (compressed-tensors, ModelOpt): the server reads that "
            "from its config and refuses a mismatch",
        )
    return (
        f"# --weights {w}: MODEL must be {CHECKPOINT[w]} checkpoint, whose config the server reads; "
        "this line does not quantize a bf16 one on load",
    )


def server_lines(
    dep: Deployment, *, line: Callable[[Engine, str | None], str], port: int, front: str, host_gpus: int | None = None
) -> tuple[str, ...]:
    """One server line per engine, from `line(engine, role)` (role None, "prefill" or "decode").

    Aggregated: the replicas on ports port, port+1, ... Disaggregated: a note saying what
    `front` (the router or proxy on `port`) must do, the prefill engines from port+100 and
    the decode engines from port+200. Quantized weights: first, a note on what MODEL must be
    (weights_note). A deployment of more than `host_gpus` GPUs is written as one block per host
    (hosts), each numbering its GPUs from 0; else every engine on one host, on the GPUs after
    the previous one's."""
    roles: list[tuple[str | None, Engine, int, int]] = (
        [(None, dep.engine, dep.replicas, port)]
        if dep.prefill is None
        else [("prefill", dep.prefill, dep.prefill_replicas, port + 100), ("decode", dep.engine, dep.replicas, port + 200)]
    )
    note = (
        ()
        if dep.prefill is None
        else (f"# prefill engines on ports {port + 100}+, decode engines on {port + 200}+; {front} on port {port}",)
    )
    if host_gpus is None or dep.gpus <= host_gpus:
        out, first = [], 0
        for role, engine, replicas, base in roles:
            lines, first = place(line(engine, role), engine, replicas, first_gpu=first, port=base)
            out += lines
        return (*weights_note(dep), *note, *out)
    return (*weights_note(dep), *note, *hosts(roles, line=line, host_gpus=host_gpus))


def hosts(roles: list[tuple[str | None, Engine, int, int]], *, line: Callable[[Engine, str | None], str], host_gpus: int) -> list[str]:
    """Per-host blocks: a header naming the host, its rank and the engines' roles, then their lines with
    the host's own GPU numbers (CUDA_VISIBLE_DEVICES from 0). Engines are packed largest first, so
    that engines of power-of-two sizes, none larger than a host, fill every host but the last."""
    engines = sorted(
        ((role, i, engine, base + i) for role, engine, replicas, base in roles for i in range(replicas)), key=lambda item: -item[2].gpus
    )
    packed: list[list[tuple[str | None, int, Engine, int, int]]] = []
    used = host_gpus
    for role, i, engine, p in engines:
        if used + engine.gpus > host_gpus:
            packed.append([])
            used = 0
        packed[-1].append((role, i, engine, p, used))
        used += engine.gpus
    out = [
        f"# {len(packed)} hosts of {host_gpus} GPUs: run each block below on its own host, and point each "
        "client (and router) at the host of its engine"
    ]
    for h, members in enumerate(packed):
        names = [f"{role or 'engine'} {i}" for role, i, *_ in members]
        out.append(f"# host {h} of {len(packed)}, GPUs numbered from 0 there: {', '.join(names)}")
        for role, _, engine, p, first in members:
            out.append(f"CUDA_VISIBLE_DEVICES={devices(first, engine.gpus)} " + line(engine, role).replace("{port}", str(p)))
    return out


def _per_replica(one: str, wl: Workload, *, port: int, replicas: int) -> str:
    """One client per engine, each holding its share of the concurrency, run together."""
    if replicas == 1:
        return one.format(port=port, conc=wl.concurrency, prompts=PROMPTS_PER_SLOT * wl.concurrency)
    share = -(-wl.concurrency // replicas)
    lines = [one.format(port=port + i, conc=share, prompts=PROMPTS_PER_SLOT * share) + " &" for i in range(replicas)]
    return "\n".join(["# one client per engine, each with its share of the concurrency", *lines, "wait"])


def vllm_bench(wl: Workload, *, port: int, replicas: int = 1) -> str:
    one = (
        "vllm bench serve --backend openai --base-url http://localhost:{port} --model "
        + MODEL_VAR
        + f" --dataset-name random --random-input-len {wl.isl} --random-output-len {wl.osl} --random-range-ratio 0"
        " --max-concurrency {conc} --num-prompts {prompts} --ignore-eos"
    )
    return _per_replica(one, wl, port=port, replicas=replicas)


def sglang_bench(wl: Workload, *, port: int, replicas: int = 1) -> str:
    one = (
        "python -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port {port} --dataset-name random"
        f" --random-input-len {wl.isl} --random-output-len {wl.osl} --random-range-ratio {wl.random_range_ratio:g}"
        " --max-concurrency {conc} --num-prompts {prompts}"
    )
    return _per_replica(one, wl, port=port, replicas=replicas)
