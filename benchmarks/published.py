"""Published training runs (benchmarks/data/published_runs.yaml): predicted against the source's own figure.

For each row with a stated throughput and parallel layout: build the model from
the row, pick the built-in hardware profile of its GPU and the stack that ran it,
fix the published degrees (and every knob the source states), let the search
choose only what the source leaves open (micro-batch, interleaving), and convert
our step time into the source's own FLOP convention (its `flop_formula`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

if not __package__:  # run as a file: python benchmarks/published.py
    import _as_script  # noqa: F401

from autopar.cost.flops import megatron_flops_per_iteration, model_flops_per_token
from autopar.cost.step import Estimate
from autopar.errors import InfeasibleError, SpecError
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.search.planner import search
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.stack import StackProfile

# The stack that ran each row, by row id prefix: Megatron-LM/Megatron-Core papers and README, and
# DeepSeek-V3's HAI-LLM (a Megatron-style stack: DualPipe, EP all-to-all overlap, ZeRO-1);
# BLOOM trained with Megatron-DeepSpeed (DeepSpeed's pipeline engine and ZeRO-1 BF16 optimizer).
STACK_OF = {"megatron": "megatron", "deepseek": "megatron", "bloom": "deepspeed"}
# Recipe facts of a row's run: DeepSeek-V3 overlaps the all-to-all with computation (report sec. 3.2.1, DualPipe).
# DeepSeek-V3 ran on HAI-LLM, not Megatron-Core: its DualPipe pairs a forward and a backward chunk with its own
# all-to-all kernels (arXiv:2412.19437 sec. 3.2), so the megatron profile's eager-dispatch host time
# (kernels.moe_host_us, a habit of Megatron-Core's default recipes without CUDA graphs) is not assumed for it.
RECIPE: dict[str, dict[str, Any]] = {"deepseek_v3_2048_h800": {"ep_overlap": True, "moe_host_us": 0.0}}
# Megatron-LM as the 2021 paper ran it (NVIDIA/Megatron-LM aed2f75, 2021-04-11, two days after arXiv:2104.04473),
# by row id prefix; a stack file can say the same (kernels.attention unfused, score_bytes, overlap.dp 0):
# - ParallelAttention's core attention is unfused (no FlashAttention before 2022): torch.baddbmm writes the fp16
#   scores (2 B per score element), FusedScaleMaskSoftmax's upper-triangular kernel reads and writes them (4 B),
#   attention dropout (default 0.1) reads them and writes its output and a 1 B mask (5 B), torch.bmm reads the
#   probabilities (2 B): 13 B forward. Backward: the bmm writes the probabilities' gradient and reads the
#   dropped probabilities for V's (4 B), dropout's backward reads the gradient and the mask and writes (5 B),
#   the softmax backward reads the gradient and its output and writes (6 B), the baddbmm backward reads the
#   scores' gradient for dQ and for dK (4 B): 19 B.
# - DP: --DDP-impl local by default; train_step calls allreduce_gradients() after forward_backward_func returns
#   (no overlap), on the contiguous grad buffer in the parameter dtype (fp16, 2 B) unless
#   --accumulate-allreduce-grads-in-fp32 is given (megatron/model/distributed.py, training.py).
RECIPE_BY_PREFIX: dict[str, dict[str, Any]] = {
    "megatron2021_": {
        "attention_kernel": "unfused",
        "score_bytes": (13.0, 19.0),
        "dp_overlap": 0.0,
        "dp_gather_overlap": 0.0,
        "grad_reduce_bytes": 2.0,
    },
    # BLOOM (Megatron-DeepSpeed, BigScience's 2022 fork of that Megatron-LM): the same ParallelAttention core
    # attention; train/tr11-176B-ml/tr11-176B-ml.slurm passes no --attention-dropout (default 0.1) and
    # --abort-on-unmet-fused-kernel-constraints (the fused softmax kernel); ALiBi's bias is baddbmm's beta input
    # ([b*heads, 1, s], not counted). Its DP is DeepSpeed's BF16 optimizer, the deepspeed stack's.
    "bloom_": {"attention_kernel": "unfused", "score_bytes": (13.0, 19.0)},
}

# Plan facts the rows imply but do not spell out, by row id prefix, with the reason.
# These are parts of the published plan (what the framework could do then), not
# correction factors.
PLAN_FACTS: dict[str, dict[str, Any]] = {
    # Megatron-LM 2021 predates sequence parallelism and the distributed optimizer (both 2022).
    "megatron2021_": {"sp": False, "zero": 0},
    # BLOOM: Megatron-DeepSpeed without SP; BF16_Optimizer shards optimizer state (ZeRO-1).
    "bloom_": {"sp": False, "zero": 1},
    # Megatron-Core r0.8 benchmarks: distributed optimizer with overlap (README), SP with TP comm overlap.
    "megatron_readme_": {"zero": 1},
}


# Rows whose architecture the row's fields cannot express (MLA, MoE details): the built-in preset.
ROW_PRESETS = {"deepseek_v3_2048_h800": "deepseek-v3"}


def hardware_for(gpu: str) -> str | None:
    g = gpu.lower()
    if "a100" in g and "40" not in g:
        return "a100-sxm-80g"
    if "h100" in g:
        return "h100-sxm"
    if "h800" in g:
        return "h800-sxm"
    return None


def dtype_of(row: dict[str, Any]) -> str:
    return "fp8" if "fp8" in str(row.get("precision") or "").lower() else "bf16"


def model_from_row(row: dict[str, Any]) -> ModelSpec:
    if row["id"] in ROW_PRESETS:
        return load_model(ROW_PRESETS[row["id"]])
    m = row["model"]
    h, heads = m["hidden"], m["heads"]
    return ModelSpec(
        name=row["id"],
        layers=m["layers"],
        hidden_size=h,
        num_attention_heads=heads,
        num_kv_heads=m.get("kv_heads") or heads,
        head_dim=h // heads,
        ffn_hidden_size=m.get("ffn_hidden") or 4 * h,
        ffn_activation="gelu",
        vocab_size=m["vocab"],
        seq_len=m["seq_len"],
        max_seq_len=m["seq_len"],
        tie_embeddings=row["id"].startswith(("megatron2021_", "bloom_")),
        dropout=row["id"].startswith("megatron2021_"),  # Megatron-LM 2021's GPT recipe: hidden dropout 0.1
    )


def fixed_knobs(row: dict[str, Any]) -> dict[str, Any]:
    par = row["parallelism"]
    fixed: dict[str, Any] = {"tp": par["tp"], "pp": par["pp"], "cp": par.get("cp") or 1}
    if par.get("dp"):
        fixed["dp"] = par["dp"]
    if par.get("ep"):
        fixed["ep"] = par["ep"]
    zero = str(par.get("zero_or_fsdp") or "").lower()
    if "zero-1" in zero or "zero stage 1" in zero:
        fixed["zero"] = 1
    rec = str(par.get("recompute") or "").lower()
    if "full" in rec or rec.startswith("yes"):
        fixed["recompute"] = "full"
    elif "selective" in rec:
        fixed["recompute"] = "selective"
    if row.get("micro_batch_size"):
        fixed["mbs"] = row["micro_batch_size"]
    if par.get("sequence_parallel") is not None:
        fixed["sp"] = bool(par["sequence_parallel"])
    for prefix, facts in PLAN_FACTS.items():
        if row["id"].startswith(prefix):
            fixed.update(facts)
    return fixed


def published_flops_per_step(row: dict[str, Any], model: ModelSpec, job: Job) -> float:
    """FLOPs per step in the source's own convention."""
    formula = row["flop_formula"]
    if formula.get("includes_recompute"):  # Narayanan et al. 2021 eq. (3), also BLOOM's logger
        return megatron_flops_per_iteration(
            batch=job.global_batch, seq_len=job.seq_len, layers=model.layers, hidden=model.hidden_size, vocab=model.vocab_size
        )
    return model_flops_per_token(model, job.seq_len) * job.tokens_per_step  # Megatron-Core r0.8 = PaLM


