"""Framework benchmark rows (benchmarks/data/framework_runs.yaml): the published plan, costed on its stack.

Each row states its full plan; we estimate exactly that plan on the row's stack
and hardware, as a user would: the row becomes `autopar estimate` arguments
(cli_args) and runs through the CLI itself, so every input is one the CLI
accepts. Recipe facts a row's source states (an overlap its recipe switches on)
are --stack-opt options of the stack (docs/stacks.md), given per row below with
the row and the reason; they are parts of the published run, not correction
factors.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autopar.io.models import from_yaml_mapping, load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.spec.model import ModelSpec

# The row's `framework` text -> autopar stack (NAME@VERSION: the version its source ran).
STACK_OF = (
    ("torchtitan", "torchtitan@2024.12"),
    ("llm-foundry", "llm-foundry@0.3"),
    ("NeMo", "megatron"),
    ("Megatron", "megatron"),
    ("DeepSpeed", "deepspeed"),
)

# Sources whose hardware is other than the built-in profile the row names, by (repo, path prefix).
HARDWARE_OF = {
    # torchtitan's H100 tables ran on Grand Teton H100s: 96 GB HBM2e, 500 W power limit (the files' own note).
    ("pytorch/torchtitan", "benchmarks/llama3_h100_"): "h100-96g-500w",
}

# Stacks whose published peak memory is the caching allocator's. torchtitan logs
# torch.cuda.max_memory_reserved (torchtitan/metrics.py reserved_bytes.all.peak, train.py "memory:" at
# 9dec370): the allocator's segments, without the CUDA context and NCCL's own buffers, which the
# stack's fixed_overhead_gib counts; we compare like with like (MemoryBreakdown.allocator_reserved).
ALLOCATOR_RESERVED = ("torchtitan",)

# Recipe facts stated by the row's source, as --stack-opt KEY=VALUE, by row id.
STACK_OPTS: dict[str, tuple[str, ...]] = {
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 enables the MoE all-to-all overlap ("A2A overlap", row notes) and
    # captures attn, moe_router and moe_preprocess in CUDA graphs (Megatron-Bridge 21d102f5
    # deepseek_workload_base_configs.py): no eager MoE dispatch on the host (megatron-0.16.yaml kernels.moe_host_us).
    "mb2604_b200_deepseekv3_mxfp8_256": ("moe_a2a_overlap=true", "moe_cuda_graphs=true"),
    # Megatron-Bridge's GPT-OSS performance configs reduce gradients in bf16 (set_gpt_oss_common_configs:
    # ddp.grad_reduce_in_fp32 False, scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py at 21d102f5);
    # the FP8 rows already reduce in bf16 (megatron-0.16.yaml collectives.fp8_grad_reduce_bytes). Its BF16 runs
    # also use the precision-aware optimizer (set_post_overrides: use_precision_aware_optimizer when compute_dtype
    # is bf16, scripts/performance/utils/overrides.py): memory only, these rows publish none.
    "mb2604_h100_gptoss120b_bf16_64": ("grad_reduce=bf16", "precision_aware_optimizer=true"),
    "mb2604_b200_gptoss120b_bf16_64": ("grad_reduce=bf16", "precision_aware_optimizer=true"),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_*_V1: cuda_graph_scope attn, moe_router, moe_preprocess (qwen3_workload_
    # base_configs.py at 21d102f5); the H100 FP8 config of the same release has none.
    "mb2604_b200_qwen3_30b_mxfp8_8": ("moe_cuda_graphs=true",),
    # Megatron-MoE-ModelZoo best_practice/qwen3/run_h100_235b.sh (e865051): --cuda-graph-impl transformer_engine
    # --cuda-graph-scope moe_router moe_preprocess.
    "mz_h100_qwen3_235b_deepep_ep32_bf16": ("moe_cuda_graphs=true",),
    # held-out (heldout_runs.yaml): QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V1/V2 set moe_a2a_overlap True
    # (Megatron-Bridge 21d102f5 qwen3_workload_base_configs.py).
    "mb2604_h100_qwen3_235b_fp8_256": ("moe_a2a_overlap=true",),
    # held-out (heldout_runs.yaml): the 2D row without async TP, whose collectives are not decomposed.
    "tt_h100_l31_70b_fsdp32_tp8_vanilla_fp8": ("async_tp=false",),
    # Composer mixed_precision PURE (the row's 'bf16 | PURE' columns): bf16 reduce, bf16 gathers, bf16 residuals.
    "lf_a100_mpt70b_64_fsdp_ac": ("mixed_precision=PURE",),
}


# Module-level recompute the row's recipe names (Megatron --recompute-modules), by row id.
RECOMPUTE_MODULES: dict[str, tuple[str, ...]] = {
    # GPT_OSS_120B_PRETRAIN_CONFIG_{H100,B200}_BF16_V2: recompute_modules [layernorm, moe_act] (row notes; the B200
    # row is held out).
    "mb2604_h100_gptoss120b_bf16_64": ("moe_act", "layernorm"),
    "mb2604_b200_gptoss120b_bf16_64": ("moe_act", "layernorm"),
    # held out: the model zoo's 'norm, act' again.
    "mz_h100_qwen3_235b_a2a_ep8_pp32_bf16": ("moe_act", "layernorm"),
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2: recompute_modules [mla_up_proj, mlp] (row notes).
    "mb2604_b200_deepseekv3_mxfp8_256": ("mla_up_proj", "mlp"),
    # the model zoo's recompute column reads 'norm, act': layernorm and the MoE activation.
    "mz_h100_qwen3_235b_deepep_ep32_bf16": ("moe_act", "layernorm"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkResult:
    id: str  # row id
    stack: str  # stack it ran on
    gpus: int  # GPUs
    published: float  # tokens/s per GPU
    predicted: float | None  # ours; None when the plan is refused
    published_gib: float | None  # peak memory per GPU, where the source gives it
    predicted_gib: float | None  # ours
    accepted: bool  # the stack's rules accept the plan
    fits: bool  # it fits in the GPU's memory by our model
    why: str  # why refused, or the plan

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.published - 1

    @property
    def memory_error(self) -> float | None:
        if self.published_gib is None or self.predicted_gib is None:
            return None
        return self.predicted_gib / self.published_gib - 1


def stack_ref(row: dict[str, Any]) -> str:
    """The --stack the row ran on (NAME@VERSION)."""
    text = str(row.get("framework", ""))
    return next((s for key, s in STACK_OF if key.lower() in text.lower()), "megatron")


def model_for(row: dict[str, Any]) -> ModelSpec:
    m = row["model"]
    return load_model(m) if isinstance(m, str) else from_yaml_mapping(dict(m), where=row["id"])


def hardware_for(row: dict[str, Any]) -> str:
    src = row.get("source") or {}
    return next(
        (hw for (repo, path), hw in HARDWARE_OF.items() if src.get("repo") == repo and str(src.get("path", "")).startswith(path)),
        row["hardware"],
    )


def cli_args(row: dict[str, Any], model: str) -> list[str]:
    """The `autopar estimate` arguments that state the row's published run; `model` is a preset name or the
    path of the row's model written as a .yaml. fits: the predicted peak within the whole GPU."""
    args = [
        "estimate",
        model,
        "--hardware",
        hardware_for(row),
        "--stack",
        stack_ref(row),
        "--gpus",
        str(row["gpus"]),
        "--global-batch",
        str(row["global_batch"]),
        "--seq-len",
        str(row["seq_len"]),
        "--dtype",
        row["dtype"],
    ]
    for key in ("tp", "pp", "vpp", "cp", "ep", "mbs", "recompute", "zero"):
        args += [f"--{key}", str(row[key])]
    args += ["--etp", str(row.get("etp", 1)), "--sp" if row["tp"] > 1 else "--no-sp"]
    if row["id"] in RECOMPUTE_MODULES:
        args += ["--recompute-modules", ",".join(RECOMPUTE_MODULES[row["id"]])]
    for opt in STACK_OPTS.get(row["id"], ()):
        args += ["--stack-opt", opt]
    return [*args, "--json", "--no-explain"]


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `autopar ARGS`, in this process."""
    from typer.testing import CliRunner

    from autopar.cli import app

    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


def evaluate(row: dict[str, Any]) -> FrameworkResult:
    model_for(row), load_hardware(hardware_for(row))  # a model or profile autopar cannot read: AutoparError
    stack = load_stack(stack_ref(row))
    base = dict(
        id=row["id"],
        stack=stack.name,
        gpus=row["gpus"],
        published=float(row["tokens_per_s_per_gpu"]),
        published_gib=row.get("published_memory_gib"),
    )
    with tempfile.TemporaryDirectory() as tmp:
        model = row["model"]
        if not isinstance(model, str):
            path = Path(tmp) / f"{row['id']}.yaml"
            path.write_text(yaml.safe_dump(dict(model)))
            model = str(path)
        code, out, err = run_cli(cli_args(row, model))
    if code not in (0, 1) or not out.strip():
        why = err.strip().removeprefix("autopar: error: ")
        return FrameworkResult(**base, predicted=None, predicted_gib=None, accepted=False, fits=False, why=why)
    doc = json.loads(out)
    label = f"dp{doc['dp']} tp{doc['tp']} pp{doc['pp']} vpp{doc['vpp']} cp{doc['cp']} ep{doc['ep']} mbs{doc['mbs']}"
    peak = doc["allocator_reserved_gib" if stack.name in ALLOCATOR_RESERVED else "memory_gib_per_gpu"]
    return FrameworkResult(**base, predicted=doc["tokens_per_s_per_gpu"], predicted_gib=peak, accepted=True, fits=doc["fits"], why=label)
