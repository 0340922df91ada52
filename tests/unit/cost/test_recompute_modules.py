"""Megatron-Core's module-level recompute (--recompute-granularity selective --recompute-modules ...).

What each module's recompute drops from what a layer keeps, and what it costs to redo, derived by
hand from TransformerConfig.recompute_modules and TransformerLayer (megatron/core/transformer/
transformer_config.py and transformer_layer.py at core_v0.16.1): core_attn, mlp, moe and
shared_experts are checkpointed, only their inputs stay; layernorm, moe_act and mla_up_proj discard
their outputs and rebuild them in backward; mlp applies to dense MLPs only.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.compute import LayerPlan, layer_time, part_time
from autopar.cost.memory import layer_activation_bytes, memory_breakdown
from autopar.cost.shape import Shape
from autopar.io.models import load_model
from autopar.io.stacks import load_stack
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.plan import RECOMPUTE_MODULES, Plan, plan_errors

MEGA = load_stack("megatron")
T = 8192  # tokens of one micro-batch on one rank


def kept(model_name: str, kind: str, plan: Plan, *, fp8: bool = False) -> float:
    return layer_activation_bytes(load_model(model_name), kind, tokens=T, plan=plan, fp8=fp8, stack=MEGA)


def test_layernorm_and_mlp_drop_the_norm_outputs_and_the_mlp_inside() -> None:
    # llama3-8b (h 4096, SwiGLU f 14336), tp 1, bf16. layernorm: both norm outputs (the QKV and fc1 inputs),
    # 2 x 2 B x h per token; mlp: gate and up outputs (2 x 2 B x f) and fc2's input (2 B x f).
    none = Plan(dp=1, tp=1, pp=1, recompute="none")
    both = replace(none, recompute="selective", recompute_modules=("layernorm", "mlp"))
    assert kept("llama3-8b", "dense", none) - kept("llama3-8b", "dense", both) == pytest.approx(T * (4 * 4096 + 6 * 14336))
    # under FP8 (Transformer Engine) the saved GEMM inputs are 1 B: norm outputs 2 x 1 B x h, fc2 input 1 B x f
    assert kept("llama3-8b", "dense", none, fp8=True) - kept("llama3-8b", "dense", both, fp8=True) == pytest.approx(
        T * (2 * 4096 + 5 * 14336)
    )
    # core_attn alone keeps everything: flash attention saves only its inputs and output
    core = replace(none, recompute="selective", recompute_modules=("core_attn",))
    assert kept("llama3-8b", "dense", core) == pytest.approx(kept("llama3-8b", "dense", none))


def test_mla_up_proj_drops_the_up_projected_heads() -> None:
    # DeepSeek-V3: 128 heads, Q and K of qk_head_dim 128 + 64 = 192, V of 128, bf16, tp 1:
    # 2 B x 128 x (2 x 192 + 128) = 131,072 B per token, in every layer (dense or MoE).
    none = Plan(dp=1, tp=1, pp=1, recompute="none")
    up = replace(none, recompute="selective", recompute_modules=("mla_up_proj",))
    for kind in ("dense", "moe"):
        assert kept("deepseek-v3", kind, none) - kept("deepseek-v3", kind, up) == pytest.approx(T * 131_072)
    # mlp recomputes the three dense layers' MLP only (TransformerLayer: recompute_mlp when not an MoELayer)
    mlp = replace(none, recompute="selective", recompute_modules=("mlp",))
    assert kept("deepseek-v3", "moe", mlp) == pytest.approx(kept("deepseek-v3", "moe", none))
    assert kept("deepseek-v3", "dense", none) - kept("deepseek-v3", "dense", mlp) == pytest.approx(T * 6 * 18432)


def test_moe_act_drops_each_routed_copys_activation_output() -> None:
    # Qwen3-30B-A3B: top 8 of 128 experts, expert width 768, capacity 1, etp 1, bf16: each of the 8 routed
    # copies of a token keeps fc2's input, 2 B x 768. moe drops the whole MoE layer but its input.
    none = Plan(dp=1, tp=1, pp=1, recompute="none")
    act = replace(none, recompute="selective", recompute_modules=("moe_act",))
    assert kept("qwen3-30b-a3b", "moe", none) - kept("qwen3-30b-a3b", "moe", act) == pytest.approx(T * 8 * 768 * 2)
    whole = replace(none, recompute="selective", recompute_modules=("moe",))
    # routed: dispatched input (2 B x h), gate/up (4 B x 768) and fc2 input (2 B x 768) per copy; no expert
    # output (the probabilities scale the activation, experts.py at core_v0.16.1); fp32 routing probabilities
    # 4 B x 128 experts per token
    routed = 8 * (2 * 2048 + 6 * 768)
    assert kept("qwen3-30b-a3b", "moe", none) - kept("qwen3-30b-a3b", "moe", whole) == pytest.approx(T * (routed + 4 * 128))


def test_megatron_016_keeps_no_expert_output_and_08_does() -> None:
    # Megatron-Core 0.16 multiplies the routing probabilities into the expert activation (TEGroupedMLP.forward,
    # weighted_bias_swiglu_impl) and unpermutes without them; 0.8 scaled the expert output at the unpermute
    # (moe_utils.unpermute(permuted_tokens, sorted_indices, probs)), which keeps it: 2 B x h per routed copy.
    # Qwen3-30B-A3B, top 8, h 2048, tp 1, capacity 1.
    none = Plan(dp=1, tp=1, pp=1, recompute="none")
    model = load_model("qwen3-30b-a3b")
    old = layer_activation_bytes(model, "moe", tokens=T, plan=none, stack=load_stack("megatron@0.8"))
    assert old - kept("qwen3-30b-a3b", "moe", none) == pytest.approx(T * 8 * 2 * 2048)


def test_recomputed_modules_cost_their_forward(toy_hw: HardwareProfile) -> None:
    # The time a module-level recompute adds is its own forward: mlp the whole dense MLP forward, layernorm two
    # norms (read h, write h, bf16) per dense layer at the profile's HBM rate.
    m = load_model("llama3-8b")
    shape = Shape(dtype="bf16", seq_len=T, mbs=1, stack=MEGA)
    plan = Plan(dp=1, tp=1, pp=1, recompute="selective", recompute_modules=("mlp",))
    mlp = part_time(m, toy_hw, shape, "mlp", (LayerPlan.of(plan).dims,))
    assert layer_time(m, toy_hw, shape, plan, "dense").recompute == pytest.approx(mlp.fwd) and mlp.fwd > 0
    norms = replace(plan, recompute_modules=("layernorm",))
    two_norms = 2 * MEGA.elementwise_passes * 2 * 4096 * T * 2 / (toy_hw.hbm_bytes_per_s * toy_hw.memory_efficiency)
    assert layer_time(m, toy_hw, shape, norms, "dense").recompute == pytest.approx(two_norms)


def test_rules_name_what_is_wrong() -> None:
    m, job = load_model("llama3-8b"), Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=8192)
    base = Plan(dp=8, tp=1, pp=1, recompute="selective")
    assert plan_errors(replace(base, recompute_modules=("mla_up_proj",)), m, job) == [
        "`recompute_modules=mla_up_proj`: llama3-8b has no multi-latent attention"
    ]
    assert "needs `recompute=selective`" in plan_errors(replace(base, recompute="full", recompute_modules=("mlp",)), m, job)[0]
    assert "unknown module 'attn'" in plan_errors(replace(base, recompute_modules=("attn",)), m, job)[0]
    assert plan_errors(replace(base, recompute_modules=("mlp",)), m, job, load_stack("megatron")) == []
    titan = plan_errors(replace(base, zero=3, recompute_modules=("mlp",)), m, job, load_stack("torchtitan"))
    assert titan == ["stack torchtitan has no module-level recompute of mlp (it has none)"]


def test_cli_costs_and_emits_the_modules() -> None:
    runner = CliRunner()
    args = [
        "estimate",
        "llama3-8b",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "8",
        "--recompute",
        "selective",
        "--recompute-modules",
        "mlp,layernorm",
        "--emit",
        "megatron",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "recompute selective(layernorm,mlp)" in res.output  # Megatron's order
    assert "--recompute-modules layernorm mlp" in " ".join(res.output.split())
    bad = runner.invoke(app, [*args[:-2], "--recompute-modules", "moe"])
    assert bad.exit_code == 2 and "llama3-8b has no experts" in bad.output and "Traceback" not in bad.output


def test_module_recompute_fits_what_selective_alone_does_not() -> None:
    # DeepSeek-V3 on 256 B200s as Megatron-Bridge's DEEPSEEK_V3_PRETRAIN_CONFIG_B200 runs it (PP 8, VPP 2,
    # EP 32, MXFP8, recompute_modules [mla_up_proj, mlp]): the up-projected heads (128 KiB a token a
    # layer) and the dense MLPs' insides are what go. Rank 0 holds chunks 0 and 8 of 61 layers in 16 chunks
    # ([4] * 13 + [3] * 3): 8 layers, the 3 dense ones among them, for 8 * (1 + 7/16) = 11.5 micro-batches.
    # Dropped per token: mla_up_proj 2 B x 128 heads x (2 x 192 + 128) = 128 KiB a layer; mlp (FP8: gate/up
    # 2 x 2 B, fc2 input 1 B) 5 B x 18432 a dense layer. Recompute rebuilds one layer at a time in backward:
    # the largest, a dense one, is held on top (the transient).
    m = load_model("deepseek-v3")
    job = Job(gpus=256, gpus_per_node=8, global_batch=4096, seq_len=4096, dtype="fp8")
    plan = Plan(dp=32, tp=1, pp=8, vpp=2, ep=32, recompute="selective", recompute_modules=("mla_up_proj", "mlp"))
    with_modules = memory_breakdown(m, job, plan, stack=MEGA)
    without = memory_breakdown(m, job, replace(plan, recompute="none", recompute_modules=()), stack=MEGA)
    up, mlp = 2 * 128 * (2 * 192 + 128), 5 * 18432
    dropped = 4096 * ((8 * up + 3 * mlp) * 11.5 - (up + mlp))
    assert without.activations - with_modules.activations == pytest.approx(dropped)
    assert with_modules.total / 2**30 < 178  # B200: 192 GB, 178 GiB


@settings(deadline=None)  # a model load per example: over 200 ms on a loaded machine
@given(
    modules=st.sets(st.sampled_from(RECOMPUTE_MODULES)),
    extra=st.sampled_from(RECOMPUTE_MODULES),
    name=st.sampled_from(["llama3-8b", "deepseek-v3", "qwen3-30b-a3b"]),
    tp=st.sampled_from([1, 2]),
    fp8=st.booleans(),
)
def test_recomputing_one_more_module_never_keeps_more(modules: set[str], extra: str, name: str, tp: int, fp8: bool) -> None:
    model = load_model(name)
    order = tuple(m for m in RECOMPUTE_MODULES if m in modules)
    more = tuple(m for m in RECOMPUTE_MODULES if m in modules | {extra})
    none = Plan(dp=1, tp=tp, pp=1, recompute="none")
    for kind in set(model.layer_kinds()):
        base = kept(name, kind, none, fp8=fp8)
        fewer = kept(name, kind, replace(none, recompute="selective", recompute_modules=order), fp8=fp8) if order else base
        most = kept(name, kind, replace(none, recompute="selective", recompute_modules=more), fp8=fp8)
        assert 0 < most <= fewer * (1 + 1e-12) and fewer <= base * (1 + 1e-12)