@dataclass(frozen=True, slots=True, kw_only=True)
class RowResult:
    id: str
    stack: str  # the stack that ran it
    gpus: int
    metric: str  # what is compared: TFLOP/s per GPU in the source's convention, or tokens/s per GPU
    published: float
    predicted: float
    fits: bool
    accepted: bool  # the stack's rules admit a plan with the published degrees
    plan: str
    our_best_ratio: float | None  # our top plan's tokens/s over the published plan's (both predicted)
    published_rank: int | None  # rank of the published plan in our full search (1 = our top)

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1


def usable(row: dict[str, Any]) -> bool:
    a, par, m = row["achieved"], row["parallelism"], row["model"]
    measured = a.get("tflops_per_gpu") is not None or a.get("tokens_per_s_per_gpu") is not None
    return (
        measured
        and par.get("tp") is not None
        and par.get("pp") is not None
        and (m.get("moe") is None or row["id"] in ROW_PRESETS)
        and hardware_for(row["hardware"]["gpu"]) is not None
        and row["global_batch"].get("sequences") is not None
    )


def stack_for(row: dict[str, Any]) -> StackProfile:
    name = next(s for prefix, s in STACK_OF.items() if row["id"].startswith(prefix))
    facts = next((f for prefix, f in RECIPE_BY_PREFIX.items() if row["id"].startswith(prefix)), {})
    return replace(load_stack(name), **facts, **RECIPE.get(row["id"], {}))


