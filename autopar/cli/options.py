"""The options more than one command takes, each defined once: its flag, help text and completion.

An option used by one command only stays with that command. Defaults are given
where a command declares the option (``top: Top = 10``), so that the help shows
them as the command has them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from autopar.completions import (
    complete_emit,
    complete_framework,
    complete_hardware,
    complete_model,
    complete_stack,
    complete_strategy,
    complete_weights,
)

# --- every command ----------------------------------------------------------------------------------------------

Model = Annotated[
    str, typer.Argument(help="Preset name (see `autopar models`), model .yaml, or Hugging Face config.json.", autocompletion=complete_model)
]
HardwareOpt = Annotated[
    str | None,
    typer.Option(
        "--hardware",
        help="Built-in profile name or profile .yaml (default: saved profile, else h100-sxm).",
        autocompletion=complete_hardware,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]

# --- training: suggest, estimate ----------------------------------------------------------------------------------

StackOpt = Annotated[
    str | None,
    typer.Option(
        "--stack",
        help="Execution stack NAME or NAME@VERSION: megatron | torchtitan | deepspeed | "
        "llm-foundry (newest version unless @VERSION), or a stack .yaml (default: megatron; see "
        "`autopar stacks`).",
        autocompletion=complete_stack,
    ),
]
StackOptOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--stack-opt",
        help="A recipe fact of the stack, KEY=VALUE (repeatable), e.g. grad_reduce=bf16; each stack's options: `autopar stacks`.",
    ),
]
RecipeOpt = Annotated[
    str | None,
    typer.Option(help="A YAML file of stack options (KEY: VALUE, the --stack-opt keys); --stack-opt wins over it."),
]
GpusOpt = Annotated[int | None, typer.Option(help="Total GPUs.")]
GpusAutoOpt = Annotated[
    str | None, typer.Option("--gpus", help="Total GPUs, or auto: the fewest GPUs that fit, and tokens/s as the count doubles.")
]
NodesOpt = Annotated[int | None, typer.Option(help="Nodes (GPUs = nodes x GPUs per node).")]
BatchOpt = Annotated[int | None, typer.Option(help="Global batch in sequences (default: about 4M tokens).")]
SeqOpt = Annotated[int | None, typer.Option(help="Sequence length in tokens (default: the model's).")]
DtypeOpt = Annotated[str, typer.Option(help="bf16 | fp16 | fp8 (FP8 GEMMs; MFU then against the fp8 peak)")]
HeadroomOpt = Annotated[
    str,
    typer.Option(
        help="Memory a plan should leave free on each GPU, GiB (4) or a share (5%); "
        "a plan fits in the whole GPU, one inside the headroom is warned about."
    ),
]
DistOpt = Annotated[
    str | None, typer.Option(help="Sequence-length distribution: lengths (.txt/.jsonl/.npy), a histogram or a parametric form (.yaml).")
]
DEFAULT_VARLEN_STRATEGY = "megatron_dynamic_cp"
StrategyOpt = Annotated[
    str | None,
    typer.Option(
        help="With --seq-len-dist: naive | balanced | wlb | megatron_dynamic_cp | hdp_no_balance | hdp (default megatron_dynamic_cp).",
        autocompletion=complete_strategy,
    ),
]
EmitOpt = Annotated[
    str | None,
    typer.Option(
        help="Also give the launch: megatron | torchtitan | megatron-bridge (torchrun lines) | deepspeed (a line and "
        "ds_config.json) | slurm | slurm-torchtitan (sbatch scripts).",
        autocompletion=complete_emit,
    ),
]


def path_text(value: str) -> Path:
    """A file or folder option's text as a Path; empty text is refused, where Path("") is the current folder."""
    if not value.strip():
        raise typer.BadParameter("is empty: give a file or folder path")
    return Path(value)


def path_option(help: str) -> Any:
    """A file or folder option (empty text refused: path_text), shown as <path> in --help."""
    return typer.Option(help=help, parser=path_text, metavar="<path>")


EmitOutOpt = Annotated[Path | None, path_option("Write the --emit launch to this file instead of printing it.")]
TitanOpt = Annotated[
    str | None, typer.Option(help="torchtitan config function, NAME or MODULE:NAME (e.g. llama3_70b); presets have a default.")
]
ExtraOpt = Annotated[str | None, typer.Option(help="Framework arguments appended to the --emit command, as one shell-quoted string.")]
PartitionOpt = Annotated[str | None, typer.Option(help="SLURM partition for --emit slurm*.")]
TimeOpt = Annotated[str | None, typer.Option(help="SLURM time limit for --emit slurm*, e.g. 04:00:00.")]
AccountOpt = Annotated[str | None, typer.Option(help="SLURM account for --emit slurm*.")]
QosOpt = Annotated[str | None, typer.Option(help="SLURM quality of service for --emit slurm*.")]
CpusOpt = Annotated[int | None, typer.Option(help="CPUs per node for --emit slurm* (default 8 per GPU).", min=1)]
SaveDirOpt = Annotated[
    Path | None,
    path_option("Also write the plans (plans.csv, plans.jsonl), the --json document and the --emit launch files into this folder."),
]

