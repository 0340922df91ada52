"""Framework benchmark rows (benchmarks/data/framework_runs.yaml): the published plan, costed on its stack.

Each row states its full plan; we estimate exactly that plan on the row's stack
and hardware, and say whether the stack's rules accept it and whether it fits.
Recipe facts a row's source states (an overlap its recipe switches on) are
applied per row below, each with the row and the reason; they are parts of the
published run, not correction factors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from autopar.cost.step import Estimate, estimate
from autopar.errors import AutoparError
from autopar.io.models import from_yaml_mapping, load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.stack import StackProfile

# The row's `framework` text -> autopar stack.
STACK_OF = (("torchtitan", "torchtitan"), ("llm-foundry", "llm-foundry"), ("NeMo", "megatron"),
            ("Megatron", "megatron"), ("DeepSpeed", "deepspeed"))

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

# Recipe facts stated by the row's source, by row id.
RECIPE: dict[str, dict[str, Any]] = {
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 enables the MoE all-to-all overlap ("A2A overlap", row notes) and
    # captures attn, moe_router and moe_preprocess in CUDA graphs (Megatron-Bridge 21d102f5
    # deepseek_workload_base_configs.py): no eager MoE dispatch on the host (megatron.yaml kernels.moe_host_us).
    "mb2604_b200_deepseekv3_mxfp8_256": {"ep_overlap": True, "moe_host_us": 0.0},
    # Megatron-Bridge's GPT-OSS performance configs reduce gradients in bf16 (set_gpt_oss_common_configs:
    # ddp.grad_reduce_in_fp32 False, scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py at 21d102f5);
    # the FP8 rows already reduce in bf16 (megatron.yaml collectives.fp8_grad_reduce_bytes).
    "mb2604_h100_gptoss120b_bf16_64": {"grad_reduce_bytes": 2.0},
    "mb2604_b200_gptoss120b_bf16_64": {"grad_reduce_bytes": 2.0},
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_*_V1: cuda_graph_scope attn, moe_router, moe_preprocess (qwen3_workload_
    # base_configs.py at 21d102f5); the H100 FP8 config of the same release has none.
    "mb2604_b200_qwen3_30b_mxfp8_8": {"moe_host_us": 0.0},
    # Megatron-MoE-ModelZoo best_practice/qwen3/run_h100_235b.sh (e865051): --cuda-graph-impl transformer_engine
    # --cuda-graph-scope moe_router moe_preprocess.
    "mz_h100_qwen3_235b_deepep_ep32_bf16": {"moe_host_us": 0.0},
    # held-out (heldout_runs.yaml): QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V1/V2 set moe_a2a_overlap True
    # (Megatron-Bridge 21d102f5 qwen3_workload_base_configs.py).
    "mb2604_h100_qwen3_235b_fp8_256": {"ep_overlap": True},
    # held-out (heldout_runs.yaml): the 2D row without async TP, whose collectives are not decomposed.
    "tt_h100_l31_70b_fsdp32_tp8_vanilla_fp8": {"tp_overlap": 0.0},
    # Composer mixed_precision PURE (the row's 'bf16 | PURE' columns) reduces gradients in bf16, not fp32.
    # PURE also all-gathers bf16 parameters (param_dtype bf16), not DEFAULT's fp32, and keeps the residual
    # stream in bf16: norms and residual adds move 10h + 10h bytes per sub-layer, GELU 16h, 36h per block against
    # the cost model's 44h (llm-foundry.yaml kernels.elementwise_passes): 36/44.
    "lf_a100_mpt70b_64_fsdp_ac": {"grad_reduce_bytes": 2.0, "gather_bytes": 2.0, "elementwise_passes": 36 / 44},
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


def stack_for(row: dict[str, Any]) -> StackProfile:
    text = str(row.get("framework", ""))
    name = next((s for key, s in STACK_OF if key.lower() in text.lower()), "megatron")
    stack = load_stack(name)
    return replace(stack, **RECIPE.get(row["id"], {}))


def model_for(row: dict[str, Any]) -> ModelSpec:
    m = row["model"]
    return load_model(m) if isinstance(m, str) else from_yaml_mapping(dict(m), where=row["id"])


def hardware_for(row: dict[str, Any]) -> str:
    src = row.get("source") or {}
    return next((hw for (repo, path), hw in HARDWARE_OF.items()
                 if src.get("repo") == repo and str(src.get("path", "")).startswith(path)), row["hardware"])


def plan_for(row: dict[str, Any], stack: StackProfile) -> Plan:
    dp = row["gpus"] // (row["tp"] * row["pp"] * row["cp"])
    cp_comm = stack.cp_comms[0] if row["cp"] > 1 else "ring"
    return Plan(dp=dp, tp=row["tp"], pp=row["pp"], vpp=row["vpp"], cp=row["cp"], ep=row["ep"], etp=row.get("etp", 1),
                mbs=row["mbs"], recompute=row["recompute"], zero=row["zero"], sp=row["tp"] > 1, cp_comm=cp_comm,
                recompute_modules=RECOMPUTE_MODULES.get(row["id"], ()))


def evaluate(row: dict[str, Any]) -> FrameworkResult:
    stack = stack_for(row)
    model, hw = model_for(row), load_hardware(hardware_for(row))
    job = Job(gpus=row["gpus"], gpus_per_node=hw.gpus_per_node, global_batch=row["global_batch"], seq_len=row["seq_len"],
              dtype=row["dtype"])
    plan = plan_for(row, stack)
    base = dict(id=row["id"], stack=stack.name, gpus=row["gpus"], published=float(row["tokens_per_s_per_gpu"]),
                published_gib=row.get("published_memory_gib"))
    why = stack.refusal(plan)
    est: Estimate | None = None
    if why is None:
        try:
            est = estimate(model, hw, job, plan, stack=stack)
        except AutoparError as exc:
            why = str(exc)
    if est is None:
        return FrameworkResult(**base, predicted=None, predicted_gib=None, accepted=False, fits=False, why=why or "")
    peak = est.memory.allocator_reserved if stack.name in ALLOCATOR_RESERVED else est.memory.total
    return FrameworkResult(**base, predicted=est.tokens_per_s_per_gpu, predicted_gib=peak / 2**30,
                           accepted=True, fits=est.fits, why=plan.label())