def evaluate(row: dict[str, Any], *, rank: bool = False) -> RowResult:
    """Predict one row; `rank` also runs the open search to place the published plan among ours (slow)."""
    model = model_from_row(row)
    stack = stack_for(row)
    hw = load_hardware(hardware_for(row["hardware"]["gpu"]) or "")
    job = Job(
        gpus=row["hardware"]["gpu_count"],
        gpus_per_node=hw.gpus_per_node,
        global_batch=row["global_batch"]["sequences"],
        seq_len=row["model"]["seq_len"],
        dtype=dtype_of(row),
    )
    fixed = fixed_knobs(row)
    fits = accepted = True
    try:
        ranked = search(model, hw, job, fixed=fixed, stack=stack).ranked
    except InfeasibleError:
        fits = False
        try:
            ranked = _ignore_memory(model, hw, job, fixed, stack)
        except (InfeasibleError, SpecError):
            accepted, ranked = False, ()
    if not ranked:
        return RowResult(
            id=row["id"],
            stack=stack.name,
            gpus=job.gpus,
            metric="-",
            published=0.0,
            predicted=0.0,
            fits=False,
            accepted=False,
            plan="refused",
            our_best_ratio=None,
            published_rank=None,
        )
    best: Estimate = ranked[0]
    achieved = row["achieved"]
    if achieved.get("tflops_per_gpu") is not None:
        metric, published = "TFLOP/s/GPU", achieved["tflops_per_gpu"]
        predicted = published_flops_per_step(row, model, job) / best.step_time_s / job.gpus / 1e12
    else:
        metric, published, predicted = "tokens/s/GPU", achieved["tokens_per_s_per_gpu"], best.tokens_per_s_per_gpu
    ratio = place = None
    if rank:
        try:
            ours = search(model, hw, job, stack=stack).ranked
            ratio = ours[0].tokens_per_s / best.tokens_per_s
            place = len([e for e in ours if e.tokens_per_s > best.tokens_per_s]) + 1
        except InfeasibleError:
            pass
    p = best.plan
    label = f"dp{p.dp} tp{p.tp} pp{p.pp} vpp{p.vpp}{f' ep{p.ep}' if p.ep > 1 else ''} mbs{p.mbs} {p.recompute} z{p.zero}"
    label += f"{' sp' if p.sp else ''}{' ' + job.dtype if job.dtype != 'bf16' else ''}"
    return RowResult(
        id=row["id"],
        stack=stack.name,
        gpus=job.gpus,
        metric=metric,
        published=published,
        predicted=predicted,
        fits=fits,
        accepted=accepted,
        plan=label,
        our_best_ratio=ratio,
        published_rank=place,
    )


def _ignore_memory(model: ModelSpec, hw: Any, job: Job, fixed: dict[str, Any], stack: StackProfile) -> tuple[Estimate, ...]:
    """The published plan does not fit by our model: time it anyway, fastest first."""
    roomy = replace(hw, memory_bytes=float("inf"))
    return search(model, roomy, job, fixed=fixed, stack=stack).ranked