# --- serving: serve suggest, serve estimate -----------------------------------------------------------------------

ServeGpusOpt = Annotated[int | None, typer.Option(help="Total GPUs of the deployment.")]
IslOpt = Annotated[int, typer.Option(help="Input (prompt) tokens per request.")]
OslOpt = Annotated[int, typer.Option(help="Output tokens per request.")]
FrameworkOpt = Annotated[
    str | None,
    typer.Option(
        help="NAME or NAME@VERSION: vllm | sglang | trtllm, at a version (default: the --emit target, else vllm; the newest "
        "version with data, see `autopar frameworks`), or a framework .yaml.",
        autocompletion=complete_framework,
    ),
]
ServeEmitOpt = Annotated[
    str | None, typer.Option(help="Also print the launch lines and a benchmark: vllm | sglang | trtllm.", autocompletion=complete_framework)
]
WeightsOpt = Annotated[str, typer.Option(help="bf16 | fp8 | fp4 | int4 (weight-only)", autocompletion=complete_weights)]
KvOpt = Annotated[str, typer.Option(help="auto | bf16 | fp8")]
MixedOpt = Annotated[
    bool, typer.Option("--mixed-chunk", help="SGLang --enable-mixed-chunk: prefill steps also run the decodes (default: SGLang's, off).")
]
MaxPrefillOpt = Annotated[
    int | None,
    typer.Option(help="SGLang --max-prefill-tokens: new prompt tokens one step admits beyond its first prompt (default: SGLang's, 16384)."),
]
RecvIntervalOpt = Annotated[
    int | None,
    typer.Option(
        "--scheduler-recv-interval",
        help="SGLang --scheduler-recv-interval: decode steps between the scheduler's takes of new requests (default: SGLang's, 1).",
    ),
]
RangeRatioOpt = Annotated[
    float,
    typer.Option(
        help="Each request's output length drawn between ratio x osl and osl, as sglang.bench_serving --random-range-ratio "
        "(default 1: every request at --osl, the benchmark autopar prints)."
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        help="Tokens one engine step holds (vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size, "
        "TensorRT-LLM --max_num_tokens; default: the framework's)."
    ),
]
MaxBatchOpt = Annotated[
    int | None,
    typer.Option(
        help="Requests one engine runs at once (--max-num-seqs, --max-running-requests, --max_batch_size; default: the framework's)."
    ),
]
MemFractionOpt = Annotated[
    float | None,
    typer.Option(
        help="vLLM --gpu-memory-utilization, SGLang --mem-fraction-static (of total memory), TensorRT-LLM "
        "--kv_cache_free_gpu_memory_fraction (of what the weights leave); default: the framework's."
    ),
]
PrefixCacheOpt = Annotated[
    bool,
    typer.Option(
        "--disable-prefix-cache",
        help="No prompt reuses a cached prefix: vLLM --no-enable-prefix-caching, SGLang --disable-radix-cache "
        "(a hybrid Mamba model then keeps the overlap scheduler), TensorRT-LLM enable_block_reuse false.",
    ),
]
SsmDtypeOpt = Annotated[
    str | None,
    typer.Option(
        help="bf16 | fp32: the Mamba SSM state a hybrid model keeps per request (vLLM --mamba-ssm-cache-dtype, "
        "SGLang --mamba-ssm-dtype, TensorRT-LLM mamba_ssm_cache_dtype; default: the checkpoint's config)."
    ),
]
# A disaggregated deployment's per-pool launch settings, over the shared --max-num-tokens, --max-batch-size and
# --memory-fraction (the InferenceX and Dynamo recipes launch prefill and decode engines with their own).
PrefillMaxTokensOpt = Annotated[int | None, typer.Option(help="disagg: --max-num-tokens of the prefill engines.")]
PrefillMaxBatchOpt = Annotated[int | None, typer.Option(help="disagg: --max-batch-size of the prefill engines.")]
PrefillMemFractionOpt = Annotated[float | None, typer.Option(help="disagg: --memory-fraction of the prefill engines.")]
DecodeMaxTokensOpt = Annotated[int | None, typer.Option(help="disagg: --max-num-tokens of the decode engines.")]
DecodeMaxBatchOpt = Annotated[int | None, typer.Option(help="disagg: --max-batch-size of the decode engines.")]
DecodeMemFractionOpt = Annotated[float | None, typer.Option(help="disagg: --memory-fraction of the decode engines.")]
