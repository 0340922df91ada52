"""The search's selective variant and the fit advice use Megatron's module-level recompute for MoE models.

Megatron-Core's --recompute-modules (TransformerConfig.recompute_modules at core_v0.16.1) includes two
output-discarding recomputes of elementwise ops, moe_act (the routed experts' activation) and layernorm
(the norms before attention and the MLP/MoE): backward rebuilds their outputs without redoing a GEMM.
The Megatron-Bridge gpt-oss recipes (GPT_OSS_120B_PRETRAIN_CONFIG_*_V2: recompute_modules [layernorm,
moe_act]) and the MoE model zoo's Qwen3-235B rows ('norm, act') run exactly this pair.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from autopar.advise.train import context, fit_hints
from autopar.cost.memory import layer_activation_bytes, memory_breakdown
from autopar.cost.step import estimate
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.search.planner import search
from autopar.search.space import enumerate_plans
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, searched_modules

MEGA = load_stack("megatron")


def test_the_searched_modules_are_the_moe_recipes_pair() -> None:
    assert searched_modules(load_model("gpt-oss-120b"), MEGA) == ("moe_act", "layernorm")
    assert searched_modules(load_model("deepseek-v3"), MEGA) == ("moe_act", "layernorm")
    assert searched_modules(load_model("llama3-8b"), MEGA) == ()  # dense: Megatron's selective as before
    assert searched_modules(load_model("gpt-oss-120b"), load_stack("torchtitan")) == ()  # no module recompute
    assert searched_modules(load_model("gpt-oss-120b"), None) == ()


def test_the_modules_drop_the_norm_outputs_and_the_expert_activation() -> None:
    """gpt-oss-120b (h 2880, 128 experts of width 2880, top 4), tp 1, bf16: what one MoE layer no longer
    keeps per token is its two norm outputs (2 x 2 B x h) and the four routed copies' activation output
    (4 x 2 B x 2880): 11,520 + 23,040 = 34,560 B (cost/recompute.py module_dropped_bytes)."""
    model = load_model("gpt-oss-120b")
    none = Plan(dp=1, tp=1, pp=1)
    modules = Plan(dp=1, tp=1, pp=1, recompute="selective", recompute_modules=("moe_act", "layernorm"))
    tokens = 4096
    drop = layer_activation_bytes(model, "moe", tokens=tokens, plan=none, stack=MEGA) - layer_activation_bytes(
        model, "moe", tokens=tokens, plan=modules, stack=MEGA
    )
    assert drop == pytest.approx(tokens * 34_560)


def _small_moe() -> ModelSpec:
    return ModelSpec(
        name="moe",
        layers=4,
        hidden_size=1024,
        num_attention_heads=8,
        num_kv_heads=8,
        head_dim=128,
        ffn_hidden_size=4096,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=4096,
        max_seq_len=4096,
        tie_embeddings=False,
        moe=load_model("qwen3-30b-a3b").moe,
    )


def test_the_search_tries_them_and_agrees_with_estimate() -> None:
    """Every selective plan the Megatron search enumerates for an MoE model recomputes the modules, and
    its ranked plans' numbers equal a fresh estimate of the plan (search and estimate share one model)."""
    model, hw = _small_moe(), load_hardware("h100-sxm")
    job = Job(gpus=8, gpus_per_node=8, global_batch=32, seq_len=4096)
    plans = list(enumerate_plans(model, job, stack=MEGA))
    selective = [p for p in plans if p.recompute == "selective"]
    assert selective and all(p.recompute_modules == ("moe_act", "layernorm") for p in selective)
    assert all(p.recompute_modules == () for p in plans if p.recompute != "selective")
    result = search(model, hw, job, stack=MEGA)
    ranked = list(itertools.islice(zip(result.ranked.candidates, result.ranked, strict=True), 40))
    assert any(est.plan.recompute == "selective" for _, est in ranked)
    for cand, est in ranked:
        fresh = estimate(model, hw, job, est.plan, stack=MEGA)
        assert (cand.tokens_per_s, cand.memory_bytes) == (fresh.tokens_per_s, fresh.memory.total)


def test_fit_advice_offers_the_modules_when_they_fit() -> None:
    """gpt-oss-120b on 64 H100s, dp8 tp2 pp4 vpp9 ep16, mbs 4, no recompute: 84.9 GiB. Megatron's plain
    selective does not bring it under 75.7 GiB (an H100 with 95% of its memory); the modules do (74.2 GiB),
    and are listed though three changes save more memory."""
    ctx = context("gpt-oss-120b", hardware="h100-sxm", gpus=64, nodes=None, global_batch=1024, seq_len=4096, dtype="bf16")
    ctx = replace(ctx, hw=replace(ctx.hw, memory_bytes=0.95 * ctx.hw.memory_bytes))
    model, job = ctx.model, ctx.job
    assert ctx.stack.name == "megatron" and ctx.hw.memory_bytes / 2**30 == pytest.approx(75.7, abs=0.05)
    plan = Plan(dp=8, tp=2, pp=4, vpp=9, ep=16, mbs=4)
    hints = dict(fit_hints(ctx, plan))
    label = "--recompute selective --recompute-modules moe_act,layernorm"
    assert label in hints and len(hints) == 4
    with_modules = Plan(dp=8, tp=2, pp=4, vpp=9, ep=16, mbs=4, recompute="selective", recompute_modules=("moe_act", "layernorm"))
    assert hints[label] * 2**30 == pytest.approx(memory_breakdown(model, job, with_modules, stack=MEGA).total)
    assert "--recompute selective" not in hints