# --- published recipes that ran, at their published sizes: do they fit? --------------------------------------

# The NeMo and Megatron-Bridge performance recipes of issue 27, at the sizes their tables ran, with the recipe
# facts typed as a user would (docs/memory.md "Published plans that ran"): the BF16 performance scripts set the
# precision-aware optimizer (NeMo scripts/performance/helpers.py set_precision_configs; Megatron-Bridge
# scripts/performance/utils/overrides.py set_post_overrides). They ran, so each must fit in 80 GB.
RECIPE_PLANS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        # NeMo recommended_model_configs/model_configs_h100.csv: pre_train llama31 405b bf16, 1024 GPUs, TP8 PP8 CP2 VP8,
        # mbs 1, GBS 512, seq 8192; 126 layers on pp 8 x vpp 8 split as Megatron-Core must (account for the
        # embedding and the loss: 128 = 64 x 2)
        "Llama 3.1 405B BF16, 1,024 H100, TP8 PP8 CP2 VPP8, GBS 512",
        ("llama3.1-405b", "--gpus", "1024", "--tp", "8", "--pp", "8", "--cp", "2", "--vpp", "8", "--global-batch", "512",
         "--seq-len", "8192"),
    ),
    (
        # Megatron-Bridge deepseek_workload_base_configs.py (H100 BF16): TP2 PP8 VP4 EP64, GBS 8192, seq 4096,
        # recompute_modules [mla_up_proj, mlp]
        "DeepSeek-V3 BF16, 1,024 H100, TP2 PP8 VPP4 EP64, GBS 8192",
        (
            "deepseek-v3", "--gpus", "1024", "--tp", "2", "--pp", "8", "--vpp", "4", "--ep", "64", "--global-batch", "8192",
            "--seq-len", "4096", "--recompute", "selective", "--recompute-modules", "mla_up_proj,mlp",
        ),
    ),
    (
        # NeMo model_configs_h100.csv: pre_train nemotron4 15b bf16, 64 GPUs, TP2, mbs 2, GBS 256, seq 4096
        "Nemotron-4 15B BF16, 64 H100, TP2 mbs 2, GBS 256",
        ("nemotron4-15b", "--gpus", "64", "--tp", "2", "--mbs", "2", "--global-batch", "256", "--seq-len", "4096"),
    ),
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class RecipeFit:
    name: str
    device_gib: float  # memory_gib_per_gpu: what must fit
    allocator_gib: float  # allocator_reserved_gib
    capacity_gib: float  # the GPU's memory
    fits: bool


def recipe_fits() -> list[RecipeFit]:
    """Each of RECIPE_PLANS costed by `autopar estimate` on h100-sxm and megatron, ZeRO-1 (the distributed
    optimizer), with the precision-aware optimizer."""
    from benchmarks.framework import run_cli

    out = []
    for name, args in RECIPE_PLANS:
        words = ["estimate", *args, "--zero", "1", "--stack-opt", "precision_aware_optimizer=true", "--json", "--no-explain"]
        code, stdout, stderr = run_cli(words)
        if code not in (0, 1):  # 1: it does not fit, and still prints its estimate
            raise SystemExit(f"published.py: {name}: {stderr.strip() or stdout.strip()}")
        doc = json.loads(stdout)
        capacity = load_hardware("h100-sxm").memory_bytes / 2**30
        out.append(
            RecipeFit(
                name=name,
                device_gib=doc["memory_gib_per_gpu"],
                allocator_gib=doc["allocator_reserved_gib"],
                capacity_gib=capacity,
                fits=bool(doc["fits"]),
            )
        )
    return out


if __name__ == "__main__":
    for r in recipe_fits():
        verdict = "fits" if r.fits else f"does not fit by {r.device_gib - r.capacity_gib:.1f} GiB"
        print(f"{r.name}: device peak {r.device_gib:.2f} GiB, allocator {r.allocator_gib:.2f} GiB of {r.capacity_gib:.2f}: {verdict}")
